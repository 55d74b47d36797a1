//go:build exercise

// The test of exercise 12 (exercises/12-events/README.md). It is not part of
// the project's tests: copy it into the project's root and run it with the
// exercise tag, as the exercise's README says.
//
// It runs run, as demo-controller does, against fakeapi's API server
// (ex12API, below): the pods of one namespace, and Events, which it
// validates and answers as kube-apiserver v1.36 does (the exercise's e2e
// test checks the same against one) and notes, each request with its answer
// and its time. Pods change as the kubelet would change them; the test reads
// what reached the server, never the log alone: an Event that fails is only
// a log line.

package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"reflect"
	"regexp"
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"

	"demo-controller/internal/fakeapi"
)

// The task's names and numbers, spelled out: the test must compile before
// the solution.
const (
	ex12Controller = "demo-controller.example/demo-controller"
	ex12Action     = "Observed"
	ex12Namespace  = "shop"
	ex12Flaps      = 100
	ex12Bound      = 2 * time.Second // the most stop may wait for writes in flight
	// ex12Wait bounds each wait: the API server below answers at once, so
	// what has not happened by then will not happen.
	ex12Wait = 5 * time.Second
)

func TestExercise12Events(t *testing.T) {
	if !t.Run("the ClusterRole lets the controller record Events, and no more", func(t *testing.T) {
		ex12CheckClusterRole(t)
	}) {
		return // one thing at a time: the scenarios below need no ClusterRole, but the task does
	}

	if !t.Run("the handler leaves the pods it is handed as they are", func(t *testing.T) {
		// Called here, alone, before any run: in a run, the pod is the
		// cache's, and a handler that writes to it races the informer,
		// which reads it from a goroutine of its own.
		ex12CheckHandlerLeavesPods(t)
	}) {
		return
	}

	api := newEx12API(t, ex12Pod("found", corev1.PodRunning))
	c := api.run(t)
	c.waitForLog(t, `"Pod found" pod="shop/found"`, 1)

	if !t.Run("an Event for each phase a pod enters, and none for the rest", func(t *testing.T) {
		api.create(t, "web")
		c.waitForLog(t, `"Pod created" pod="shop/web"`, 1)
		api.change(t, "web", "scheduled", func(p *corev1.Pod) { p.Spec.NodeName = "node-1" })
		c.waitForLog(t, `"Pod scheduled" pod="shop/web"`, 1)
		api.change(t, "web", "Running", func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodRunning
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		})
		c.waitForLog(t, `"Pod phase changed" pod="shop/web"`, 1)
		api.expect(t, c, "web", "Running", "PhaseRunning")
		api.checkEvent(t, "web", "PhaseRunning", "Pending", "Running")
		api.change(t, "web", "not ready", func(p *corev1.Pod) { p.Status.Conditions[0].Status = corev1.ConditionFalse })
		c.waitForLog(t, `"Pod not ready" pod="shop/web"`, 1)
		api.change(t, "web", "Succeeded", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded })
		c.waitForLog(t, `"Pod phase changed" pod="shop/web"`, 2)
		api.expect(t, c, "web", "Succeeded", "PhaseRunning", "PhaseSucceeded")
		api.checkEvent(t, "web", "PhaseSucceeded", "Running", "Succeeded")
		// Its Events outlive it; deleting it records none (the test looks
		// again once run has stopped, and its writes are done).
		api.delete(t, "web")
		c.waitForLog(t, `"Pod deleted" pod="shop/web"`, 1)

		// A pod whose node is lost, then fails: every phase change is Normal.
		api.create(t, "lost")
		c.waitForLog(t, `"Pod created" pod="shop/lost"`, 1)
		for i, phase := range []corev1.PodPhase{corev1.PodRunning, corev1.PodUnknown, corev1.PodFailed} {
			api.change(t, "lost", string(phase), func(p *corev1.Pod) { p.Status.Phase = phase })
			c.waitForLog(t, `"Pod phase changed" pod="shop/lost"`, i+1)
		}
		api.expect(t, c, "lost", "Failed", "PhaseRunning", "PhaseUnknown", "PhaseFailed")
		api.checkEvent(t, "lost", "PhaseUnknown", "Running", "Unknown")
		api.checkEvent(t, "lost", "PhaseFailed", "Unknown", "Failed")
	}) {
		return // one scenario at a time: a mistake often fails them all
	}

	if !t.Run(fmt.Sprintf("a pod that flaps %d times makes two Events, each a series", ex12Flaps), func(t *testing.T) {
		api.create(t, "flap")
		c.waitForLog(t, `"Pod created" pod="shop/flap"`, 1)
		// The first four changes make the two Events, then their series;
		// the test waits for each to reach the server, so that it knows
		// what the next one adds. The rest only count, in the process.
		want := [][]string{{"PhaseRunning"}, {"PhaseRunning", "PhasePending"},
			{"PhaseRunning x2", "PhasePending"}, {"PhaseRunning x2", "PhasePending x2"}}
		for i := 1; i <= ex12Flaps; i++ {
			phase := corev1.PodRunning
			if i%2 == 0 {
				phase = corev1.PodPending
			}
			api.change(t, "flap", fmt.Sprintf("flap %d, to %s", i, phase), func(p *corev1.Pod) { p.Status.Phase = phase })
			c.waitForLog(t, `"Pod phase changed" pod="shop/flap"`, i)
			if i <= len(want) {
				api.expect(t, c, "flap", fmt.Sprintf("flap %d of %d", i, ex12Flaps), want[i-1]...)
			}
		}
		api.expect(t, c, "flap", fmt.Sprintf("all %d flaps", ex12Flaps), want[len(want)-1]...)
	}) {
		return
	}

	if !t.Run("at SIGTERM, the Events being written are written before run returns", func(t *testing.T) {
		// Two writes in flight at once: the patch that makes series' first
		// Event a series (its third phase change), held 1.5 s, and the
		// create of last's first Event, held 1 s.
		api.create(t, "series")
		c.waitForLog(t, `"Pod created" pod="shop/series"`, 1)
		for i, phase := range []corev1.PodPhase{corev1.PodRunning, corev1.PodPending} {
			api.change(t, "series", string(phase), func(p *corev1.Pod) { p.Status.Phase = phase })
			c.waitForLog(t, `"Pod phase changed" pod="shop/series"`, i+1)
		}
		api.expect(t, c, "series", "Pending", "PhaseRunning", "PhasePending")
		api.create(t, "last")
		c.waitForLog(t, `"Pod created" pod="shop/last"`, 1)
		api.holdNext("series", "patch", 1500*time.Millisecond)
		api.holdNext("last", "create", time.Second)
		api.change(t, "series", "Running again", func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning })
		api.change(t, "last", "Running", func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning })
		c.waitForLog(t, `"Pod phase changed" pod="shop/series"`, 3)
		c.waitForLog(t, `"Pod phase changed" pod="shop/last"`, 1)
		patch, create := api.waitForWrite(t, c, "series", "patch"), api.waitForWrite(t, c, "last", "create")
		signalled := time.Now()
		returned := c.stop(t, 2*ex12Bound+time.Second)
		create, patch = api.settled(t, create.n), api.settled(t, patch.n)
		for _, w := range []struct {
			ex12Write
			what string
		}{{create, "the create of last's Event"}, {patch, "the patch that makes series' PhaseRunning a series (count 2)"}} {
			after := w.finished.Sub(signalled).Round(time.Millisecond)
			switch {
			case w.cancelled && w.verb == "patch" && !create.cancelled && !create.finished.After(w.finished) &&
				w.finished.Sub(create.finished) < 100*time.Millisecond:
				t.Fatalf("run's context ended (as at SIGTERM) while two Events were being written; the stop waited for "+
					"the create of one (answered after 1 s), then cancelled the other's write, %s, before the API "+
					"server answered it: the wait counts creates, not patches. The broadcaster patches an Event when "+
					"it becomes a series: count the sink's Patch calls as writes in flight too, from their start to "+
					"their return", w.what)
			case w.cancelled && after >= 100*time.Millisecond:
				t.Fatalf("run's context ended (as at SIGTERM) while %s was being written (the API server held it), and "+
					"the write was cancelled %v later, before the API server answered it: the stop waited, but not for "+
					"that write. Wait for the writes in flight themselves, not a fixed time: count each from the start "+
					"of the sink's Create or Patch to its return, and cancel once none is, or after %v", w.what, after, ex12Bound)
			case w.cancelled:
				t.Fatalf("run's context ended (as at SIGTERM) while %s was being written, and the write was cancelled "+
					"%v later, before the API server answered it. The broadcaster writes with the context "+
					"StartRecordingToSinkWithContext was given: if that is run's context (or made from it), SIGTERM "+
					"cancels it; give it context.WithoutCancel(ctx), and cancel it yourself last. If it already is, "+
					"your stop cancels it at once: a wait with run's context (a poll, a select on its Done) returns "+
					"at once, for that context has ended. Wait with a timer of your own (%v) for the writes in flight",
					w.what, after, ex12Bound)
			case w.finished.IsZero() || w.finished.After(returned):
				t.Fatalf("run returned while %s was still being written (the API server answered it later): main exits "+
					"when run returns, and the goroutines that write Events die with it. Once runController has "+
					"returned (its worker records nothing more), shut the broadcaster down (Shutdown takes no more "+
					"Events and hands out the ones it holds), then wait for the writes in flight, creates and patches", w.what)
			case w.code != http.StatusCreated && w.code != http.StatusOK:
				t.Fatalf("%s was refused: %s", w.what, w.answer)
			}
			t.Logf("%s, in flight at SIGTERM, was answered %v after it began; run returned %v after that",
				w.what, w.finished.Sub(w.started).Round(time.Millisecond), returned.Sub(w.finished).Round(time.Millisecond))
		}
		ex12CheckShutDown(t)
		// What the process held and never wrote: the counts of flap's series.
		api.expect(t, c, "flap", "the controller stopped", "PhaseRunning x2", "PhasePending x2")
		api.expect(t, c, "series", "the controller stopped", "PhaseRunning x2", "PhasePending")
		api.expect(t, c, "last", "the controller stopped", "PhaseRunning")
		t.Logf("%d flaps made %d writes of Events: 2 creates, 2 patches (the series' count of 2); the counts of %d "+
			"each were never written", ex12Flaps, api.count("flap", ""), ex12Flaps/2)
		if got := api.eventsAbout("web"); ex12Describe(got) != "PhaseRunning, PhaseSucceeded" {
			var extra []string
			for _, e := range got {
				if e.Reason != "PhaseRunning" && e.Reason != "PhaseSucceeded" {
					extra = append(extra, fmt.Sprintf("%s, %q", e.Reason, e.Note))
				}
			}
			t.Fatalf("web's Events, once run has stopped, are %s; want PhaseRunning, PhaseSucceeded. web was deleted "+
				"after it Succeeded, and an Event came with it (%s): record an Event only when a phase changes "+
				"(Updated), not when a pod is deleted. The pod is gone: an Event about it tells nobody anything, and "+
				"is one more object the API server keeps for an hour",
				ex12Describe(got), strings.Join(extra, "; "))
		}
	}) {
		return
	}

	if !t.Run(fmt.Sprintf("at SIGTERM, run waits no more than %v for an Event's write", ex12Bound), func(t *testing.T) {
		c := api.run(t)
		c.waitForLog(t, `"Cache synced`, 1)
		api.create(t, "hang")
		c.waitForLog(t, `"Pod created" pod="shop/hang"`, 1)
		api.holdNext("hang", "create", time.Hour) // the API server never answers
		api.change(t, "hang", "Running", func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning })
		c.waitForLog(t, `"Pod phase changed" pod="shop/hang"`, 1)
		api.waitForWrite(t, c, "hang", "create")
		signalled := time.Now()
		returned := c.stop(t, 2*ex12Bound+time.Second)
		t.Logf("with an Event's write unanswered, run returned %v after its context ended", returned.Sub(signalled).Round(10*time.Millisecond))
	}) {
		return
	}

	t.Run("with nothing to write, run returns at once", func(t *testing.T) {
		c := api.run(t)
		c.waitForLog(t, `"Cache synced`, 1)
		signalled := time.Now()
		returned := c.stop(t, 2*ex12Bound+time.Second)
		if took := returned.Sub(signalled); took > ex12Bound/4 {
			t.Errorf("run took %v to return after its context ended, with no Event to write: wait for the writes "+
				"in flight, and only for them (a write counts from its start to its answer), not for a fixed time",
				took.Round(10*time.Millisecond))
		}
		if got := api.eventsAbout("found"); len(got) > 0 {
			t.Errorf("the pod found at start has an Event (%s): record one only when a phase changes. Each restart "+
				"of the controller would make one for every pod in the cluster", ex12Describe(got))
		}
	})
}

