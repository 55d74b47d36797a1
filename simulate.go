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

// story is what happens in the simulated cluster after the four pods it
// starts with have been found. Each step makes the handler be called once.
// A step with no change creates the pod if it does not exist (Pending), and
// deletes it if it does.
var story = []struct {
	namespace, name string
	change          func(*corev1.Pod)
}{
	{"shop", "web-3", nil}, // created
	{"shop", "web-3", func(p *corev1.Pod) { p.Spec.NodeName = "node-b" }},
	{"shop", "web-3", func(p *corev1.Pod) { p.Status.Phase, p.Status.Conditions = corev1.PodRunning, ready }},
	{"shop", "web-2", func(p *corev1.Pod) { p.Status.ContainerStatuses[0].RestartCount++; p.Status.Conditions = nil }},
	{"shop", "web-2", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }},
	{"batch", "report", func(p *corev1.Pod) { p.Status.Phase, p.Status.Conditions = corev1.PodSucceeded, nil }},
	{"shop", "db-0", nil}, // deleted, then created again under the same name (with a new UID)
	{"shop", "db-0", nil},
	{"shop", "web-1", func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: time.Now()} }},
	{"shop", "web-1", nil},
	{"batch", "report", nil},
}

// simulate runs the controller, unchanged, on client-go's fake clientset
// instead of a cluster, with a storyteller around the logging handler. It
// reads no kubeconfig. It returns when the story is over or ctx is
// cancelled, and with an error if the controller or a step of the story fails.
func simulate(ctx context.Context, o options) error {
	o.namespace = "" // the story spans two namespaces
	// The four pods found at start; storyteller.next waits for their calls.
	client := fake.NewClientset(simPod("shop", "web-1", "node-a", corev1.PodRunning, ready),
		simPod("shop", "web-2", "node-b", corev1.PodRunning, ready), simPod("shop", "db-0", "node-a", corev1.PodRunning, ready),
		simPod("batch", "report", "node-a", corev1.PodRunning, ready))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	teller := &storyteller{Handler: LogHandler{}, client: client, pause: o.simulatePause, end: cancel}
	err := runController(ctx, client, "simulated cluster", o, teller)
	return errors.Join(err, teller.err) // (read after runController: its worker has stopped)
}

// storyteller passes each call on to the real handler, then waits for the
// pause and plays the story's next step. So a step happens only once the
// step before has been handled, and the queue never folds two steps for one
// pod into one call, even at full speed. (Your own Handler should not wait
// like this, as it holds up the only worker; here, that is the point.)
type storyteller struct {
	Handler
	client *fake.Clientset
	pause  time.Duration
	end    context.CancelFunc
	calls  int   // the handler's calls so far; the first four are the pods found at start
	err    error // why the story ended early, if it did
}

// Created passes the call on, then plays the next step.
func (s *storyteller) Created(ctx context.Context, pod *corev1.Pod, found bool) error {
	return s.next(ctx, s.Handler.Created(ctx, pod, found))
}

// Updated passes the call on, then plays the next step.
func (s *storyteller) Updated(ctx context.Context, old, pod *corev1.Pod) error {
	return s.next(ctx, s.Handler.Updated(ctx, old, pod))
}

// Deleted passes the call on, then plays the next step.
func (s *storyteller) Deleted(ctx context.Context, pod *corev1.Pod) error {
	return s.next(ctx, s.Handler.Deleted(ctx, pod))
}

// next plays the next step once the pods found at start have been reported.
// It ends the simulation after the last step, or when a step fails.
func (s *storyteller) next(ctx context.Context, err error) error {
	if s.calls++; err != nil || s.calls < 4 { // 4: the pods simulate starts with
		return err
	}
	select {
	case <-time.After(s.pause):
	case <-ctx.Done():
		return nil
	}
	if i := s.calls - 4; i == len(story) {
		s.end()
	} else if err := play(ctx, s.client, i); err != nil {
		s.err = fmt.Errorf("the simulated cluster failed at step %d of its story: %w", i+1, err)
		s.end()
	}
	return nil
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
		Spec:   corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "example/app"}}},
		Status: corev1.PodStatus{Phase: phase, Conditions: conditions, ContainerStatuses: []corev1.ContainerStatus{{Name: "app"}}}}
}
