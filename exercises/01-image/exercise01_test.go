//go:build exercise

// The test of exercise 1 (exercises/01-image/README.md). It is not part of
// the project's tests: copy it into the project's root and run it with the
// exercise tag, as the exercise's README says. Each of its checks stands for
// a mistake a solution can make, and names it when it fails.

package main

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
)

// TestExercise01ImageChange runs the controller as a real run does
// (runController: the informer and keep, the queue, the worker, and the
// handler that newHandler returns) on a fake clientset. The pod web has two
// containers, app and proxy. First proxy gets a new image, as
// `kubectl set image pod/web proxy=example/proxy:v2` does; then only the
// pod's phase changes. Exactly one line must say that proxy's image changed,
// at the first update; and the pods the handler is given, straight from the
// cache, must hold of the spec each container's name and image, and nothing
// more.
func TestExercise01ImageChange(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // the whole test takes a second
	defer cancel()
	log := &exercise01Log{}
	ctx = klog.NewContext(ctx, textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(log))))

	// web, as the API server has it at each resourceVersion. A real pod's
	// spec holds much more than its containers' names and images. Its
	// container statuses name the images running, which change only once
	// the kubelet has replaced the containers.
	web := func(resourceVersion, proxyImage string, phase corev1.PodPhase) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "uid-web", ResourceVersion: resourceVersion},
			Spec: corev1.PodSpec{
				Containers: []corev1.Container{
					{Name: "app", Image: "example/app:v1", Command: []string{"serve", "--port=8080"},
						Env: []corev1.EnvVar{{Name: "MODE", Value: "production"}}, Ports: []corev1.ContainerPort{{ContainerPort: 8080}}},
					{Name: "proxy", Image: proxyImage, Args: []string{"--upstream=localhost:8080"}},
				},
				Volumes:            []corev1.Volume{{Name: "config"}},
				ServiceAccountName: "web",
				NodeName:           "node-1",
			},
			Status: corev1.PodStatus{Phase: phase, ContainerStatuses: []corev1.ContainerStatus{
				{Name: "app", Image: "example/app:v1"}, {Name: "proxy", Image: "example/proxy:v1"}}},
		}
	}
	const want = `"Container image changed" pod="default/web" container="proxy" oldImage="example/proxy:v1" image="example/proxy:v2"`

	client := fake.NewClientset(web("1", "example/proxy:v1", corev1.PodRunning))
	handler := &exercise01Handler{Handler: newHandler(), log: log}
	done := make(chan error, 1)
	go func() { done <- runController(ctx, client, "fake", "", 10*time.Second, handler) }()
	update := func(pod *corev1.Pod, call string) {
		t.Helper()
		if _, err := client.CoreV1().Pods("default").Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		handler.waitFor(t, call) // one update at a time: the queue would fold two into one call
	}
	handler.waitFor(t, "found")
	update(web("2", "example/proxy:v2", corev1.PodRunning), "updated 1->2")
	update(web("3", "example/proxy:v2", corev1.PodSucceeded), "updated 2->3")
	cancel() // the worker finishes the call in hand, then runController returns
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("runController: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("runController did not return within 10 s of the end of its context")
	}

	// The update that changed proxy's image logs exactly the one line.
	changed, cached := handler.call("updated 1->2")
	if got := exercise01ImageLines(changed); len(got) == 0 {
		// Nothing: is the comparison wrong, or does the handler not see
		// what it compares? Hand it the two whole pods, as they are before
		// keep, and see.
		whole := &exercise01Log{}
		logger := klog.LoggerWithValues(textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(whole))), "pod", klog.KRef("default", "web"))
		_ = newHandler().Updated(klog.NewContext(context.Background(), logger), web("1", "example/proxy:v1", corev1.PodRunning), web("2", "example/proxy:v2", corev1.PodRunning))
		if slices.Contains(whole.Lines(), want) {
			t.Errorf("no \"Container image changed\" line when proxy's image changed. The handler logs it when it is handed the whole pods, "+
				"but through the controller it is handed the pods from the cache, which holds only what keep (handler.go) keeps of each pod: "+
				"the pod it was handed has the containers %s", exercise01Containers(cached))
		} else {
			t.Errorf("no \"Container image changed\" line when proxy's image changed, not even when the handler is handed the two whole pods: "+
				"in them, container proxy (the second of two) asks for image example/proxy:v2 instead of example/proxy:v1 (its status still "+
				"shows the image running, until the kubelet has replaced the container). Want\n  %s\n%s", want, exercise01Logged(whole.Lines()))
		}
	} else if !slices.Equal(got, []string{want}) {
		var why []string
		if slices.ContainsFunc(got, func(line string) bool { return strings.Contains(line, ` container="app"`) }) {
			why = append(why, "a line for container app, whose image did not change")
		}
		if n := len(slices.DeleteFunc(slices.Clone(got), func(line string) bool { return !strings.Contains(line, ` container="proxy"`) })); n > 1 {
			why = append(why, fmt.Sprintf("%d lines for container proxy, for one change", n))
		}
		if slices.ContainsFunc(got, func(line string) bool { return strings.Contains(line, ` container=""`) }) {
			why = append(why, "a line with no container name (what does the cache keep of each container?)")
		}
		if slices.ContainsFunc(got, func(line string) bool { return strings.Contains(line, `oldImage="example/proxy:v2"`) }) {
			why = append(why, "the old image and the new one swapped")
		}
		t.Errorf("when proxy's image changed, the controller logged\n  %s\nwant exactly one line, with the keys container, oldImage and image in that order:\n  %s%s",
			strings.Join(got, "\n  "), want, exercise01Why(why))
	}

	// No such line when the pod is found, nor at an update that changes no
	// image.
	for call, what := range map[string]string{"found": "when the pod was found", "updated 2->3": "at an update that changed only the pod's phase"} {
		if lines, _ := handler.call(call); len(exercise01ImageLines(lines)) > 0 {
			t.Errorf("%s, the controller logged\n  %s\nwant no \"Container image changed\" line: no image changed", what, strings.Join(exercise01ImageLines(lines), "\n  "))
		}
	}

	// The cache holds every pod for as long as the controller runs: of the
	// spec, it keeps the node, each container's name and image, and nothing
	// else.
	if cached != nil {
		more := exercise01Set(reflect.ValueOf(cached.Spec), "pod.Spec", "NodeName", "Containers")
		for i, c := range cached.Spec.Containers {
			more = append(more, exercise01Set(reflect.ValueOf(c), fmt.Sprintf("pod.Spec.Containers[%d]", i), "Name", "Image")...)
		}
		if len(more) > 0 {
			t.Errorf("the cache keeps more of each pod than the handler reads: the pods it hands the handler have these fields set: %s. "+
				"It holds every pod for as long as the controller runs: keep (handler.go) must keep of each container its name and image, and nothing more",
				strings.Join(more, ", "))
		}
	}
}

