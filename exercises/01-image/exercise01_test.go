//go:build exercise

// The test of exercise 1 (exercises/01-image/README.md). It is not part of
// the project's tests: copy it into the project's root and run it with the
// exercise tag, as the exercise's README says.

package main

import (
	"context"
	"reflect"
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

// Through the same wiring as a real run (runController: the informer, keep,
// the queue, LogHandler), a pod whose container gets a new image logs
// "Container image changed", once, with the old and the new image.
func TestExercise01ImageChange(t *testing.T) {
	var buf syncBuffer
	logger := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(&buf)))
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	defer cancel()
	pod := testPod("default", "web", "uid-web", "1", corev1.PodRunning)
	client := fake.NewClientset(pod)
	done := make(chan error, 1)
	go func() { done <- runController(ctx, client, "fake", options{syncTimeout: time.Minute}, LogHandler{}) }()

	// logLines returns what the controller has logged, without klog's headers.
	logLines := func() []string {
		var lines []string
		for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
			lines = append(lines, klogHeader.ReplaceAllString(line, ""))
		}
		return lines
	}
	waitForLine := func(prefix string) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
			for _, line := range logLines() {
				if strings.HasPrefix(line, prefix) {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			t.Fatalf("no line %s in the log:\n%s", prefix, strings.Join(logLines(), "\n"))
		}
	}
	update := func(change func(*corev1.Pod)) {
		t.Helper()
		change(pod)
		if _, err := client.CoreV1().Pods("default").Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	waitForLine(`"Pod found" pod="default/web"`)
	// As `kubectl set image pod/web app=example/app:v2` would. (The fake
	// clientset does not set resourceVersions: the test does.)
	update(func(p *corev1.Pod) { p.ResourceVersion, p.Spec.Containers[0].Image = "2", "example/app:v2" })
	// Then a change that LogHandler already logs, to know when the worker
	// has handled the first; it must not log the image again.
	update(func(p *corev1.Pod) { p.ResourceVersion, p.Status.Phase = "3", corev1.PodSucceeded })
	waitForLine(`"Pod phase changed" pod="default/web"`)
	cancel() // the worker finishes the call in hand, then Run returns
	if err := <-done; err != nil {
		t.Fatalf("runController: %v", err)
	}

	want := `"Container image changed" pod="default/web" container="app" oldImage="example/app" image="example/app:v2"`
	var got []string
	for _, line := range logLines() {
		if strings.HasPrefix(line, `"Container image changed"`) {
			got = append(got, line)
		}
	}
	switch {
	case len(got) == 0:
		t.Fatalf("no \"Container image changed\" line. If LogHandler.Updated compares the images and you see this, "+
			"check what keep (handler.go) keeps of each pod. The log was:\n%s", strings.Join(logLines(), "\n"))
	case len(got) > 1 || got[0] != want:
		t.Fatalf("the image change was logged as\n  %s\nwant exactly one line\n  %s", strings.Join(got, "\n  "), want)
	}

	// The cache holds every pod for as long as the controller runs: of each
	// container, it keeps what LogHandler reads, and nothing else.
	whole := testPod("default", "web", "uid-web", "1", corev1.PodRunning)
	whole.Spec.Containers[0].Command = []string{"serve", "--port=8080"}
	whole.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "MODE", Value: "production"}}
	kept, _ := keep(whole)
	want1 := []corev1.Container{{Name: "app", Image: "example/app"}}
	if got := kept.(*corev1.Pod).Spec.Containers; !reflect.DeepEqual(got, want1) {
		t.Errorf("keep keeps more of a container than its name and image (this one has a command and an environment, " +
			"and a real one has much more): keep only what LogHandler reads")
	}
}
