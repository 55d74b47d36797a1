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
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
	"k8s.io/client-go/kubernetes/scheme"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
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
		data, err := os.ReadFile("demo-controller.yaml")
		if err != nil {
			t.Fatal(err)
		}
		var verbs []string
		for _, doc := range strings.Split(string(data), "\n---\n") {
			obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
			if err != nil {
				t.Fatalf("demo-controller.yaml: %v", err)
			}
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

		// web's whole life: three phases, and as many updates that change none.
		steps := []struct {
			step   string
			change func(*corev1.Pod)
		}{
			{"scheduled", func(p *corev1.Pod) { p.Spec.NodeName = "node-1" }},
			{"Running", func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning }},
			{"ready", func(p *corev1.Pod) {
				p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
			}},
			{"restarted", func(p *corev1.Pod) { p.Status.ContainerStatuses[0].RestartCount = 1 }},
			{"Succeeded", func(p *corev1.Pod) { p.Status.Phase, p.Status.Conditions = corev1.PodSucceeded, nil }},
			{"terminating", func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: time.Now()} }},
		}
		env.create("created", testPod("default", "web", "uid-web", "", corev1.PodPending))
		env.settle("web")
		for _, s := range steps {
			env.write("web", "kubelet", s.step, s.change)
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
		var wasted, phases []string
		for _, a := range env.appliesTo("web") {
			if a.doing != "created" && a.doing != "Running" && a.doing != "Succeeded" {
				wasted = append(wasted, fmt.Sprintf("%s, %s", a.doing, a.phase))
			} else {
				phases = append(phases, a.phase)
			}
		}
		switch want := []string{"Pending", "Running", "Succeeded"}; {
		case len(wasted) > 0:
			t.Errorf("the handler applied where nothing needed recording: %s. Apply only when the pod's annotation, as the "+
				"cache holds it, differs from its phase: an update that changes no phase, and above all the update that the "+
				"handler's own write causes when it comes back, must find nothing to do, or the writes never end",
				strings.Join(wasted, "; "))
		case !slices.Equal(phases, want):
			t.Errorf("web went through the phases %s, and the handler recorded %s: record the phase when the pod "+
				"is created (or found) and each time it changes, once", want, phases)
		case !slices.Equal(env.logged(`"Phase recorded" pod="default/web"`), []string{
			`"Phase recorded" pod="default/web" phase="Pending"`, `"Phase recorded" pod="default/web" phase="Running"`,
			`"Phase recorded" pod="default/web" phase="Succeeded"`}):
			t.Errorf("after each apply that succeeds, log \"Phase recorded\" with the phase, as the task shows; for web the log has:\n  %s",
				strings.Join(env.logged(`"Phase recorded" pod="default/web"`), "\n  "))
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
	}) {
		return // one scenario at a time: a mistake often fails them all
	}

	t.Run("another field manager owns the annotation", func(t *testing.T) {
		env := ex05Start(t, testPod("default", "shared", "uid-shared", "1", corev1.PodPending))
		env.settle("shared")
		// As `kubectl annotate --overwrite --field-manager=other` would, in
		// the same update as the pod's next phase.
		env.write("shared", "other", "Running", func(p *corev1.Pod) {
			p.Annotations[ex05Key], p.Status.Phase = "manual", corev1.PodRunning
		})
		env.waitForLog(`"Dropping pod after retries"`, `pod="default/shared"`, func() string {
			if env.returnedNil("shared", "Running") {
				return "The handler returned no error for an apply refused with a conflict (another field manager, " +
					"\"other\", owns " + ex05Key + "): return it, so that the controller retries, then reports it. " +
					"(A 409 that names a field manager is not a pod that is gone.)"
			}
			return ""
		})
		if got := env.appliesTo("shared"); len(got) != 2+maxRetries {
			t.Errorf("the handler applied %d times to shared: once for Pending, then, for the change refused with a conflict, "+
				"%d, want 1 + maxRetries = %d. The controller retries a handler's error already: retrying inside the "+
				"handler (retry.RetryOnConflict) only multiplies the requests; a conflict with another manager does not "+
				"go away by itself", len(got), len(got)-1, 1+maxRetries)
		}
	})
}

// ex05Env is a controller running on a fake clientset, with the test in front
// of the fake for the controller's requests.
type ex05Env struct {
	t      *testing.T
	client *fake.Clientset
	log    *syncBuffer
	rv     atomic.Int64 // the last resourceVersion given out

	mu          sync.Mutex
	step        string          // the change the test made last
	doing       string          // what the handler is handling: the step, or its own write
	calls       []ex05Call      // every call of the handler, in order
	applies     []ex05Apply     // every apply the controller sent, in order
	problems    []string        // what the controller did that the task rules out
	ownRVs      map[string]bool // the resourceVersions of the controller's own writes
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
	env := &ex05Env{t: t, client: fake.NewClientset(objects...), log: &syncBuffer{},
		ownRVs: map[string]bool{}, beforeApply: map[string]func(k8stesting.ObjectTracker){}}
	env.rv.Store(100)
	env.client.PrependReactor("*", "*", env.react)
	env.client.PrependWatchReactor("pods", env.watch)
	handler := any(newHandler).(func(kubernetes.Interface) Handler)(env.client)

	logger := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(env.log), textlogger.Verbosity(4)))
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
	if e.doing = e.step; e.ownRVs[pod.ResourceVersion] {
		e.doing = "its own write coming back"
	} else if what == "found" {
		e.doing = "found"
	}
	e.mu.Unlock()

	err := run()

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
		return strings.Contains(e.log.String(), prefix) && slices.ContainsFunc(strings.Split(e.log.String(), "\n"),
			func(line string) bool { return strings.Contains(line, prefix) && strings.Contains(line, part) }), nil
	})
	if err != nil {
		e.t.Fatalf("no line %s %s in the log within %v. The log's last lines:\n%s", prefix, part, ex05Wait, e.logTail(15))
	}
}

func (e *ex05Env) logTail(n int) string {
	lines := strings.Split(strings.TrimSpace(e.log.String()), "\n")
	lines = lines[max(0, len(lines)-n):]
	for i := range lines {
		lines[i] = "  " + klogHeader.ReplaceAllString(lines[i], "")
	}
	return strings.Join(lines, "\n")
}

// logged returns the lines of the log that start with prefix, without
// klog's headers.
func (e *ex05Env) logged(prefix string) []string {
	var out []string
	for _, line := range strings.Split(e.log.String(), "\n") {
		if line = klogHeader.ReplaceAllString(line, ""); strings.HasPrefix(line, prefix) {
			out = append(out, line)
		}
	}
	return out
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
