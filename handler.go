package main

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// Handler is where your own code goes. The controller calls it from its one
// worker, one pod at a time, after working out what happened to the pod.
// The pods passed in are shared with the informer's cache: read them, and
// copy (pod.DeepCopy()) before changing anything.
//
// Returning an error makes the controller retry the same call later, with
// backoff, up to maxRetries times.
type Handler interface {
	// Created is called for a pod the controller has not reported before.
	// found is true when the pod already existed when the controller started.
	Created(ctx context.Context, pod *corev1.Pod, found bool) error
	// Updated is called when a reported pod has changed.
	Updated(ctx context.Context, old, pod *corev1.Pod) error
	// Deleted is called with the pod as last reported, once it is gone.
	Deleted(ctx context.Context, pod *corev1.Pod) error
}

// LogHandler is the default Handler: it logs one line per lifecycle event.
// The logger in ctx already carries the pod's namespace/name.
type LogHandler struct{}

// Created logs "Pod found" or "Pod created".
func (LogHandler) Created(ctx context.Context, pod *corev1.Pod, found bool) error {
	if found {
		klog.FromContext(ctx).Info("Pod found", "phase", pod.Status.Phase, "node", pod.Spec.NodeName)
		return nil
	}
	klog.FromContext(ctx).Info("Pod created", "phase", pod.Status.Phase)
	return nil
}

// Updated logs one line for each change that matters in a pod's life, in
// the order they usually happen; other changes only at -v=4.
func (LogHandler) Updated(ctx context.Context, old, pod *corev1.Pod) error {
	logger, changes := klog.FromContext(ctx), 0
	log := func(msg string, keysAndValues ...any) {
		logger.Info(msg, keysAndValues...)
		changes++
	}
	if old.Spec.NodeName == "" && pod.Spec.NodeName != "" {
		log("Pod scheduled", "node", pod.Spec.NodeName)
	}
	if old.Status.Phase != pod.Status.Phase {
		log("Pod phase changed", "oldPhase", old.Status.Phase, "phase", pod.Status.Phase)
	}
	if ready, wasReady := isReady(pod), isReady(old); ready && !wasReady {
		log("Pod ready")
	} else if !ready && wasReady {
		log("Pod not ready")
	}
	restarts := map[string]int32{}
	for _, status := range old.Status.ContainerStatuses {
		restarts[status.Name] = status.RestartCount
	}
	for _, status := range pod.Status.ContainerStatuses {
		if status.RestartCount > restarts[status.Name] {
			log("Container restarted", "container", status.Name, "restartCount", status.RestartCount)
		}
	}
	if old.DeletionTimestamp == nil && pod.DeletionTimestamp != nil {
		log("Pod terminating")
	}
	if changes == 0 {
		logger.V(4).Info("Pod updated", "resourceVersion", pod.ResourceVersion)
	}
	return nil
}

// Deleted logs "Pod deleted" with the last phase the controller saw.
func (LogHandler) Deleted(ctx context.Context, pod *corev1.Pod) error {
	klog.FromContext(ctx).Info("Pod deleted", "phase", pod.Status.Phase)
	return nil
}

// isReady reports whether the pod's Ready condition is True.
func isReady(pod *corev1.Pod) bool {
	for _, condition := range pod.Status.Conditions {
		if condition.Type == corev1.PodReady {
			return condition.Status == corev1.ConditionTrue
		}
	}
	return false
}