// exercise01ImageLines returns the "Container image changed" lines among lines.
func exercise01ImageLines(lines []string) []string {
	return slices.DeleteFunc(slices.Clone(lines), func(line string) bool { return !strings.HasPrefix(line, `"Container image changed"`) })
}

// exercise01Containers says what a pod from the cache holds of its containers.
func exercise01Containers(pod *corev1.Pod) string {
	if pod == nil || len(pod.Spec.Containers) == 0 {
		return "[] (none at all)"
	}
	var containers []string
	for _, c := range pod.Spec.Containers {
		containers = append(containers, fmt.Sprintf("{Name: %q, Image: %q}", c.Name, c.Image))
	}
	return "[" + strings.Join(containers, ", ") + "]"
}

// exercise01Logged says what was logged, if anything.
func exercise01Logged(lines []string) string {
	if len(lines) == 0 {
		return "It logged nothing."
	}
	return "It logged:\n  " + strings.Join(lines, "\n  ")
}

// exercise01Why joins the reasons found, if any, as the end of a message.
func exercise01Why(why []string) string {
	if len(why) == 0 {
		return ""
	}
	return "\nIt logged " + strings.Join(why, "; and ") + "."
}

// exercise01Set lists the fields of the struct v that are set, as
// path.Field, except those named in except.
func exercise01Set(v reflect.Value, path string, except ...string) []string {
	var set []string
	for i := range v.NumField() {
		if name := v.Type().Field(i).Name; !v.Field(i).IsZero() && !slices.Contains(except, name) {
			set = append(set, path+"."+name)
		}
	}
	return set
}

