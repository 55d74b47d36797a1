package main

import (
	"context"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes/fake"
)

// story is what happens in the simulated cluster, one handler call a step.
// A step for a pod that does not exist creates it (Pending); a step with no
// change deletes the pod.
var story = []struct {
	pod    string
	change func(*corev1.Pod)
}{
	{"shop/web-3", nil}, // created
	{"shop/web-3", func(p *corev1.Pod) { p.Spec.NodeName = "node-b" }},
	{"shop/web-3", func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning }},
	{"shop/web-3", func(p *corev1.Pod) { setReady(p, corev1.ConditionTrue) }},
	{"shop/web-2", func(p *corev1.Pod) { p.Status.ContainerStatuses[0].RestartCount++; setReady(p, corev1.ConditionFalse) }},
	{"shop/web-2", func(p *corev1.Pod) { setReady(p, corev1.ConditionTrue) }},
	{"batch/report", nil},
	{"batch/report", func(p *corev1.Pod) { p.Spec.NodeName, p.Status.Phase = "node-a", corev1.PodRunning }},
	{"batch/report", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }},
	{"batch/import", nil},
	{"batch/import", func(p *corev1.Pod) { p.Spec.NodeName, p.Status.Phase = "node-b", corev1.PodRunning }},
	{"batch/import", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }},
	{"shop/db-0", nil}, // deleted, then created again under the same name
	{"shop/db-0", nil},
	{"shop/web-1", func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: time.Now()} }},
	{"shop/web-1", nil},
	{"batch/report", nil},
	{"batch/import", nil},
}

// simulate runs the controller, unchanged, on client-go's fake clientset
// instead of a cluster, and plays the story through that clientset. It reads
// no kubeconfig, and returns when the story is over or ctx is cancelled.
func simulate(ctx context.Context, o options) error {
	client := fake.NewClientset(simPod("shop/web-1", "node-a"), simPod("shop/web-2", "node-b"), simPod("shop/db-0", "node-a"))
	// The handler reports each call, so that the story plays one step at a
	// time at any speed: faster, the queue would fold steps into one.
	handler := pacedHandler{LogHandler{}, make(chan struct{}, len(story)+3)}
	inScope := func(ns string) bool { return o.namespace == "" || o.namespace == ns }
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		defer cancel()                                                  // the story is over: stop the controller
		if !handler.wait(ctx, map[bool]int{true: 3}[inScope("shop")]) { // the pods above are found first
			return
		}
		for i, step := range story {
			if sleep(ctx, o.simulateSpeed) != nil {
				return
			}
			ns, name, _ := strings.Cut(step.pod, "/")
			pods := client.CoreV1().Pods(ns)
			pod, err := pods.Get(ctx, name, metav1.GetOptions{})
			switch {
			case err != nil: // not there yet
				_, err = pods.Create(ctx, simPod(step.pod, ""), metav1.CreateOptions{})
			case step.change == nil:
				err = pods.Delete(ctx, name, metav1.DeleteOptions{})
			default:
				step.change(pod) // pod is the fake's copy, not the cache's: ours to change
				// A real API server gives every change a new resourceVersion; the fake leaves it to us.
				pod.ResourceVersion = strconv.Itoa(i + 2)
				_, err = pods.Update(ctx, pod, metav1.UpdateOptions{})
			}
			if err == nil && inScope(ns) && !handler.wait(ctx, 1) {
				return
			}
		}
	}()
	return runController(ctx, client, "simulated cluster", o, handler)
}

// sleep pauses for one event at speed events per second (none at speed 0).
func sleep(ctx context.Context, speed float64) error {
	if speed > 0 {
		select {
		case <-time.After(time.Duration(float64(time.Second) / speed)):
		case <-ctx.Done():
		}
	}
	return ctx.Err()
}

// simPod returns a pod "namespace/name" with one container; on a node, it
// is running and ready, else pending.
func simPod(key, node string) *corev1.Pod {
	ns, name, _ := strings.Cut(key, "/")
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uuid.NewUUID(), ResourceVersion: "1"},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "example/app"}}},
		Status:     corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{Name: "app"}}},
	}
	if node != "" {
		pod.Status.Phase = corev1.PodRunning
		setReady(pod, corev1.ConditionTrue)
	}
	return pod
}

// setReady sets the pod's Ready condition, as a kubelet would.
func setReady(pod *corev1.Pod, status corev1.ConditionStatus) {
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
}

// pacedHandler passes each call on to the real handler, then tells the story.
type pacedHandler struct {
	Handler
	handled chan struct{} // buffered for the whole story: sends never block
}

// wait waits for n handler calls, and reports false if ctx ended first.
func (h pacedHandler) wait(ctx context.Context, n int) bool {
	for ; n > 0; n-- {
		select {
		case <-h.handled:
		case <-ctx.Done():
			return false
		}
	}
	return true
}

func (h pacedHandler) Created(ctx context.Context, pod *corev1.Pod, found bool) error {
	defer func() { h.handled <- struct{}{} }()
	return h.Handler.Created(ctx, pod, found)
}

func (h pacedHandler) Updated(ctx context.Context, old, pod *corev1.Pod) error {
	defer func() { h.handled <- struct{}{} }()
	return h.Handler.Updated(ctx, old, pod)
}

func (h pacedHandler) Deleted(ctx context.Context, pod *corev1.Pod) error {
	defer func() { h.handled <- struct{}{} }()
	return h.Handler.Deleted(ctx, pod)
}
