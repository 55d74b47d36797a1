//go:build exercise

// The test of exercise 5 (exercises/05-writeback/README.md). It is not part of
// the project's tests: copy it into the project's root and run it with the
// exercise tag, as the exercise's README says.
//
// It runs the controller as a real run does (runController, with the handler
// newHandler returns) on client-go's fake clientset, and plays the API
// server's part for the controller's applies: it answers as kube-apiserver
// v1.36 does (the exercise's e2e test checks the same cases against one),
// gives each write that changes a pod a new resourceVersion, and notes every
// request the controller makes. The test's own writes (the kubelet's, another
// user's) go straight to the fake's store.

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"runtime/debug"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"

	"demo-controller/internal/fakeapi"
)

// The task's names, spelled out: the test must compile before the solution.
const (
	ex05Key     = "demo-controller.example/phase"
	ex05Manager = "demo-controller"
	// ex05Wait bounds each wait: the fake answers in microseconds, so what
	// has not happened by then will not happen.
	ex05Wait = 5 * time.Second
)

var ex05Pods = corev1.SchemeGroupVersion.WithResource("pods")

func TestExercise05WriteBack(t *testing.T) {
	t.Run("keep keeps the annotation, and only it", func(t *testing.T) {
		pod := testPod("default", "web", "uid-web", "1", corev1.PodRunning)
		pod.Annotations = map[string]string{ex05Key: "Running", "team": "shop",
			"kubectl.kubernetes.io/last-applied-configuration": `{"apiVersion":"v1","kind":"Pod","spec":{"...":"..."}}`}
		kept, _ := keep(pod)
		switch got := kept.(*corev1.Pod).Annotations; {
		case got[ex05Key] != "Running":
			t.Errorf("keep (handler.go) drops the annotation %s. The handler is handed the cache's pods, so it never sees "+
				"the phase it recorded, and writes it again at every update: keep that annotation, and only that one", ex05Key)
		case len(got) > 1:
			t.Errorf("keep (handler.go) keeps more annotations than %s (it keeps %s): the cache holds every pod for as long "+
				"as the controller runs; keep only the annotation the handler reads", ex05Key, strings.Join(slices.Sorted(maps.Keys(got)), ", "))
		}
	})

	t.Run("the ClusterRole lets the controller apply, and no more", func(t *testing.T) {
		var verbs []string
		for _, obj := range fakeapi.Manifest(t, "demo-controller.yaml") {
			if role, ok := obj.(*rbacv1.ClusterRole); ok {
				for _, rule := range role.Rules {
					if slices.Contains(rule.Resources, "pods") {
						verbs = append(verbs, rule.Verbs...)
					}
				}
			}
		}
		slices.Sort(verbs)
		switch {
		case !slices.Contains(verbs, "patch"):
			t.Errorf("demo-controller.yaml's ClusterRole lets the controller %s pods, not patch them: server-side apply "+
				"is a PATCH request, and on a cluster every apply would be refused (pods \"web\" is forbidden: User "+
				"\"system:serviceaccount:demo-controller:demo-controller\" cannot patch resource \"pods\")", strings.Join(verbs, ", "))
		case !slices.Equal(verbs, []string{"list", "patch", "watch"}):
			t.Errorf("demo-controller.yaml's ClusterRole lets the controller %s pods: the informer needs list and watch, "+
				"apply needs patch, and the controller does nothing else", strings.Join(verbs, ", "))
		}
	})

	// Today's newHandler takes no client; the task's must.
	if _, ok := any(newHandler).(func(kubernetes.Interface) Handler); !ok {
		t.Fatalf("newHandler is a %T: the handler has no client to write with. Make it "+
			"newHandler(client kubernetes.Interface) Handler, and pass it the client that run (main.go) makes", newHandler)
	}

	if !t.Run("one apply per phase, and none for the rest", func(t *testing.T) {
		recorded := testPod("default", "recorded", "uid-recorded", "1", corev1.PodRunning)
		recorded.Annotations = map[string]string{ex05Key: "Running"} // by an earlier run of the controller
		env := ex05Start(t, recorded, testPod("default", "unrecorded", "uid-unrecorded", "1", corev1.PodRunning))
		env.settle("recorded")
		env.settle("unrecorded")

		// web's whole life: three phases, as many updates that change none,
		// someone else removing the annotation, and a delete, during which the
		// pod is terminating until its containers have stopped.
		steps := []struct {
			step, manager string
			change        func(*corev1.Pod)
		}{
			{"scheduled", "kube-scheduler", func(p *corev1.Pod) { p.Spec.NodeName = "node-1" }},
			{"Running", "kubelet", func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning }},
			{"ready", "kubelet", func(p *corev1.Pod) {
				p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
			}},
			{"restarted", "kubelet", func(p *corev1.Pod) { p.Status.ContainerStatuses[0].RestartCount = 1 }},
			// kubectl annotate pod web demo-controller.example/phase-
			{"annotation removed", "kubectl-annotate", func(p *corev1.Pod) { delete(p.Annotations, ex05Key) }},
			{"terminating", "kube-apiserver", func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: time.Now()} }},
			{"Succeeded", "kubelet", func(p *corev1.Pod) { p.Status.Phase, p.Status.Conditions = corev1.PodSucceeded, nil }},
		}
		env.create("created", testPod("default", "web", "uid-web", "", corev1.PodPending))
		env.settle("web")
		for _, s := range steps {
			env.write("web", s.manager, s.step, s.change)
			env.settle("web")
		}
		env.delete("deleted", "web")
		env.settle("web")

		if got := env.appliesTo("recorded"); len(got) > 0 {
			t.Errorf("the pod recorded was found already saying %s=Running, and the handler applied anyway (%s). "+
				"Write only when the pod does not already say so: a restart of the controller would write to every pod", ex05Key, describeApplies(got))
		}
		if got := env.appliesTo("unrecorded"); len(got) != 1 || got[0].phase != "Running" {
			t.Errorf("the pod unrecorded was found, Running, with no annotation; the handler's applies: %s, want one, of Running. "+
				"Record the phase of the pods found at the start too", describeApplies(got))
		}
		// The steps after which the annotation does not say the phase.
		needed := map[string]string{"created": "Pending", "Running": "Running", "annotation removed": "Running", "Succeeded": "Succeeded"}
		var wasted []string
		got := map[string][]string{}
		for _, a := range env.appliesTo("web") {
			if _, ok := needed[a.doing]; ok {
				got[a.doing] = append(got[a.doing], a.phase)
			} else {
				wasted = append(wasted, fmt.Sprintf("%s, %s", a.doing, a.phase))
			}
		}
		switch {
		case len(wasted) > 0:
			t.Errorf("the handler applied where nothing needed recording: %s. Apply only when the pod's annotation, as the "+
				"cache holds it, differs from its phase: an update that changes no phase, and above all the update that the "+
				"handler's own write causes when it comes back, must find nothing to do, or the writes never end",
				strings.Join(wasted, "; "))
		case len(got["annotation removed"]) == 0 && len(got["Running"]) == 1:
			t.Errorf("someone else removed web's annotation (kubectl annotate pod web %s-), and changed nothing else: the "+
				"handler applied nothing, and web no longer says its phase, Running. Decide from the annotation, as the cache "+
				"holds it, not from whether the phase changed (old against new): apply whenever the annotation does not "+
				"say the phase, whatever the update changed", ex05Key)
		case len(got["Succeeded"]) == 0 && len(got["Running"]) == 1:
			t.Errorf("web was terminating (deleted, its deletionTimestamp set, its containers stopping) when it became " +
				"Succeeded, and the handler applied nothing. A terminating pod is still there, and still changes: record its " +
				"phase until it is gone")
		default:
			for _, step := range []string{"created", "Running", "annotation removed", "Succeeded"} {
				if !slices.Equal(got[step], []string{needed[step]}) {
					t.Errorf("after %q, web's annotation did not say its phase, %s, and the handler's applies were %v, want "+
						"one, of %s: record the phase when the pod is created (or found), each time it changes, and each "+
						"time the annotation stops saying it; once. All its applies: %s", step, needed[step], got[step],
						needed[step], describeApplies(env.appliesTo("web")))
					break
				}
			}
		}
		// The task's log: LogHandler's lines, each "Phase recorded" after the
		// line of the change it records.
		want := []string{`"Pod created"`, `"Phase recorded" phase="Pending"`, `"Pod phase changed"`, `"Phase recorded" phase="Running"`,
			`"Phase recorded" phase="Running"`, `"Pod terminating"`, `"Pod phase changed"`, `"Phase recorded" phase="Succeeded"`, `"Pod deleted"`}
		if seen := env.webLines(); !t.Failed() && !slices.Equal(seen, want) {
			why := "log them in the task's order: LogHandler's line first (call LogHandler's Created and Updated from yours), " +
				"then \"Phase recorded\", with the phase, once the apply has succeeded"
			if !slices.Contains(seen, `"Pod created"`) {
				why = "LogHandler's lines are missing: call LogHandler's Created and Updated from yours (embed it, as hint 1 " +
					"shows), then record the phase; the task's log keeps every line of today's"
			}
			t.Errorf("web's log, of its lifecycle lines and \"Phase recorded\":\n  %s\nwant:\n  %s\n%s",
				strings.Join(seen, "\n  "), strings.Join(want, "\n  "), why)
		}
	}) {
		return // one scenario at a time: a mistake often fails them all
	}

	if !t.Run("a pod deleted while the handler writes", func(t *testing.T) {
		env := ex05Start(t, testPod("default", "gone", "uid-gone", "1", corev1.PodRunning))
		env.settle("gone")
		env.beforeApplyTo("gone", func(tracker k8stesting.ObjectTracker) {
			_ = tracker.Delete(ex05Pods, "default", "gone")
		})
		env.write("gone", "kubelet", "Succeeded", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded })
		env.settle("gone") // its delete reported

		if err := env.errorFor("gone", "Succeeded"); err != nil {
			why := "That is the server saying that no pod with that UID exists any more."
			if a := env.appliesTo("gone"); a[len(a)-1].uid == "" {
				why = "Your apply names no UID, so the server tried to create the pod (apply is create-or-update); " +
					"a pod is refused for want of containers, but a ConfigMap would have come back. Put the pod's UID " +
					"in the apply (WithUID): the server then refuses to create it, and says that no pod with that UID exists."
			}
			t.Errorf("gone was deleted just before the handler's apply of Succeeded reached the server, which answered:\n  %v\n"+
				"and the handler returned that as an error: the controller retries it, up to maxRetries times, and gives up "+
				"(\"Dropping pod after retries\") if the delete is slow to reach the cache. %s A pod that is gone needs "+
				"nothing: tell this answer apart and return nil; the informer will report the delete", err, why)
		}
		env.checkGoneLine("gone")
	}) {
		return // one scenario at a time: a mistake often fails them all
	}

	if !t.Run("a pod deleted and created again under its name while the handler writes", func(t *testing.T) {
		env := ex05Start(t, testPod("default", "again", "uid-old", "1", corev1.PodRunning))
		env.settle("again")
		env.beforeApplyTo("again", func(tracker k8stesting.ObjectTracker) {
			_ = tracker.Delete(ex05Pods, "default", "again")
			_ = tracker.Create(ex05Pods, testPod("default", "again", "uid-new", env.nextRV(), corev1.PodPending), "default")
		})
		env.write("again", "kubelet", "Succeeded", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded })
		env.settle("again") // the new pod reported

		for _, a := range env.appliesTo("again") {
			if a.landedOn == "uid-new" && a.phase == "Succeeded" {
				t.Fatalf("again was deleted and created again (a new pod, Pending) just before the handler's apply of the " +
					"old pod's phase, Succeeded, reached the server, and the apply wrote Succeeded on the new pod. Put " +
					"the pod's UID in the apply (WithUID), so that the server refuses to write to another pod")
			}
		}
		if err := env.errorFor("again", "Succeeded"); err != nil {
			t.Errorf("again was deleted and created again (a new pod) just before the handler's apply of the old pod's "+
				"phase reached the server, which answered:\n  %v\nand the handler returned that as an error, for the "+
				"controller to retry. The pod it was for is gone: that needs nothing; tell this answer apart too, and "+
				"return nil (the informer reports the old pod deleted and the new one created)", err)
		}
		if got := env.appliesTo("again"); len(got) == 0 || got[len(got)-1].phase != "Pending" || got[len(got)-1].landedOn != "uid-new" {
			t.Errorf("the new pod again was not recorded as Pending; the handler's applies: %s", describeApplies(got))
		}
		env.checkGoneLine("again")
	}) {
		return // one scenario at a time: a mistake often fails them all
	}

	t.Run("another field manager owns the annotation", func(t *testing.T) {
		env := ex05Start(t, testPod("default", "shared", "uid-shared", "1", corev1.PodPending))
		env.settle("shared")
		// As `kubectl annotate --overwrite --field-manager=other` would: the
		// annotation changes, the phase does not.
		env.write("shared", "other", "annotated", func(p *corev1.Pod) { p.Annotations[ex05Key] = "manual" })
		env.waitForLog(`"Dropping pod after retries"`, `pod="default/shared"`, func() string {
			if env.returnedNil("shared", "annotated") && len(env.appliesAfter("shared", "annotated")) == 0 {
				return "Another field manager, \"other\", set shared's annotation to manual (kubectl annotate --overwrite " +
					"--field-manager=other), and changed nothing else: the handler made no apply, so the pod says manual, " +
					"not its phase, Pending. Decide from the annotation, as the cache holds it, not from whether the phase " +
					"changed: apply whenever the annotation does not say the phase (here the server refuses, with a conflict)."
			}
			if env.returnedNil("shared", "annotated") {
				return "The handler returned no error for an apply refused with a conflict (another field manager, " +
					"\"other\", owns " + ex05Key + "): return it, so that the controller retries, then reports it. " +
					"(A 409 that names a field manager is not a pod that is gone.)"
			}
			return ""
		})
		if got := env.appliesAfter("shared", "annotated"); len(got) != 1+maxRetries {
			t.Errorf("the handler applied %d times to shared for the change refused with a conflict, want 1 + maxRetries = %d. "+
				"The controller retries a handler's error already: retrying inside the handler (retry.RetryOnConflict) only "+
				"multiplies the requests; a conflict with another manager does not go away by itself", len(got), 1+maxRetries)
		}
		env.checkRecordedLines("shared")
	})
}