// ex12CheckClusterRole checks what demo-controller.yaml grants on Events to
// the Deployment's ServiceAccount: the rules of the ClusterRoles that a
// ClusterRoleBinding binds to it. A rule in a ClusterRole that nothing
// binds grants nothing.
func ex12CheckClusterRole(t *testing.T) {
	var roles []*rbacv1.ClusterRole
	var bindings []*rbacv1.ClusterRoleBinding
	var account rbacv1.Subject // the Deployment's ServiceAccount
	for _, obj := range fakeapi.Manifest(t, "demo-controller.yaml") {
		switch obj := obj.(type) {
		case *rbacv1.ClusterRole:
			roles = append(roles, obj)
		case *rbacv1.ClusterRoleBinding:
			bindings = append(bindings, obj)
		case *appsv1.Deployment:
			account = rbacv1.Subject{Kind: "ServiceAccount", Name: cmp.Or(obj.Spec.Template.Spec.ServiceAccountName, "default"), Namespace: obj.Namespace}
		}
	}
	bound := map[string]bool{}
	for _, b := range bindings {
		if b.RoleRef.Kind == "ClusterRole" && slices.ContainsFunc(b.Subjects, func(s rbacv1.Subject) bool {
			return s.Kind == account.Kind && s.Name == account.Name && s.Namespace == account.Namespace
		}) {
			bound[b.RoleRef.Name] = true
		}
	}
	var newAPI, coreAPI, pods []string
	for _, role := range roles {
		for _, rule := range role.Rules {
			for _, resource := range rule.Resources {
				events := resource == "events" || resource == "*"
				if !bound[role.Name] && events {
					t.Fatalf("demo-controller.yaml's ClusterRole %s grants %s on events, and no ClusterRoleBinding binds "+
						"it to the Deployment's ServiceAccount (%s/%s): it grants nothing. RBAC reads only the roles bound "+
						"to the user; put the rule in the ClusterRole the manifest already binds (demo-controller), or "+
						"bind yours. On a cluster every Event would be refused with a 403, which the controller only logs",
						role.Name, strings.Join(rule.Verbs, ", "), account.Namespace, account.Name)
				}
				switch {
				case !bound[role.Name]:
				case resource == "pods" && slices.Contains(rule.APIGroups, ""):
					pods = append(pods, rule.Verbs...)
				case !events:
				case slices.Contains(rule.APIGroups, "events.k8s.io") || slices.Contains(rule.APIGroups, "*"):
					newAPI = append(newAPI, rule.Verbs...)
				case slices.Contains(rule.APIGroups, ""):
					coreAPI = append(coreAPI, rule.Verbs...)
				}
			}
		}
	}
	slices.Sort(newAPI)
	slices.Sort(pods)
	switch {
	case len(coreAPI) > 0 && len(newAPI) == 0:
		t.Errorf("demo-controller.yaml's ClusterRole grants %s on events of the core API group (\"\"), and nothing on "+
			"events.k8s.io: those are the older record package's. tools/events writes events.k8s.io/v1 Events, and "+
			"RBAC names the group: on a cluster, each one would be refused (events.events.k8s.io is forbidden: "+
			"User \"system:serviceaccount:demo-controller:demo-controller\" cannot create resource \"events\" in API "+
			"group \"events.k8s.io\")", strings.Join(coreAPI, ", "))
	case len(coreAPI) > 0:
		t.Errorf("demo-controller.yaml's ClusterRole grants %s on events of the core API group (\"\"): the controller "+
			"writes only events.k8s.io Events; grant nothing it does not use", strings.Join(coreAPI, ", "))
	case !slices.Contains(newAPI, "create"):
		t.Errorf("demo-controller.yaml's ClusterRole does not grant create on events (API group events.k8s.io): every " +
			"Event would be refused with a 403, and the controller would only log it (\"Server rejected event\"): " +
			"nothing stops, nothing fails, and no one sees an Event")
	case !slices.Contains(newAPI, "patch"):
		t.Errorf("demo-controller.yaml's ClusterRole grants create on events.k8s.io events, not patch: the broadcaster " +
			"patches an Event when it becomes a series (the same Event again), so a missing patch shows only when a " +
			"pod's phase repeats, as a 403 in the log")
	case !slices.Equal(newAPI, []string{"create", "patch"}):
		t.Errorf("demo-controller.yaml's ClusterRole grants %s on events.k8s.io events: the broadcaster creates and "+
			"patches Events, and never reads, updates or deletes one; grant create and patch only", strings.Join(newAPI, ", "))
	case !slices.Equal(pods, []string{"list", "watch"}):
		t.Errorf("demo-controller.yaml's ClusterRole grants %s on pods: recording Events needs nothing more on pods than "+
			"the informer's list and watch", strings.Join(pods, ", "))
	}
}

