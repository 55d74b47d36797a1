//go:build exercise

// The test of exercise 1 (exercises/01-image/README.md). It is not part of
// the project's tests: copy it into the project's root and run it with the
// exercise tag, as the exercise's README says. Each of its checks stands for
// a mistake a solution can make, and names it when it fails.

package main

import (
	"cmp"
	"context"
	"fmt"
	"reflect"
	"regexp"
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
// handler that newHandler returns) on a fake clientset. The pod web has
// three containers, written in the order proxy, app, logs (the kubelet lists
// their statuses sorted by name: app, logs, proxy), an init container,
// migrate, and an ephemeral one, debug. Then, one update at a time:
//
//  1. `kubectl set image pod/web proxy=example/proxy:v2 logs=example/logs:v2
//     migrate=example/migrate:v2`: two containers' images change at once,
//     and the init container's;
//  2. the kubelet replaces proxy and logs: only the images running (their
//     statuses) change;
//  3. only the pod's phase changes.
//
// Exactly two lines must say that proxy's and logs' images changed, at the
// first update, through ctx's logger; none at the others; what LogHandler
// logged before is still logged; and the pods the handler is given, straight
// from the cache, must hold of the spec each container's name and image, and
// nothing more.
func TestExercise01ImageChange(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute) // the whole test takes a second
	defer cancel()
	log := &exercise01Log{}
	ctx = klog.NewContext(ctx, textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(log))))
	// What goes to klog's global logger (klog.InfoS, klog.Background(), a
	// context with no logger) lands here, not in the controller's log.
	global := &exercise01Log{}
	klog.SetLogger(textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(global))))
	defer klog.ClearLogger()

	client := fake.NewClientset(exercise01Web("1", nil, false, corev1.PodRunning))
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
	update(exercise01Web("2", exercise01SetImage, false, corev1.PodRunning), "updated 1->2")
	update(exercise01Web("3", exercise01SetImage, true, corev1.PodRunning), "updated 2->3")
	update(exercise01Web("4", exercise01SetImage, true, corev1.PodSucceeded), "updated 3->4")
	cancel() // the worker finishes the call in hand, then runController returns
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("runController: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("runController did not return within 10 s of the end of its context")
	}

	// A line that went to klog's global logger has no pod= and does not
	// reach the logger the controller was given.
	if lines := exercise01ImageLines(global.Lines()); len(lines) > 0 {
		t.Fatalf("the handler logged\n  %s\nthrough klog's global logger (klog.InfoS, klog.Background(), or a context with no logger), "+
			"not through the logger in ctx, which the worker gives the pod's key (pod=) and which is the logger demo-controller was started with. "+
			"Log as LogHandler does: klog.FromContext(ctx).Info(...)", strings.Join(exercise01Last(lines, 4), "\n  "))
	}

	// The update that changed proxy's and logs' images logs exactly the two
	// lines.
	changed, cached := handler.call("updated 1->2")
	replaced, _ := handler.call("updated 2->3")
	statusCompared := false
	switch got := exercise01ImageLines(changed); {
	case len(got) == 0 && len(exercise01ImageLines(replaced)) > 0:
		statusCompared = true
		t.Errorf("no \"Container image changed\" line when `kubectl set image` changed proxy's and logs' images; then, when the kubelet had "+
			"replaced the containers, the controller logged\n  %s\nThat compares the images running (pod.Status.ContainerStatuses), "+
			"which change only once the kubelet has replaced a container; the task is about the image a container asks for "+
			"(pod.Spec.Containers[i].Image), at the update that changes it",
			strings.Join(exercise01Last(exercise01ImageLines(replaced), 4), "\n  "))
	case len(got) == 0:
		t.Error(exercise01WhyNone(cached))
	case !exercise01SameLines(got, exercise01Want):
		t.Errorf("when `kubectl set image` changed the images of containers proxy and logs (and of migrate, an init container), "+
			"the controller logged\n  %s\nwant exactly these two lines (in either order), with the keys container, oldImage and image in that order:\n  %s%s",
			strings.Join(exercise01Last(got, 6), "\n  "), strings.Join(exercise01Want, "\n  "), exercise01Why(got))
	}

	// No such line when the pod is found, nor at an update that changes no
	// image the spec asks for.
	for _, c := range []struct{ call, what string }{
		{"found", "when the pod was found"},
		{"updated 2->3", "when the kubelet had replaced proxy and logs (only the images running changed, in the containers' statuses; the images the spec asks for did not)"},
		{"updated 3->4", "at an update that changed only the pod's phase"},
	} {
		if lines, _ := handler.call(c.call); len(exercise01ImageLines(lines)) > 0 && !(statusCompared && c.call == "updated 2->3") {
			t.Errorf("%s, the controller logged\n  %s\nwant no \"Container image changed\" line: no container asks for a new image",
				c.what, strings.Join(exercise01Last(exercise01ImageLines(lines), 4), "\n  "))
		}
	}
	// What LogHandler logged before, the handler still logs.
	if lines, _ := handler.call("updated 3->4"); !slices.ContainsFunc(lines, func(line string) bool { return strings.HasPrefix(line, `"Pod phase changed"`) }) {
		lines = slices.DeleteFunc(lines, func(line string) bool { return line == `"Worker stopped"` })
		t.Errorf("at an update that changed only the pod's phase (Running to Succeeded), the controller logged no \"Pod phase changed\" line: "+
			"the handler that newHandler returns must still log what LogHandler logs (if it is a type of your own, does its Updated call LogHandler's?). %s",
			exercise01Logged(exercise01Last(lines, 4)))
	}

	// The cache holds every pod for as long as the controller runs: of the
	// spec, it keeps the node, each container's name and image, and nothing
	// else (no init containers, no ephemeral ones).
	if cached != nil {
		more := exercise01Set(reflect.ValueOf(cached.Spec), "pod.Spec", "NodeName", "Containers")
		for i, c := range cached.Spec.Containers {
			more = append(more, exercise01Set(reflect.ValueOf(c), fmt.Sprintf("pod.Spec.Containers[%d]", i), "Name", "Image")...)
		}
		if len(more) > 0 {
			t.Errorf("the cache keeps more of each pod than the handler reads: the pods it hands the handler have these fields set: %s. "+
				"It holds every pod for as long as the controller runs: keep (handler.go) must keep of each container in pod.Spec.Containers "+
				"its name and image, and nothing more (no init containers, no ephemeral containers: the task is not about them)",
				strings.Join(exercise01Last(more, 12), ", "))
		}
	}
}

