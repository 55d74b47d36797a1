//go:build e2e && exercise

// The end-to-end test of exercise 12 (exercises/12-events/README.md):
// hack/check-exercises.sh copies it into e2e/ of a copy of the project with
// the solution applied, and runs it against a real kube-apiserver, on the
// binary built with the solution. An Event that fails is only a line in the
// controller's log, so it reads what reached the API server: the Events
// themselves, and the server's request counter (its /metrics).

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/scheme"
)

const (
	ex12Controller = "demo-controller.example/demo-controller"
	ex12Identity   = "system:serviceaccount:demo-controller:demo-controller"
	ex12Flaps      = 100
	ex12Wait       = 10 * time.Second // for an Event to reach the server
)

// The manifest's ServiceAccount may create and patch events.k8s.io Events,
// and do nothing else with Events of either API.
func TestExercise12RBAC(t *testing.T) {
	if out, err := manifestOnce(); err != nil {
		t.Fatalf("kubectl create -f demo-controller.yaml: %v\n%s", err, out)
	}
	for _, check := range []struct{ verb, resource, want string }{
		{"create", "events.events.k8s.io", "yes"}, {"patch", "events.events.k8s.io", "yes"},
		{"update", "events.events.k8s.io", "no"}, {"get", "events.events.k8s.io", "no"},
		{"list", "events.events.k8s.io", "no"}, {"watch", "events.events.k8s.io", "no"},
		{"delete", "events.events.k8s.io", "no"}, {"create", "events", "no"}, {"patch", "events", "no"},
		{"list", "pods", "yes"}, {"watch", "pods", "yes"}, {"patch", "pods", "no"},
	} {
		out, _ := kubectl(adminKube, "auth", "can-i", check.verb, check.resource, "--all-namespaces", "--as="+ex12Identity)
		if got := strings.TrimSpace(out); got != check.want {
			t.Errorf("kubectl auth can-i %s %s as the manifest's ServiceAccount: %q, want %q", check.verb, check.resource, got, check.want)
		}
	}
}

// A pod's life, with the manifest's rights: one Event for each phase it
// enters, with the fields the task asks for, in the pod's namespace, shown
// by kubectl events; none for a pod found at start.
func TestExercise12PhaseEvents(t *testing.T) {
	if out, err := manifestOnce(); err != nil {
		t.Fatalf("kubectl create -f demo-controller.yaml: %v\n%s", err, out)
	}
	const ns = "ex12-life"
	found := createPod(t, ns, "found")
	p := startController(t, serviceAccountKubeconfig(t, "demo-controller", "demo-controller"), "--namespace="+ns)
	at := waitForLines(t, p, 0, "Cache synced", `"Pod found" pod="ex12-life/found"`)
	pod := createPod(t, ns, "web")
	at = waitForLines(t, p, at, `"Pod created" pod="ex12-life/web"`)
	bind(t, ns, "web", "node-1")
	setStatus(t, ns, "web", corev1.PodRunning, true, 0)
	at = waitForLines(t, p, at, `"Pod phase changed" pod="ex12-life/web"`)
	setStatus(t, ns, "web", corev1.PodSucceeded, false, 0)
	waitForLines(t, p, at, `"Pod phase changed" pod="ex12-life/web"`)
	got := ex12WaitForEvents(t, p, ns, "web", "PhaseRunning", "PhaseSucceeded")

	host, _ := os.Hostname()
	for i, e := range got {
		from, to := []string{"Pending", "Running"}[i], []string{"Running", "Succeeded"}[i]
		want := corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: ns, Name: "web", UID: pod.UID}
		switch {
		case e.Namespace != ns:
			t.Errorf("the Event %s is in the namespace %q, want the pod's, %q", e.Name, e.Namespace, ns)
		case e.Regarding != want:
			t.Errorf("the Event %s regards %+v, want %+v", e.Name, e.Regarding, want)
		case e.Type != "Normal" || e.Action != "Observed" || e.Note != fmt.Sprintf("Phase changed from %s to %s", from, to):
			t.Errorf("the Event %s: type %q, action %q, note %q", e.Name, e.Type, e.Action, e.Note)
		case e.ReportingController != ex12Controller || e.ReportingInstance != ex12Controller+"-"+host:
			t.Errorf("the Event %s: reporting controller %q, instance %q; want %q, %q", e.Name,
				e.ReportingController, e.ReportingInstance, ex12Controller, ex12Controller+"-"+host)
		}
	}
	out, err := kubectl(adminKube, "events", "-n", ns, "--for", "pod/web")
	if err != nil || !strings.Contains(out, "PhaseRunning") || !strings.Contains(out, "PhaseSucceeded") {
		t.Errorf("kubectl events --for pod/web does not show the two Events (%v):\n%s", err, out)
	}
	t.Logf("kubectl events -n %s --for pod/web:\n%s", ns, out)
	if e := ex12Events(t, ns, "found"); len(e) > 0 {
		t.Errorf("the pod found at start (UID %s) has Events: %s", found.UID, ex12Describe(e))
	}

	// The Events outlive the pod: they are objects of their own. And its
	// deletion makes none: the test looks once the controller has exited,
	// its writes done.
	deletePod(t, ns, "web", now)
	waitForLines(t, p, at, `"Pod deleted" pod="ex12-life/web"`)
	p.stop()
	if e := ex12Events(t, ns, "web"); ex12Describe(e) != "PhaseRunning, PhaseSucceeded" {
		t.Errorf("after web was deleted and the controller stopped, its Events are %s; want the two, still there (they "+
			"live an hour), and no other: an Event about a pod deleted is about an object that no longer exists", ex12Describe(e))
	}
}