// ex12CheckHandlerLeavesPods calls the handler newHandler makes (with a
// recorder that drops every Event) as the worker does, with whole pods,
// and checks that it changed none of them. In a run, those pods are the
// informer cache's own objects.
func ex12CheckHandlerLeavesPods(t *testing.T) {
	recorder := &events.FakeRecorder{}
	var handler Handler
	switch f := reflect.ValueOf(newHandler); {
	case f.Type().NumIn() == 0: // today's newHandler(): the scenarios below say what is missing
		handler = f.Call(nil)[0].Interface().(Handler)
	case f.Type().NumIn() == 1 && reflect.TypeOf(recorder).AssignableTo(f.Type().In(0)):
		handler = f.Call([]reflect.Value{reflect.ValueOf(recorder)})[0].Interface().(Handler)
	default:
		t.Fatalf("newHandler is a %v: the task's takes the recorder, newHandler(recorder events.EventRecorder) Handler", f.Type())
	}
	ctx := klog.NewContext(context.Background(), textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(io.Discard))))
	whole := func(phase corev1.PodPhase, rv string) *corev1.Pod { // as the API server sends it
		pod := testPod(ex12Namespace, "web", "uid-web", rv, phase)
		pod.Labels, pod.Annotations = map[string]string{"app": "web"}, map[string]string{"note": "kept"}
		pod.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate,
			APIVersion: "v1", Subresource: "status"}}
		pod.Spec.NodeName = "node-1"
		return pod
	}
	pending, running, ready := whole(corev1.PodPending, "7"), whole(corev1.PodRunning, "8"), whole(corev1.PodRunning, "9")
	ready.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	for _, call := range []struct {
		name string
		pods []*corev1.Pod
		call func() error
	}{
		{"Created (found)", []*corev1.Pod{pending}, func() error { return handler.Created(ctx, pending, true) }},
		{"Updated, Pending to Running", []*corev1.Pod{pending, running}, func() error { return handler.Updated(ctx, pending, running) }},
		{"Updated, the same phase", []*corev1.Pod{running, ready}, func() error { return handler.Updated(ctx, running, ready) }},
		{"Deleted", []*corev1.Pod{ready}, func() error { return handler.Deleted(ctx, ready) }},
	} {
		before := make([]*corev1.Pod, len(call.pods))
		for i, pod := range call.pods {
			before[i] = pod.DeepCopy()
		}
		_ = call.call() // (what it returns, the scenarios below check)
		for i, pod := range call.pods {
			if changed := ex12Changes(before[i], pod); len(changed) > 0 {
				which := "the pod"
				if len(call.pods) == 2 {
					which = [...]string{"the old pod", "the new pod"}[i]
				}
				t.Fatalf("in %s, the handler changed %s it was handed: %s. In the controller, that pod is the "+
					"informer cache's own object, which the informer reads from a goroutine of its own (the race "+
					"detector may report a DATA RACE) and every later read gets, changed. Change nothing in it: pass Eventf a reference "+
					"you build, &corev1.ObjectReference{APIVersion: \"v1\", Kind: \"Pod\", Namespace, Name, UID} "+
					"(hint 2), which names no resourceVersion; or change a copy, pod.DeepCopy()",
					call.name, which, strings.Join(changed, "; "))
			}
		}
	}
}