// exercise01Web returns the pod web as the API server has it at
// resourceVersion: its spec as `kubectl set image` leaves it (set: the
// images it changes, by container; nil: none), the images running as the
// kubelet reports them (replaced: the kubelet has replaced the containers
// whose images set changed), and its phase. A real pod's spec holds much more
// than its containers' names and images.
func exercise01Web(resourceVersion string, set map[string]string, replaced bool, phase corev1.PodPhase) *corev1.Pod {
	image := func(name string) string { return cmp.Or(set[name], "example/"+name+":v1") }
	running := func(name string) (string, int32) {
		if replaced && set[name] != "" {
			return set[name], 1
		}
		return "example/" + name + ":v1", 0
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "uid-web", ResourceVersion: resourceVersion},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "migrate", Image: image("migrate"), Command: []string{"migrate", "--to=latest"}}},
			Containers: []corev1.Container{ // in the order they were written, not by name
				{Name: "proxy", Image: image("proxy"), Args: []string{"--upstream=localhost:8080"}},
				{Name: "app", Image: image("app"), Command: []string{"serve", "--port=8080"},
					Env: []corev1.EnvVar{{Name: "MODE", Value: "production"}}, Ports: []corev1.ContainerPort{{ContainerPort: 8080}}},
				{Name: "logs", Image: image("logs"), VolumeMounts: []corev1.VolumeMount{{Name: "logs", MountPath: "/var/log/app"}}},
			},
			EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
				Name: "debug", Image: "busybox:1.37", Stdin: true, TTY: true}, TargetContainerName: "app"}},
			Volumes:            []corev1.Volume{{Name: "logs"}},
			ServiceAccountName: "web",
			NodeName:           "node-1",
		},
		Status: corev1.PodStatus{Phase: phase},
	}
	// The kubelet lists the containers' statuses sorted by name, and names
	// the image each runs as the container runtime does.
	for _, name := range []string{"app", "logs", "proxy"} {
		img, restarts := running(name)
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{
			Name: name, Image: "docker.io/" + img, Ready: phase == corev1.PodRunning, RestartCount: restarts})
	}
	pod.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "migrate", Image: "docker.io/example/migrate:v1"}}
	return pod
}