// ex05Env is a controller running on a fake clientset, with the test in front
// of the fake for the controller's requests.
type ex05Env struct {
	t      *testing.T
	client *fake.Clientset
	log    *fakeapi.Log
	levels ex05Levels   // the verbosity of each message logged through ctx's logger
	rv     atomic.Int64 // the last resourceVersion given out

	mu          sync.Mutex
	step        string          // the change the test made last
	doing       string          // what the handler is handling: the step, or its own write
	calls       []ex05Call      // every call of the handler, in order
	applies     []ex05Apply     // every apply the controller sent, in order
	problems    []string        // what the controller did that the task rules out
	ownRVs      map[string]bool // the resourceVersions of the controller's own writes
	callLog     int             // the number of lines logged when the handler's current call began
	beforeApply map[string]func(k8stesting.ObjectTracker)
}

type ex05Call struct {
	pod, rv, what, step string
	done                bool
	err                 error
}

type ex05Apply struct {
	pod, phase, doing string
	uid               string    // the UID the apply named, if any
	landedOn          types.UID // the UID of the pod it changed; "" if refused
	err               error
}

// ex05Start runs the controller, with newHandler's handler, over a fake
// clientset that holds pods.
func ex05Start(t *testing.T, pods ...*corev1.Pod) *ex05Env {
	t.Helper()
	var objects []runtime.Object
	for _, pod := range pods {
		objects = append(objects, pod)
	}
	env := &ex05Env{t: t, client: fake.NewClientset(objects...), log: &fakeapi.Log{},
		ownRVs: map[string]bool{}, beforeApply: map[string]func(k8stesting.ObjectTracker){}}
	env.rv.Store(100)
	env.client.PrependReactor("*", "*", env.react)
	env.client.PrependWatchReactor("pods", env.watch)
	handler := any(newHandler).(func(kubernetes.Interface) Handler)(env.client)

	sink := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(env.log), textlogger.Verbosity(4))).GetSink()
	logger := logr.New(ex05LevelSink{sink, &env.levels})
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	done := make(chan error, 1)
	go func() { done <- runController(ctx, env.client, "fake", "", time.Minute, &ex05Checker{env, handler}) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(wait.ForeverTestTimeout):
			t.Error("runController did not return after its context was cancelled")
		}
	})
	return env
}

