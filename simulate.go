// simulate.go holds --simulate (make demo): the same controller, run on
// client-go's fake clientset instead of a cluster, with a short story of
// pods' lives played through it. Read it after the three core files.
package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes/fake"
)

// ready is a pod's conditions once its containers are up, as a kubelet writes them.
var ready = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}

// story is what happens in the simulated cluster once the pods it starts
// with have been found. A step whose pod does not exist creates it
// (Pending); otherwise a step with no change deletes it, and one with a
// change updates it.
var story = []struct {
	namespace, name string
	change          func(*corev1.Pod)
}{
	{"shop", "web-2", nil}, // created
	{"shop", "web-2", func(p *corev1.Pod) { p.Spec.NodeName = "node-b" }},
	{"shop", "web-2", func(p *corev1.Pod) { p.Status.Phase, p.Status.Conditions = corev1.PodRunning, ready }},
	{"shop", "web-1", func(p *corev1.Pod) { p.Status.ContainerStatuses[0].RestartCount++; p.Status.Conditions = nil }},
	{"batch", "report", func(p *corev1.Pod) { p.Status.Phase, p.Status.Conditions = corev1.PodSucceeded, nil }},
	{"shop", "web-1", func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: time.Now()} }},
	{"shop", "web-1", nil}, // deleted
	// db-0 replaced by a new pod of the same name, in one update: what an
	// informer sees when a pod was deleted and created again while its watch
	// was down and it then lists again. The worker gets one key, and sync
	// makes two calls in one sync: the old pod deleted, the new one created.
	// (So this step comes last: the story moves on once per call, and the
	// Deleted call ends it while the Created call still comes.)
	{"shop", "db-0", func(p *corev1.Pod) { *p = *simPod("shop", "db-0", "", corev1.PodPending, nil) }},
}

// simulate runs the controller on a fake clientset and plays the story. It
// reads no kubeconfig. It returns when the story is over or ctx is
// cancelled, with an error if the controller or a step of the story failed.
func simulate(ctx context.Context, o options) error {
	ctx, end := context.WithCancel(ctx)
	defer end()
	client := fake.NewClientset(
		simPod("shop", "web-1", "node-a", corev1.PodRunning, ready),
		simPod("shop", "db-0", "node-a", corev1.PodRunning, ready),
		simPod("batch", "report", "node-b", corev1.PodRunning, ready))
	atStart, _ := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})

	// next runs after each call of the handler, with the error LogHandler
	// returned, and plays the story one step at a time. The rule: each call
	// that succeeds is counted (one that failed is not: the controller will
	// retry it). The first calls report the found pods; the call that
	// reports the last of them, and each call after it, plays the story's
	// next step, after the pause; the first call after the last step ends
	// the simulation. So a step is played only once the step before it has
	// been handled, and the queue never folds two steps into one call, even
	// at full speed. (Your own Handler should not wait like this: it holds up
	// the only worker. Here, that is the point.) Only the worker calls next.
	calls := 0
	var failed error // why the story ended early, if it did
	next := func(ctx context.Context, err error) error {
		if err != nil {
			return err
		}
		calls++
		i := calls - len(atStart.Items) // the step to play now
		if i < 0 {
			return nil // found pods still to be reported
		}
		if i >= len(story) {
			end() // the story is over
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(o.simulatePause):
		}
		// Play step i, as a user or a kubelet would on a real cluster.
		step, pods := story[i], client.CoreV1().Pods(story[i].namespace)
		pod, err := pods.Get(ctx, step.name, metav1.GetOptions{})
		switch {
		case err != nil: // no such pod: create it
			_, err = pods.Create(ctx, simPod(step.namespace, step.name, "", corev1.PodPending, nil), metav1.CreateOptions{})
		case step.change == nil:
			err = pods.Delete(ctx, step.name, metav1.DeleteOptions{})
		default:
			step.change(pod)                        // the fake's own copy, not the informer's: ours to change
			pod.ResourceVersion = fmt.Sprint(i + 2) // an API server would set it; the fake does not
			_, err = pods.Update(ctx, pod, metav1.UpdateOptions{})
		}
		if err != nil {
			failed = fmt.Errorf("the simulated cluster failed at step %d of its story: %w", i+1, err)
			end()
		}
		return nil
	}
	// All namespaces, as the story spans two; of the user's flags, --simulate-pause, --sync-timeout and klog's apply.
	err := runController(ctx, client, "simulated cluster", "", o.syncTimeout, storyteller(next))
	return errors.Join(err, failed) // read only now that the worker has stopped
}

// storyteller is the Handler of the simulation, made of one func (as
// http.HandlerFunc makes a func an http.Handler): each call goes to
// LogHandler, then to the func with LogHandler's error, and the func's
// error is what the controller gets.
type storyteller func(ctx context.Context, err error) error

func (next storyteller) Created(ctx context.Context, pod *corev1.Pod, found bool) error {
	return next(ctx, LogHandler{}.Created(ctx, pod, found))
}

func (next storyteller) Updated(ctx context.Context, old, pod *corev1.Pod) error {
	return next(ctx, LogHandler{}.Updated(ctx, old, pod))
}

func (next storyteller) Deleted(ctx context.Context, pod *corev1.Pod) error {
	return next(ctx, LogHandler{}.Deleted(ctx, pod))
}

// simPod returns a pod with one container, as the API server would hold it.
func simPod(namespace, name, node string, phase corev1.PodPhase, conds []corev1.PodCondition) *corev1.Pod {
	pod := &corev1.Pod{Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "app:1"}}},
		Status: corev1.PodStatus{Phase: phase, Conditions: conds, ContainerStatuses: []corev1.ContainerStatus{{Name: "app"}}}}
	pod.Namespace, pod.Name, pod.UID = namespace, name, uuid.NewUUID()
	return pod
}