// A pod that flaps between two phases 100 times makes two Events, each a
// series; what reaches the API server, and when, is counted by its own
// request counter. The counts the process holds are lost when it stops.
func TestExercise12Flapping(t *testing.T) {
	if out, err := manifestOnce(); err != nil {
		t.Fatalf("kubectl create -f demo-controller.yaml: %v\n%s", err, out)
	}
	const ns = "ex12-flap"
	createPod(t, ns, "flap")
	p := startController(t, serviceAccountKubeconfig(t, "demo-controller", "demo-controller"), "--namespace="+ns)
	at := waitForLines(t, p, 0, "Cache synced", `"Pod found" pod="ex12-flap/flap"`)
	before := ex12Writes(t)
	start := time.Now()
	want := [][]string{{"PhaseRunning"}, {"PhaseRunning", "PhasePending"},
		{"PhaseRunning x2", "PhasePending"}, {"PhaseRunning x2", "PhasePending x2"}}
	for i := 1; i <= ex12Flaps; i++ {
		phase := corev1.PodRunning
		if i%2 == 0 {
			phase = corev1.PodPending
		}
		setStatus(t, ns, "flap", phase, false, 0)
		at = waitForLines(t, p, at, `"Pod phase changed" pod="ex12-flap/flap"`)
		if i <= len(want) { // then the rest only count, in the process
			ex12WaitForEvents(t, p, ns, "flap", want[i-1]...)
		}
	}
	took := time.Since(start)
	got := ex12WaitForEvents(t, p, ns, "flap", want[len(want)-1]...)
	writes := ex12Writes(t).minus(before)
	t.Logf("%d flaps in %v: %d Events on the server (%s); %d creates and %d patches of Events",
		ex12Flaps, took.Round(100*time.Millisecond), len(got), ex12Describe(got), writes.creates, writes.patches)
	if writes.creates != 2 || writes.patches != 2 {
		t.Errorf("%d flaps made %d creates and %d patches of Events, want 2 and 2", ex12Flaps, writes.creates, writes.patches)
	}
	out, _ := kubectl(adminKube, "events", "-n", ns, "--for", "pod/flap")
	t.Logf("kubectl events -n %s --for pod/flap:\n%s", ns, out)

	// At SIGTERM the counts the process holds (50 each) are not written.
	p.stop()
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("the controller exited with code %d at SIGTERM, want 0", code)
	}
	got = ex12Events(t, ns, "flap")
	t.Logf("after SIGTERM: %s", ex12Describe(got))
	if ex12Describe(got) != "PhaseRunning x2, PhasePending x2" {
		t.Errorf("after SIGTERM, the flapping pod's Events are %s", ex12Describe(got))
	}
}

