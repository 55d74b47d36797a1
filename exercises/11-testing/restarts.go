//go:build exercise

// restarts.go is the code exercise 11 asks you to test
// (exercises/11-testing/README.md): RestartAlarm, a Handler with one rule.
// Copy it into the project's root as it is. Do not change it: the check
// (exercise11_test.go) changes it, and the controller, one mistake at a
// time, and runs your tests on each to see whether they notice.

package main

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// restartLimit is how many restarts of a container make it worth a report.
const restartLimit = 3

// RestartAlarm is a Handler with one rule: a container that has restarted
// restartLimit (3) times in its pod's life is reported once, in one line:
//
//	"Container restarting often" pod="default/web" container="app" restartCount=3
//
// The report comes the first time the controller hands the alarm the pod
// with that container's restartCount at restartLimit or more: at the update
// that takes it there (restartCount is then the count in that update: 3, or
// more if several restarts came in one update), or at once for a pod the
// controller has not reported before (created, or a new pod under an old
// name: a new UID is a new life). A pod found at start (in the informer's
// first list) is not reported for the restarts it already had: they came
// before this run watched, and the run before it reported them. Its
// containers that reach the limit later are.
//
// Each report goes to Notify first, if it is set (a pager, a chat), with the
// pod of the call, the container and its restartCount. If Notify fails, the
// call logs nothing and returns the error: the controller calls again later
// (Handler, maxRetries), and the report is sent and logged then, once.
// (Notify may then be called again for a container whose report it took
// before the failure: a retry repeats the whole call.)
//
// The pods it is handed are the cache's: it reads them, and never changes
// them. It keeps no state: what it reports follows from the calls alone.
type RestartAlarm struct {
	Notify func(ctx context.Context, pod *corev1.Pod, container string, restartCount int32) error
}

// Created reports the containers of a new pod that are at the limit already.
func (a RestartAlarm) Created(ctx context.Context, pod *corev1.Pod, found bool) error {
	if found {
		return nil // restarts from before this run: not news
	}
	return a.report(ctx, nil, pod)
}

// Updated reports the containers that have reached the limit since old.
func (a RestartAlarm) Updated(ctx context.Context, old, pod *corev1.Pod) error {
	return a.report(ctx, old, pod)
}

// Deleted reports nothing: the pod's life is over.
func (RestartAlarm) Deleted(context.Context, *corev1.Pod) error { return nil }

// report reports each container of pod at or over the limit that was under
// it in old (nil: a pod not reported before). Containers are matched by name.
func (a RestartAlarm) report(ctx context.Context, old, pod *corev1.Pod) error {
	before := map[string]int32{}
	if old != nil {
		for _, s := range old.Status.ContainerStatuses {
			before[s.Name] = s.RestartCount
		}
	}
	var due []corev1.ContainerStatus
	for _, s := range pod.Status.ContainerStatuses {
		if s.RestartCount >= restartLimit && before[s.Name] < restartLimit {
			due = append(due, s)
		}
	}
	// Every notification first, then every line: a failure logs nothing,
	// so the retry's lines are the only ones.
	for _, s := range due {
		if a.Notify != nil {
			if err := a.Notify(ctx, pod, s.Name, s.RestartCount); err != nil {
				return err
			}
		}
	}
	for _, s := range due {
		klog.FromContext(ctx).Info("Container restarting often", "container", s.Name, "restartCount", s.RestartCount)
	}
	return nil
}