// watch is the informer's watch, with a copy of each pod it sends. The
// fake's store sends the pods written between the informer's LIST and its
// WATCH (a found pod's apply, say) as it holds them, not copies, and keep
// (handler.go) may trim what it is given in place: without copies, keep would
// trim the store's own pods while this test reads them. A real API server
// sends each watcher objects of its own.
func (e *ex05Env) watch(action k8stesting.Action) (bool, watch.Interface, error) {
	w, err := e.client.Tracker().Watch(ex05Pods, action.GetNamespace(), action.(k8stesting.WatchActionImpl).ListOptions)
	if err != nil {
		return true, nil, err
	}
	return true, watch.Filter(w, func(event watch.Event) (watch.Event, bool) {
		event.Object = event.Object.DeepCopyObject()
		return event, true
	}), nil
}

func (e *ex05Env) nextRV() string { return strconv.FormatInt(e.rv.Add(1), 10) }

func (e *ex05Env) setStep(step string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.step = step
}

// create, write and delete change the pods as the kubelet or a user would:
// straight in the fake's store, each with a new resourceVersion.
func (e *ex05Env) create(step string, pod *corev1.Pod) {
	e.t.Helper()
	e.setStep(step)
	pod.ResourceVersion = e.nextRV()
	if err := e.client.Tracker().Create(ex05Pods, pod, pod.Namespace); err != nil {
		e.t.Fatal(err)
	}
}

