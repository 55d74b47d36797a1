//go:build exercise

// The test of exercise 2 (exercises/02-pending/README.md). It is not part of
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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
)

// With --pending-timeout, a pod still Pending that long after its creation
// is logged once as "Pod pending too long", when the time comes, while the
// worker goes on with other pods; a pod that leaves Pending in time is not.
func TestExercise02PendingTooLong(t *testing.T) {
	const timeout = 2 * time.Second
	var o options
	if err := newFlagSet(&o).Parse([]string{"--pending-timeout=" + timeout.String()}); err != nil {
		t.Fatalf("%v: the exercise adds this flag", err)
	}
	var buf syncBuffer
	logger := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(&buf)))
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	defer cancel()

	// Two pods exist at start: one Pending for an hour already, one Running.
	stuck := testPod("default", "stuck", "uid-stuck", "1", corev1.PodPending)
	stuck.CreationTimestamp = metav1.NewTime(time.Now().Add(-time.Hour))
	running := testPod("default", "running", "uid-running", "1", corev1.PodRunning)
	running.CreationTimestamp = stuck.CreationTimestamp
	client := fake.NewClientset(stuck, running)
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
	// find returns the index of the first line that starts with prefix, or -1.
	find := func(prefix string) int {
		return slices.IndexFunc(logLines(), func(line string) bool { return strings.HasPrefix(line, prefix) })
	}
	waitForLine := func(prefix string) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, wait.ForeverTestTimeout, true,
			func(context.Context) (bool, error) { return find(prefix) >= 0, nil })
		if err != nil {
			t.Fatalf("no line %s in the log:\n%s", prefix, strings.Join(logLines(), "\n"))
		}
	}
	create := func(name string, phase corev1.PodPhase) *corev1.Pod {
		t.Helper()
		pod := testPod("default", name, "uid-"+name, "1", phase)
		pod.CreationTimestamp = metav1.Now() // an API server would set it; the fake clientset does not
		if _, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		return pod
	}
	toRunning := func(pod *corev1.Pod) {
		t.Helper()
		pod.ResourceVersion, pod.Status.Phase = "2", corev1.PodRunning
		if _, err := client.CoreV1().Pods("default").Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	waitForLine(`"Pod found" pod="default/running"`)
	slow := create("slow", corev1.PodPending)
	quick := create("quick", corev1.PodPending)
	waitForLine(`"Pod created" pod="default/quick"`)
	toRunning(quick)
	waitForLine(`"Pod phase changed" pod="default/quick"`)
	// The worker is free while slow waits: a pod created now is handled
	// long before slow's time is up.
	create("later", corev1.PodRunning)
	waitForLine(`"Pod created" pod="default/later"`)
	waitForLine(`"Pod pending too long" pod="default/slow"`)
	if waited := time.Since(slow.CreationTimestamp.Time); waited < timeout-time.Second/10 {
		t.Errorf("slow was logged as pending too long %v after it was created, want %v: "+
			"how long has it been pending, as the controller sees it?", waited.Round(time.Millisecond), timeout)
	} else if find(`"Pod created" pod="default/later"`) > find(`"Pod pending too long" pod="default/slow"`) {
		t.Errorf("the worker handled a pod created meanwhile only after slow's time was up: " +
			"does it wait, instead of putting slow's key back on the queue for later?")
	}
	toRunning(slow)
	waitForLine(`"Pod phase changed" pod="default/slow"`)
	cancel() // the worker finishes the call in hand, then Run returns
	if err := <-done; err != nil {
		t.Fatalf("runController: %v", err)
	}

	var got []string
	for _, line := range logLines() {
		if strings.HasPrefix(line, `"Pod pending too long"`) {
			line, _, _ = strings.Cut(line, " pendingFor=")
			got = append(got, line)
		}
	}
	want := []string{`"Pod pending too long" pod="default/stuck"`, `"Pod pending too long" pod="default/slow"`}
	if !slices.Equal(got, want) {
		t.Errorf("lines about pods pending too long (without their pendingFor):\n got  %q\n want %q\nThe whole log:\n%s",
			got, want, strings.Join(logLines(), "\n"))
	}
	if i := find(`"Pod pending too long" pod="default/slow"`); i < 0 || !strings.Contains(logLines()[i], " pendingFor=") {
		t.Errorf("the line has no pendingFor")
	}
}