// exercise01SetImage is what the test's `kubectl set image` changes.
var exercise01SetImage = map[string]string{"proxy": "example/proxy:v2", "logs": "example/logs:v2", "migrate": "example/migrate:v2"}

// exercise01Want is what the controller must log at that update.
var exercise01Want = []string{
	`"Container image changed" pod="default/web" container="proxy" oldImage="example/proxy:v1" image="example/proxy:v2"`,
	`"Container image changed" pod="default/web" container="logs" oldImage="example/logs:v1" image="example/logs:v2"`,
}

// exercise01WhyNone says why no line came at the update that changed two
// images: is the comparison wrong, or does the handler not see what it
// compares? It hands the handler newHandler returns the two whole pods, as
// they are before keep, and sees.
func exercise01WhyNone(cached *corev1.Pod) string {
	logged := func(verbosity int) ([]string, []string) {
		whole, global := &exercise01Log{}, &exercise01Log{}
		klog.SetLogger(textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(global))))
		defer klog.ClearLogger()
		logger := klog.LoggerWithValues(textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(whole), textlogger.Verbosity(verbosity))),
			"pod", klog.KRef("default", "web"))
		_ = newHandler().Updated(klog.NewContext(context.Background(), logger),
			exercise01Web("1", nil, false, corev1.PodRunning), exercise01Web("2", exercise01SetImage, false, corev1.PodRunning))
		return whole.Lines(), global.Lines()
	}
	const none = "no \"Container image changed\" line when `kubectl set image` changed the images of containers proxy and logs"
	lines, _ := logged(0)
	if got := exercise01ImageLines(lines); exercise01SameLines(got, exercise01Want) {
		return none + ". The handler logs them when it is handed the whole pods, but through the controller it is handed the pods " +
			"from the cache, which holds only what keep (handler.go) keeps of each pod: the pod it was handed has the containers " +
			exercise01Containers(cached)
	} else if len(got) > 0 {
		return none + ". The handler logs, when it is handed the whole pods,\n  " + strings.Join(exercise01Last(got, 6), "\n  ") +
			"\nbut not through the cache, which holds only what keep (handler.go) keeps of each pod: the pod it was handed has the containers " +
			exercise01Containers(cached) + ". Want exactly these two lines:\n  " + strings.Join(exercise01Want, "\n  ")
	}
	if verbose, _ := logged(10); len(exercise01ImageLines(verbose)) > 0 {
		return none + ". The handler logs\n  " + strings.Join(exercise01Last(exercise01ImageLines(verbose), 4), "\n  ") +
			"\nonly at a higher verbosity (logger.V(n).Info, as -v=n shows): want it at the default one, logger.Info, as \"Pod phase changed\" is"
	}
	return none + ", not even when the handler that newHandler returns is handed the two whole pods (a handler of your own type must be " +
		"returned by newHandler, and log through klog.FromContext(ctx): what it prints otherwise does not count). In them, proxy " +
		"(the first of three containers) asks for example/proxy:v2 instead of example/proxy:v1, and logs (the third) for example/logs:v2 " +
		"instead of example/logs:v1, in pod.Spec.Containers; their statuses still name the images running, until the kubelet has " +
		"replaced the containers. Want\n  " + strings.Join(exercise01Want, "\n  ") + "\n" + exercise01Logged(exercise01Last(lines, 6))
}