func (e *ex05Env) write(name, manager, step string, change func(*corev1.Pod)) {
	e.t.Helper()
	e.setStep(step)
	obj, err := e.client.Tracker().Get(ex05Pods, "default", name)
	if err != nil {
		e.t.Fatal(err)
	}
	pod := obj.(*corev1.Pod).DeepCopy()
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	change(pod)
	pod.ResourceVersion = e.nextRV()
	if err := e.client.Tracker().Update(ex05Pods, pod, "default", metav1.UpdateOptions{FieldManager: manager}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *ex05Env) delete(step, name string) {
	e.t.Helper()
	e.setStep(step)
	if err := e.client.Tracker().Delete(ex05Pods, "default", name); err != nil {
		e.t.Fatal(err)
	}
}

// beforeApplyTo has the server run f once, when the next apply to the pod
// arrives, before it answers: a change that races the controller's write.
func (e *ex05Env) beforeApplyTo(name string, f func(k8stesting.ObjectTracker)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.beforeApply[name] = f
}

// react is the server's side of every request the controller makes. The
// informer's list and watch, and applies to pods, are what the task needs;
// anything else is noted as a problem, then done by the fake.
func (e *ex05Env) react(action k8stesting.Action) (bool, runtime.Object, error) {
	verb, resource := action.GetVerb(), action.GetResource().Resource
	if sub := action.GetSubresource(); sub != "" {
		resource += "/" + sub
	}
	name := ""
	switch a := action.(type) {
	case k8stesting.GetActionImpl:
		name = a.GetName()
	case k8stesting.PatchActionImpl:
		name = a.GetName()
		if a.GetPatchType() == types.ApplyPatchType && resource == "pods" {
			return e.apply(a)
		}
		if a.GetPatchType() == types.ApplyPatchType && resource == "pods/status" {
			e.problem(fmt.Sprintf("the handler applied to pod %s's status subresource (ApplyStatus): the annotation is the "+
				"pod's metadata, not its status, and the task's apply is to the pod itself (Apply). The status is the "+
				"kubelet's to write: the ClusterRole grants patch on pods, not on pods/status, and on a cluster every "+
				"such apply would be refused (403)", name))
			return false, nil, nil
		}
		e.problem(fmt.Sprintf("the handler sent a %s patch to pod %s: the task asks for server-side apply (the typed "+
			"client's Apply, with corev1ac.Pod(name, namespace)), which sends only your fields and makes the API server "+
			"record demo-controller as their owner", a.GetPatchType(), name))
		return false, nil, nil
	case k8stesting.UpdateActionImpl:
		if m, err := meta.Accessor(a.GetObject()); err == nil {
			name = m.GetName()
		}
	}
	switch verb {
	case "list", "watch":
		return false, nil, nil // the informer's
	case "get":
		e.problem(fmt.Sprintf("the handler read %s %s from the API server (a GET): read the pod it is given, which is "+
			"the cache's, and make keep (handler.go) keep the annotation. (The ClusterRole grants no get.)", resource, name))
	case "update":
		e.problem(fmt.Sprintf("the handler sent an Update of %s %s: a read-modify-write of the cached pod. The cache "+
			"holds each pod as keep trims it, and may be behind the server: a real API server refuses that Update "+
			"(\"spec.containers: Forbidden: pod updates may not add or remove containers\", or \"the object has been "+
			"modified\"), and an Update that goes "+
			"through overwrites what others wrote. Use server-side apply, with only your annotation", resource, name))
	default:
		e.problem(fmt.Sprintf("the handler sent a %s of %s %s: recording a phase takes one apply, and nothing else", verb, resource, name))
	}
	return false, nil, nil
}

func (e *ex05Env) problem(p string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.problems = append(e.problems, p)
}

// apply answers an apply to a pod as kube-apiserver v1.36 does.
func (e *ex05Env) apply(a k8stesting.PatchActionImpl) (bool, runtime.Object, error) {
	name, opts := a.GetName(), a.PatchOptions
	var body map[string]any
	_ = json.Unmarshal(a.GetPatch(), &body)
	metadata, _ := body["metadata"].(map[string]any)
	annotations, _ := metadata["annotations"].(map[string]any)
	phase, hasPhase := annotations[ex05Key].(string)
	uid, _ := metadata["uid"].(string)
	switch {
	case opts.FieldManager == "":
		e.problem(fmt.Sprintf("the apply to %s has no field manager: a real API server refuses it (\"fieldManager: "+
			"Required value\"). Apply as %q: the server records each field's owner by that name", name, ex05Manager))
	case opts.FieldManager != ex05Manager:
		e.problem(fmt.Sprintf("the apply to %s is made as the field manager %q; the task's is %q", name, opts.FieldManager, ex05Manager))
	}
	if opts.Force != nil && *opts.Force {
		e.problem(fmt.Sprintf("the apply to %s forces (Force: true): it takes %s from any other field manager that set "+
			"it, without a word, on every change of the pod. Leave Force unset: a conflict is an error, for a person "+
			"to resolve (the exercise's README says why)", name, ex05Key))
	}
	if extra := ex05Extra(body); len(extra) > 0 {
		why := ""
		if slices.Contains(extra, "metadata.resourceVersion") {
			why = " A resourceVersion makes the apply fail with a conflict whenever the pod changed after the cache saw " +
				"it (sample-controller#32's \"the object has been modified\"); an apply of a field you own needs none."
		}
		e.problem(fmt.Sprintf("the apply to %s sends %s besides the annotation: with apply, the fields you send are the "+
			"fields you own, and those you sent once and then leave out are removed. Send only "+
			"metadata.annotations[%q] (and the pod's UID).%s", name, strings.Join(extra, ", "), ex05Key, why))
	} else if !hasPhase {
		e.problem(fmt.Sprintf("the apply to %s does not set the annotation %s", name, ex05Key))
	}

	e.mu.Lock()
	recorded := fmt.Sprintf(`"Phase recorded" pod="default/%s" phase=%q`, name, phase)
	if hasPhase && slices.ContainsFunc(e.log.Lines()[e.callLog:], func(line string) bool { return strings.Contains(line, recorded) }) {
		e.problems = append(e.problems, fmt.Sprintf("the handler logged \"Phase recorded\" for %s (%s) before its apply "+
			"reached the server: log it once Apply has returned with no error. An apply may be refused (the pod gone, "+
			"another field manager's conflict), and then nothing was recorded", name, phase))
	}
	record := ex05Apply{pod: name, phase: phase, uid: uid, doing: e.doing}
	hook := e.beforeApply[name]
	delete(e.beforeApply, name)
	e.mu.Unlock()
	tracker := e.client.Tracker()
	if hook != nil {
		hook(tracker)
	}
	var obj runtime.Object
	live, err := tracker.Get(ex05Pods, a.GetNamespace(), name)
	switch {
	case opts.FieldManager == "":
		err = apierrors.NewInvalid(schema.GroupKind{Group: "meta.k8s.io", Kind: "PatchOptions"}, "", field.ErrorList{field.Required(field.NewPath("fieldManager"), "is required for apply patch")})
	case apierrors.IsNotFound(err) && uid != "":
		err = apierrors.NewConflict(ex05Pods.GroupResource(), name,
			fmt.Errorf("uid mismatch: the provided object specified uid %s, and no existing object was found", uid))
	case apierrors.IsNotFound(err): // apply creates what it does not find: a pod needs more than an annotation
		err = apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, name, field.ErrorList{field.Required(field.NewPath("spec", "containers"), "")})
	case err != nil:
	case uid != "" && live.(*corev1.Pod).UID != types.UID(uid):
		err = apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, name, field.ErrorList{field.Invalid(field.NewPath("metadata", "uid"), uid, "field is immutable")})
	default:
		before := live.(*corev1.Pod).DeepCopy()
		_, obj, err = k8stesting.ObjectReaction(tracker)(a)
		if err == nil {
			record.landedOn = before.UID
			obj = e.bump(before, obj.(*corev1.Pod))
		}
	}
	record.err = err
	e.mu.Lock()
	e.applies = append(e.applies, record)
	e.mu.Unlock()
	return true, obj, err
}

