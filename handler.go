// handler.go is the second file to read, after controller.go: the seam
// where your own code goes. It holds the Handler interface, LogHandler (the
// default, which logs each step of a pod's life), and keep, the list of what
// the cache keeps of each pod. keep is on this page on purpose: a field the
// handler reads must also be kept, or the handler silently sees it empty.
package main

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// Handler is where your own code goes. The controller calls it from its one
// worker, one pod at a time, after working out what happened to the pod.
//
// Read the pods passed in; never change them. They are the cache's own,
// shared with the informer.
//   - Copy one (pod.DeepCopy()) before changing anything.
//   - They hold only what keep keeps.
//
// Return an error to be called again. The controller retries with backoff,
// up to maxRetries times (controller.go).
//   - Each retry syncs the pod again, so the call is the one its state then
//     asks for.
//   - After the last, it gives up until an event brings the pod's key back.
//
// Give a write that must not be cut short a context of its own. ctx
// is cancelled when the controller stops (SIGINT, or the kubelet's SIGTERM).
//   - A call in progress then runs on with ctx cancelled: a request made with
//     it fails with "context canceled".
//   - An error returned then is logged ("Sync failed while shutting down"),
//     not retried.
//   - So make such a write with context.WithoutCancel(ctx) and a deadline
//     of its own (context.WithTimeout).
//   - Keep that deadline well within the pod's grace period
//     (demo-controller.yaml): after it, the kubelet kills the process.
//
// Nothing else bounds a call: only the handler knows how long its work may
// take.
//   - A slow one holds every other pod back: the queue waits for the one
//     worker (exercise 13 adds metrics that show it).
//   - A panic is not recovered: it is a bug, and a process started again
//     is safer than one that runs on after it. It ends the process, with
//     Go's exit code 2 and the stack. In a pod, the kubelet then restarts the container, and
//     every pod is found again. A panic on the same pod each time makes it
//     crash-loop (CrashLoopBackOff).
type Handler interface {
	// Created is called for a pod the controller has not reported before.
	// found is true for a pod that came in the informer's first list, the
	// one it makes as it starts. After a restart, every pod is found.
	// It is a flag, not a method of its own: a found pod and a created one
	// need the same work (the pod, brought into line); only what you tell
	// people differs (not news, for a found one: no alert, no Event).
	Created(ctx context.Context, pod *corev1.Pod, found bool) error
	// Updated is called when a reported pod has changed.
	Updated(ctx context.Context, old, pod *corev1.Pod) error
	// Deleted is called with the pod as last reported, once it is gone.
	Deleted(ctx context.Context, pod *corev1.Pod) error
}

// keep is what the cache holds of each pod, and nothing else: what the
// controller and LogHandler read. That is the pod's identity, its deletion
// timestamp, its node, its phase, and its conditions and container statuses
// whole.
//
// Every field your handler reads must be kept here. A field not kept
// reaches the handler empty, silently.
//   - TestHandlerSeesWhatWholePodsShow (keep_test.go) calls the handler with
//     the cache's pods and with whole pods, changing every field of a pod a
//     few at a time, and compares.
//   - It fails, naming the field, only for the handler newHandler returns.
//   - The test sees a field only if its value shows in what the handler
//     logs through ctx's logger (at -v=4 or lower), or returns.
//
// It drops status.reason and status.message, so LogHandler logs an evicted
// pod (reason "Evicted") as any other pod that failed.
//   - A handler can still tell that its kubelet ended it: the kubelet adds
//     the condition DisruptionTarget, reason TerminationByKubelet, which
//     keep keeps (a node's graceful shutdown adds it too).
//   - Keep status.reason to tell an eviction exactly.
//
// What keep keeps decides the controller's memory. The cache holds every
// pod the controller watches, for as long as it runs (docs/performance.md).
// Keep a field more, and measure again (make bench): the manifest's limit
// was measured with this keep.
//
// TestKeepGuardCatchesAnOwnHandler needs a field that keep drops: it reads a
// pod's labels. If you keep labels, change that test to read another field.
//
// keep may change the pod in place. It is the informer's transform (set in
// runController): it runs on each pod as it arrives from the API server,
// before anything else sees it.
//
// Keeping a kept pod must change nothing: client-go hands keep each pod of
// a streamed list twice, once in the reflector's store for the stream and
// again in the informer's Replace (reflector.go, the_real_fifo.go).
// It is the factory's transform, so every informer of that factory hands
// it its objects (exercise 4's nodes too): all but pods go through as they
// are. (client-go never hands it a delete tombstone.)
//
// keep never returns an error. An error from a transform loses that watch
// event, or fails the whole list, which client-go then retries for ever.
func keep(obj any) (any, error) {
	if pod, ok := obj.(*corev1.Pod); ok {
		pod.ObjectMeta = metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID,
			ResourceVersion: pod.ResourceVersion, DeletionTimestamp: pod.DeletionTimestamp}
		pod.Spec = corev1.PodSpec{NodeName: pod.Spec.NodeName}
		pod.Status = corev1.PodStatus{Phase: pod.Status.Phase, Conditions: pod.Status.Conditions,
			ContainerStatuses: pod.Status.ContainerStatuses}
	}
	return obj, nil
}

// newHandler returns the Handler that run (main.go) gives the controller.
// Your own Handler goes here: the guard test of keep then checks it too.
func newHandler() Handler { return LogHandler{} }

