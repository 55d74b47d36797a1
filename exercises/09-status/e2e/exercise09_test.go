//go:build e2e && exercise

// The end-to-end test of exercise 9 (exercises/09-status/README.md): the
// Greeting's status against a real kube-apiserver, which sets generation and
// splits off /status, as client-go's fake clientset does not. Copy it into
// e2e/ and run it as the exercise's README says; hack/check-exercises.sh runs
// it on the binary built with solution.patch.

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/util/retry"
)

// ex09CRDPath is the Greeting's CRD, to which the task adds the status
// subresource, the status schema and the READY column.
var ex09CRDPath = filepath.Join("exercises", "07-crd", "greeting-crd.yaml")

// ex09Plain is a copy of the Greeting's CRD with no status subresource: the comparison.
var ex09Plain = schema.GroupVersionResource{Group: "demo.example.com", Version: "v1alpha1", Resource: "plaingreetings"}

// ex09User is demo-controller's identity, with the manifest's ServiceAccount.
const ex09User = "system:serviceaccount:demo-controller:demo-controller"

// ex09Dynamic returns the admin's dynamic client, at up to 200 requests a
// second: client-go's default of 5 would slow the polls down.
func ex09Dynamic(t *testing.T) dynamic.Interface {
	t.Helper()
	return dynamicClient(t, adminKube, 200)
}

// ex09ReadCRD reads the task's CRD.
func ex09ReadCRD(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, ex09CRDPath))
	if err != nil {
		t.Fatal(err)
	}
	crd := &unstructured.Unstructured{}
	if err := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096).Decode(&crd.Object); err != nil {
		t.Fatalf("%s: %v", ex09CRDPath, err)
	}
	return crd
}

// ex09ApplyCRD applies a CRD with kubectl and waits until its resource is served.
func ex09ApplyCRD(t *testing.T, crd *unstructured.Unstructured, gvr schema.GroupVersionResource) {
	t.Helper()
	data, err := json.Marshal(crd.Object)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(workDir, crd.GetName()+".json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := kubectl(adminKube, "apply", "-f", path); err != nil {
		t.Fatalf("kubectl apply the CRD %s (%s): %v\n%s", crd.GetName(), ex09CRDPath, err, out)
	}
	if out, err := kubectl(adminKube, "wait", "--for=condition=Established", "--timeout=30s", "crd/"+crd.GetName()); err != nil {
		t.Fatalf("the CRD %s is not established: %v\n%s", crd.GetName(), err, out)
	}
	client := ex09Dynamic(t).Resource(gvr)
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err = client.List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, nil
	}); err != nil {
		t.Fatalf("the API server does not serve %s: %v", gvr, err)
	}
}

// ex09PlainCRD returns a copy of the Greeting's CRD under other names, with
// no subresources.
func ex09PlainCRD(crd *unstructured.Unstructured) *unstructured.Unstructured {
	plain := crd.DeepCopy()
	plain.SetName("plaingreetings.demo.example.com")
	_ = unstructured.SetNestedMap(plain.Object, map[string]any{"kind": "PlainGreeting", "listKind": "PlainGreetingList",
		"singular": "plaingreeting", "plural": "plaingreetings"}, "spec", "names")
	versions, _, _ := unstructured.NestedSlice(plain.Object, "spec", "versions")
	for _, v := range versions {
		if v, ok := v.(map[string]any); ok {
			delete(v, "subresources")
		}
	}
	_ = unstructured.SetNestedSlice(plain.Object, versions, "spec", "versions")
	return plain
}

// ex09Write is one write of TestExercise09WhatRaisesGeneration, and what
// the API server does with it, with the status subresource and without.
type ex09Write struct {
	what          string
	carriesStatus bool // the write sets status.observedGeneration
	do            func(c dynamic.ResourceInterface, obj *unstructured.Unstructured) error
	// what the write does: raise generation; store status.observedGeneration
	// (set to the generation before the write); "404" if refused so.
	with, without ex09Effect
}

type ex09Effect struct {
	raises, storesStatus bool
	refused              string
}