// ex12Changes says which fields differ between two pods, the first three.
func ex12Changes(before, after *corev1.Pod) []string {
	a, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(before)
	b, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(after)
	var out []string
	var walk func(path string, a, b any)
	walk = func(path string, a, b any) {
		am, aok := a.(map[string]any)
		bm, bok := b.(map[string]any)
		if aok && bok {
			keys := slices.Sorted(maps.Keys(am))
			for k := range bm {
				if _, ok := am[k]; !ok {
					keys = append(keys, k)
				}
			}
			for _, k := range keys {
				walk(strings.TrimPrefix(path+"."+k, "."), am[k], bm[k])
			}
			return
		}
		if !reflect.DeepEqual(a, b) {
			show := func(v any) string {
				if v == nil {
					return "none"
				}
				data, _ := json.Marshal(v)
				return string(data)
			}
			out = append(out, fmt.Sprintf("%s was %s, is now %s", path, show(a), show(b)))
		}
	}
	walk("", a, b)
	return out[:min(len(out), 3)]
}

// ex12Pod returns a pod of the test's namespace, as the API server holds it.
func ex12Pod(name string, phase corev1.PodPhase) *corev1.Pod {
	pod := testPod(ex12Namespace, name, "uid-"+name, "", phase)
	pod.TypeMeta = metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}
	return pod
}

// ex12API is fakeapi's API server, serving the pods of the test's namespace
// (a list, and a watch from a resourceVersion) and Events, which it creates
// and patches as kube-apiserver v1.36 does (writeEvent), behind a front of
// the test's own (ServeHTTP): the front serves events.k8s.io/v1's
// discovery, notes every request about Events, in either API, with its
// answer and its time, and holds the writes the test says. writes, holds
// and step need the Server's lock.
type ex12API struct {
	*fakeapi.Server
	url     string        // the front's
	closing chan struct{} // closed when the test ends: nothing is held any more

	writes []ex12Write              // every request about Events, in order
	holds  map[string]time.Duration // by "pod verb" ("last create"): the next such write's hold
	step   map[string]string        // by pod: the change the test made last
}

// ex12Write is a request about Events, as the server saw it.
type ex12Write struct {
	n                 int    // its place in writes
	verb, path        string // create, patch, update, get, list, watch, delete
	core              bool   // the core API's events (/api/v1), not events.k8s.io
	pod, step         string // the pod the Event is about, and its last change then
	code              int
	answer            string // the server's message, when it refused
	started, finished time.Time
	cancelled         bool // the client gave up before the answer
}

func newEx12API(t *testing.T, pods ...*corev1.Pod) *ex12API {
	api := &ex12API{Server: fakeapi.New(t, "pods", "events"), holds: map[string]time.Duration{},
		step: map[string]string{}, closing: make(chan struct{})}
	api.Write = api.writeEvent
	for _, pod := range pods {
		api.Store("pods", ex12Object(pod))
	}
	front := httptest.NewServer(api)
	t.Cleanup(func() {
		close(api.closing) // a held request ends, so that Close, which waits for them, returns
		front.Close()
	})
	api.url = front.URL
	return api
}

// ex12Object is a typed object as fakeapi keeps it.
func ex12Object(obj any) map[string]any {
	m, _ := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	return m
}

func (api *ex12API) create(t *testing.T, name string) {
	t.Helper()
	api.Lock()
	defer api.Unlock()
	api.step[name] = "created"
	api.StoreLocked("pods", ex12Object(ex12Pod(name, corev1.PodPending)))
}

// change changes a pod as the kubelet (or the scheduler) would.
func (api *ex12API) change(t *testing.T, name, step string, f func(*corev1.Pod)) {
	t.Helper()
	api.Lock()
	defer api.Unlock()
	pod := &corev1.Pod{}
	stored := api.ObjectLocked("pods", ex12Namespace+"/"+name)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(stored, pod); err != nil {
		t.Fatal(err)
	}
	f(pod)
	api.step[name] = step
	api.StoreLocked("pods", ex12Object(pod))
}

// delete deletes a pod, as the API server does once its grace period is over.
func (api *ex12API) delete(t *testing.T, name string) {
	t.Helper()
	api.Lock()
	defer api.Unlock()
	api.step[name] = "deleted"
	api.RemoveLocked("pods", ex12Namespace, name)
}

// holdNext makes the server take d to answer the next write of an Event
// about the pod (verb: create or patch), or until the client gives up.
func (api *ex12API) holdNext(pod, verb string, d time.Duration) {
	api.Lock()
	defer api.Unlock()
	api.holds[pod+" "+verb] = d
}

// ex12Events and ex12Kind name Events in events.k8s.io/v1.
var (
	ex12Events = schema.GroupResource{Group: "events.k8s.io", Resource: "events"}
	ex12Kind   = schema.GroupKind{Group: "events.k8s.io", Kind: "Event"}
)

// ex12Path matches the paths of Events, in either API, and of pods.
var ex12Path = regexp.MustCompile(`^/(api/v1|apis/events\.k8s\.io/v1)(?:/namespaces/([^/]+))?/(events|pods)(?:/([^/]+))?$`)