// With a ClusterRole that lacks one verb, the controller runs on, and the
// only sign is a line of its log: the API server's 403. Without patch, a
// series never forms on the server; without create, no Event is there.
func TestExercise12MissingVerb(t *testing.T) {
	if out, err := manifestOnce(); err != nil {
		t.Fatalf("kubectl create -f demo-controller.yaml: %v\n%s", err, out)
	}
	for _, missing := range []string{"patch", "create"} {
		t.Run("no "+missing, func(t *testing.T) {
			ns := "ex12-no-" + missing
			kube := ex12Without(t, ns, missing)
			createPod(t, ns, "flap")
			p := startController(t, kube, "--namespace="+ns)
			at := waitForLines(t, p, 0, "Cache synced")
			for i := 1; i <= 3; i++ {
				setStatus(t, ns, "flap", []corev1.PodPhase{corev1.PodRunning, corev1.PodPending}[(i+1)%2], false, 0)
				at = waitForLines(t, p, at, `"Pod phase changed" pod="`+ns+`/flap"`)
			}
			if missing == "patch" { // the third change is the first repeat
				ex12WaitFor(t, p, false, ns, "flap", "PhaseRunning", "PhasePending")
			}
			refused := fmt.Sprintf(`cannot %s resource \"events\" in API group \"events.k8s.io\" in the namespace \"%s\"`, missing, ns)
			waitForLines(t, p, 0, refused)
			line := p.lines()[slices.IndexFunc(p.lines(), func(l string) bool { return strings.Contains(l, refused) })]
			if !strings.Contains(line, `"Server rejected event (will not retry!)"`) {
				t.Errorf("the 403 is logged, but not as the broadcaster does: %s", ex12Cut(line))
			}
			if i := strings.Index(line, ` event="`); i >= 0 {
				line = line[:i] // the Event, printed whole, follows
			}
			t.Logf("the controller's log: %s", ex12Cut(line))
			got := ex12Events(t, ns, "flap")
			want := map[string]string{"patch": "PhaseRunning, PhasePending", "create": "none"}[missing]
			if ex12Describe(got) != want {
				t.Errorf("without %s, the flapping pod's Events are %s, want %s", missing, ex12Describe(got), want)
			}
			if p.exited() {
				t.Errorf("the controller exited (%v): a refused Event must not stop it", p.err)
			}
		})
	}
}

// At SIGTERM, an Event whose write is in flight is written before the
// process exits, and a write the API server does not answer is given up
// within the bound. A webhook that the test serves holds the write.
func TestExercise12StopAtSIGTERM(t *testing.T) {
	const ns = "ex12-stop"
	hook := ex12StartWebhook(t, ns)
	kube := adminKube

	t.Run("a write in flight is finished", func(t *testing.T) {
		createPod(t, ns, "last")
		p := startController(t, kube, "--namespace="+ns)
		waitForLines(t, p, 0, "Cache synced", `"Pod found" pod="ex12-stop/last"`)
		hook.arm("last", 1500*time.Millisecond)
		setStatus(t, ns, "last", corev1.PodRunning, false, 0)
		hook.waitCalled(t, "last")
		p.signal(syscall.SIGTERM)
		code := p.waitExit(15 * time.Second)
		exited := time.Now()
		answered := hook.answered("last")
		if code != 0 {
			t.Fatalf("the controller exited with code %d at SIGTERM, want 0", code)
		}
		if answered.IsZero() || exited.Before(answered) {
			t.Fatalf("the controller exited before the API server answered the Event's write it had in flight at " +
				"SIGTERM (a webhook held it 1.5 s), and the Event was lost with the process: once the worker has " +
				"stopped, shut the broadcaster down and wait for the writes in flight (at most 2 s), writing with a " +
				"context that SIGTERM does not cancel")
		}
		if got := ex12Events(t, ns, "last"); ex12Describe(got) != "PhaseRunning" {
			t.Errorf("the Event whose write was in flight at SIGTERM: the server has %s, want PhaseRunning", ex12Describe(got))
		}
		t.Logf("SIGTERM with a write in flight (held 1.5 s): the process exited %v after the write was answered",
			exited.Sub(answered).Round(10*time.Millisecond))
	})

	t.Run("a write never answered is given up", func(t *testing.T) {
		createPod(t, ns, "hang")
		p := startController(t, kube, "--namespace="+ns)
		waitForLines(t, p, 0, "Cache synced", `"Pod found" pod="ex12-stop/hang"`)
		hook.arm("hang", 9*time.Second)
		setStatus(t, ns, "hang", corev1.PodRunning, false, 0)
		hook.waitCalled(t, "hang")
		signalled := time.Now()
		p.signal(syscall.SIGTERM)
		code := p.waitExit(15 * time.Second)
		took := time.Since(signalled)
		t.Logf("SIGTERM with a write the server holds 9 s: the process exited %v after it, code %d", took.Round(10*time.Millisecond), code)
		if code != 0 || took > 5*time.Second {
			t.Errorf("the controller exited %v after SIGTERM with code %d, while a webhook held an Event's write 9 s: "+
				"want 0, within 5 s (demo-controller.yaml gives it 10 s before SIGKILL). Bound the wait for the writes "+
				"in flight (2 s), then cancel them", took.Round(10*time.Millisecond), code)
		}
		for _, line := range p.lines() {
			if strings.Contains(line, "Events") && strings.Contains(line, "Gave up") || strings.Contains(line, "Unable to write event") {
				t.Logf("the controller's log: %s", ex12Cut(line))
			}
		}
	})
}

