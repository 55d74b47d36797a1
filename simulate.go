// simulate.go holds --simulate (make demo): the same controller, run on
// client-go's fake clientset instead of a cluster, with a short story of
// pods' lives played through it. Read it after the three core files.
// make demo ARGS=-v=5 adds the trace, which shows the machinery at work:
// each event the informer hands over, and which branch of sync decided.
package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// ready is a pod's conditions once its containers are up, as a kubelet writes them.
var ready = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}

// A write is one request to the simulated API server, as a user or a
// kubelet would make it: "create" (a Pending pod), "delete", "update" (with
// change), or "replay": an update that keeps the resourceVersion, standing
// in for what a relist or a resync hands the handlers (a real relist is
// slow to bring about, and comes after a random wait).
type write struct {
	op, namespace, name string
	change              func(*corev1.Pod)
}

// story is what happens in the simulated cluster once the pods it starts
// with have been found: steps of one or more writes. Each step is played
// once the one before has been synced (see storyteller).
// To add a step, append it: the README's table and sample name steps by
// number. Then add its lines to wantStory (simulate_test.go).
var story = [][]write{
	{{"create", "shop", "web-2", nil}}, // 1: a new pod
	// 2: a burst of three updates: the queue holds web-2's key once: one sync, one Updated call
	{{"update", "shop", "web-2", func(p *corev1.Pod) { p.Spec.NodeName = "node-b" }},
		{"update", "shop", "web-2", func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning }},
		{"update", "shop", "web-2", func(p *corev1.Pod) { p.Status.Conditions = ready }}},
	// 3: a new label: Updated is called, and LogHandler reports nothing: at the default -v
	// the step shows only its "Story" line (-v=5 shows the call)
	{{"update", "shop", "web-2", func(p *corev1.Pod) { p.Labels = map[string]string{"tier": "web"} }}},
	// 4: web-1 handed over again, unchanged, as a relist does: sync calls nothing, so again
	// only the "Story" line at the default -v (-v=5 shows sync's decision)
	{{"replay", "shop", "web-1", nil}},
	// 5: a container restarts, then a graceful delete begins: one key again, one call
	{{"update", "shop", "web-1", func(p *corev1.Pod) { p.Status.ContainerStatuses[0].RestartCount++ }},
		{"update", "shop", "web-1", func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{} }}},
	// 6: web-1 is gone. The fake's delete event carries the pod as it was, with its old
	// resourceVersion; a real API server's carries the resourceVersion of the delete
	{{"delete", "shop", "web-1", nil}},
	// 7: report, a batch pod (as a Job runs: no owner here), completes: its containers
	// exited 0, so it is Succeeded and no longer ready, how a batch pod's life ends (a
	// Deployment's pods end deleted instead). The story sets the status whole, for short.
	{{"update", "batch", "report", func(p *corev1.Pod) { p.Status = corev1.PodStatus{Phase: corev1.PodSucceeded} }}},
	// 8: a pod fails, and so does the handler's first call (see Updated): its retry logs the
	// same lines again, after the story's own line that says so
	{{"update", "batch", "job", func(p *corev1.Pod) { p.Status = corev1.PodStatus{Phase: corev1.PodFailed} }}},
	// 9: db-0 deleted and created again before the worker takes its key: one key, one sync
	{{"delete", "shop", "db-0", nil}, {"create", "shop", "db-0", nil}},
}

// simulate runs the controller on a fake clientset and plays the story.
// It returns when the story is over or ctx is cancelled, with an error if
// the controller or a step of the story failed. Of the user's flags, only
// --simulate-pause, --sync-timeout and klog's apply: it reads no
// kubeconfig, and watches every namespace whatever --namespace says. It
// builds the informer and the Controller as runController does, but
// itself, to put a storyteller around the controller's queue.
func simulate(ctx context.Context, o options) error {
	ctx, cancel := context.WithCancel(ctx)
	s := &storyteller{ctx: ctx, pause: o.simulatePause, events: 4} // 4 writes: the 4 pods below
	s.api = fake.NewClientset(newPod("shop", "web-1", "1", "node-a"), newPod("shop", "db-0", "2", "node-a"),
		newPod("batch", "job", "3", "node-b"), newPod("batch", "report", "4", "node-b"))
	factory := informers.NewSharedInformerFactoryWithOptions(s.api, 0, informers.WithTransform(keep))
	controller := NewController(ctx, factory.Core().V1().Pods(), s)
	s.TypedRateLimitingInterface, controller.queue = controller.queue, s
	factory.StartWithContext(ctx)
	err := controller.Run(ctx, o.syncTimeout)
	cancel() // then wait for the informer to stop
	factory.Shutdown()
	return errors.Join(err, s.failed) // read only now that the worker has stopped
}

