//go:build exercise

// The test of exercise 4 (exercises/04-nodes/README.md). It is not part of
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
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
)

// The lines logged for a pod on a node carry the zone of that node, read
// from a second informer's cache; and the worker starts only once that
// cache has synced too, even when the nodes are slow to list.
func TestExercise04NodeZones(t *testing.T) {
	node := func(name, zone string) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1"}}
		if zone != "" {
			n.Labels = map[string]string{corev1.LabelTopologyZone: zone}
		}
		return n
	}
	onNode := func(name, nodeName string) *corev1.Pod {
		pod := testPod("default", name, "uid-"+name, "1", corev1.PodRunning)
		pod.Spec.NodeName = nodeName
		return pod
	}
	client := fake.NewClientset(node("node-1", "zone-a"), node("node-2", ""),
		onNode("web-1", "node-1"), onNode("web-2", "node-2"))

	var buf syncBuffer
	logger := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(&buf)))
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	defer cancel()
	// logLines returns what the controller has logged, without klog's headers.
	logLines := func() []string {
		var lines []string
		for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
			lines = append(lines, klogHeader.ReplaceAllString(line, ""))
		}
		return lines
	}
	hasLine := func(prefix string) bool {
		return slices.ContainsFunc(logLines(), func(line string) bool { return strings.HasPrefix(line, prefix) })
	}
	waitForLine := func(prefix string) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, wait.ForeverTestTimeout, true,
			func(context.Context) (bool, error) { return hasLine(prefix), nil })
		if err != nil {
			t.Fatalf("no line %s in the log:\n%s", prefix, strings.Join(logLines(), "\n"))
		}
	}

	// The nodes are slow to list: the list waits until a pod has been
	// reported (which it must not be, before the nodes are known), or for
	// at most a second.
	listed := make(chan struct{})
	client.PrependReactor("list", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		<-listed
		return false, nil, nil // and then the fake clientset lists them
	})
	go func() {
		_ = wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, time.Second, true,
			func(context.Context) (bool, error) { return hasLine(`"Pod found"`), nil })
		close(listed)
	}()

	done := make(chan error, 1)
	go func() { done <- runController(ctx, client, "fake", options{syncTimeout: time.Minute}, LogHandler{}) }()
	waitForLine(`"Pod found" pod="default/web-2"`)
	waitForLine(`"Pod found" pod="default/web-1"`)

	// A pod created now, then scheduled to node-1.
	pod := testPod("default", "web-3", "uid-web-3", "1", corev1.PodPending)
	if _, err := client.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForLine(`"Pod created" pod="default/web-3"`)
	pod.ResourceVersion, pod.Spec.NodeName = "2", "node-1" // (the fake clientset does not set resourceVersions)
	if _, err := client.CoreV1().Pods("default").Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForLine(`"Pod scheduled" pod="default/web-3"`)
	cancel() // the worker finishes the call in hand, then Run returns
	if err := <-done; err != nil {
		t.Fatalf("runController: %v", err)
	}

	var got []string
	for _, line := range logLines() {
		if strings.HasPrefix(line, `"Pod `) {
			got = append(got, line)
		}
	}
	slices.Sort(got)
	want := []string{
		`"Pod created" pod="default/web-3" phase="Pending"`,
		`"Pod found" pod="default/web-1" zone="zone-a" phase="Running" node="node-1"`,
		`"Pod found" pod="default/web-2" phase="Running" node="node-2"`,
		`"Pod scheduled" pod="default/web-3" zone="zone-a" node="node-1"`,
	}
	if !slices.Equal(got, want) {
		if slices.Contains(got, want[3]) && !slices.Contains(got, want[1]) {
			t.Errorf("a pod scheduled later has its zone, but not a pod found at the start: " +
				"did the worker start before the nodes were in the cache?")
		}
		t.Errorf("the lines about pods (sorted):\n  %s\nwant:\n  %s\nThe whole log:\n%s",
			strings.Join(got, "\n  "), strings.Join(want, "\n  "), strings.Join(logLines(), "\n"))
	}
}
