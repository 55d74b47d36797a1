package fakeapi

import (
	"sync"
	"sync/atomic"

	"k8s.io/client-go/util/workqueue"
)

// QueueAdds counts the keys put on the workqueues named name: each Add of a
// key not already waiting, whether the code called Add, AddAfter once its
// delay is over, or AddRateLimited. It counts in the queues made after its
// first call only. It returns nil if another workqueue metrics provider
// was set first: workqueue.SetProvider takes only its first call in a
// process.
func QueueAdds(name string) *atomic.Int64 {
	queueMetrics.once.Do(func() {
		workqueue.SetProvider(queueMetrics)
		// a queue of its own tells whether the provider took
		probe := addsOf("fakeapi probe")
		q := workqueue.NewTypedWithConfig[string](workqueue.TypedQueueConfig[string]{Name: "fakeapi probe"})
		q.Add("probe")
		q.ShutDown()
		queueMetrics.set = probe.Load() == 1
	})
	if !queueMetrics.set {
		return nil
	}
	return addsOf(name)
}

// addsOf is the count of the queues named name.
func addsOf(name string) *atomic.Int64 {
	queueMetrics.mu.Lock()
	defer queueMetrics.mu.Unlock()
	if queueMetrics.adds[name] == nil {
		queueMetrics.adds[name] = new(atomic.Int64)
	}
	return queueMetrics.adds[name]
}

// queueMetrics is the workqueue metrics provider QueueAdds sets. It
// measures nothing but the adds.
var queueMetrics = &queueProvider{adds: map[string]*atomic.Int64{}}

type queueProvider struct {
	once sync.Once
	set  bool // SetProvider was called with this provider first
	mu   sync.Mutex
	adds map[string]*atomic.Int64
}

// counter adds to n, if the queue's name is counted; noMetric measures nothing.
type counter struct{ n *atomic.Int64 }

func (c counter) Inc() {
	if c.n != nil {
		c.n.Add(1)
	}
}

type noMetric struct{}

func (noMetric) Inc()            {}
func (noMetric) Dec()            {}
func (noMetric) Set(float64)     {}
func (noMetric) Observe(float64) {}

func (p *queueProvider) NewAddsMetric(name string) workqueue.CounterMetric {
	p.mu.Lock()
	defer p.mu.Unlock()
	return counter{p.adds[name]}
}
func (*queueProvider) NewDepthMetric(string) workqueue.GaugeMetric            { return noMetric{} }
func (*queueProvider) NewLatencyMetric(string) workqueue.HistogramMetric      { return noMetric{} }
func (*queueProvider) NewWorkDurationMetric(string) workqueue.HistogramMetric { return noMetric{} }
func (*queueProvider) NewRetriesMetric(string) workqueue.CounterMetric        { return noMetric{} }
func (*queueProvider) NewUnfinishedWorkSecondsMetric(string) workqueue.SettableGaugeMetric {
	return noMetric{}
}
func (*queueProvider) NewLongestRunningProcessorSecondsMetric(string) workqueue.SettableGaugeMetric {
	return noMetric{}
}
