package main

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
)

// countingHandler counts handler calls and closes done at the target.
type countingHandler struct {
	Handler
	calls  atomic.Int64
	target int64
	done   chan struct{}
}

func (h *countingHandler) Created(ctx context.Context, pod *corev1.Pod, found bool) error {
	err := h.Handler.Created(ctx, pod, found)
	if h.calls.Add(1) == h.target {
		close(h.done)
	}
	return err
}

// BenchmarkPipeline measures the controller's own path for one event: the
// add handler enqueues the key, the worker takes it, sync reads the cache
// and calls the handler. The informer is not running: the pods are put in
// its cache directly, so the figure leaves out client-go's watch decoding.
//
//	go test -run '^$' -bench Pipeline -benchmem
func BenchmarkPipeline(b *testing.B) {
	for _, tc := range []struct {
		name    string
		handler Handler
	}{
		{"no-op handler", noopHandler{}},
		{"LogHandler", LogHandler{}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			logger := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(io.Discard)))
			ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
			defer cancel()
			factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
			handler := &countingHandler{Handler: tc.handler, target: int64(b.N), done: make(chan struct{})}
			c := NewController(ctx, factory.Core().V1().Pods(), handler)
			store := factory.Core().V1().Pods().TypedInformer().GetStore()
			pods := make([]*corev1.Pod, b.N)
			for i := range pods {
				pods[i] = testPod("bench", fmt.Sprintf("pod-%d", i), fmt.Sprintf("uid-%d", i), "1", corev1.PodRunning)
				if err := store.Add(pods[i]); err != nil {
					b.Fatal(err)
				}
			}
			go func() {
				for c.processNextItem(ctx) {
				}
			}()
			defer c.queue.ShutDown()
			b.ReportAllocs()
			b.ResetTimer()
			for _, pod := range pods {
				c.enqueue(logger, "add", pod, pod.ResourceVersion)
			}
			<-handler.done
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}

// noopHandler does nothing: it isolates the controller's own cost.
type noopHandler struct{}

func (noopHandler) Created(context.Context, *corev1.Pod, bool) error        { return nil }
func (noopHandler) Updated(context.Context, *corev1.Pod, *corev1.Pod) error { return nil }
func (noopHandler) Deleted(context.Context, *corev1.Pod) error              { return nil }