// TestExercise09WhatRaisesGeneration measures, on the real API server,
// which writes raise metadata.generation, on the task's CRD (with the status
// subresource) and on a copy of it without one; the task states the figures.
func TestExercise09WhatRaisesGeneration(t *testing.T) {
	started := time.Now()
	crd := ex09ReadCRD(t)
	ex09ApplyCRD(t, crd, greetingsGVR)
	ex09ApplyCRD(t, ex09PlainCRD(crd), ex09Plain)
	ctx := context.Background()
	merge := func(patch string) func(c dynamic.ResourceInterface, obj *unstructured.Unstructured) error {
		return func(c dynamic.ResourceInterface, obj *unstructured.Unstructured) error {
			_, err := c.Patch(ctx, obj.GetName(), types.MergePatchType, []byte(patch), metav1.PatchOptions{})
			return err
		}
	}
	withObservedGeneration := func(obj *unstructured.Unstructured) *unstructured.Unstructured {
		obj = obj.DeepCopy()
		_ = unstructured.SetNestedField(obj.Object, obj.GetGeneration(), "status", "observedGeneration")
		return obj
	}
	update := func(c dynamic.ResourceInterface, obj *unstructured.Unstructured) error {
		_, err := c.Update(ctx, withObservedGeneration(obj), metav1.UpdateOptions{})
		return err
	}
	updateStatus := func(c dynamic.ResourceInterface, obj *unstructured.Unstructured) error {
		_, err := c.UpdateStatus(ctx, withObservedGeneration(obj), metav1.UpdateOptions{})
		return err
	}
	// stale writes the status from the object as it was before someone
	// else's write: a decision made on an old copy.
	stale := func(c dynamic.ResourceInterface, obj *unstructured.Unstructured) error {
		if err := merge(`{"metadata":{"labels":{"team":"d"}}}`)(c, obj); err != nil {
			return err
		}
		obj = obj.DeepCopy()
		_ = unstructured.SetNestedField(obj.Object, obj.GetGeneration()+100, "status", "observedGeneration")
		_, err := c.UpdateStatus(ctx, obj, metav1.UpdateOptions{})
		return err
	}
	del := func(c dynamic.ResourceInterface, obj *unstructured.Unstructured) error {
		return c.Delete(ctx, obj.GetName(), metav1.DeleteOptions{})
	}
	none, raises := ex09Effect{}, ex09Effect{raises: true}
	writes := []ex09Write{
		{"a label added", false, merge(`{"metadata":{"labels":{"team":"a"}}}`), none, none},
		{"an annotation added", false, merge(`{"metadata":{"annotations":{"note":"b"}}}`), none, none},
		{"spec.to changed", false, merge(`{"spec":{"to":"Grace"}}`), raises, raises},
		{"spec.to written again, unchanged", false, merge(`{"spec":{"to":"Grace"}}`), none, none},
		{"status.observedGeneration = generation, by an Update of the Greeting", true, update, none, ex09Effect{raises: true, storesStatus: true}},
		{"the same again, with the new generation", true, update, none, ex09Effect{raises: true, storesStatus: true}},
		{"status.observedGeneration = generation, by UpdateStatus (/status)", true, updateStatus, ex09Effect{storesStatus: true}, ex09Effect{refused: "404"}},
		{"the same UpdateStatus again, unchanged", true, updateStatus, ex09Effect{storesStatus: true}, ex09Effect{refused: "404"}},
		{"UpdateStatus from a copy older than someone else's write", false, stale, ex09Effect{refused: "409"}, ex09Effect{refused: "404"}},
		{"a finalizer added", false, merge(`{"metadata":{"finalizers":["demo.example.com/hold"]}}`), none, none},
		{"deleted: deletionTimestamp set, the finalizer holds it", false, del, raises, raises},
		{"deleted again", false, del, none, none},
		{"a label changed while it is being deleted", false, merge(`{"metadata":{"labels":{"team":"c"}}}`), none, none},
	}
	ns := namespace(t, "status-generation")
	var report strings.Builder
	for _, tc := range []struct {
		gvr  schema.GroupVersionResource
		kind string
		with bool
	}{{greetingsGVR, "Greeting", true}, {ex09Plain, "PlainGreeting", false}} {
		c := ex09Dynamic(t).Resource(tc.gvr).Namespace(ns)
		obj, err := c.Create(ctx, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "demo.example.com/v1alpha1",
			"kind": tc.kind, "metadata": map[string]any{"name": "measured"}, "spec": map[string]any{"to": "Ada"}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&report, "%s (%s): created with generation %d\n", tc.gvr.Resource, map[bool]string{true: "status subresource", false: "no status subresource"}[tc.with], obj.GetGeneration())
		for _, w := range writes {
			want := w.without
			if tc.with {
				want = w.with
			}
			err := w.do(c, obj)
			after, gerr := c.Get(ctx, obj.GetName(), metav1.GetOptions{})
			if gerr != nil {
				t.Fatal(gerr)
			}
			og, stored, _ := unstructured.NestedInt64(after.Object, "status", "observedGeneration")
			stored = stored && og == obj.GetGeneration() && w.carriesStatus
			got := ex09Effect{raises: after.GetGeneration() > obj.GetGeneration(), storesStatus: stored}
			if apierrors.IsNotFound(err) {
				got.refused = "404"
			} else if apierrors.IsConflict(err) {
				got.refused = "409"
			} else if err != nil {
				t.Fatalf("%s on %s: %v", w.what, tc.gvr.Resource, err)
			}
			fmt.Fprintf(&report, "  %-72s generation %d -> %d%s%s%s\n", w.what, obj.GetGeneration(), after.GetGeneration(),
				map[bool]string{true: ", status stored"}[got.storesStatus], map[string]string{"404": ", answered 404 Not Found", "409": ", answered 409 Conflict"}[got.refused],
				map[bool]string{true: ", resourceVersion unchanged"}[after.GetResourceVersion() == obj.GetResourceVersion()])
			if got != want && tc.with {
				switch {
				case got.refused == "404" && want.refused != "404":
					t.Errorf("%s: UpdateStatus answered 404 Not Found: the CRD in %s has no status subresource. Add "+
						"subresources: {status: {}} to its version v1alpha1", w.what, ex09CRDPath)
				case got.raises && got.storesStatus:
					t.Errorf("%s raised the Greeting's generation, %d -> %d: the CRD in %s has no status subresource, so "+
						"status is part of the object, and a status write is a change like any other", w.what, obj.GetGeneration(), after.GetGeneration(), ex09CRDPath)
				case !got.storesStatus && want.storesStatus:
					t.Errorf("%s: the API server answered, and did not store status.observedGeneration: the CRD's schema in %s "+
						"does not declare it (status: {type: object, properties: {observedGeneration: {type: integer}, conditions: ...}}), "+
						"and the API server drops what the schema does not declare", w.what, ex09CRDPath)
				default:
					t.Errorf("%s, on the task's Greeting: generation %d -> %d, status stored: %v; want raised: %v, stored: %v",
						w.what, obj.GetGeneration(), after.GetGeneration(), got.storesStatus, want.raises, want.storesStatus)
				}
			} else if got != want {
				t.Errorf("%s, on a CRD with no status subresource: generation %d -> %d, status stored: %v, refused: %q; "+
					"the task says raised: %v, stored: %v, refused: %q", w.what, obj.GetGeneration(), after.GetGeneration(),
					got.storesStatus, got.refused, want.raises, want.storesStatus, want.refused)
			}
			obj = after
		}
		if _, err := c.Patch(ctx, obj.GetName(), types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("what raises metadata.generation, measured on kube-apiserver (%v):\n%s", time.Since(started).Round(100*time.Millisecond), report.String())
}

// ex09Status is what a test reads of a Greeting's status.
type ex09Status struct {
	generation, observedGeneration int64
	ready                          *metav1.Condition
	conditions                     []metav1.Condition
	resourceVersion                string
}

func (s ex09Status) String() string {
	ready := "no Ready condition"
	if s.ready != nil {
		ready = fmt.Sprintf("Ready %s, reason %s, message %q, lastTransitionTime %s", s.ready.Status, s.ready.Reason, s.ready.Message, s.ready.LastTransitionTime.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("generation %d, observedGeneration %d, %s", s.generation, s.observedGeneration, ready)
}

// ex09Read reads a Greeting's status from the API server.
func ex09Read(t *testing.T, c dynamic.ResourceInterface, name string) ex09Status {
	t.Helper()
	obj, err := c.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s := ex09Status{generation: obj.GetGeneration(), resourceVersion: obj.GetResourceVersion()}
	s.observedGeneration, _, _ = unstructured.NestedInt64(obj.Object, "status", "observedGeneration")
	conditions, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conditions {
		var condition metav1.Condition
		if m, ok := c.(map[string]any); ok && runtime.DefaultUnstructuredConverter.FromUnstructured(m, &condition) == nil {
			s.conditions = append(s.conditions, condition)
		}
	}
	s.ready = meta.FindStatusCondition(s.conditions, "Ready")
	return s
}

// ex09WaitFor polls a Greeting's status until ok says so, for up to 30 s,
// and returns it and how long that took.
func ex09WaitFor(t *testing.T, p *process, c dynamic.ResourceInterface, name, what string, ok func(ex09Status) bool) (ex09Status, time.Duration) {
	t.Helper()
	started := time.Now()
	var s ex09Status
	polls := 0
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, lineTimeout, true, func(context.Context) (bool, error) {
		if p.exited() {
			return false, fmt.Errorf("demo-controller exited")
		}
		if s = ex09Read(t, c, name); ok(s) {
			return true, nil
		}
		if polls++; polls%25 == 0 { // every half second
			if why := ex09Refused(t, name); why != "" {
				return false, fmt.Errorf("%s", why)
			}
		}
		return false, nil
	})
	if err != nil {
		why := ex09Refused(t, name)
		if why == "" {
			why = "demo-controller made no request to write its status that the API server refused (" + err.Error() + ")"
		}
		t.Fatalf("Greeting %s: %s; within %v it has: %s. %s", name, what, time.Since(started).Round(100*time.Millisecond), s, why)
	}
	return s, time.Since(started)
}

// ex09Namespace is where TestExercise09Status makes its Greetings.
const ex09Namespace = "status-life"

// ex09Refused reads, in the audit log, demo-controller's writes of a
// Greeting in ex09Namespace that were refused or went to the Greeting
// itself, and says what they mean; "" if there are none.
func ex09Refused(t *testing.T, name string) string {
	t.Helper()
	for _, e := range ex09StatusWrites(t, ex09Namespace, name) {
		code := 0
		if e.ResponseStatus != nil {
			code = e.ResponseStatus.Code
		}
		switch {
		case e.ObjectRef.Subresource == "":
			return fmt.Sprintf("demo-controller wrote the Greeting itself (%s), not /status: with the status subresource, "+
				"the API server ignores the status there; and the ClusterRole grants no update of greetings. Write "+
				"through /status (UpdateStatus)", e)
		case code == 404:
			return fmt.Sprintf("the API server answered demo-controller's status write with 404 Not Found (%s): the "+
				"CRD has no status subresource (subresources: {status: {}})", e)
		case code == 403:
			return fmt.Sprintf("the API server refused demo-controller's status write, 403 Forbidden (%s): the "+
				"ClusterRole in demo-controller.yaml must grant its verb on greetings/status", e)
		case code == 422:
			return fmt.Sprintf("the API server refused demo-controller's status write, 422 Invalid (%s): the status "+
				"breaks the CRD's schema (a reason that is not one CamelCase word, say); demo-controller's log has the "+
				"server's words", e)
		}
	}
	return ""
}

// ex09StatusWrites returns demo-controller's requests to write the status of
// a Greeting (through /status, or through the Greeting itself) so far.
func ex09StatusWrites(t *testing.T, ns, name string) []auditEvent {
	t.Helper()
	return auditEvents(t, ex09User, ns, func(e auditEvent) bool {
		return e.ObjectRef.Resource == "greetings" && e.ObjectRef.Name == name && isWrite(e)
	})
}

// ex09Fence changes the spec of another Greeting and waits until its status
// follows. demo-controller has one worker, and one watch carries every
// Greeting's events in order: once the fence's status is written, every
// event about other Greetings from before the fence's change has been
// handled.
func ex09Fence(t *testing.T, p *process, c dynamic.ResourceInterface, to string) {
	t.Helper()
	obj, err := c.Patch(context.Background(), "fence", types.MergePatchType, []byte(`{"spec":{"to":"`+to+`"}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ex09WaitFor(t, p, c, "fence", "its status never followed a change of its spec (the fence that tells that demo-controller has handled what came before)",
		func(s ex09Status) bool { return s.observedGeneration == obj.GetGeneration() && s.ready != nil })
}

// demo-controller, with the manifest's rights, writes each Greeting's status:
// Ready and observedGeneration, through /status, once per change, and never
// for its own write, a label or an annotation; a racing writer's condition
// stays; kubectl shows a READY column.
func TestExercise09Status(t *testing.T) {
	started := time.Now()
	ex09ApplyCRD(t, ex09ReadCRD(t), greetingsGVR)
	if out, err := manifestOnce(); err != nil {
		t.Fatalf("kubectl create -f demo-controller.yaml: %v\n%s", err, out)
	}
	canI := func(verb, subresource string) string {
		out, _ := kubectl(adminKube, "auth", "can-i", verb, "greetings.demo.example.com", "--subresource="+subresource, "--all-namespaces", "--as="+ex09User)
		return strings.TrimSpace(out)
	}
	if canI("update", "status") != "yes" && canI("patch", "status") != "yes" {
		t.Errorf("demo-controller's ServiceAccount may neither update nor patch greetings/status: the ClusterRole in " +
			"demo-controller.yaml must grant the verb the status write uses (UpdateStatus: update; an apply or a patch: patch), " +
			"on resource greetings/status")
	}
	for _, verb := range []string{"update", "patch", "delete"} {
		if canI(verb, "") != "no" {
			t.Errorf("demo-controller's ServiceAccount may %s greetings: the controller writes a Greeting's status only, through "+
				"/status (the resource greetings/status); grant nothing more", verb)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	ctx := context.Background()
	ns := namespace(t, ex09Namespace)
	greetings := ex09Dynamic(t).Resource(greetingsGVR).Namespace(ns)
	configMaps := admin.CoreV1().ConfigMaps(ns)
	create := func(name string, spec map[string]any) *unstructured.Unstructured {
		t.Helper()
		obj, err := greetings.Create(ctx, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "demo.example.com/v1alpha1",
			"kind": "Greeting", "metadata": map[string]any{"name": name}, "spec": spec}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return obj
	}
	create("fence", map[string]any{"to": "Fence"})
	p := startController(t, serviceAccountKubeconfig(t, "demo-controller", "demo-controller"), "--namespace="+ns)
	ex09WaitFor(t, p, greetings, "fence", "it was there when demo-controller started, and has no Ready condition",
		func(s ex09Status) bool { return s.ready != nil })

	// Created: one status write, Ready True, observedGeneration 1.
	at := time.Now()
	create("hello", map[string]any{"to": "Ada"})
	first, took := ex09WaitFor(t, p, greetings, "hello", "created, its ConfigMap made, and its status should say Ready True, observedGeneration 1",
		func(s ex09Status) bool { return s.ready != nil && s.observedGeneration == 1 })
	if first.ready.Status != metav1.ConditionTrue {
		t.Fatalf("Greeting hello was created and its ConfigMap made; its status says %s, want Ready True", first)
	}
	t.Logf("a new Greeting's status said Ready True, observedGeneration 1, %v after it was created", took.Round(time.Millisecond))
	if cm, err := configMaps.Get(ctx, "greeting-hello", metav1.GetOptions{}); err != nil || cm.Data["greeting"] != "Hello, Ada" {
		t.Fatalf("Greeting hello's status says Ready True, but its ConfigMap greeting-hello is %v (%v)", cm.Data, err)
	}
	fences, conflicts := 0, 0
	// writes checks the requests to write hello's status since the last
	// call: one if the status changed (two at most: the second, from a cache
	// that had not yet seen the first, repeats it; with the resourceVersion
	// it would be refused with 409, which is not counted), none otherwise.
	counted, repeats := 0, 0
	writes := func(what string, changed bool) {
		t.Helper()
		fences++
		ex09Fence(t, p, greetings, "Fence"+strings.Repeat("e", fences))
		got := ex09StatusWrites(t, ns, "hello")
		var accepted []auditEvent
		for _, e := range got {
			if e.ResponseStatus == nil || e.ResponseStatus.Code != 409 {
				accepted = append(accepted, e)
			}
		}
		want := map[bool]string{true: "1", false: "0"}[changed]
		if n := len(accepted) - counted; changed && n != 1 && n != 2 || !changed && n != 0 {
			t.Fatalf("after %s, demo-controller made %d more requests to write Greeting hello's status (not counting "+
				"those answered 409 Conflict), want %s: write the status only when it changes (meta.SetStatusCondition "+
				"says whether the condition changed; compare observedGeneration too); the write's own event, a label or "+
				"an annotation change nothing in it, and a write that changes nothing is still a request. Its requests, "+
				"from the API server's audit log:\n%s", what, n, want, strings.Join(eventLines(got), "\n"))
		} else if n == 2 {
			repeats++
		}
		counted = len(accepted)
		conflicts = len(got) - len(accepted)
		for _, e := range got {
			if e.ObjectRef.Subresource != "status" {
				t.Fatalf("demo-controller wrote Greeting hello's status through the Greeting itself (%s), not /status: "+
					"with the status subresource, the API server ignores the status there", e)
			}
		}
	}
	writes("the Greeting was created and its status said so", true)
	t.Logf("creating a Greeting: %v to Ready True, one status write", time.Since(at).Round(time.Millisecond))

	// A label, an annotation: no write.
	for _, patch := range []string{`{"metadata":{"labels":{"team":"blue"}}}`, `{"metadata":{"annotations":{"note":"hi"}}}`} {
		if _, err := greetings.Patch(ctx, "hello", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	writes("a label and an annotation were added to it", false)
	if s := ex09Read(t, greetings, "hello"); s.generation != 1 {
		t.Errorf("a label and an annotation raised the Greeting's generation to %d", s.generation)
	}

	// The spec changes: generation 2, and observedGeneration follows, with
	// one write; Ready stays True, so its lastTransitionTime stays.
	changed, err := greetings.Patch(ctx, "hello", types.MergePatchType, []byte(`{"spec":{"language":"fr"}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if changed.GetGeneration() != 2 {
		t.Fatalf("a change of the spec raised generation to %d, want 2", changed.GetGeneration())
	}
	second, took := ex09WaitFor(t, p, greetings, "hello", "its spec changed (generation 2); its status should follow, observedGeneration 2",
		func(s ex09Status) bool { return s.observedGeneration == 2 })
	t.Logf("after a change of the spec, observedGeneration followed in %v", took.Round(time.Millisecond))
	switch cm, err := configMaps.Get(ctx, "greeting-hello", metav1.GetOptions{}); {
	case err != nil || cm.Data["greeting"] != "Bonjour, Ada":
		t.Fatalf("Greeting hello's status says observedGeneration 2 (language fr), but its ConfigMap holds %v (%v)", cm.Data, err)
	case second.ready == nil || second.ready.Status != metav1.ConditionTrue:
		t.Fatalf("after a change of the spec: %s, want Ready True", second)
	case !second.ready.LastTransitionTime.Equal(&first.ready.LastTransitionTime):
		t.Errorf("Ready stayed True, and its lastTransitionTime moved from %s to %s: it says when the status last "+
			"changed (True, False), and stays with a new reason, message or observedGeneration; meta.SetStatusCondition keeps it",
			first.ready.LastTransitionTime.UTC().Format(time.RFC3339), second.ready.LastTransitionTime.UTC().Format(time.RFC3339))
	}
	writes("the spec changed once", true)
	t.Logf("%d status writes answered 409 Conflict so far, %d repeated without a resourceVersion (a ConfigMap's event "+
		"that brought the key back before the cache had the status write)", conflicts, repeats)

	// The ConfigMap deleted: put back, and the status, still true, unwritten.
	if err := configMaps.Delete(ctx, "greeting-hello", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var cm *corev1.ConfigMap
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, lineTimeout, true, func(ctx context.Context) (bool, error) {
		cm, err = configMaps.Get(ctx, "greeting-hello", metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatalf("Greeting hello's ConfigMap was deleted, and demo-controller did not put it back within %v. Its generation "+
			"did not change, and its observedGeneration says so: a controller that skips a Greeting whose generation it has "+
			"observed never puts back a deleted child. Decide from the child too, every time", lineTimeout)
	}
	if cm.Data["greeting"] != "Bonjour, Ada" {
		t.Errorf("Greeting hello's ConfigMap was put back with %v", cm.Data)
	}
	writes("its ConfigMap was deleted and put back", false)

	// A status changed by hand (as kubectl patch --subresource=status
	// would): written back, once, from the cache; another writer's
	// condition added: nothing written.
	byHand := func(change func(conditions []any) []any) {
		t.Helper()
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			obj, err := greetings.Get(ctx, "hello", metav1.GetOptions{})
			if err != nil {
				return err
			}
			conditions, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
			_ = unstructured.SetNestedSlice(obj.Object, change(conditions), "status", "conditions")
			_, err = greetings.UpdateStatus(ctx, obj, metav1.UpdateOptions{FieldManager: "by-hand"})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	withoutReady := func(conditions []any) []any {
		var kept []any
		for _, c := range conditions {
			if m, ok := c.(map[string]any); !ok || m["type"] != "Ready" {
				kept = append(kept, c)
			}
		}
		return kept
	}
	byHand(func(conditions []any) []any {
		return append(withoutReady(conditions), map[string]any{"type": "Ready", "status": "False", "reason": "SetByHand",
			"message": "set by hand", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)})
	})
	repaired, took := ex09WaitFor(t, p, greetings, "hello", "someone set its Ready to False by hand, and its ConfigMap says "+
		"what its spec asks: its status should say Ready True again. Their write is an update event of the Greeting: "+
		"compare with the status in the cache, not with what you wrote last",
		func(s ex09Status) bool { return s.ready != nil && s.ready.Status == metav1.ConditionTrue })
	t.Logf("Ready set to False by hand: written back to True in %v", took.Round(time.Millisecond))
	if repaired.observedGeneration != 2 {
		t.Errorf("after its Ready was written back: %s, want observedGeneration 2", repaired)
	}
	writes("someone set its Ready to False by hand", true)
	byHand(withoutReady)
	_, took = ex09WaitFor(t, p, greetings, "hello", "someone removed its Ready condition by hand: its status should say "+
		"Ready True again", func(s ex09Status) bool { return s.ready != nil && s.ready.Status == metav1.ConditionTrue })
	t.Logf("Ready removed by hand: written back in %v", took.Round(time.Millisecond))
	writes("someone removed its Ready condition by hand", true)
	byHand(func(conditions []any) []any {
		return append(conditions, map[string]any{"type": "Reviewed", "status": "True", "reason": "ByHand",
			"message": "another writer's condition", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)})
	})
	writes("someone added a condition of their own by hand, which changes nothing of Ready", false)

	// A racing writer adds its own condition while demo-controller writes:
	// its condition stays, and Ready follows each spec.
	conflictsNow := func() int {
		n := 0
		for _, e := range ex09StatusWrites(t, ns, "hello") {
			if e.ResponseStatus != nil && e.ResponseStatus.Code == 409 {
				n++
			}
		}
		return n
	}
	langs := []string{"de", "es", "en", "fr", "de", "es", "en", "fr"} // fr last
	var last int64
	for i, language := range langs {
		changed, err := greetings.Patch(ctx, "hello", types.MergePatchType, []byte(`{"spec":{"language":"`+language+`"}}`), metav1.PatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		last = changed.GetGeneration()
		obj := changed // at once: before demo-controller has written the status for this spec, most often
		err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if obj == nil {
				if obj, err = greetings.Get(ctx, "hello", metav1.GetOptions{}); err != nil {
					return err
				}
			}
			conditions, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
			var kept []any
			for _, c := range conditions {
				if m, ok := c.(map[string]any); !ok || m["type"] != "Reviewed" {
					kept = append(kept, c)
				}
			}
			kept = append(kept, map[string]any{"type": "Reviewed", "status": "True", "reason": "Round" + fmt.Sprint(i),
				"message": "another writer's condition", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)})
			_ = unstructured.SetNestedSlice(obj.Object, kept, "status", "conditions")
			_, err = greetings.UpdateStatus(ctx, obj, metav1.UpdateOptions{FieldManager: "reviewer"})
			obj = nil
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	final, _ := ex09WaitFor(t, p, greetings, "hello", fmt.Sprintf("its spec changed %d times (generation %d) while another writer wrote its own condition", len(langs), last),
		func(s ex09Status) bool { return s.observedGeneration == last })
	if meta.FindStatusCondition(final.conditions, "Reviewed") == nil || meta.FindStatusCondition(final.conditions, "Reviewed").Reason != fmt.Sprint("Round", len(langs)-1) {
		t.Errorf("another writer's condition Reviewed, written last as Round%d, is %v: demo-controller's status write dropped it. "+
			"Change only the Ready condition (meta.SetStatusCondition on the conditions there), and write with the resourceVersion "+
			"of the Greeting you read: a 409 Conflict then says someone wrote meanwhile, and the retry starts from their write", len(langs)-1, meta.FindStatusCondition(final.conditions, "Reviewed"))
	}
	if final.ready == nil || final.ready.Status != metav1.ConditionTrue {
		t.Errorf("after the race: %s, want Ready True", final)
	}
	if cm, err := configMaps.Get(ctx, "greeting-hello", metav1.GetOptions{}); err != nil || cm.Data["greeting"] != "Bonjour, Ada" {
		t.Errorf("after the race, the status says observedGeneration %d, and the ConfigMap holds %v, want Bonjour, Ada (language fr) (%v)", final.observedGeneration, cm.Data, err)
	}
	t.Logf("%d spec changes, each followed by another writer's status write: %d of demo-controller's status writes "+
		"answered 409 Conflict, retried; the other writer's condition kept", len(langs), conflictsNow()-conflicts)

	// Not ours: a ConfigMap of that name made by someone else.
	if _, err := configMaps.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "greeting-taken"}, Data: map[string]string{"x": "y"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	create("taken", map[string]any{"to": "Ada"})
	taken, _ := ex09WaitFor(t, p, greetings, "taken", "its ConfigMap's name is taken by a ConfigMap it does not control; its status should say Ready False",
		func(s ex09Status) bool { return s.ready != nil && s.observedGeneration == 1 })
	if taken.ready.Status != metav1.ConditionFalse || !strings.Contains(taken.ready.Message, "greeting-taken") {
		t.Errorf("Greeting taken, whose ConfigMap's name is taken by another's: %s; want Ready False, with a reason and a message naming the ConfigMap", taken)
	}

	// A name too long for its ConfigMap: Ready False, with the server's words.
	long := strings.Repeat("a", 250)
	create(long, map[string]any{"to": "Ada"})
	tooLong, _ := ex09WaitFor(t, p, greetings, long, "its ConfigMap's name (greeting-<its name>) is too long; its status should say Ready False",
		func(s ex09Status) bool { return s.ready != nil && s.observedGeneration == 1 })
	if tooLong.ready.Status != metav1.ConditionFalse || !strings.Contains(tooLong.ready.Message, "must be no more than 253") {
		t.Errorf("Greeting %s…, whose ConfigMap's name is too long: %s; want Ready False, with the API server's words", long[:10], tooLong)
	}

	// kubectl get greetings shows a READY column.
	out, err := kubectl(adminKube, "get", "greetings", "-n", ns, "-o", "wide")
	if err != nil {
		t.Fatalf("kubectl get greetings: %v\n%s", err, out)
	}
	header := strings.Fields(strings.SplitN(out, "\n", 2)[0])
	readyAt := -1
	for i, h := range header {
		if h == "READY" {
			readyAt = i
		}
	}
	rows := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		if f := strings.Fields(line); len(f) > 0 {
			rows[f[0]] = f
		}
	}
	switch {
	case readyAt < 0:
		t.Errorf("kubectl get greetings shows no READY column:\n%s\nAdd it to the CRD's version: additionalPrinterColumns, "+
			"name Ready, type string, jsonPath .status.conditions[?(@.type==\"Ready\")].status", out)
	case len(rows["hello"]) <= readyAt || rows["hello"][readyAt] != "True" || len(rows["taken"]) <= readyAt || rows["taken"][readyAt] != "False":
		t.Errorf("kubectl get greetings shows READY, but not True for hello and False for taken:\n%s", out)
	}
	t.Logf("kubectl get greetings -o wide:\n%s", out)
	t.Logf("%v in all", time.Since(started).Round(100*time.Millisecond))
}