// exercise01Why says what is wrong with the lines got, as the end of a
// message: a reason for each mistake it recognises.
func exercise01Why(got []string) string {
	var why []string
	add := func(reason string) {
		if !slices.Contains(why, reason) {
			why = append(why, reason)
		}
	}
	field := func(line, key string) string {
		m := regexp.MustCompile(` ` + key + `="([^"]*)"`).FindStringSubmatch(line)
		if m == nil {
			return ""
		}
		return m[1]
	}
	owner := func(image string) string { // the container whose images these are
		name, _, _ := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(image, "docker.io/"), "example/"), ":")
		return name
	}
	lines := map[string]int{} // by container
	var others []string       // "container app with proxy's images"
	for _, line := range got {
		container, oldImage, image := field(line, "container"), field(line, "oldImage"), field(line, "image")
		lines[container]++
		switch {
		case container == "":
			add("a line with no container name (what does the cache keep of each container?)")
		case strings.ContainsAny(container, ", []"):
			add(fmt.Sprintf("one line for several containers (container=%q): want one line for each container whose image changed", container))
		case container == "migrate":
			add("a line for migrate, an init container: the task is about the pod's containers (pod.Spec.Containers), not its init containers")
		case container == "app" && owner(oldImage) == "app":
			add("a line for container app, whose image did not change")
		case container != owner(oldImage) || container != owner(image):
			others = append(others, fmt.Sprintf("container %s with images of %s", container, strings.Join(slices.Compact([]string{owner(oldImage), owner(image)}), " and ")))
		}
		if strings.HasPrefix(oldImage, "docker.io/") || strings.HasPrefix(image, "docker.io/") {
			add("an image as the container's status names it (docker.io/...): oldImage and image are the images the spec asks for " +
				"(old.Spec.Containers and pod.Spec.Containers), not the ones running")
		}
		if strings.HasSuffix(oldImage, ":v2") && strings.HasSuffix(image, ":v1") {
			add("the old image and the new one swapped")
		}
	}
	if len(others) > 0 {
		add("lines that name one container with another's images (" + strings.Join(others, ", ") + "): the spec lists the containers " +
			"in the order they were written (proxy, app, logs), the kubelet their statuses sorted by name (app, logs, proxy); " +
			"is a status entry looked up by a spec container's index?")
	}
	for _, name := range []string{"proxy", "logs"} {
		if lines[name] > 1 {
			add(fmt.Sprintf("%d lines for container %s, for one change", lines[name], name))
		}
	}
	if right := slices.DeleteFunc(slices.Clone(got), func(line string) bool { return !slices.Contains(exercise01Want, line) }); len(right) == 1 && len(got) == 1 {
		add("the line for one of the two containers whose images changed in this one update, and not the other's: " +
			"does the loop stop at the first change (a break, or a return)?")
	}
	if len(why) == 0 {
		return ""
	}
	end := "."
	if strings.HasSuffix(why[len(why)-1], "?") {
		end = ""
	}
	return "\nIt logged " + strings.Join(why, "; and ") + end
}

// exercise01SameLines reports whether got and want hold the same lines, in
// any order.
func exercise01SameLines(got, want []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want)))
}

// exercise01Last returns the last n of lines: a failing check shows no more.
func exercise01Last(lines []string, n int) []string {
	if len(lines) > n {
		return append([]string{fmt.Sprintf("(%d more before)", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return lines
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
