//go:build exercise

// The test of exercise 3 (exercises/03-selector/README.md). It is not part of
// the project's tests: copy it into the project's root and run it with the
// exercise tag, as the exercise's README says.

package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
)

// With --selector, the cache holds only the pods whose labels match, and the
// controller reports only those.
func TestExercise03Selector(t *testing.T) {
	var o options
	if err := newFlagSet(&o).Parse([]string{"--selector=app=web,tier!=canary"}); err != nil {
		t.Fatalf("%v: the exercise adds this flag", err)
	}
	labelled := func(name string, labels map[string]string) *corev1.Pod {
		pod := testPod("shop", name, "uid-"+name, "1", corev1.PodRunning)
		pod.Labels = labels
		return pod
	}
	client := fake.NewClientset(
		labelled("web-1", map[string]string{"app": "web"}),
		labelled("web-2", map[string]string{"app": "web", "tier": "front"}),
		labelled("web-canary", map[string]string{"app": "web", "tier": "canary"}),
		labelled("db-0", map[string]string{"app": "db"}),
		labelled("bare", nil),
	)
	var buf syncBuffer
	logger := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(&buf)))
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- runController(ctx, client, "fake", o, LogHandler{}) }()

	// logLines returns what the controller has logged, without klog's headers.
	logLines := func() []string {
		var lines []string
		for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
			lines = append(lines, klogHeader.ReplaceAllString(line, ""))
		}
		return lines
	}
	err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
		return strings.Count(buf.String(), `"Pod found"`) >= 2, nil
	})
	if err != nil {
		t.Fatalf("the controller did not report the pods it found:\n%s", strings.Join(logLines(), "\n"))
	}
	cancel() // the worker finishes the call in hand, then Run returns
	if err := <-done; err != nil {
		t.Fatalf("runController: %v", err)
	}

	var found []string
	for _, line := range logLines() {
		if strings.HasPrefix(line, `"Pod found"`) {
			found = append(found, strings.Fields(line)[2])
		}
	}
	slices.Sort(found)
	want := []string{`pod="shop/web-1"`, `pod="shop/web-2"`}
	if !slices.Contains(logLines(), `"Cache synced; starting the worker" pods=2`) || !slices.Equal(found, want) {
		t.Errorf("with --selector=app=web,tier!=canary the controller found %q, want %q. The log:\n%s",
			found, want, strings.Join(logLines(), "\n"))
	}
}