// ex12WaitForEvents waits until the Events about the pod are want (reasons,
// " xN" for a series of N, oldest first), and returns them. It fails at once
// if there are more than want.
func ex12WaitForEvents(t *testing.T, p *process, ns, pod string, want ...string) []eventsv1.Event {
	t.Helper()
	return ex12WaitFor(t, p, true, ns, pod, want...)
}

// ex12WaitFor is ex12WaitForEvents, which also fails at once, if
// noRefusals, when the controller logs that the API server refused an Event.
func ex12WaitFor(t *testing.T, p *process, noRefusals bool, ns, pod string, want ...string) []eventsv1.Event {
	t.Helper()
	var got []eventsv1.Event
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, ex12Wait, true, func(context.Context) (bool, error) {
		got = ex12Events(t, ns, pod)
		if len(got) > len(want) {
			return false, fmt.Errorf("more Events than want")
		}
		if noRefusals && strings.Contains(p.out.String(), `"Server rejected event`) {
			return false, fmt.Errorf("an Event refused")
		}
		return ex12Describe(got) == strings.Join(want, ", "), nil
	})
	if err != nil {
		why := ""
		for _, e := range got {
			if e.Regarding.ResourceVersion != "" {
				why = fmt.Sprintf(" Their regarding carries the pod's resourceVersion (%s): every phase change is a new "+
					"Event, never a repeat folded into a series.", e.Regarding.ResourceVersion)
			}
		}
		for _, line := range p.lines() {
			if strings.Contains(line, `"Server rejected event`) {
				if i := strings.Index(line, ` event="`); i >= 0 {
					line = line[:i] // the Event, printed whole, follows
				}
				why = " The API server refused an Event: " + ex12Cut(line)
			}
		}
		t.Fatalf("the Events about %s/%s are %s, want %s (%v).%s The controller's last lines:\n%s",
			ns, pod, ex12Describe(got), strings.Join(want, ", "), err, why, p.tail(10))
	}
	return got
}

// ex12Events returns the Events about the pod, oldest first.
func ex12Events(t *testing.T, ns, pod string) []eventsv1.Event {
	t.Helper()
	list, err := admin.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "regarding.name=" + pod})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(list.Items, func(a, b eventsv1.Event) int { return a.EventTime.Compare(b.EventTime.Time) })
	return list.Items
}

func ex12Describe(events []eventsv1.Event) string {
	var out []string
	for _, e := range events {
		if e.Series != nil {
			out = append(out, fmt.Sprintf("%s x%d", e.Reason, e.Series.Count))
		} else {
			out = append(out, e.Reason)
		}
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

// ex12Cut returns a log line without klog's header.
func ex12Cut(line string) string {
	if i := strings.Index(line, "] "); i >= 0 {
		return line[i+2:]
	}
	return line
}

type ex12Counts struct{ creates, patches int }

func (c ex12Counts) minus(d ex12Counts) ex12Counts {
	return ex12Counts{c.creates - d.creates, c.patches - d.patches}
}

// ex12Writes returns how many creates and patches of events.k8s.io Events
// the API server has served so far, whatever their answer.
func ex12Writes(t *testing.T) ex12Counts {
	t.Helper()
	data, err := admin.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatalf("reading the API server's metrics: %v", err)
	}
	var c ex12Counts
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "apiserver_request_total{") || !strings.Contains(line, `group="events.k8s.io"`) ||
			!strings.Contains(line, `resource="events"`) {
			continue
		}
		n, err := strconv.Atoi(line[strings.LastIndex(line, " ")+1:])
		if err != nil {
			t.Fatalf("reading the API server's metrics: %q: %v", line, err)
		}
		switch {
		case strings.Contains(line, `verb="POST"`):
			c.creates += n
		case strings.Contains(line, `verb="PATCH"`):
			c.patches += n
		}
	}
	return c
}