// exercise01Handler passes each call on to the handler that run uses (the
// one newHandler returns) and records it: its name ("found", "updated
// 1->2", ...), the pod it was handed (straight from the cache), and where
// in the log its lines start.
type exercise01Handler struct {
	Handler
	log   *exercise01Log
	mu    sync.Mutex
	calls []exercise01Call
}

type exercise01Call struct {
	name     string
	pod      *corev1.Pod
	from     int // the index in the log of the first line logged during the call
	returned bool
}

func (h *exercise01Handler) Created(ctx context.Context, pod *corev1.Pod, found bool) error {
	name := "created"
	if found {
		name = "found"
	}
	return h.record(name, pod, func() error { return h.Handler.Created(ctx, pod, found) })
}

func (h *exercise01Handler) Updated(ctx context.Context, old, pod *corev1.Pod) error {
	name := "updated " + old.ResourceVersion + "->" + pod.ResourceVersion
	return h.record(name, pod, func() error { return h.Handler.Updated(ctx, old, pod) })
}

func (h *exercise01Handler) Deleted(ctx context.Context, pod *corev1.Pod) error {
	return h.record("deleted", pod, func() error { return h.Handler.Deleted(ctx, pod) })
}

func (h *exercise01Handler) record(name string, pod *corev1.Pod, call func() error) error {
	h.mu.Lock()
	i := len(h.calls)
	h.calls = append(h.calls, exercise01Call{name: name, pod: pod, from: len(h.log.Lines())})
	h.mu.Unlock()
	err := call()
	h.mu.Lock()
	h.calls[i].returned = true
	h.mu.Unlock()
	return err
}

// call returns the lines logged from the start of the call named name to the
// start of the next one, and the pod it was handed (nil if it was not made).
func (h *exercise01Handler) call(name string) ([]string, *corev1.Pod) {
	h.mu.Lock()
	defer h.mu.Unlock()
	lines := h.log.Lines()
	for i, c := range h.calls {
		if c.name == name {
			to := len(lines)
			if i+1 < len(h.calls) {
				to = h.calls[i+1].from
			}
			return lines[c.from:to], c.pod
		}
	}
	return nil, nil
}

// waitFor waits, at most 10 s, until the call named name has returned.
func (h *exercise01Handler) waitFor(t *testing.T, name string) {
	t.Helper()
	made := func(context.Context) (bool, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		return slices.ContainsFunc(h.calls, func(c exercise01Call) bool { return c.name == name && c.returned }), nil
	}
	if wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 10*time.Second, true, made) != nil {
		h.mu.Lock()
		defer h.mu.Unlock()
		var names []string
		for _, c := range h.calls {
			names = append(names, c.name)
		}
		lines := h.log.Lines()
		t.Fatalf("the handler was not called for %q within 10 s (its calls: %q). The last lines logged:\n  %s",
			name, names, strings.Join(lines[max(0, len(lines)-10):], "\n  "))
	}
}

// exercise01Log holds what the controller logs, one entry per line, without
// klog's header. It prints nothing: a failing check shows the lines that
// matter.
type exercise01Log struct {
	mu    sync.Mutex
	lines []string
}

func (l *exercise01Log) Write(entry []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	line := strings.TrimSuffix(string(entry), "\n")
	if _, text, ok := strings.Cut(line, "] "); ok {
		line = text
	}
	l.lines = append(l.lines, line)
	return len(entry), nil
}

func (l *exercise01Log) Lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.lines)
}