// bump gives a pod a write changed a new resourceVersion, as a real API
// server does (the fake does not): the write then comes back to the
// informer as an update. A write that changes nothing changes no version.
func (e *ex05Env) bump(before, after *corev1.Pod) *corev1.Pod {
	b, a := before.DeepCopy(), after.DeepCopy()
	b.ManagedFields, a.ManagedFields = nil, nil
	if equality.Semantic.DeepEqual(a, b) {
		return after
	}
	after = after.DeepCopy()
	after.ResourceVersion = e.nextRV()
	if err := e.client.Tracker().Update(ex05Pods, after, after.Namespace); err != nil {
		panic(err)
	}
	e.mu.Lock()
	e.ownRVs[after.ResourceVersion] = true
	e.mu.Unlock()
	return after
}

// ex05Extra returns the paths of what an apply's body sets besides its
// object's identity, its UID and the annotation.
func ex05Extra(body map[string]any) []string {
	var extra []string
	for k, v := range body {
		switch k {
		case "apiVersion", "kind":
		case "metadata":
			m, _ := v.(map[string]any)
			for mk, mv := range m {
				switch mk {
				case "name", "namespace", "uid":
				case "annotations":
					for ak := range mv.(map[string]any) {
						if ak != ex05Key {
							extra = append(extra, fmt.Sprintf("metadata.annotations[%q]", ak))
						}
					}
				default:
					extra = append(extra, "metadata."+mk)
				}
			}
		default:
			extra = append(extra, k)
		}
	}
	sort.Strings(extra)
	return extra
}