func (api *ex12API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m := ex12Path.FindStringSubmatch(r.URL.Path)
	switch {
	case r.URL.Path == "/apis/events.k8s.io/v1" && r.Method == http.MethodGet: // discovery, as kube-apiserver serves it
		fakeapi.Write(w, http.StatusOK, &metav1.APIResourceList{
			TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
			GroupVersion: "events.k8s.io/v1",
			APIResources: []metav1.APIResource{{Name: "events", Namespaced: true, Kind: "Event",
				Verbs: metav1.Verbs{"create", "delete", "deletecollection", "get", "list", "patch", "update",
					"watch"}}},
		})
	case m == nil:
		apiStatus(w, http.StatusNotFound, "NotFound", "the server could not find the requested resource")
	case m[3] == "pods" && m[1] == "api/v1" && m[2] == ex12Namespace && m[4] == "" && r.Method == http.MethodGet:
		api.Server.ServeHTTP(w, r)
	case m[3] == "events":
		api.serveEvents(w, r, m[1] == "api/v1", m[2], m[4])
	default:
		apiStatus(w, http.StatusNotFound, "NotFound", "this test's API server serves only the pods of "+ex12Namespace+" and Events")
	}
}

// serveEvents notes a request about Events, holds it if the test says, and
// answers it: a create, a patch or an update in events.k8s.io/v1 as
// kube-apiserver does (writeEvent); anything else (the test fails on it)
// simply.
func (api *ex12API) serveEvents(w http.ResponseWriter, r *http.Request, core bool, namespace, name string) {
	verb := map[string]string{http.MethodPost: "create", http.MethodPatch: "patch", http.MethodPut: "update", http.MethodDelete: "delete"}[r.Method]
	if r.Method == http.MethodGet {
		verb = "get"
		if name == "" {
			verb = "list"
		}
		if r.URL.Query().Get("watch") == "true" {
			verb = "watch"
		}
	}
	body, _ := io.ReadAll(r.Body)
	write := ex12Write{verb: verb, path: r.Method + " " + r.URL.Path, core: core, started: time.Now()}
	var status *apierrors.StatusError
	api.Lock()
	switch {
	case core && (verb == "create" || verb == "update"):
		var old corev1.Event
		if _, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, &old); err == nil {
			write.pod = old.InvolvedObject.Name
		}
	case !core:
		write.pod, _, status = api.eventLocked(verb, namespace, name, body)
	}
	write.n, write.step = len(api.writes), api.step[write.pod]
	hold := time.Duration(0)
	if (verb == "create" || verb == "patch") && !core && status == nil {
		hold = api.holds[write.pod+" "+verb]
		delete(api.holds, write.pod+" "+verb)
	}
	api.writes = append(api.writes, write)
	api.Unlock()

	if hold > 0 {
		select {
		case <-time.After(hold):
		case <-api.closing:
		case <-r.Context().Done():
			api.Lock()
			api.writes[write.n].cancelled, api.writes[write.n].finished = true, time.Now()
			api.Unlock()
			return
		}
	}

	answer := httptest.NewRecorder() // noted as answered before the client can have it
	switch {
	case !core && (verb == "create" || verb == "patch" || verb == "update"):
		r.Body = io.NopCloser(bytes.NewReader(body))
		api.Server.ServeHTTP(answer, r)
	case core && verb == "create":
		event := &corev1.Event{}
		_, _, _ = scheme.Codecs.UniversalDeserializer().Decode(body, nil, event)
		fakeapi.Write(answer, http.StatusCreated, event)
	default:
		list := metav1.TypeMeta{Kind: "EventList", APIVersion: "events.k8s.io/v1"}
		fakeapi.Write(answer, http.StatusOK, &eventsv1.EventList{TypeMeta: list})
	}
	api.Lock()
	write.code, write.finished = answer.Code, time.Now()
	if answer.Code >= http.StatusBadRequest {
		var refused metav1.Status
		_ = json.Unmarshal(answer.Body.Bytes(), &refused)
		write.answer = refused.Message
	}
	api.writes[write.n] = write
	api.Unlock()
	maps.Copy(w.Header(), answer.Header())
	w.WriteHeader(answer.Code)
	_, _ = w.Write(answer.Body.Bytes())
}

// eventLocked reads a create, patch or update of an Event in
// events.k8s.io/v1 as kube-apiserver does: the Event it asks for, the pod it
// is about, or why it is refused.
func (api *ex12API) eventLocked(verb, namespace, name string, body []byte) (
	pod string, event *eventsv1.Event, refused *apierrors.StatusError) {
	event = &eventsv1.Event{}
	switch verb {
	case "create", "update":
		if _, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, event); err != nil {
			return "", nil, apierrors.NewBadRequest(err.Error())
		}
		if verb == "create" {
			return event.Regarding.Name, event, ex12Validate(namespace, event)
		}
		return event.Regarding.Name, event, nil
	case "patch", "apply":
		stored := api.ObjectLocked("events", namespace+"/"+name)
		if stored == nil {
			return "", nil, apierrors.NewNotFound(ex12Events, name)
		}
		old, _ := json.Marshal(stored)
		_ = json.Unmarshal(old, event)
		pod = event.Regarding.Name
		patched, err := strategicpatch.StrategicMergePatch(old, body, eventsv1.Event{})
		event = &eventsv1.Event{}
		if err == nil {
			err = json.Unmarshal(patched, event)
		}
		switch {
		case err != nil:
			return pod, nil, apierrors.NewBadRequest(err.Error())
		case event.Series != nil && event.Series.Count < 2:
			count := field.Invalid(field.NewPath("series.count"), "", "should be at least 2")
			return pod, nil, apierrors.NewInvalid(ex12Kind, name, field.ErrorList{count})
		}
		return pod, event, nil
	}
	return "", nil, nil
}

// writeEvent is fakeapi's Write: it stores the Event a create, a patch or
// an update asks for, as kube-apiserver does.
func (api *ex12API) writeEvent(r *fakeapi.Request) (int, any) {
	_, event, status := api.eventLocked(r.Verb, r.Namespace, r.Name, r.Body)
	switch {
	case status != nil:
		return fakeapi.Status(status)
	case event == nil:
		return fakeapi.Status(apierrors.NewMethodNotSupported(r.GroupResource(), r.Verb))
	case event.Name == "" && event.GenerateName != "":
		event.Name = event.GenerateName + strconv.FormatInt(time.Now().UnixNano()%100000, 36)
	}
	code := http.StatusOK
	if r.Verb == "create" {
		if api.ObjectLocked("events", r.Namespace+"/"+event.Name) != nil {
			return fakeapi.Status(apierrors.NewAlreadyExists(ex12Events, event.Name))
		}
		code = http.StatusCreated
	}
	event.Namespace = r.Namespace
	obj := ex12Object(event)
	api.StoreLocked("events", obj)
	return code, obj
}