// LogHandler is the default Handler: it logs one line per lifecycle event.
// Its lines are for people, and may change: a program that needs the
// pods' lifecycle should read the pods, not this log.
// The logger in ctx already carries the pod's namespace/name. Each line is
// logged where it is decided, so that the source in klog's header
// (handler.go:LINE) points at the line that logged it.
type LogHandler struct{}

// Created logs "Pod found" or "Pod created". It reports no change: a pod
// first seen already scheduled, running or ready gets no "Pod scheduled",
// "Pod phase changed" or "Pod ready" line, only its phase (and, found, its
// node).
func (LogHandler) Created(ctx context.Context, pod *corev1.Pod, found bool) error {
	if !found {
		klog.FromContext(ctx).Info("Pod created", "phase", pod.Status.Phase)
		return nil
	}
	klog.FromContext(ctx).Info("Pod found", "phase", pod.Status.Phase, "node", pod.Spec.NodeName)
	return nil
}

// Updated logs one line for each change that matters between old and pod,
// and nothing for the others (a label, an annotation, a status field it
// does not read). The trace (-v=5) shows every call: sync's
// "resourceVersion changed: Updated" line.
//   - It sees the net change: a phase passed through between two syncs is
//     not seen. (A pod whose containers end at once may go from Pending to
//     Succeeded with no Running in its status at all.)
//   - The lines come in a fixed order: scheduled, phase, ready, restarted,
//     terminating. Changes folded into one sync come out in that order,
//     whatever order they happened in.
//   - "Pod scheduled" comes before "Running", or in the same sync: a pod
//     runs only once it is on a node. A pod already on a node when first
//     reported (found, or created with its node set) gets no "Pod
//     scheduled"; "Pod created" does not name its node.
//
// Common events in these lines:
//   - A container that exits is restarted ("Container restarted") where the
//     pod's restartPolicy allows. Once all its containers have ended for
//     good, the pod's phase changes to Succeeded or Failed.
//   - A pod with init containers stays Pending while they run, and logs
//     nothing for them: keep drops their statuses. Then, as any pod, it
//     logs its phase change to Running, and ready.
//   - A restart (a crash, an OOM kill) keeps the phase Running. What it
//     logs follows the kubelet's status writes, as the syncs see them:
//     "Pod not ready" if one shows the pod not ready while the container is
//     down; "Container restarted" once its restartCount goes up; "Pod
//     ready" once it is ready again. In one sync, the ready line comes
//     first. Why it exited (lastState) is kept, not logged.
//   - A pod its kubelet evicts (the node short of memory or disk) changes
//     phase to Failed; keep drops the reason, Evicted (see keep).
//   - A pod deleted (by kubectl delete, by kubectl drain's eviction, or
//     with its namespace) logs "Pod terminating", and "Pod deleted" last.
//     Between them, on a node that runs it, the kubelet's last writes
//     usually log "Pod not ready" and a phase change to Succeeded or Failed
//     (how its containers exited), unless the delete follows too fast.
//     "Pod deleted" comes once its kubelet has stopped its containers:
//     within its grace period (30 s by default), unless a finalizer holds
//     it. On a node that does not answer, it waits until the node comes
//     back or is deleted, or the pod is force-deleted.
//     One on no node yet, or already ended, goes at once: "Pod deleted"
//     alone.
//   - A Deployment's rollout replaces its pods: the new ones log created,
//     scheduled, phase changed and ready; the old ones terminating, then
//     deleted. Their lines interleave.
//   - A pod whose finalizers are never removed stays terminating: no "Pod
//     deleted" comes, and nothing here says why (keep drops finalizers).
func (LogHandler) Updated(ctx context.Context, old, pod *corev1.Pod) error {
	logger := klog.FromContext(ctx)
	if old.Spec.NodeName == "" && pod.Spec.NodeName != "" {
		logger.Info("Pod scheduled", "node", pod.Spec.NodeName)
	}
	if old.Status.Phase != pod.Status.Phase {
		logger.Info("Pod phase changed", "oldPhase", old.Status.Phase, "phase", pod.Status.Phase)
	}
	if ready, wasReady := isReady(pod), isReady(old); ready && !wasReady {
		logger.Info("Pod ready")
	} else if !ready && wasReady {
		logger.Info("Pod not ready")
	}
	// Only app containers' restarts are logged, by choice: an init
	// container's progress is not the pod's lifecycle here, so keep drops
	// the statuses of init containers, sidecars among them (a sidecar's
	// restart goes unlogged). The kubelet sorts container
	// statuses by name, and a pod's containers and their names never
	// change: compare them by position.
	for i, s := range pod.Status.ContainerStatuses {
		if i < len(old.Status.ContainerStatuses) && s.RestartCount > old.Status.ContainerStatuses[i].RestartCount {
			logger.Info("Container restarted", "container", s.Name, "restartCount", s.RestartCount)
		}
	}
	if old.DeletionTimestamp == nil && pod.DeletionTimestamp != nil {
		logger.Info("Pod terminating")
	}
	return nil
}

// Deleted logs "Pod deleted" with the phase the handler last heard of: a
// phase the pod passed through between two syncs is not seen.
func (LogHandler) Deleted(ctx context.Context, pod *corev1.Pod) error {
	klog.FromContext(ctx).Info("Pod deleted", "phase", pod.Status.Phase)
	return nil
}

// isReady reports whether the pod's Ready condition is True.
func isReady(pod *corev1.Pod) bool {
	i := slices.IndexFunc(pod.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == corev1.PodReady })
	return i >= 0 && pod.Status.Conditions[i].Status == corev1.ConditionTrue
}
