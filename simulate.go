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

// ready and notReady are pod conditions, as a kubelet would write them.
var (
	ready    = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	notReady = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
)

// story is what happens in the simulated cluster, after the pods made in
// simulate are found. Each step makes the handler be called once: a step for
// a pod that does not exist creates it (Pending); one with no change deletes
// the pod.
var story = []struct {
	pod    string
	change func(*corev1.Pod)
}{
	{"shop/web-3", nil}, // created
	{"shop/web-3", func(p *corev1.Pod) { p.Spec.NodeName = "node-b" }},
	{"shop/web-3", func(p *corev1.Pod) { p.Status.Phase, p.Status.Conditions = corev1.PodRunning, ready }},
	{"shop/web-2", func(p *corev1.Pod) { p.Status.ContainerStatuses[0].RestartCount++; p.Status.Conditions = notReady }},
	{"shop/web-2", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }},
	{"batch/report", nil},
	{"batch/report", func(p *corev1.Pod) { p.Spec.NodeName, p.Status.Phase = "node-a", corev1.PodRunning }},
	{"batch/report", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }},
	{"shop/db-0", nil}, // deleted, then created again under the same name
	{"shop/db-0", nil},
	{"shop/web-1", func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: time.Now()} }},
	{"shop/web-1", nil},
	{"batch/report", nil},
	{"shop/web-2", nil},
}

// simulate runs the controller, unchanged, on client-go's fake clientset
// instead of a cluster, and plays the story through that clientset, with
// --simulate-pause between steps. It reads no kubeconfig, and returns when
// the story is over or ctx is cancelled.
func simulate(ctx context.Context, o options) error {
	o.namespace = "" // the story spans two namespaces
	client := fake.NewClientset(simPod("shop/web-1", "node-a", corev1.PodRunning, ready),
		simPod("shop/web-2", "node-b", corev1.PodRunning, ready), simPod("shop/db-0", "node-a", corev1.PodRunning, ready))
	// The handler says when it has been called, and the story waits for
	// that before its next step: at full speed the queue would otherwise fold
	// several steps for one pod into one call, as it should in a controller.
	handler := pacedHandler{LogHandler{}, make(chan struct{}, len(story)+3)}
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		defer cancel()                              // the story is over: stop the controller
		for i, calls := 0, 3; ; i, calls = i+1, 1 { // first the three pods above are found
			// Wait for the handler's calls and for the pause, whichever is longer.
			for pause := time.After(o.simulatePause); calls > 0 || pause != nil; {
				select {
				case <-handler.handled:
					calls--
				case <-pause:
					pause = nil
				case <-ctx.Done():
					return
				}
			}
			if i == len(story) {
				return
			}
			ns, name, _ := strings.Cut(story[i].pod, "/")
			pods := client.CoreV1().Pods(ns)
			pod, err := pods.Get(ctx, name, metav1.GetOptions{})
			switch {
			case err != nil:
				_, err = pods.Create(ctx, simPod(story[i].pod, "", corev1.PodPending, nil), metav1.CreateOptions{})
			case story[i].change == nil:
				err = pods.Delete(ctx, name, metav1.DeleteOptions{})
			default:
				story[i].change(pod)                      // the fake's own copy, not the informer's: ours to change
				pod.ResourceVersion = strconv.Itoa(i + 2) // an API server would set it; the fake does not
				_, err = pods.Update(ctx, pod, metav1.UpdateOptions{})
			}
			if err != nil {
				return
			}
		}
	}()
	return runController(ctx, client, "simulated cluster", o, handler)
}

// simPod returns a pod "namespace/name" with one container.
func simPod(key, node string, phase corev1.PodPhase, conditions []corev1.PodCondition) *corev1.Pod {
	ns, name, _ := strings.Cut(key, "/")
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uuid.NewUUID(), ResourceVersion: "1"},
		Spec:   corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "example/app"}}},
		Status: corev1.PodStatus{Phase: phase, Conditions: conditions, ContainerStatuses: []corev1.ContainerStatus{{Name: "app"}}}}
}

// pacedHandler passes each call on to the real handler, then tells the story.
// Its channel holds a signal for every call of the story: sends never block.
type pacedHandler struct {
	Handler
	handled chan struct{}
}

// Created calls the real handler's Created, then tells the story.
func (h pacedHandler) Created(ctx context.Context, pod *corev1.Pod, found bool) error {
	defer func() { h.handled <- struct{}{} }()
	return h.Handler.Created(ctx, pod, found)
}

// Updated calls the real handler's Updated, then tells the story.
func (h pacedHandler) Updated(ctx context.Context, old, pod *corev1.Pod) error {
	defer func() { h.handled <- struct{}{} }()
	return h.Handler.Updated(ctx, old, pod)
}

// Deleted calls the real handler's Deleted, then tells the story.
func (h pacedHandler) Deleted(ctx context.Context, pod *corev1.Pod) error {
	defer func() { h.handled <- struct{}{} }()
	return h.Handler.Deleted(ctx, pod)
}