// ex05Checker is the Handler the controller gets: it calls newHandler's,
// notes each call, and checks that the call left the cache's pods as they were.
type ex05Checker struct {
	env   *ex05Env
	inner Handler
}

func (c *ex05Checker) Created(ctx context.Context, pod *corev1.Pod, found bool) error {
	return c.call(map[bool]string{true: "found", false: "created"}[found], pod,
		func() error { return c.inner.Created(ctx, pod, found) }, pod)
}

func (c *ex05Checker) Updated(ctx context.Context, old, pod *corev1.Pod) error {
	return c.call("updated", pod, func() error { return c.inner.Updated(ctx, old, pod) }, old, pod)
}

func (c *ex05Checker) Deleted(ctx context.Context, pod *corev1.Pod) error {
	return c.call("deleted", pod, func() error { return c.inner.Deleted(ctx, pod) }, pod)
}

func (c *ex05Checker) call(what string, pod *corev1.Pod, run func() error, given ...*corev1.Pod) error {
	e := c.env
	var copies []*corev1.Pod
	for _, p := range given {
		copies = append(copies, p.DeepCopy())
	}
	e.mu.Lock()
	i := len(e.calls)
	e.calls = append(e.calls, ex05Call{pod: pod.Name, rv: pod.ResourceVersion, what: what, step: e.step})
	e.callLog = len(e.log.Lines())
	if e.doing = e.step; e.ownRVs[pod.ResourceVersion] {
		e.doing = "its own write coming back"
	} else if what == "found" {
		e.doing = "found"
	}
	e.mu.Unlock()

	err := func() (err error) {
		defer func() {
			if r := recover(); r != nil { // a panic would end the test binary, and say only where
				why := "A handler that panics takes the whole controller down."
				if strings.Contains(fmt.Sprint(r), "assignment to entry in nil map") {
					why = "It wrote to a map of the pod it was given (its Annotations?): that pod is the cache's, shared " +
						"with every reader, and a change to it is never sent to the server. Build what you apply from " +
						"scratch (corev1ac.Pod(name, namespace).WithAnnotations(...))."
				}
				e.problem(fmt.Sprintf("the handler panicked on %s %s: %v, at %s. %s", what, pod.Name, r, ex05PanicSite(), why))
				err = fmt.Errorf("panic: %v", r)
			}
		}()
		return run()
	}()

	e.mu.Lock()
	defer e.mu.Unlock()
	e.calls[i].done, e.calls[i].err = true, err
	for j, p := range given {
		if !equality.Semantic.DeepEqual(p, copies[j]) {
			e.problems = append(e.problems, fmt.Sprintf("the handler changed the pod it was given (%s %s): that pod is "+
				"the cache's, shared with the informer and every other reader, and a change to it is never sent to the "+
				"server. Leave it as it is: build what you apply from scratch (corev1ac.Pod), with only your annotation",
				what, pod.Name))
			break
		}
	}
	return err
}

