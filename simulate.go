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

// story is what happens in the simulated cluster after the three pods it
// starts with have been found. Each step makes the handler be called once.
// A step with no change creates the pod if it does not exist (Pending), and
// deletes it if it does.
var story = []struct {
	namespace, name string
	change          func(*corev1.Pod)
}{
	{"shop", "web-2", nil}, // created
	{"shop", "web-2", func(p *corev1.Pod) { p.Spec.NodeName = "node-b" }},
	{"shop", "web-2", func(p *corev1.Pod) { p.Status.Phase, p.Status.Conditions = corev1.PodRunning, ready }},
	{"shop", "web-1", func(p *corev1.Pod) { p.Status.ContainerStatuses[0].RestartCount++; p.Status.Conditions = nil }},
	{"shop", "web-1", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }},
	{"batch", "report", func(p *corev1.Pod) { p.Status.Phase, p.Status.Conditions = corev1.PodSucceeded, nil }},
	{"shop", "db-0", nil}, {"shop", "db-0", nil}, // deleted, then created again under the same name (with a new UID)
	{"shop", "web-1", func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: time.Now()} }},
	{"shop", "web-1", nil}, {"batch", "report", nil}, // deleted
}

// simulate runs the controller, unchanged, on client-go's fake clientset
// instead of a cluster, and plays the story through it. It reads no
// kubeconfig. It returns when the story is over or ctx is cancelled, and with
// an error if the controller or a step of the story fails.
func simulate(ctx context.Context, o options) error {
	ctx, end := context.WithCancel(ctx)
	defer end()
	client := fake.NewClientset(simPod("shop", "web-1", "node-a", corev1.PodRunning, ready),
		simPod("shop", "db-0", "node-a", corev1.PodRunning, ready), simPod("batch", "report", "node-b", corev1.PodRunning, ready))
	atStart, _ := client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})

	// next is called after each call of the handler. Once the pods above
	// have all been reported as found, it waits for the pause, then plays
	// the story's next step; after the last step it ends the simulation. So a
	// step happens only once the step before it has been handled, and the
	// queue never folds two steps for one pod into one call, even at full
	// speed. (Your own Handler should not wait like this: it holds up the
	// only worker. Here, that is the point.) Only the worker calls next.
	// step is the story's next step; it is negative while found pods are
	// still to be reported. failed is why the story ended early, if it did.
	step, failed := -len(atStart.Items), error(nil)
	next := func(ctx context.Context, err error) error {
		// (A call that failed is retried by the controller: it is not a new step.)
		if step++; err == nil && step >= 0 {
			select {
			case <-ctx.Done():
			case <-time.After(o.simulatePause):
				if step == len(story) {
					end()
				} else if err := play(ctx, client, step); err != nil {
					failed = fmt.Errorf("the simulated cluster failed at step %d of its story: %w", step+1, err)
					end()
				}
			}
		}
		return err
	}
	// All namespaces, as the story spans two; of the user's flags, only the sync deadline applies.
	err := runController(ctx, client, "simulated cluster", options{syncTimeout: o.syncTimeout}, thenCall(next))
	return errors.Join(err, failed) // read only now that the worker has stopped
}

// thenCall is a Handler made of one func, the way http.HandlerFunc is an
// http.Handler made of one func. Each call is handled by LogHandler first,
// then passed on to the func with LogHandler's error; what the func returns
// is what the controller gets.
type thenCall func(ctx context.Context, err error) error

// Created logs "Pod found" or "Pod created", then calls f.
func (f thenCall) Created(ctx context.Context, pod *corev1.Pod, found bool) error {
	return f(ctx, LogHandler{}.Created(ctx, pod, found))
}

// Updated logs the pod's changes, then calls f.
func (f thenCall) Updated(ctx context.Context, old, pod *corev1.Pod) error {
	return f(ctx, LogHandler{}.Updated(ctx, old, pod))
}

// Deleted logs "Pod deleted", then calls f.
func (f thenCall) Deleted(ctx context.Context, pod *corev1.Pod) error {
	return f(ctx, LogHandler{}.Deleted(ctx, pod))
}

// play acts out step i of the story on the fake clientset, as a user or a
// kubelet would on a real cluster.
func play(ctx context.Context, client *fake.Clientset, i int) error {
	step, pods := story[i], client.CoreV1().Pods(story[i].namespace)
	pod, err := pods.Get(ctx, step.name, metav1.GetOptions{})
	switch {
	case err != nil:
		_, err = pods.Create(ctx, simPod(step.namespace, step.name, "", corev1.PodPending, nil), metav1.CreateOptions{})
	case step.change == nil:
		err = pods.Delete(ctx, step.name, metav1.DeleteOptions{})
	default:
		step.change(pod)                        // the fake's own copy, not the informer's: ours to change
		pod.ResourceVersion = fmt.Sprint(i + 2) // an API server would set it; the fake does not
		_, err = pods.Update(ctx, pod, metav1.UpdateOptions{})
	}
	return err
}

// simPod returns a pod with one container.
func simPod(namespace, name, node string, phase corev1.PodPhase, conditions []corev1.PodCondition) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: uuid.NewUUID(), ResourceVersion: "1"},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "example/app"}}}, Status: corev1.PodStatus{Phase: phase, Conditions: conditions, ContainerStatuses: []corev1.ContainerStatus{{Name: "app"}}}}
}