// ex12Validate validates an Event created through events.k8s.io/v1 as
// kube-apiserver v1.36 does (the fields a recorder sets), in its words.
func ex12Validate(namespace string, e *eventsv1.Event) *apierrors.StatusError {
	var errs field.ErrorList
	if e.Name == "" && e.GenerateName == "" {
		errs = append(errs, field.Required(field.NewPath("metadata", "name"), "name or generateName is required"))
	}
	if e.EventTime.IsZero() {
		errs = append(errs, field.Required(field.NewPath("eventTime"), ""))
	}
	if e.Type != corev1.EventTypeNormal && e.Type != corev1.EventTypeWarning {
		errs = append(errs, field.Invalid(field.NewPath("type"), "", fmt.Sprintf("has invalid value: %v", e.Type)))
	}
	if e.Regarding.Namespace != namespace {
		errs = append(errs, field.Invalid(field.NewPath("involvedObject", "namespace"), e.Regarding.Namespace, "does not match event.namespace"))
	}
	if e.ReportingController == "" {
		errs = append(errs, field.Required(field.NewPath("reportingController"), ""))
	}
	for _, msg := range validation.IsQualifiedName(e.ReportingController) {
		errs = append(errs, field.Invalid(field.NewPath("reportingController"), e.ReportingController, msg))
	}
	if e.ReportingInstance == "" {
		errs = append(errs, field.Required(field.NewPath("reportingInstance"), ""))
	}
	if len(e.ReportingInstance) > 128 {
		errs = append(errs, field.Invalid(field.NewPath("reportingInstance"), "", "can have at most 128 characters"))
	}
	if e.Action == "" {
		errs = append(errs, field.Required(field.NewPath("action"), ""))
	}
	if len(e.Action) > 128 {
		errs = append(errs, field.Invalid(field.NewPath("action"), "", "can have at most 128 characters"))
	}
	if e.Reason == "" {
		errs = append(errs, field.Required(field.NewPath("reason"), ""))
	}
	if len(e.Reason) > 128 {
		errs = append(errs, field.Invalid(field.NewPath("reason"), "", "can have at most 128 characters"))
	}
	if len(e.Note) > 1024 {
		errs = append(errs, field.Invalid(field.NewPath("message"), "", "can have at most 1024 characters"))
	}
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(ex12Kind, e.Name, errs)
}

// write returns the n-th request about Events as it is now.
func (api *ex12API) write(n int) ex12Write {
	api.Lock()
	defer api.Unlock()
	return api.writes[n]
}

// settled waits until the n-th request about Events has been answered, or
// given up by the client, and returns it.
func (api *ex12API) settled(t *testing.T, n int) ex12Write {
	t.Helper()
	for deadline := time.Now().Add(ex12Wait); ; time.Sleep(time.Millisecond) {
		if w := api.write(n); !w.finished.IsZero() || time.Now().After(deadline) {
			return w
		}
	}
}

// count returns how many requests about Events concerned the pod (any if
// ""), of the verb (any if "").
func (api *ex12API) count(pod, verb string) int {
	api.Lock()
	defer api.Unlock()
	n := 0
	for _, w := range api.writes {
		if (pod == "" || w.pod == pod) && (verb == "" || w.verb == verb) {
			n++
		}
	}
	return n
}

// eventsAbout returns the Events the server holds about the pod, oldest first.
func (api *ex12API) eventsAbout(pod string) []*eventsv1.Event {
	api.Lock()
	defer api.Unlock()
	var out []*eventsv1.Event
	for _, obj := range api.ObjectsLocked("events") {
		e := &eventsv1.Event{}
		err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj, e)
		if err == nil && e.Regarding.Name == pod {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b *eventsv1.Event) int { return a.EventTime.Compare(b.EventTime.Time) })
	return out
}