// failOnProblems ends the test at the first thing the controller did that
// the task rules out.
func (e *ex05Env) failOnProblems() {
	e.t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.problems) > 0 {
		e.t.Fatal(e.problems[0])
	}
}

// settle waits until the handler has handled the pod as the server holds it
// now (or its delete) and returned no error: by then, the writes that change
// caused, and their coming back, are over.
func (e *ex05Env) settle(name string) {
	e.t.Helper()
	var rv, last string
	err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, ex05Wait, true, func(context.Context) (bool, error) {
		e.failOnProblems()
		obj, err := e.client.Tracker().Get(ex05Pods, "default", name)
		rv = "(deleted)"
		if err == nil {
			rv = obj.(*corev1.Pod).ResourceVersion
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		for i := len(e.calls) - 1; i >= 0; i-- {
			if c := e.calls[i]; c.pod == name {
				last = fmt.Sprintf("%s at resourceVersion %s, returned %v", c.what, c.rv, c.err)
				return c.done && c.err == nil && (c.what == "deleted") == (err != nil) && (err != nil || c.rv == rv), nil
			}
		}
		return false, nil
	})
	if err != nil {
		e.t.Fatalf("after %q, the handler did not finish with %s as the server holds it (resourceVersion %s) within %v: "+
			"its last call for it was %s; its applies: %s. The log's last lines:\n%s",
			e.step, name, rv, ex05Wait, last, describeApplies(e.appliesTo(name)), e.logTail(15))
	}
	e.checkRecordedLines(name)
}

// checkRecordedLines fails the test unless the log has one "Phase recorded"
// line for the pod per apply to it that succeeded, with the same phases.
func (e *ex05Env) checkRecordedLines(name string) {
	e.t.Helper()
	var succeeded []string
	for _, a := range e.appliesTo(name) {
		if a.err == nil {
			succeeded = append(succeeded, fmt.Sprintf(`"Phase recorded" pod="default/%s" phase=%q`, name, a.phase))
		}
	}
	lines := e.logged(fmt.Sprintf(`"Phase recorded" pod="default/%s"`, name))
	switch {
	case slices.Equal(lines, succeeded):
	case len(lines) == 0:
		e.t.Fatalf("%d of the handler's applies to %s succeeded, and the log that ctx's logger writes has no \"Phase recorded\" "+
			"line for it. After each apply that succeeds, log \"Phase recorded\" with the phase, with the logger in ctx "+
			"(klog.FromContext(ctx)), whose lines carry pod=: klog.InfoS and the like write to klog's own logger, without "+
			"the pod. The log's last lines:\n%s", len(succeeded), name, e.logTail(10))
	case len(lines) > len(succeeded):
		e.t.Fatalf("the log has %d \"Phase recorded\" line(s) for %s, and %d of the handler's applies to it succeeded (its applies: %s). "+
			"Log it only after an apply that succeeded: not for a write that was skipped, nor for one the server refused. "+
			"The lines:\n  %s", len(lines), name, len(succeeded), describeApplies(e.appliesTo(name)), strings.Join(lines, "\n  "))
	default:
		e.t.Fatalf("after each apply that succeeds, log \"Phase recorded\" with the phase the apply wrote, as the task "+
			"shows. For %s, the applies that succeeded would log:\n  %s\nand the log has:\n  %s",
			name, strings.Join(succeeded, "\n  "), strings.Join(lines, "\n  "))
	}
}

// checkGoneLine fails the test unless the handler, having met the pod gone,
// logged so at -v=4 with the server's answer.
func (e *ex05Env) checkGoneLine(name string) {
	e.t.Helper()
	if e.t.Failed() {
		return
	}
	const msg = "Pod gone before its phase was recorded"
	lines := e.logged(fmt.Sprintf(`%q pod="default/%s"`, msg, name))
	levels := e.levels.of(msg)
	switch {
	case len(lines) == 0:
		e.t.Errorf("the pod %q was gone (deleted, or deleted and created again) when the handler's apply reached the server, "+
			"and the handler returned nil, as it should; "+
			"but the log that ctx's logger writes has no line %q for it. Log it at -v=4, with err, through the logger "+
			"in ctx, whose lines carry pod=: klog.FromContext(ctx).V(4).Info(%q, \"err\", err). (klog.V(4).InfoS "+
			"writes to klog's own logger, without the pod.) The log's last lines:\n%s", name, msg, msg, e.logTail(10))
	case slices.ContainsFunc(levels, func(v int) bool { return v != 4 }):
		e.t.Errorf("the handler logged %q at -v=%d; the task says -v=4: it is no error, and at the default verbosity "+
			"the informer's \"Pod deleted\" says enough: klog.FromContext(ctx).V(4).Info(...)", msg, levels[0])
	case !strings.Contains(lines[0], ` err="`):
		e.t.Errorf("the handler logged %q without err, the server's answer, which says why:\n  %s", msg, lines[0])
	}
}