// ex12Without makes, in namespace ns, a ServiceAccount bound to a copy of
// the manifest's ClusterRole without the verb on Events, and returns a
// kubeconfig with its token.
func ex12Without(t *testing.T, ns, verb string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "demo-controller.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// The ClusterRole that the manifest binds to its ServiceAccount (the
	// unit test checks that it is the one that grants Events).
	roles := map[string]*rbacv1.ClusterRole{}
	var bound []string
	for _, doc := range strings.Split(string(data), "\n---\n") {
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
		switch obj := obj.(type) {
		case *rbacv1.ClusterRole:
			roles[obj.Name] = obj
		case *rbacv1.ClusterRoleBinding:
			if err == nil && slices.ContainsFunc(obj.Subjects, func(s rbacv1.Subject) bool {
				return s.Kind == "ServiceAccount" && s.Name == "demo-controller" && s.Namespace == "demo-controller"
			}) {
				bound = append(bound, obj.RoleRef.Name)
			}
		}
	}
	if len(bound) != 1 || roles[bound[0]] == nil {
		t.Fatalf("demo-controller.yaml binds %d ClusterRoles of its own to its ServiceAccount (%s), want one", len(bound), strings.Join(bound, ", "))
	}
	role := roles[bound[0]]
	name := "ex12-without-" + verb
	role.ObjectMeta = metav1.ObjectMeta{Name: name}
	for i, rule := range role.Rules {
		if slices.Contains(rule.Resources, "events") {
			role.Rules[i].Verbs = slices.DeleteFunc(slices.Clone(rule.Verbs), func(v string) bool { return v == verb })
		}
	}
	role.Rules = slices.DeleteFunc(role.Rules, func(r rbacv1.PolicyRule) bool { return len(r.Verbs) == 0 })
	ctx := context.Background()
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().ServiceAccounts(namespace(t, ns)).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}}}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// RBAC's cache takes a moment: wait until the ServiceAccount may list pods.
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		out, _ := kubectl(adminKube, "auth", "can-i", "list", "pods", "-n", ns, "--as=system:serviceaccount:"+ns+":"+name)
		return strings.TrimSpace(out) == "yes", nil
	})
	if err != nil {
		t.Fatalf("the ClusterRole %s never took effect: %v", name, err)
	}
	return serviceAccountKubeconfig(t, ns, name)
}

// ex12Webhook is a validating admission webhook for creates of
// events.k8s.io Events in one namespace. Armed for a pod, it holds the next
// create of an Event about it, then allows it.
type ex12Webhook struct {
	mu    sync.Mutex
	armed map[string]time.Duration
	calls map[string]time.Time // when the held create reached it
	done  map[string]time.Time // when it answered (never, if the API server dropped the call first)
}

func (h *ex12Webhook) arm(pod string, hold time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.armed[pod] = hold
}

func (h *ex12Webhook) answered(pod string) time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.done[pod]
}

// waitCalled waits until the create of an Event about the pod is held.
func (h *ex12Webhook) waitCalled(t *testing.T, pod string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, ex12Wait, true, func(context.Context) (bool, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		_, called := h.calls[pod]
		return called, nil
	})
	if err != nil {
		t.Fatalf("no create of an Event about %s reached the webhook within %v", pod, ex12Wait)
	}
}

func (h *ex12Webhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	review := readReview(w, r)
	if review == nil {
		return
	}
	var event eventsv1.Event
	_ = json.Unmarshal(review.Request.Object.Raw, &event)
	pod := event.Regarding.Name
	h.mu.Lock()
	hold, armed := h.armed[pod]
	delete(h.armed, pod)
	if armed {
		h.calls[pod] = time.Now()
	}
	h.mu.Unlock()
	if armed {
		select {
		case <-time.After(hold):
		case <-r.Context().Done(): // the API server dropped the call: the write was never answered
			return
		}
		h.mu.Lock()
		h.done[pod] = time.Now()
		h.mu.Unlock()
	}
	allowReview(w, review)
}

// ex12StartWebhook serves the webhook over TLS on loopback, registers it for
// creates of Events in namespace ns, and waits until the API server calls it.
func ex12StartWebhook(t *testing.T, ns string) *ex12Webhook {
	t.Helper()
	hook := &ex12Webhook{armed: map[string]time.Duration{}, calls: map[string]time.Time{}, done: map[string]time.Time{}}
	serveWebhook(t, hook, "ex12", "hold.exercise12.example", ns, admissionregistrationv1.RuleWithOperations{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{"events.k8s.io"}, APIVersions: []string{"v1"}, Resources: []string{"events"}},
	})

	// The API server picks the configuration up within a moment: create
	// Events about a pod "probe" until the webhook sees one.
	hook.arm("probe", 0)
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := admin.EventsV1().Events(ns).Create(ctx, &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-"},
			EventTime: metav1.NowMicro(), ReportingController: "ex12-test", ReportingInstance: "ex12-test", Action: "Probe",
			Reason: "Probe", Type: "Normal", Regarding: corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: "probe"}}, metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		hook.mu.Lock()
		defer hook.mu.Unlock()
		_, probed := hook.calls["probe"]
		return probed, nil
	})
	if err != nil {
		t.Fatalf("the API server never called the webhook: %v", err)
	}
	return hook
}