// ex12Describe says what Events are: "PhaseRunning x2" for a series of two.
func ex12Describe(events []*eventsv1.Event) string {
	var out []string
	for _, e := range events {
		out = append(out, ex12Short(e))
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}

func ex12Short(e *eventsv1.Event) string {
	if e.Series != nil {
		return fmt.Sprintf("%s x%d", e.Reason, e.Series.Count)
	}
	return e.Reason
}

// problem returns what the controller did that the task rules out, if
// anything: the first such request about Events.
func (api *ex12API) problem() string {
	api.Lock()
	defer api.Unlock()
	for _, w := range api.writes {
		switch {
		case w.core:
			return fmt.Sprintf("the controller wrote to the core API's events (%s): that is the older record "+
				"package's API (record.NewBroadcaster, core/v1 Events), which events.NewEventBroadcasterAdapter also "+
				"falls back to when it cannot read events.k8s.io/v1's discovery (this server serves it). Record with "+
				"k8s.io/client-go/tools/events (events.NewBroadcaster, with an events.EventSinkImpl of "+
				"client.EventsV1()), which writes events.k8s.io/v1 Events", w.path)
		case w.verb == "get" || w.verb == "list" || w.verb == "watch":
			return fmt.Sprintf("the controller read Events back (%s, a %s): an Event is best-effort, kept for an "+
				"hour, and may never be written at all; decide from the pods, never from Events", w.path, w.verb)
		case w.verb == "update" || w.verb == "delete":
			return fmt.Sprintf("the controller sent a %s of an Event (%s): the broadcaster only creates Events and "+
				"patches a series' count; record through its recorder (Eventf)", w.verb, w.path)
		case w.code == http.StatusUnprocessableEntity:
			why := ""
			switch {
			case strings.Contains(w.answer, "reportingController"):
				why = fmt.Sprintf(" The reporting controller is the name given to NewRecorder: it must be a qualified "+
					"name, as a label key is (an optional DNS prefix and a slash, then a name of letters, digits, "+
					"'-', '_' and '.'); the task's is %q.", ex12Controller)
			case strings.Contains(w.answer, "action"):
				why = fmt.Sprintf(" Eventf's fifth argument is the action, which events.k8s.io/v1 requires; the task's is %q.", ex12Action)
			}
			return fmt.Sprintf("the API server refused an Event about %s (after %q), and the controller only logged it:\n  %s\n%s",
				w.pod, w.step, w.answer, why)
		}
	}
	return ""
}

// expect waits until the Events about the pod are want (reasons, with
// " xN" for a series of N, in the order they were first recorded), and
// fails at once, saying why in the task's words, when they cannot become so.
func (api *ex12API) expect(t *testing.T, c *ex12Run, pod, after string, want ...string) {
	t.Helper()
	deadline := time.Now().Add(ex12Wait)
	for {
		if p := api.problem(); p != "" {
			t.Fatalf("%s The log's last lines:\n%s", p, c.tail(10))
		}
		got := api.eventsAbout(pod)
		var reasons []string
		for _, e := range got {
			reasons = append(reasons, ex12Short(e))
		}
		if why := ex12Versioned(got); why != "" {
			t.Fatalf("after %s's %s: %s", pod, after, why)
		}
		if slices.Equal(reasons, want) {
			return
		}
		if why := ex12Why(got, want, pod); why != "" {
			t.Fatalf("after %s's %s, the API server holds these Events about it: %s; want %s. %s",
				pod, after, ex12Describe(got), strings.Join(want, ", "), why)
		}
		if time.Now().After(deadline) {
			why := fmt.Sprintf("within %v", ex12Wait)
			if api.count("", "") == 0 {
				why += ". No request about Events reached the API server at all. Record with a broadcaster made in " +
					"run, with run's client (events.NewBroadcaster), and started (StartRecordingToSinkWithContext): " +
					"its recorder only hands Events to it, and it writes them"
			}
			t.Fatalf("after %s's %s, the API server holds these Events about it: %s; want %s, %s. The log's last lines:\n%s",
				pod, after, ex12Describe(got), strings.Join(want, ", "), why, c.tail(10))
		}
		time.Sleep(time.Millisecond)
	}
}

// ex12Versioned explains Events with a related object, or whose reference
// names the pod's version.
func ex12Versioned(got []*eventsv1.Event) string {
	for _, e := range got {
		if e.Related != nil {
			why := ""
			if e.Related.ResourceVersion != "" {
				why = fmt.Sprintf(" And it carries the pod's resourceVersion (%s): the broadcaster's key, which says "+
					"which Events are the same, includes related, so every phase change would be a new Event, and a "+
					"pod that flaps %d times would make %d.", e.Related.ResourceVersion, ex12Flaps, ex12Flaps)
			}
			return fmt.Sprintf("the Event %s has a related object (%+v): the task's has none (Eventf's second "+
				"argument, nil). related names a second object the Event involves (the node a pod is bound to, say); "+
				"the pod is the regarding, already.%s", e.Reason, *e.Related, why)
		}
		if e.Regarding.ResourceVersion != "" {
			return fmt.Sprintf("the Event's regarding carries the pod's resourceVersion (%s): it was made from the pod "+
				"itself (reference.GetReference does that, and Eventf with the pod calls it). The broadcaster folds an "+
				"Event into a series only when it sees the same one again, and what is the same is decided by the "+
				"reference (with type, reason, action, related and the reporting controller and instance), not by the note: every change of a pod changes its "+
				"resourceVersion, so every phase change is a new Event, and a pod that flaps %d times makes %d. "+
				"Pass a reference that names the pod without its version: &corev1.ObjectReference{APIVersion: \"v1\", "+
				"Kind: \"Pod\", Namespace, Name, UID}", e.Regarding.ResourceVersion, ex12Flaps, ex12Flaps)
		}
	}
	return ""
}

// ex12Why explains Events that cannot become want by waiting, or returns "".
func ex12Why(got []*eventsv1.Event, want []string, pod string) string {
	wantReasons := map[string]bool{}
	for _, w := range want {
		wantReasons[strings.Fields(w)[0]] = true
	}
	phases := regexp.MustCompile(`Pending|Running|Succeeded|Failed|Unknown`)
	for _, e := range got {
		switch {
		case !phases.MatchString(e.Reason):
			return fmt.Sprintf("Its reason is %q, the same whatever the phase: the task's reason names the phase the "+
				"pod entered (PhaseRunning, PhaseSucceeded...). The broadcaster folds Events with the same references, "+
				"type, reason, action and reporting controller and instance into one series, whatever their notes: with one reason for every change, a "+
				"pod that went Running, then Succeeded, shows one Event, with its first note (\"...to Running\") and "+
				"a count of 2", e.Reason)
		case !regexp.MustCompile(`^Phase(Pending|Running|Succeeded|Failed|Unknown)$`).MatchString(e.Reason):
			return fmt.Sprintf("Its reason is %q; the task's is Phase and the phase entered: PhaseRunning, "+
				"PhaseSucceeded, and so on", e.Reason)
		case !wantReasons[e.Reason] && pod != "flap":
			return fmt.Sprintf("The Event %s, %q, is about no phase change of %s's: record an Event only when the "+
				"phase changes (Updated, with old and new phases that differ), not when a pod is created or found, "+
				"nor for its other changes", e.Reason, e.Note, pod)
		}
	}
	if len(got) > len(want) {
		return ex12Unfolded(got)
	}
	return ""
}

// ex12Unfolded explains why Events that should be one series are not.
func ex12Unfolded(got []*eventsv1.Event) string {
	for i, a := range got {
		for _, b := range got[i+1:] {
			if a.Reason != b.Reason {
				continue
			}
			switch {
			case a.Type != b.Type:
				return fmt.Sprintf("Two Events of the reason %s differ in their type (%q, %q): the broadcaster takes "+
					"them for different Events. The type is Normal, for every phase", a.Reason, a.Type, b.Type)
			case !reflect.DeepEqual(a.Related, b.Related):
				return fmt.Sprintf("Two Events of the reason %s differ in their related object (%+v, %+v): the "+
					"broadcaster takes them for different Events. The task's have none", a.Reason, a.Related, b.Related)
			case a.Action != b.Action:
				return fmt.Sprintf("Two Events of the reason %s differ in their action (%q, %q): the broadcaster "+
					"takes them for different Events. The action is fixed: %q", a.Reason, a.Action, b.Action, ex12Action)
			case a.ReportingController != b.ReportingController || a.ReportingInstance != b.ReportingInstance:
				return "Two Events of the same reason come from different recorders: make one broadcaster and one " +
					"recorder, in run, for the whole process"
			case a.Regarding != b.Regarding:
				return fmt.Sprintf("Two Events of the reason %s regard the pod by different references (%+v, %+v): "+
					"the broadcaster takes them for different Events", a.Reason, a.Regarding, b.Regarding)
			default:
				return fmt.Sprintf("Two Events identical but for their time and note (%s) were not folded into a "+
					"series: they were not recorded through a broadcaster's recorder. Creating Events with the client "+
					"(EventsV1().Events(ns).Create) makes one per change, each a request from the worker, with no "+
					"series: record with events.NewBroadcaster(...).NewRecorder(...).Eventf", a.Reason)
			}
		}
	}
	return ""
}

// checkEvent checks the fields of the pod's Event of the reason.
func (api *ex12API) checkEvent(t *testing.T, pod, reason, from, to string) {
	t.Helper()
	host, _ := os.Hostname()
	var e *eventsv1.Event
	for _, got := range api.eventsAbout(pod) {
		if got.Reason == reason {
			e = got
		}
	}
	ref := e.Regarding
	wantRef := corev1.ObjectReference{APIVersion: "v1", Kind: "Pod", Namespace: ex12Namespace, Name: pod, UID: types.UID("uid-" + pod)}
	switch {
	case ref.Kind != "Pod" || ref.APIVersion != "v1":
		t.Fatalf("the Event's regarding is %+v: with no kind Pod and apiVersion v1, kubectl events --for pod/%s does "+
			"not find it (it selects by kind and name). Want %+v", ref, pod, wantRef)
	case ref.UID != wantRef.UID:
		t.Fatalf("the Event's regarding has the UID %q, want the pod's, %q: a pod deleted and created again under "+
			"the same name is another pod, whose Events are its own", ref.UID, wantRef.UID)
	case ref != wantRef:
		t.Fatalf("the Event's regarding is %+v, want %+v", ref, wantRef)
	case e.Related != nil:
		t.Fatalf("the Event has a related object (%+v): the task's has none (Eventf's second argument, nil). The pod "+
			"is the regarding; related names a second object the Event involves (the node a pod is bound to, say)", *e.Related)
	case e.Type != corev1.EventTypeNormal:
		t.Fatalf("the Event of %s's phase change from %s to %s has the type %q, want Normal: the task records every "+
			"phase change as Normal, Failed and Unknown included. The Event says what the controller saw, not that "+
			"something went wrong with the controller; what went wrong with the pod, its kubelet's own Warnings say "+
			"(BackOff, FailedMount...). (And the type is in the broadcaster's key: Normal and Warning Events of one "+
			"reason are never one series.)", pod, from, to, e.Type)
	case e.Action != ex12Action:
		t.Fatalf("the Event's action is %q, want %q (what the controller did about the pod)", e.Action, ex12Action)
	case e.ReportingController != ex12Controller:
		t.Fatalf("the Event's reporting controller is %q, want %q, the name given to NewRecorder", e.ReportingController, ex12Controller)
	case e.ReportingInstance != ex12Controller+"-"+host:
		t.Fatalf("the Event's reporting instance is %q, want %q: NewRecorder names it after the reporting controller "+
			"and the host (in a pod, the pod's name)", e.ReportingInstance, ex12Controller+"-"+host)
	case e.Note != fmt.Sprintf("Phase changed from %s to %s", from, to):
		t.Fatalf("the Event's note is %q, want %q", e.Note, fmt.Sprintf("Phase changed from %s to %s", from, to))
	}
}

// waitForWrite waits until a write (verb: create or patch) of an Event about
// the pod has reached the server, and returns it.
func (api *ex12API) waitForWrite(t *testing.T, c *ex12Run, pod, verb string) ex12Write {
	t.Helper()
	deadline := time.Now().Add(ex12Wait)
	for {
		if p := api.problem(); p != "" {
			t.Fatalf("%s The log's last lines:\n%s", p, c.tail(10))
		}
		api.Lock()
		i := slices.IndexFunc(api.writes, func(w ex12Write) bool { return w.pod == pod && w.verb == verb })
		var w ex12Write
		if i >= 0 {
			w = api.writes[i]
		}
		api.Unlock()
		if i >= 0 {
			return w
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s of an Event about %s's phase change reached the API server within %v. The log's last lines:\n%s",
				verb, pod, ex12Wait, c.tail(10))
		}
		time.Sleep(time.Millisecond)
	}
}