// storyteller is both the controller's queue and its handler, with the
// story added. As the queue, Add (which the event handlers call) also
// counts the event, and Forget (which the worker calls once it has synced
// a key) plays the next step if no other key waits. It then holds the
// worker for the pause, and until the event handlers have queued every
// event of the step: the informer calls them on a goroutine of its own,
// and a worker let go sooner could take a burst's key before its last
// event and sync it twice. So the output is the same on every run. (Your
// own code should not hold the worker like this; here, that is the
// point.) After the last step it shuts the queue down: Get still hands out
// the keys queued, and reports the shutdown once there are none, so the
// worker syncs them, then stops. As the handler, it is LogHandler, except
// that Updated fails the first time it reports a Failed pod. Only the
// worker calls Forget and the handler: the storyteller counts on the one
// worker, and with two its fields would race.
type storyteller struct {
	workqueue.TypedRateLimitingInterface[cache.ObjectName]
	LogHandler
	ctx          context.Context
	api          *fake.Clientset // the simulated API server
	pause        time.Duration
	step, events int          // the steps played, and the events they made (one per write)
	added        atomic.Int64 // the events the handlers queued: one per Add
	failed       error        // why the story ended early, if it did
}

func (s *storyteller) Add(key cache.ObjectName) {
	s.TypedRateLimitingInterface.Add(key)
	s.added.Add(1)
}

func (s *storyteller) Forget(key cache.ObjectName) {
	s.TypedRateLimitingInterface.Forget(key)
	if s.Len() > 0 || s.ShuttingDown() {
		return // a key still waits, or the story is over
	}
	s.step++
	klog.FromContext(s.ctx).Info("Story", "step", s.step)
	for _, w := range story[s.step-1] {
		if err := s.play(w); err != nil {
			s.failed = fmt.Errorf("the simulated cluster failed at story step %d: %w", s.step, err)
			break
		}
		s.events++
	}
	// The pause, then the wait for the handlers. (An error: ctx ended.)
	queued := func(context.Context) (bool, error) { return s.added.Load() == int64(s.events), nil }
	_ = wait.PollUntilContextCancel(s.ctx, max(s.pause, time.Millisecond), false, queued)
	if s.step == len(story) || s.failed != nil {
		s.ShutDown()
	}
}

// play makes one write. The fake clientset keeps no resourceVersion, so
// play gives one, as an API server would: the number of the write. A
// delete's and a replay's numbers are never seen (a delete event carries the
// pod as it was, a replay keeps it), so the trace's numbers skip them. An API
// server's skip too: they count every write of every object, and say
// nothing but "changed".
func (s *storyteller) play(w write) (err error) {
	pods, rv := s.api.CoreV1().Pods(w.namespace), fmt.Sprint(s.events+1)
	if w.op == "delete" {
		return pods.Delete(s.ctx, w.name, metav1.DeleteOptions{})
	} else if w.op == "create" {
		_, err = pods.Create(s.ctx, newPod(w.namespace, w.name, rv, ""), metav1.CreateOptions{})
		return err
	}
	pod, err := pods.Get(s.ctx, w.name, metav1.GetOptions{}) // the fake's own copy: ours to change
	if err != nil {
		return err
	} else if w.op == "update" {
		pod.ResourceVersion = rv
		w.change(pod)
	}
	_, err = pods.Update(s.ctx, pod, metav1.UpdateOptions{})
	return err
}

// newPod returns a new pod: Pending, or, with a node, running and ready
// there, with one container.
func newPod(namespace, name, resourceVersion, node string) *corev1.Pod {
	pod := &corev1.Pod{Status: corev1.PodStatus{Phase: "Pending"}, ObjectMeta: metav1.ObjectMeta{
		Namespace: namespace, Name: name, UID: uuid.NewUUID(), ResourceVersion: resourceVersion}}
	if node != "" {
		pod.Spec.NodeName, pod.Status.Phase, pod.Status.Conditions = node, corev1.PodRunning, ready
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app"}}
	}
	return pod
}

// Updated is LogHandler's, but the first call that reports a Failed pod
// fails (its key has not been requeued yet), after LogHandler has logged,
// as a handler whose write to the API server was refused would. It says so
// in a line of the story's own: at the default -v nothing else tells the
// retry's lines from the first call's.
func (s *storyteller) Updated(ctx context.Context, old, pod *corev1.Pod) error {
	err := s.LogHandler.Updated(ctx, old, pod)
	if pod.Status.Phase == corev1.PodFailed && s.NumRequeues(cache.MetaObjectToName(pod)) == 0 {
		klog.FromContext(ctx).Info("Story: this call fails, like a refused write; it is retried")
		err = errors.New("simulated: the handler's write was refused")
	}
	return err
}