// waitForLog waits for a line of the log that holds prefix and part; it
// fails as soon as wrong() says something, or if no such line comes.
func (e *ex05Env) waitForLog(prefix, part string, wrong func() string) {
	e.t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, ex05Wait, true, func(context.Context) (bool, error) {
		e.failOnProblems()
		if why := wrong(); why != "" {
			e.t.Fatalf("%s The log's last lines:\n%s", why, e.logTail(15))
		}
		return slices.ContainsFunc(e.log.Lines(), func(line string) bool { return strings.Contains(line, prefix) && strings.Contains(line, part) }), nil
	})
	if err != nil {
		e.t.Fatalf("no line %s %s in the log within %v. The log's last lines:\n%s", prefix, part, ex05Wait, e.logTail(15))
	}
}

func (e *ex05Env) logTail(n int) string {
	return "  " + strings.Join(e.log.Last(n), "\n  ")
}

// logged returns the lines of the log that start with prefix, without
// klog's headers.
func (e *ex05Env) logged(prefix string) []string {
	return slices.DeleteFunc(e.log.Lines(), func(line string) bool { return !strings.HasPrefix(line, prefix) })
}

func (e *ex05Env) appliesTo(name string) []ex05Apply {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []ex05Apply
	for _, a := range e.applies {
		if a.pod == name {
			out = append(out, a)
		}
	}
	return out
}

// appliesAfter returns the applies to the pod made while the handler
// handled the step (its retries included).
func (e *ex05Env) appliesAfter(name, step string) []ex05Apply {
	return slices.DeleteFunc(e.appliesTo(name), func(a ex05Apply) bool { return a.doing != step })
}

// webLines returns web's lines that say it was created or deleted, changed
// phase or began terminating, and its "Phase recorded" lines, without the pod.
func (e *ex05Env) webLines() []string {
	var out []string
	for _, line := range e.logged("") {
		msg, rest, _ := strings.Cut(line, ` pod="default/web"`)
		switch {
		case !strings.Contains(line, ` pod="default/web"`):
		case msg == `"Phase recorded"`:
			out = append(out, msg+rest)
		case slices.Contains([]string{`"Pod created"`, `"Pod phase changed"`, `"Pod terminating"`, `"Pod deleted"`}, msg):
			out = append(out, msg)
		}
	}
	return out
}

// returnedNil reports whether a call of the handler for the pod after the
// step returned no error.
func (e *ex05Env) returnedNil(name, step string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.ContainsFunc(e.calls, func(c ex05Call) bool { return c.pod == name && c.step == step && c.done && c.err == nil })
}

// errorFor returns the first error the handler returned for the pod after
// the step, if any.
func (e *ex05Env) errorFor(name, step string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, c := range e.calls {
		if c.pod == name && c.step == step && c.err != nil {
			return c.err
		}
	}
	return nil
}

func describeApplies(applies []ex05Apply) string {
	if len(applies) == 0 {
		return "none"
	}
	var out []string
	for _, a := range applies {
		s := fmt.Sprintf("%s (%s)", a.phase, a.doing)
		if a.err != nil {
			s += " refused: " + a.err.Error()
		}
		out = append(out, s)
	}
	return strings.Join(out, "; ")
}

// ex05Levels records the verbosity of each message logged through ctx's
// logger: textlogger's lines do not show it.
type ex05Levels struct {
	mu    sync.Mutex
	byMsg map[string][]int
}

func (l *ex05Levels) add(msg string, level int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byMsg == nil {
		l.byMsg = map[string][]int{}
	}
	l.byMsg[msg] = append(l.byMsg[msg], level)
}

func (l *ex05Levels) of(msg string) []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.byMsg[msg])
}

// ex05LevelSink is the textlogger's sink, noting each message's verbosity.
type ex05LevelSink struct {
	inner  logr.LogSink
	levels *ex05Levels
}

func (s ex05LevelSink) Init(info logr.RuntimeInfo) {
	info.CallDepth++ // klog's header names the caller, not this sink
	s.inner.Init(info)
}
func (s ex05LevelSink) Enabled(level int) bool { return s.inner.Enabled(level) }
func (s ex05LevelSink) Info(level int, msg string, kv ...any) {
	s.levels.add(msg, level)
	s.inner.Info(level, msg, kv...)
}
func (s ex05LevelSink) Error(err error, msg string, kv ...any) { s.inner.Error(err, msg, kv...) }
func (s ex05LevelSink) WithValues(kv ...any) logr.LogSink {
	return ex05LevelSink{s.inner.WithValues(kv...), s.levels}
}
func (s ex05LevelSink) WithName(name string) logr.LogSink {
	return ex05LevelSink{s.inner.WithName(name), s.levels}
}

// ex05PanicSite returns the file and line, in the project's own Go files,
// where the panic being recovered began.
func ex05PanicSite() string {
	dir, _ := os.Getwd()
	lines := strings.Split(string(debug.Stack()), "\n")
	for i, line := range lines {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, dir+"/") || strings.Contains(line, "_test.go:") {
			continue
		}
		site := strings.Fields(strings.TrimPrefix(line, dir+"/"))[0]
		if i > 0 {
			fn := lines[i-1]
			if j := strings.LastIndex(fn, "("); j > 0 {
				fn = fn[:j]
			}
			site += " (" + fn[strings.LastIndex(fn, "/")+1:] + ")"
		}
		return site
	}
	return "(no line of the project's files in the stack)"
}