// ex12CheckShutDown checks, once run has returned, that the broadcaster it
// made no longer runs: its goroutine (watch.Broadcaster's loop) ends only
// when it is shut down. (The test runs one run at a time.)
func ex12CheckShutDown(t *testing.T) {
	t.Helper()
	const loop = "k8s.io/apimachinery/pkg/watch.(*Broadcaster).loop"
	var n int
	for deadline := time.Now().Add(time.Second); ; time.Sleep(10 * time.Millisecond) {
		buf := make([]byte, 1<<20)
		buf = buf[:goruntime.Stack(buf, true)]
		if n = strings.Count(string(buf), loop+"("); n == 0 {
			return
		}
		if time.Now().After(deadline) {
			break
		}
	}
	t.Fatalf("run has returned, and the broadcaster it made still runs (%d goroutine(s) in %s, a second later): it was "+
		"never shut down. Once runController has returned, call the broadcaster's Shutdown: it takes no more Events, "+
		"hands out the ones it holds before it returns, and stops; then wait for the writes in flight. Without it, "+
		"its goroutines outlive run: each run leaves some behind", n, loop)
}

// ex12Run is one run of the program against the test's API server.
type ex12Run struct{ *fakeapi.Run }

// run runs run, as demo-controller does, against api, watching the pods
// of the test's namespace, until stop or the test's end.
func (api *ex12API) run(t *testing.T) *ex12Run {
	t.Helper()
	o := options{kubeconfig: writeKubeconfig(t, api.url, bearer, false), namespace: ex12Namespace,
		startupTimeout: ex12Wait, syncTimeout: ex12Wait}
	return &ex12Run{fakeapi.Start(t, 2*ex12Bound+time.Second, 10, func(ctx context.Context) error {
		return run(ctx, o)
	})}
}

// stop cancels run's context, as SIGTERM does, and returns when run
// returned; it fails if run does not return within limit.
func (c *ex12Run) stop(t *testing.T, limit time.Duration) time.Time {
	t.Helper()
	c.Cancel()
	select {
	case <-c.Ended:
		if c.Err != nil {
			t.Fatalf("run returned %q when its context ended (as at SIGTERM): want nil, a clean stop", c.Err)
		}
		return time.Now()
	case <-time.After(limit):
		c.Wait = time.Second // the failure is reported; do not add to it
		t.Fatalf("run did not return within %v of its context's end (as at SIGTERM), while the API server held an "+
			"Event's write unanswered: bound the wait for the writes in flight (%v; the kubelet kills the container "+
			"10 s after SIGTERM, terminationGracePeriodSeconds in demo-controller.yaml), then give them up (cancel "+
			"the context the broadcaster writes with). The log's last lines:\n%s", limit, ex12Bound, c.tail(10))
		return time.Time{}
	}
}

// waitForLog waits until n lines of the log contain part.
func (c *ex12Run) waitForLog(t *testing.T, part string, n int) {
	t.Helper()
	deadline := time.Now().Add(ex12Wait)
	for len(c.Containing(0, part)) < n {
		if c.Returned() {
			t.Fatalf("run returned %v before logging %s. The log's last lines:\n%s", c.Err, part, c.tail(10))
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s was not logged %d times within %v. The log's last lines:\n%s", part, n, ex12Wait, c.tail(10))
		}
		time.Sleep(time.Millisecond)
	}
}

// tail returns the last n lines of the log, indented.
func (c *ex12Run) tail(n int) string {
	lines := c.Lines()
	return "  " + strings.Join(lines[max(0, len(lines)-n):], "\n  ")
}
