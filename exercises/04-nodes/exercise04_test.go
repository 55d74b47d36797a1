//go:build exercise

// The test of exercise 4 (exercises/04-nodes/README.md). It is not part of
// the project's tests: copy it into the project's root and run it with the
// exercise tag, as the exercise's README says. Each of its checks stands for
// a mistake a solution can make, and names it when it fails.

package main

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
)

// TestExercise04NodeZones runs the controller as a real run does
// (runController) on a fake clientset with two nodes, node-1 in zone-a and
// node-2 with no zone, and a pod on each. The nodes are slow to list: the
// first LIST of nodes is held back until the controller reports a pod (which
// it must not do before it knows the nodes), or for 2 s. Then a pod is
// created, scheduled to node-1, and web-1 is deleted. Each line about a pod
// on node-1 must carry zone="zone-a" just after pod; no other line a zone;
// and no node may be read from the API server.
func TestExercise04NodeZones(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // the whole test takes 3 s
	defer cancel()
	log := &exercise04Log{}
	ctx = klog.NewContext(ctx, textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(log))))
	node := func(name, zone string) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1"}}
		if zone != "" {
			n.Labels = map[string]string{corev1.LabelTopologyZone: zone}
		}
		return n
	}
	pod := func(name, resourceVersion, nodeName string, phase corev1.PodPhase) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name), ResourceVersion: resourceVersion},
			Spec:       corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "app", Image: "example/app"}}},
			Status:     corev1.PodStatus{Phase: phase},
		}
	}
	fakeClient := fake.NewClientset(node("node-1", "zone-a"), node("node-2", ""),
		pod("web-1", "1", "node-1", corev1.PodRunning), pod("web-2", "1", "node-2", corev1.PodRunning))
	client := &exercise04Client{Clientset: fakeClient, log: log}
	started := time.Now()
	done := make(chan error, 1)
	go func() { done <- runController(ctx, client, "fake", "", 10*time.Second, newHandler()) }()

	// mistake says, as soon as it shows, what the controller did wrong
	// with the nodes: read them from the API server, or report a pod while
	// they were still being listed.
	mistake := func() error {
		var gets, lists int
		for _, a := range fakeClient.Actions() {
			if a.GetResource().Resource == "nodes" {
				switch a.GetVerb() {
				case "get":
					gets++
				case "list":
					lists++
				}
			}
		}
		client.mu.Lock()
		defer client.mu.Unlock()
		switch {
		case gets > 0:
			return fmt.Errorf("the node was read from the API server, not from the cache: the controller sent %d GET requests for nodes. "+
				"The task reads the nodes from an informer's cache, never asking the API server for a node each time a pod changes", gets)
		case lists > 1:
			return fmt.Errorf("the nodes were listed %d times: an informer lists them once, then watches them. "+
				"The task reads the nodes from its cache, never asking the API server each time a pod changes", lists)
		case client.reportedWhileListing != "":
			return fmt.Errorf("the worker started before the node cache synced: while the test held back the LIST of nodes, the controller logged\n  %s\n"+
				"Pods that exist at the start must get their zone too, even when the nodes take longer to list than the pods", client.reportedWhileListing)
		case slices.ContainsFunc(log.Lines(), func(line string) bool { return strings.Contains(line, " err=") }):
			i := slices.IndexFunc(log.Lines(), func(line string) bool { return strings.Contains(line, " err=") })
			return fmt.Errorf("the controller failed to handle a pod:\n  %s\nA pod on no node yet, or on a node with no zone label, gets no zone key, and nothing else changes", log.Lines()[i])
		case client.listCalled.IsZero() && time.Since(started) > 3*time.Second:
			return errors.New("3 s after the start, nothing has listed the nodes: the task reads them from an informer's cache " +
				"(an informer that a factory makes once it has been started is not started)")
		}
		return nil
	}
	// waitForLine waits, at most 5 s, for a line that starts with prefix,
	// and returns it; it stops at once at a mistake.
	waitForLine := func(prefix string) string {
		t.Helper()
		var line string
		err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
			if err := mistake(); err != nil {
				return false, err
			}
			i := slices.IndexFunc(log.Lines(), func(l string) bool { return strings.HasPrefix(l, prefix) })
			if i >= 0 {
				line = log.Lines()[i]
			}
			return i >= 0, nil
		})
		if err != nil && mistake() != nil {
			t.Fatal(mistake())
		} else if err != nil {
			t.Fatalf("no line %s within 5 s. The last lines logged:\n  %s", prefix, strings.Join(log.Last(10), "\n  "))
		}
		return line
	}
	// expect compares a line with the one the task wants, and says how
	// they differ.
	expect := func(got, want, why string) {
		t.Helper()
		gotZone, wantZone := strings.Contains(got, " zone="), strings.Contains(want, " zone=")
		switch {
		case got == want:
		case wantZone && !gotZone:
			t.Errorf("the line\n  %s\nhas no zone; want\n  %s\n(%s)", got, want, why)
		case !wantZone && gotZone:
			t.Errorf("the line\n  %s\nhas a zone; want\n  %s\n(%s)", got, want, why)
		case wantZone && !regexp.MustCompile(`^"[^"]+" pod="[^"]+" zone=`).MatchString(got):
			t.Errorf("the line\n  %s\nhas its zone, but not just after pod, where every line about the pod has it; want\n  %s", got, want)
		default:
			t.Errorf("the line\n  %s\nwant\n  %s", got, want)
		}
	}

	web1 := waitForLine(`"Pod found" pod="default/web-1"`)
	web2 := waitForLine(`"Pod found" pod="default/web-2"`)
	// Had the nodes been listed, when the pods were reported?
	var called, listed time.Time
	_ = wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 3*time.Second, true, func(context.Context) (bool, error) {
		client.mu.Lock()
		defer client.mu.Unlock()
		called, listed = client.listCalled, client.listReturned
		return called.IsZero() || !listed.IsZero(), nil
	})
	if err := mistake(); err != nil {
		t.Fatal(err)
	} else if called.IsZero() {
		t.Fatalf("the controller logged\n  %s\nand nothing has listed the nodes: the task reads them from an informer's cache", web1)
	}
	if wait := time.Since(listed); !listed.IsZero() && wait > time.Second/2 {
		t.Errorf("the worker reported the pods found at the start %v after the nodes were listed: "+
			"does it wait a fixed time (a sleep) instead of waiting for the node cache to sync?", wait.Round(100*time.Millisecond))
	}
	expect(web1, `"Pod found" pod="default/web-1" zone="zone-a" phase="Running" node="node-1"`, "web-1 is on node-1, in zone-a")
	expect(web2, `"Pod found" pod="default/web-2" phase="Running" node="node-2"`, "web-2 is on node-2, which has no zone label")

	// A pod created now, on no node yet; then scheduled to node-1; then
	// web-1 deleted.
	if _, err := fakeClient.CoreV1().Pods("default").Create(ctx, pod("web-3", "1", "", corev1.PodPending), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect(waitForLine(`"Pod created" pod="default/web-3"`), `"Pod created" pod="default/web-3" phase="Pending"`, "web-3 is on no node yet")
	if _, err := fakeClient.CoreV1().Pods("default").Update(ctx, pod("web-3", "2", "node-1", corev1.PodPending), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect(waitForLine(`"Pod scheduled" pod="default/web-3"`), `"Pod scheduled" pod="default/web-3" zone="zone-a" node="node-1"`,
		"web-3, created on no node, is now on node-1: its zone is looked up when it changes, from the pod as it is now")
	if err := fakeClient.CoreV1().Pods("default").Delete(ctx, "web-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expect(waitForLine(`"Pod deleted" pod="default/web-1"`), `"Pod deleted" pod="default/web-1" zone="zone-a" phase="Running"`,
		"web-1 was on node-1, in zone-a: the line that says it is gone carries that zone too")

	cancel() // the worker finishes the call in hand, then runController returns
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("runController: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("runController did not return within 10 s of the end of its context")
	}
	if err := mistake(); err != nil {
		t.Fatal(err)
	}
}

// exercise04Client is the fake clientset with a slow node list: the first
// LIST of nodes waits, outside the fake clientset, until the controller
// has logged a line about a pod (the worker has started), or for 2 s. (A
// reactor that waited would hold the fake clientset's lock all that time,
// and the pods' LIST with it.)
type exercise04Client struct {
	*fake.Clientset // (and so IsWatchListSemanticsUnSupported: informers list, then watch)
	log             *exercise04Log

	mu                       sync.Mutex
	listCalled, listReturned time.Time
	reportedWhileListing     string // the first line about a pod logged while the nodes were held back
}

func (c *exercise04Client) CoreV1() corev1client.CoreV1Interface {
	return exercise04CoreV1{c.Clientset.CoreV1(), c}
}

type exercise04CoreV1 struct {
	corev1client.CoreV1Interface
	client *exercise04Client
}

func (c exercise04CoreV1) Nodes() corev1client.NodeInterface {
	return exercise04Nodes{c.CoreV1Interface.Nodes(), c.client}
}

type exercise04Nodes struct {
	corev1client.NodeInterface
	client *exercise04Client
}

func (n exercise04Nodes) List(ctx context.Context, opts metav1.ListOptions) (*corev1.NodeList, error) {
	c := n.client
	c.mu.Lock()
	first := c.listCalled.IsZero()
	if first {
		c.listCalled = time.Now()
	}
	c.mu.Unlock()
	if !first {
		return n.NodeInterface.List(ctx, opts)
	}
	_ = wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, 2*time.Second, true, func(context.Context) (bool, error) {
		i := slices.IndexFunc(c.log.Lines(), func(line string) bool { return strings.Contains(line, ` pod="`) })
		if i >= 0 {
			c.mu.Lock()
			c.reportedWhileListing = c.log.Lines()[i]
			c.mu.Unlock()
		}
		return i >= 0, nil
	})
	list, err := n.NodeInterface.List(ctx, opts)
	c.mu.Lock()
	c.listReturned = time.Now()
	c.mu.Unlock()
	return list, err
}

// exercise04Log holds what the controller logs, one entry per line, without
// klog's header. It prints nothing: a failing check shows the lines that
// matter.
type exercise04Log struct {
	mu    sync.Mutex
	lines []string
}

func (l *exercise04Log) Write(entry []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	line := strings.TrimSuffix(string(entry), "\n")
	if _, text, ok := strings.Cut(line, "] "); ok {
		line = text
	}
	l.lines = append(l.lines, line)
	return len(entry), nil
}

func (l *exercise04Log) Lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.lines)
}

// Last returns the last n lines.
func (l *exercise04Log) Last(n int) []string {
	lines := l.Lines()
	return lines[max(0, len(lines)-n):]
}
