//go:build exercise

// The test of exercise 9 (exercises/09-status/README.md). It is not part of
// the project's tests: copy it into the project's root and run it with the
// exercise tag, as the exercise's README says.

package main

import (
	"bytes"
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
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"demo-controller/internal/fakeapi"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/yaml"
)

// ex09Wait bounds each wait: the API server below answers at once, so a
// status that has not come within it is not coming.
const ex09Wait = 5 * time.Second

// ex09CRD is the Greeting's CRD, to which the task adds the status.
const ex09CRD = "exercises/07-crd/greeting-crd.yaml"

// The CRD has a status subresource, declares the status, and shows a READY
// column; the ClusterRole lets demo-controller write the status, and
// nothing more of a Greeting. Only the end-to-end test applies the CRD to a
// real API server; this reads what the task asks for.
func TestExercise09CRD(t *testing.T) {
	data, err := os.ReadFile(ex09CRD)
	if err != nil {
		t.Fatal(err)
	}
	var crd map[string]any
	if err := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096).Decode(&crd); err != nil {
		t.Fatalf("%s is not YAML that kubectl can read: %v", ex09CRD, err)
	}
	versions, _, _ := unstructured.NestedSlice(crd, "spec", "versions")
	var version map[string]any
	for _, v := range versions {
		if v, ok := v.(map[string]any); ok && v["name"] == "v1alpha1" {
			version = v
		}
	}
	if version == nil {
		t.Fatalf("%s has no version v1alpha1", ex09CRD)
	}
	if _, found, _ := unstructured.NestedMap(version, "subresources", "status"); !found {
		t.Fatalf("%s: version v1alpha1 has no status subresource (subresources: {status: {}}). Without it, status is "+
			"part of the Greeting: UpdateStatus answers 404 Not Found, and a status written with the Greeting raises its "+
			"generation, so that observedGeneration never catches up (the task's measured figures)", ex09CRD)
	}
	status, _, _ := unstructured.NestedMap(version, "schema", "openAPIV3Schema", "properties", "status")
	og, _, _ := unstructured.NestedString(status, "properties", "observedGeneration", "type")
	conditions, _, _ := unstructured.NestedMap(status, "properties", "conditions")
	item, _, _ := unstructured.NestedMap(conditions, "items")
	switch {
	case status == nil:
		t.Fatalf("%s: the schema declares no status: the API server drops every field the schema does not declare, "+
			"so a status written is answered 200 OK and stored empty. Declare status, with observedGeneration and conditions", ex09CRD)
	case og != "integer":
		t.Fatalf("%s: the schema's status.observedGeneration has type %q, want integer (an int64, as metadata.generation)", ex09CRD, og)
	case conditions["type"] != "array" || item["type"] != "object":
		t.Fatalf("%s: the schema's status.conditions must be an array of objects (metav1.Condition: type, status, "+
			"reason, message, lastTransitionTime, observedGeneration)", ex09CRD)
	default:
		props, _, _ := unstructured.NestedMap(item, "properties")
		var missing []string
		for _, f := range []string{"type", "status", "reason", "message", "lastTransitionTime", "observedGeneration"} {
			if props[f] == nil {
				missing = append(missing, f)
			}
		}
		if len(missing) > 0 && item["x-kubernetes-preserve-unknown-fields"] != true {
			t.Fatalf("%s: a condition in the schema does not declare %s: the API server would drop them from every "+
				"condition written", ex09CRD, strings.Join(missing, ", "))
		}
		if conditions["x-kubernetes-list-type"] != "map" {
			t.Logf("%s: status.conditions is not x-kubernetes-list-type: map (keyed on type): fine with UpdateStatus; "+
				"with server-side apply, each apply would replace the whole list, other writers' conditions too", ex09CRD)
		}
	}
	columns, _, _ := unstructured.NestedSlice(version, "additionalPrinterColumns")
	ready := false
	for _, c := range columns {
		if c, ok := c.(map[string]any); ok && strings.EqualFold(fmt.Sprint(c["name"]), "ready") {
			path := strings.ReplaceAll(strings.ReplaceAll(fmt.Sprint(c["jsonPath"]), " ", ""), "'", `"`)
			ready = true
			if path != `.status.conditions[?(@.type=="Ready")].status` {
				t.Fatalf("%s: the column Ready has jsonPath %s; want the status of the Ready condition: "+
					`.status.conditions[?(@.type=="Ready")].status`, ex09CRD, c["jsonPath"])
			}
		}
	}
	if !ready {
		t.Fatalf("%s: kubectl get greetings shows no READY column: add additionalPrinterColumns to version v1alpha1, "+
			`with name Ready, type string, jsonPath .status.conditions[?(@.type=="Ready")].status`, ex09CRD)
	}

	// The ClusterRole: the status, through /status, and nothing more. Which
	// verb the status write needs, TestExercise09Ready checks against the
	// requests demo-controller sends.
	grants, _ := fakeapi.Grants(t, "demo-controller.yaml")
	if status := grants["demo.example.com/greetings/status"]; !slices.Contains(status, "update") && !slices.Contains(status, "patch") {
		t.Fatalf("demo-controller.yaml's ClusterRole grants %v on greetings/status: the status write needs update "+
			"(UpdateStatus) or patch (an apply or a patch to /status), on the resource greetings/status", status)
	}
	if extra := slices.DeleteFunc(slices.Clone(grants["demo.example.com/greetings"]), func(v string) bool { return v == "list" || v == "watch" }); len(extra) > 0 {
		t.Fatalf("demo-controller.yaml's ClusterRole grants %v on greetings: the controller writes a Greeting's status "+
			"only, through /status (greetings/status); on greetings, list and watch are enough", extra)
	}
}

// A Greeting's life, and its status at each step: Ready and observedGeneration
// written through /status once per change, never for the write's own echo,
// a label or an annotation; lastTransitionTime kept while Ready keeps its
// status; a ConfigMap deleted is put back; a name taken, a name too long;
// and no write at all after a restart.
func TestExercise09Ready(t *testing.T) {
	if ex09Child(t) {
		return
	}
	api := newEx09API(t)
	// hello was made by an earlier run: Ready True since 2020, for
	// generation 1; its spec has changed since (generation 2).
	api.putGreeting("default", "hello", map[string]any{"to": "Ada"})
	api.putConfigMap("default", "greeting-hello", api.owner("default", "hello"), "Hello, Ada")
	api.setStatus("default", "hello", 1, ex09Condition("Ready", "True", "ConfigMapReady", "made", ex09Since))
	api.setSpec("default", "hello", map[string]any{"to": "Ada", "language": "fr"})
	// taken's ConfigMap's name is taken by someone else's ConfigMap; an
	// earlier run said so, since 2020.
	api.putConfigMap("default", "greeting-taken", nil, "someone else's")
	api.putGreeting("default", "taken", map[string]any{"to": "Ada"})
	api.setStatus("default", "taken", 0, ex09Condition("Ready", "False", "NotOurs", "taken", ex09Since))
	api.failStatusWrites["taken"] = 1 // the first write of its status: the retry must write it
	run := ex09Start(t, api, "")

	fakeapi.Step("a Greeting that was Ready for generation 1, whose spec changed while demo-controller was down")
	s := api.waitForStatus(t, run, "default", "hello", "its spec changed (generation 2, language fr) while demo-controller was down: "+
		"its ConfigMap must say Bonjour, Ada, and its status observedGeneration 2", func(s ex09GreetingStatus) bool { return s.observedGeneration == 2 })
	api.expectReady(t, s, "default", "hello", "True", "its ConfigMap was made for generation 2")
	if !s.ready.LastTransitionTime.Equal(&metav1.Time{Time: ex09Since}) {
		t.Fatalf("Greeting default/hello was Ready True since %s, and is Ready True still, for a new generation: its "+
			"lastTransitionTime must stay %s, and it is now %s. lastTransitionTime says when the condition's status last "+
			"changed (False to True, True to False), not when it was last written. meta.SetStatusCondition, called on the "+
			"conditions read from the Greeting, keeps it while the status stays, whatever time the condition you pass "+
			"carries; a condition that replaces the old one (a new list, or the old one removed first) gets a new one",
			ex09Since.Format(time.RFC3339), ex09Since.Format(time.RFC3339), s.ready.LastTransitionTime.UTC().Format(time.RFC3339))
	}
	api.fence(t, run)
	api.expectStatusWrites(t, "default", "hello", 1, "its spec had changed once, and its status was written: its echo, "+
		"the write's own event, changes nothing in it")

	fakeapi.Step("labels and annotations")
	api.setMeta("default", "hello", `{"metadata":{"labels":{"team":"blue"}}}`)
	api.setMeta("default", "hello", `{"metadata":{"annotations":{"note":"hi"}}}`)
	api.fence(t, run)
	api.expectStatusWrites(t, "default", "hello", 1, "a label and an annotation were added, which change neither its "+
		"spec (its generation stays 2) nor its ConfigMap")
	if updated := run.Matching(0, `"Greeting updated" greeting="default/hello"`); len(updated) > 0 {
		t.Fatalf("demo-controller logged %s, although Greeting default/hello's spec has not changed since it was found: "+
			"its own status write, a label and an annotation are updates of the Greeting, not of its spec. Log "+
			"\"Greeting updated\" when its generation changes, not its resourceVersion", updated[0])
	}

	fakeapi.Step("the spec changes")
	api.setSpec("default", "hello", map[string]any{"to": "Ada", "language": "de"})
	api.waitFor(t, run, `demo-controller did not log "Greeting updated" for Greeting default/hello, whose spec changed `+
		`(language de)`, func() bool {
		return len(run.Matching(0, `"Greeting updated" greeting="default/hello" to="Ada" language="de"`)) == 1
	})
	s = api.waitForStatus(t, run, "default", "hello", "its spec changed (generation 3, language de): its status must say observedGeneration 3",
		func(s ex09GreetingStatus) bool { return s.observedGeneration == 3 })
	api.expectReady(t, s, "default", "hello", "True", "its ConfigMap was updated for generation 3")
	api.fence(t, run)
	api.expectStatusWrites(t, "default", "hello", 2, "its spec changed once more")

	fakeapi.Step("its ConfigMap is deleted")
	api.deleteConfigMap("default", "greeting-hello")
	api.waitFor(t, run, "Greeting default/hello's ConfigMap was deleted; demo-controller did not put it back. Its spec did "+
		"not change, so neither did its generation, and observedGeneration already says 3: a controller that returns early "+
		"when observedGeneration == generation never puts back a child someone deleted. Decide from the spec and the "+
		"child every time; compare only to choose whether to write", func() bool { return api.configMapText("default", "greeting-hello") == "Hallo, Ada" })
	api.fence(t, run)
	api.expectStatusWrites(t, "default", "hello", 2, "its ConfigMap was deleted and put back: Ready was True, and is True")

	fakeapi.Step("someone changes its status by hand")
	api.setStatus("default", "hello", -1, ex09Condition("Ready", "False", "SetByHand", "set by hand", time.Now()))
	s = api.waitForStatus(t, run, "default", "hello", "someone set its Ready condition to False by hand (kubectl patch "+
		"--subresource=status), and its ConfigMap says what its spec asks: its status must say Ready True again. That "+
		"write is an update event of the Greeting: compare what its status should say with what the Greeting in the "+
		"cache says, not with what you wrote last", func(s ex09GreetingStatus) bool { return s.ready != nil && s.ready.Status == "True" })
	api.expectReady(t, s, "default", "hello", "True", "its ConfigMap says what its spec asks")
	api.update("greetings", "default", "hello", func(obj map[string]any) {
		conditions, _, _ := unstructured.NestedSlice(obj, "status", "conditions")
		conditions = slices.DeleteFunc(conditions, func(c any) bool { m, _ := c.(map[string]any); return m["type"] == "Ready" })
		_ = unstructured.SetNestedSlice(obj, conditions, "status", "conditions")
	})
	s = api.waitForStatus(t, run, "default", "hello", "someone removed its Ready condition by hand: its status must say "+
		"Ready True again", func(s ex09GreetingStatus) bool { return s.ready != nil })
	api.expectReady(t, s, "default", "hello", "True", "its ConfigMap says what its spec asks")
	api.setStatus("default", "hello", -1, ex09Condition("Reviewed", "True", "Seen", "another writer's condition", ex09Since))
	api.fence(t, run)
	api.expectStatusWrites(t, "default", "hello", 4, "someone set its Ready to False, then removed it, by hand: each "+
		"was written back once; then another writer added its own condition, which changes nothing of Ready")

	fakeapi.Step("its ConfigMap loses its label and is edited, and its spec changes")
	api.update("configmaps", "default", "greeting-hello", func(obj map[string]any) {
		unstructured.RemoveNestedField(obj, "metadata", "labels")
		_ = unstructured.SetNestedField(obj, "edited", "data", "greeting")
	})
	api.setSpec("default", "hello", map[string]any{"to": "Ada", "language": "es"})
	s = api.waitForStatus(t, run, "default", "hello", "its ConfigMap lost its label and was edited, and its spec changed "+
		"(generation 4): its ConfigMap must say Hola, Ada, and its status observedGeneration 4",
		func(s ex09GreetingStatus) bool { return s.observedGeneration == 4 })
	api.expectReady(t, s, "default", "hello", "True", "its ConfigMap was written back for generation 4")
	api.fence(t, run)
	api.expectStatusWrites(t, "default", "hello", 5, "its spec changed once more")

	fakeapi.Step("a Greeting whose ConfigMap's name is taken")
	s = api.waitForStatus(t, run, "default", "taken", "a ConfigMap it does not control has its ConfigMap's name: its "+
		"status must say so, Ready False, observedGeneration 1", func(s ex09GreetingStatus) bool { return s.observedGeneration == 1 })
	api.expectReady(t, s, "default", "taken", "False", "the ConfigMap greeting-taken is not its own")
	if !strings.Contains(s.ready.Message, "greeting-taken") {
		t.Fatalf("Greeting default/taken: Ready False, message %q; let the message name the ConfigMap (greeting-taken), "+
			"for whoever reads kubectl get greeting taken -o yaml", s.ready.Message)
	}
	if n := api.eventsAbout("taken"); n != 1 {
		t.Fatalf("demo-controller wrote %d Events about Greeting default/taken, whose ConfigMap's name is taken: "+
			"exercise 8 reports it once. Your status write changed the Greeting's resourceVersion, and not its "+
			"generation: let exercise 8's \"reported already\" compare the generation", n)
	}
	if !s.ready.LastTransitionTime.Equal(&metav1.Time{Time: ex09Since}) {
		t.Fatalf("Greeting default/taken was Ready False since %s, and is Ready False still: its lastTransitionTime must "+
			"stay, and it is now %s. It says when the condition's status last changed, not when it was last written: "+
			"meta.SetStatusCondition keeps it unless the status changes", ex09Since.Format(time.RFC3339), s.ready.LastTransitionTime.UTC().Format(time.RFC3339))
	}

	fakeapi.Step("a Greeting whose ConfigMap's name would be too long")
	long := strings.Repeat("a", 250)
	api.putGreeting("default", long, map[string]any{"to": "Ada"})
	s = api.waitForStatus(t, run, "default", long, "its ConfigMap's name, greeting-"+long[:5]+"… (259 characters), is refused "+
		"by the API server (422 Invalid): its status must say so, Ready False", func(s ex09GreetingStatus) bool { return s.ready != nil })
	api.expectReady(t, s, "default", long, "False", "the API server refused its ConfigMap's name")
	if !strings.Contains(s.ready.Message, "must be no more than 253 characters") {
		t.Fatalf("Greeting default/%s…: Ready False, message %q; let the message carry the API server's words "+
			"(must be no more than 253 characters)", long[:5], s.ready.Message)
	}

	fakeapi.Step("the ConfigMap that took the name is gone, and the Greeting's spec changes")
	api.deleteConfigMap("default", "greeting-taken")
	api.setSpec("default", "taken", map[string]any{"to": "Ada", "language": "es"})
	s = api.waitForStatus(t, run, "default", "taken", "the ConfigMap that had its ConfigMap's name is gone, and its spec "+
		"changed (generation 2): its ConfigMap must be made, and its status say Ready True, observedGeneration 2",
		func(s ex09GreetingStatus) bool { return s.observedGeneration == 2 })
	api.expectReady(t, s, "default", "taken", "True", "its ConfigMap was made")
	if s.ready.LastTransitionTime.Time.Before(time.Now().Add(-time.Minute)) {
		t.Fatalf("Greeting default/taken's Ready went from False to True, and its lastTransitionTime stayed %s: it "+
			"must move when the status changes (meta.SetStatusCondition sets it then)", s.ready.LastTransitionTime.UTC().Format(time.RFC3339))
	}

	fakeapi.Step("demo-controller restarts")
	run.Stop(t)
	api.Lock()
	clear(api.lastStatusWrite) // a new run: a write that changes nothing is no longer a stale cache's
	api.Unlock()
	before := api.statusWriteCount()
	run = ex09Start(t, api, "")
	api.fence(t, run)
	if got := api.statusWriteCount() - before; got != 1 { // the fence's
		t.Fatalf("demo-controller restarted, found every Greeting with its status as it should be, and wrote %d "+
			"status(es) besides the fence's: write a status only when it would change (%s)", got-1, api.statusWriteLines())
	}
	api.checkVerbs(t)
}

// observedGeneration is the generation of the Greeting the worker decided
// on and acted on, not of one read later: here the spec changes while
// demo-controller makes the ConfigMap.
func TestExercise09ObservedGenerationFromTheDecision(t *testing.T) {
	if ex09Child(t) {
		return
	}
	api := newEx09API(t)
	api.putGreeting("default", "race", map[string]any{"to": "Ada"})
	api.beforeConfigMapWrite = func(name string) {
		if name == "greeting-race" && api.generation("default", "race") == 1 {
			api.setSpec("default", "race", map[string]any{"to": "Ada", "language": "fr"})
			// A slow write: the new spec reaches demo-controller's cache
			// before the answer does, so that a read of the cache after
			// the write finds it.
			api.waitForWatchers("greetings")
			time.Sleep(200 * time.Millisecond)
		}
	}
	run := ex09Start(t, api, "")
	fakeapi.Step("the spec changes while demo-controller makes the ConfigMap for generation 1")
	s := api.waitForStatus(t, run, "default", "race", "its spec changed (generation 2) while its ConfigMap was being made "+
		"for generation 1: its status must end at observedGeneration 2", func(s ex09GreetingStatus) bool { return s.observedGeneration == 2 })
	api.expectReady(t, s, "default", "race", "True", "its ConfigMap was made for generation 2")
}

// Another writer changes the Greeting's status while demo-controller
// writes it: demo-controller's write is refused (409 Conflict), is retried,
// and the other writer's condition stays.
func TestExercise09Conflict(t *testing.T) {
	if ex09Child(t) {
		return
	}
	api := newEx09API(t)
	api.putGreeting("default", "shared", map[string]any{"to": "Ada"})
	api.setStatus("default", "shared", 0, ex09Condition("Reviewed", "True", "Seen", "another writer's condition", ex09Since))
	raced := false
	api.beforeStatusWrite = func(name string) {
		if name == "shared" && !raced {
			raced = true
			api.setStatus("default", "shared", -1, ex09Condition("Reviewed", "False", "SeenAgain", "another writer's condition, changed", ex09Since.Add(time.Hour)))
		}
	}
	run := ex09Start(t, api, "")
	fakeapi.Step("another writer changes the status just before demo-controller's first status write")
	s := api.waitForStatus(t, run, "default", "shared", "its status must end Ready True, observedGeneration 1, beside "+
		"another writer's condition", func(s ex09GreetingStatus) bool { return s.ready != nil && s.observedGeneration == 1 })
	api.expectReady(t, s, "default", "shared", "True", "its ConfigMap was made")
	reviewed := meta.FindStatusCondition(s.conditions, "Reviewed")
	switch {
	case reviewed == nil:
		t.Fatalf("another writer's condition Reviewed is gone from Greeting default/shared's status: demo-controller's "+
			"write replaced the conditions. Change only your own condition, in the conditions that are there "+
			"(meta.SetStatusCondition); conditions now: %s", ex09Conditions(s.conditions))
	case reviewed.Reason != "SeenAgain":
		t.Fatalf("another writer changed its condition Reviewed (reason SeenAgain) just before demo-controller's first "+
			"status write, and demo-controller's write put back what it had read before (reason %s): it wrote from a "+
			"copy older than the other writer's change, and without the resourceVersion that would have made the API "+
			"server refuse it (409 Conflict). Write the Greeting you read, with its resourceVersion (UpdateStatus does), "+
			"and on a 409 return the error: the key is retried, from the newer Greeting", reviewed.Reason)
	}
	fakeapi.Step("the status is written, and stays")
	api.fence(t, run)
	if n := api.conflicts("shared"); n == 0 {
		t.Logf("no status write of demo-controller's was refused with 409 Conflict: it wrote with no resourceVersion " +
			"(a patch, or an apply), and changed only its own condition: fine")
	}
}

// A ConfigMap the API server refuses for a while (500): the status never
// says Ready True before the ConfigMap is there.
func TestExercise09ReadyOnlyOnceMade(t *testing.T) {
	if ex09Child(t) {
		return
	}
	api := newEx09API(t)
	api.failCreates["greeting-flaky"] = 2
	api.putGreeting("default", "flaky", map[string]any{"to": "Ada"})
	run := ex09Start(t, api, "")
	fakeapi.Step("the API server refuses to create the ConfigMap twice (500), then accepts it")
	s := api.waitForStatus(t, run, "default", "flaky", "its ConfigMap was refused twice (500 Internal Server Error), then made: "+
		"its status must say Ready True", func(s ex09GreetingStatus) bool { return s.ready != nil && s.ready.Status == "True" })
	api.expectReady(t, s, "default", "flaky", "True", "its ConfigMap was made")
}

// ex09Reason is what metav1.Condition's documentation allows in a reason.
var ex09Reason = regexp.MustCompile(`^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`)

// ex09Since is a lastTransitionTime long past.
var ex09Since = time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)

// ex09Hello is the word each language says hello with, as exercise 8 has it.
var ex09Hello = map[string]string{"": "Hello", "en": "Hello", "fr": "Bonjour", "de": "Hallo", "es": "Hola"}

func ex09Condition(typ, status, reason, message string, since time.Time) map[string]any {
	return map[string]any{"type": typ, "status": status, "reason": reason, "message": message,
		"lastTransitionTime": since.UTC().Format(time.RFC3339)}
}

// ex09GreetingStatus is a Greeting's status, read from the test's API server.
type ex09GreetingStatus struct {
	generation, observedGeneration int64
	conditions                     []metav1.Condition
	ready                          *metav1.Condition
}

func (s ex09GreetingStatus) String() string {
	return fmt.Sprintf("generation %d, observedGeneration %d, conditions %s", s.generation, s.observedGeneration, ex09Conditions(s.conditions))
}

func ex09Conditions(conditions []metav1.Condition) string {
	if len(conditions) == 0 {
		return "none"
	}
	var out []string
	for _, c := range conditions {
		out = append(out, fmt.Sprintf("%s %s (reason %s, message %q, lastTransitionTime %s, observedGeneration %d)",
			c.Type, c.Status, c.Reason, c.Message, c.LastTransitionTime.UTC().Format(time.RFC3339), c.ObservedGeneration))
	}
	return strings.Join(out, "; ")
}

// ex09API is an API server (fakeapi.Server) that keeps Greetings as a
// kube-apiserver does with the task's CRD: generation raised by a change of
// the spec only; /status a subresource, where only the status is written,
// and the Greeting itself, where the status is ignored; a write carrying an
// old resourceVersion refused with 409 Conflict; a write that changes
// nothing answered, and nothing else. It serves ConfigMaps (create, get,
// update, merge patch, apply), Events, and pods (none), lists and watches.
// At each status write, it checks what the status says against the
// ConfigMap it has.
type ex09API struct {
	*fakeapi.Server
	url string // the front's: see newEx09API

	// Set before the run starts; called without the lock.
	beforeConfigMapWrite func(name string)
	beforeStatusWrite    func(name string)

	// The fields below need the server's lock.
	failCreates      map[string]int           // ConfigMap name: how many creates to answer 500
	failStatusWrites map[string]int           // Greeting name: how many status writes to answer 500
	specs            map[string]map[int64]any // Greeting namespace/name: generation: spec
	specsAt          map[string]map[int64]int // Greeting namespace/name: generation: the resourceVersion it came with
	flushed          map[string]int           // resource: the last event's resourceVersion sent on its watches
	// lastStatusWrite holds, by Greeting, the resourceVersion its status
	// write by demo-controller last gave it.
	lastStatusWrite map[string]any
	events          int // Events written, which it answers and does not keep
}

// ex09Request is what ex09API judges of a request. The server records
// each one (fakeapi.Request); its Note says what ex09API found: "changed"
// (a write that changed the object), "stale" (see write), or "generation
// N" (of a Greeting a GET answered).
type ex09Request struct {
	method, resource, namespace, name, subresource string
	code                                           int
	generation                                     int64
	changed, stale                                 bool
}

// ex09Served are the resources ex09API serves, each at its own group and
// version only (fakeapi.Kinds).
var ex09Served = []string{"greetings", "configmaps", "pods", "events"}

func newEx09API(t *testing.T) *ex09API {
	api := &ex09API{Server: fakeapi.New(t, ex09Served...), specs: map[string]map[int64]any{}, specsAt: map[string]map[int64]int{},
		failCreates: map[string]int{}, flushed: map[string]int{}, lastStatusWrite: map[string]any{}, failStatusWrites: map[string]int{}}
	api.Filter = api.get
	api.Write = api.write
	api.putGreeting("default", "fence", map[string]any{"to": "Fence"}) // see fence
	// In front of the server: the discovery of the Greetings' API group,
	// each resource at its own group only, the hooks, and a note of what
	// the watches have sent (waitForWatchers).
	front := httptest.NewServer(http.HandlerFunc(api.front))
	t.Cleanup(front.Close)
	api.url = front.URL
	return api
}

var ex09Path = regexp.MustCompile(`^/(api/v1|apis/demo\.example\.com/v1alpha1|apis/events\.k8s\.io/v1)(?:/namespaces/([^/]+))?/([^/]+)(?:/([^/]+))?(?:/([^/]+))?$`)

func (api *ex09API) front(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/apis/demo.example.com/v1alpha1" {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
			GroupVersion: "demo.example.com/v1alpha1", APIResources: []metav1.APIResource{
				{Name: "greetings", SingularName: "greeting", Namespaced: true, Kind: "Greeting", Verbs: metav1.Verbs{"get", "list", "watch", "create", "update", "patch", "delete"}},
				{Name: "greetings/status", Namespaced: true, Kind: "Greeting", Verbs: metav1.Verbs{"get", "update", "patch"}}}})
		return
	}
	m := ex09Path.FindStringSubmatch(r.URL.Path)
	if m == nil || !slices.Contains(ex09Served, m[3]) || fakeapi.Kinds[m[3]].GroupVersion().String() != strings.TrimPrefix(strings.TrimPrefix(m[1], "apis/"), "api/") {
		apiStatus(w, http.StatusNotFound, "NotFound", "the server could not find the requested resource")
		return
	}
	resource, name, sub := m[3], m[4], m[5]
	if r.Method != http.MethodGet && r.Method != http.MethodDelete {
		data, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(data))
		if r.Method == http.MethodPost {
			obj, _ := ex09Decode(data, r.Header.Get("Content-Type"))
			name, _, _ = unstructured.NestedString(obj, "metadata", "name")
		}
		if resource == "configmaps" && api.beforeConfigMapWrite != nil {
			api.beforeConfigMapWrite(name)
		}
		if resource == "greetings" && sub == "status" && api.beforeStatusWrite != nil {
			api.beforeStatusWrite(name)
		}
	}
	if q := r.URL.Query(); r.Method == http.MethodGet && name == "" && (q.Get("watch") == "true" || q.Get("watch") == "1") {
		w = ex09Watch{ResponseWriter: w, api: api, resource: resource}
	}
	api.ServeHTTP(w, r)
}

// ex09Watch notes the resourceVersion of each event a watch sends.
type ex09Watch struct {
	http.ResponseWriter
	api      *ex09API
	resource string
}

func (w ex09Watch) Write(p []byte) (int, error) {
	n, err := w.ResponseWriter.Write(p)
	var e struct {
		Object struct {
			Metadata struct{ ResourceVersion string }
		}
	}
	if json.Unmarshal(p, &e) == nil {
		rv, _ := strconv.Atoi(e.Object.Metadata.ResourceVersion)
		w.api.Lock()
		w.api.flushed[w.resource] = max(w.api.flushed[w.resource], rv)
		w.api.Unlock()
	}
	return n, err
}

func (w ex09Watch) Flush() { w.ResponseWriter.(http.Flusher).Flush() }

// ex09Decode reads a request's body: JSON, an apply configuration (YAML or
// JSON), or protobuf (client-go's typed clients' default for built-in types).
func ex09Decode(data []byte, contentType string) (map[string]any, error) {
	var body map[string]any
	switch contentType {
	case "application/apply-patch+yaml":
		data, _ = yaml.ToJSON(data)
	case "application/vnd.kubernetes.protobuf":
		obj, err := fakeapi.Decode(data)
		if err != nil {
			return nil, fmt.Errorf("the body is not a protobuf object: %v", err)
		}
		return fakeapi.Whole(obj).(map[string]any), nil
	}
	if err := json.Unmarshal(data, &body); err != nil {
		return nil, fmt.Errorf("the body is not JSON: %v", err)
	}
	return fakeapi.Whole(body).(map[string]any), nil
}

// ex09Status is an answer with a Status: a code, a reason, a message.
func ex09Status(code int, reason metav1.StatusReason, message string) (int, any) {
	return fakeapi.Status(&apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: int32(code), Reason: reason, Message: message}})
}

// ex09NotFound is the API server's 404 for an object.
func ex09NotFound(resource, name string) (int, any) {
	if resource == "greetings" {
		return ex09Status(404, metav1.StatusReasonNotFound, fmt.Sprintf("greetings.demo.example.com %q not found", name))
	}
	return ex09Status(404, metav1.StatusReasonNotFound, fmt.Sprintf("%s %q not found", strings.TrimSuffix(resource, "s"), name))
}

// get answers a GET of one object (the server's Filter), and notes the
// generation of a Greeting it answers. With the lock held.
func (api *ex09API) get(r *fakeapi.Request) (int, any) {
	if r.Verb != "get" {
		return 0, nil
	}
	current := api.ObjectLocked(r.Resource, r.Key())
	if current == nil {
		return ex09NotFound(r.Resource, r.Name)
	}
	if g, found, _ := unstructured.NestedInt64(current, "metadata", "generation"); found && r.Resource == "greetings" {
		r.Note = fmt.Sprintf("generation %d", g)
	}
	return 200, fakeapi.Copy(current)
}

// write serves one write of one object (the server's Write), with the lock
// held.
func (api *ex09API) write(r *fakeapi.Request) (int, any) {
	resource, ns, name, sub := r.Resource, r.Namespace, r.Name, r.Subresource
	key := r.Key()
	current := api.ObjectLocked(resource, key)
	if r.Verb == "delete" {
		if current == nil {
			return ex09NotFound(resource, name)
		}
		api.RemoveLocked(resource, ns, name)
		r.Note = "changed"
		return 200, map[string]any{"kind": "Status", "apiVersion": "v1", "status": "Success"}
	}
	body, err := ex09Decode(r.Body, r.ContentType)
	if err != nil {
		return ex09Status(http.StatusBadRequest, metav1.StatusReasonBadRequest, err.Error())
	}
	if r.Verb == "create" {
		if resource == "events" {
			regarding, _, _ := unstructured.NestedString(body, "regarding", "name")
			r.Name = regarding
			api.events++
			obj := fakeapi.Copy(body)
			fakeapi.SetMeta(obj, "name", fmt.Sprintf("event-%d", api.events))
			r.Note = "changed"
			return 201, obj
		}
		switch {
		case current != nil:
			return ex09Status(409, metav1.StatusReasonAlreadyExists, fmt.Sprintf("%s %q already exists", strings.TrimSuffix(resource, "s"), name))
		case len(name) > 253:
			return ex09Status(422, metav1.StatusReasonInvalid, fmt.Sprintf("ConfigMap %q is invalid: metadata.name: Invalid value: %q: must be no more than 253 characters", name, name))
		case api.failCreates[name] > 0:
			api.failCreates[name]--
			return ex09Status(500, metav1.StatusReasonInternalError, "Internal error occurred: etcdserver: request timed out")
		}
		api.createLocked(resource, ns, name, fakeapi.Copy(body))
		r.Note = "changed"
		return 201, fakeapi.Copy(api.ObjectLocked(resource, key))
	}
	// An update, a patch or an apply.
	if sub != "" && (resource != "greetings" || sub != "status") {
		return ex09Status(404, metav1.StatusReasonNotFound, "the server could not find the requested resource")
	}
	if sub == "status" && current != nil && api.failStatusWrites[name] > 0 {
		api.failStatusWrites[name]--
		return ex09Status(500, metav1.StatusReasonInternalError, "Internal error occurred: etcdserver: request timed out")
	}
	if current == nil {
		if r.Verb == "apply" && resource == "configmaps" && sub == "" {
			if uid, _, _ := unstructured.NestedString(body, "metadata", "uid"); uid != "" {
				return ex09Status(409, metav1.StatusReasonConflict, fmt.Sprintf("Operation cannot be fulfilled on configmaps %q: Precondition failed: UID in precondition: %s, UID in object meta: ", name, uid))
			}
			api.createLocked(resource, ns, name, fakeapi.Copy(body))
			r.Note = "changed"
			return 201, fakeapi.Copy(api.ObjectLocked(resource, key))
		}
		return ex09NotFound(resource, name)
	}
	var next map[string]any
	rv, _, _ := unstructured.NestedString(body, "metadata", "resourceVersion")
	uid, _, _ := unstructured.NestedString(body, "metadata", "uid")
	switch {
	case r.Verb == "update":
		if rv == "" && resource == "greetings" {
			return ex09Status(422, metav1.StatusReasonInvalid, fmt.Sprintf("Greeting.demo.example.com %q is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update", name))
		}
		next = body
	case r.ContentType == "application/merge-patch+json" || r.ContentType == "application/strategic-merge-patch+json" && resource == "configmaps":
		next = fakeapi.MergePatch(fakeapi.Copy(current), body).(map[string]any)
	case r.Verb == "apply":
		next = fakeapi.ApplyMerge(fakeapi.Copy(current), body, map[string]string{"conditions": "type"})
	default:
		return ex09Status(415, metav1.StatusReasonUnsupportedMediaType, fmt.Sprintf("the body of type %s is not served by this test's API server, "+
			"which takes UpdateStatus, a merge patch (types.MergePatchType) or an apply", r.ContentType))
	}
	if rv != "" && rv != fakeapi.Meta(current, "resourceVersion") {
		return ex09Status(409, metav1.StatusReasonConflict, fmt.Sprintf("Operation cannot be fulfilled on %s %q: the object has been modified; please apply your changes to the latest version and try again",
			map[bool]string{true: "greetings.demo.example.com", false: resource}[resource == "greetings"], name))
	}
	if uid != "" && uid != fakeapi.Meta(current, "uid") {
		return ex09Status(409, metav1.StatusReasonConflict, fmt.Sprintf("Operation cannot be fulfilled on %s %q: Precondition failed: UID in precondition: %s", resource, name, uid))
	}
	// What the server keeps: identity, and for a Greeting, the status
	// (written through the Greeting itself) or all but the status (/status).
	next = fakeapi.Updated(current, next, sub, resource == "greetings")
	gvk := fakeapi.Kinds[resource]
	next["kind"], next["apiVersion"] = gvk.Kind, gvk.GroupVersion().String()
	if reflect.DeepEqual(next, current) {
		// A status write that repeats the controller's own last one, with
		// nothing written to the Greeting in between: made from a cache that
		// had not yet seen the first (another event brought the key back).
		// With the resourceVersion, it would have been a 409.
		if sub == "status" && api.lastStatusWrite[key] == fakeapi.Meta(current, "resourceVersion") {
			r.Note = "stale"
		}
		return 200, fakeapi.Copy(current) // no change: no new resourceVersion, no event
	}
	r.Note = "changed"
	api.storeLocked(resource, current, next)
	if sub == "status" {
		api.lastStatusWrite[key] = fakeapi.Meta(next, "resourceVersion")
		api.checkStatus(ns, name, next)
	}
	return 200, fakeapi.Copy(next)
}

// storeLocked stores next, a change of current, and for a Greeting whose
// generation it raises, notes the spec that generation asks for.
func (api *ex09API) storeLocked(resource string, current, next map[string]any) {
	key := fakeapi.Meta(current, "namespace") + "/" + fakeapi.Meta(current, "name")
	if g, _, _ := unstructured.NestedInt64(next, "metadata", "generation"); resource == "greetings" && g != ex09StatusOf(current).generation {
		api.specs[key][g] = fakeapi.Copy(map[string]any{"spec": next["spec"]})["spec"]
		api.specsAt[key][g] = api.RVLocked() + 1
	}
	api.StoreLocked(resource, next)
}

// requestsLocked returns the requests so far, with what write and get
// noted of each.
func (api *ex09API) requestsLocked() []ex09Request {
	var out []ex09Request
	for _, r := range api.RequestsLocked(0) {
		method, _, _ := strings.Cut(ex09Line(r), " ")
		req := ex09Request{method: method, resource: r.Resource, namespace: r.Namespace, name: r.Name, subresource: r.Subresource, code: r.Code,
			changed: r.Note == "changed", stale: r.Note == "stale"}
		if g, ok := strings.CutPrefix(r.Note, "generation "); ok {
			req.generation, _ = strconv.ParseInt(g, 10, 64)
		}
		out = append(out, req)
	}
	return out
}

// checkStatus records what a Greeting's status, just written, says that is
// not so. With the lock held.
func (api *ex09API) checkStatus(ns, name string, greeting map[string]any) {
	s := ex09StatusOf(greeting)
	requests := api.requestsLocked()
	writes := 0
	for _, r := range requests {
		if r.resource == "greetings" && r.name == name && r.changed && r.code < 300 {
			writes++
		}
	}
	if writes > 20 {
		api.ProblemLocked(fmt.Sprintf("demo-controller wrote Greeting %s/%s's status %d times in a row: "+
			"a hot loop. Each status write is an event that brings the key back; a write that changes the status each "+
			"time (a new lastTransitionTime, say) never ends. Compare first, and write only what changes", ns, name, writes))
	}
	// What demo-controller last asked of the Greeting's ConfigMap, and
	// whether it read the Greeting itself since its last status write.
	var lastWrite *ex09Request
	for i := len(requests) - 1; i >= 0 && lastWrite == nil; i-- {
		if r := requests[i]; r.resource == "configmaps" && r.name == "greeting-"+name && r.method != http.MethodGet {
			lastWrite = &r
		}
	}
	var read []int64 // the generations its Gets of the Greeting answered, since its last status write
	for i := len(requests) - 1; i >= 0; i-- {
		r := requests[i]
		if r.resource == "greetings" && r.name == name && r.subresource == "status" && r.changed {
			break
		}
		if r.resource == "greetings" && r.name == name && r.method == http.MethodGet && r.code == 200 {
			read = append(read, r.generation)
		}
	}

	if lastWrite != nil && lastWrite.code >= 500 {
		api.ProblemLocked(fmt.Sprintf("demo-controller wrote Greeting %s/%s's status (%s) right "+
			"after the write of its ConfigMap failed (%s, answered %d), which is retried: while a write of the ConfigMap "+
			"fails and is retried, the status says nothing new (task item 2). Return the error, and write no status",
			ns, name, ex09Conditions(s.conditions), lastWrite.method, lastWrite.code))
	}
	if s.ready == nil {
		return
	}
	if s.observedGeneration > s.generation {
		api.ProblemLocked(fmt.Sprintf("Greeting %s/%s's status says observedGeneration %d, and its "+
			"generation is %d", ns, name, s.observedGeneration, s.generation))
	}
	if s.ready.Status != metav1.ConditionTrue {
		return
	}
	spec, _ := api.specs[ns+"/"+name][s.observedGeneration].(map[string]any)
	to, _ := spec["to"].(string)
	language, _ := spec["language"].(string)
	want := ex09Hello[language] + ", " + to
	cm := api.ObjectLocked("configmaps", ns+"/greeting-"+name)
	got, _, _ := unstructured.NestedString(cm, "data", "greeting")
	uid, _, _ := unstructured.NestedString(greeting, "metadata", "uid")
	ours := false
	refs, _, _ := unstructured.NestedSlice(cm, "metadata", "ownerReferences")
	for _, ref := range refs {
		if ref, ok := ref.(map[string]any); ok && ref["uid"] == uid && ref["controller"] == true {
			ours = true
		}
	}
	switch {
	case s.observedGeneration == 0:
		api.ProblemLocked(fmt.Sprintf("Greeting %s/%s's status says Ready True, and no "+
			"observedGeneration: write status.observedGeneration, the generation of the Greeting the worker decided on", ns, name))
	case cm == nil:
		api.ProblemLocked(fmt.Sprintf("Greeting %s/%s's status says Ready True, observedGeneration %d, "+
			"and its ConfigMap greeting-%s does not exist (yet): write the status after the ConfigMap's write has "+
			"succeeded, with what it did; when it failed, return the error and write nothing", ns, name, s.observedGeneration, name))
	case !ours:
		api.ProblemLocked(fmt.Sprintf("Greeting %s/%s's status says Ready True, and its ConfigMap's "+
			"name is taken by a ConfigMap it does not control: Ready is True only when its own ConfigMap says what it "+
			"asks; here Ready False, with a reason and a message that say why", ns, name))
	case got != want && lastWrite != nil && lastWrite.method == http.MethodPost && lastWrite.code == 409:
		label, _, _ := unstructured.NestedString(cm, "metadata", "labels", "app.kubernetes.io/managed-by")
		api.ProblemLocked(fmt.Sprintf("Greeting %s/%s's status says Ready True, observedGeneration %d, "+
			"while its ConfigMap holds %q (label %q), and generation %d asks for %q: demo-controller's Create of the "+
			"ConfigMap was answered 409 AlreadyExists, and it said Ready True without writing the ConfigMap. "+
			"AlreadyExists says that a ConfigMap of that name exists, not that it holds this spec's text: this "+
			"Greeting's, and not as asked (out of the cache: its label removed), apply it, then say Ready True",
			ns, name, s.observedGeneration, got, label, s.observedGeneration, want))
	case got != want && slices.Contains(read, s.observedGeneration):
		api.ProblemLocked(fmt.Sprintf("Greeting %s/%s's status says Ready True, observedGeneration %d, "+
			"while its ConfigMap holds %q, and generation %d asks for %q: demo-controller read the Greeting with a Get "+
			"(generation %d) before this status write, and took observedGeneration from it. observedGeneration is the "+
			"generation of the Greeting the worker read from its cache and made the ConfigMap from: the spec changed "+
			"after that read, and its own event will bring the key back", ns, name, s.observedGeneration, got, s.observedGeneration,
			want, s.observedGeneration))
	case got != want && ex09RV(cm) < api.specsAt[ns+"/"+name][s.observedGeneration]:
		api.ProblemLocked(fmt.Sprintf("Greeting %s/%s's status says Ready True, observedGeneration %d, "+
			"while its ConfigMap still holds %q, written before generation %d's spec came, which asks for %q: the status "+
			"vouches for a spec the ConfigMap was not made from. Either the status was written before the ConfigMap (write "+
			"the ConfigMap first, then the status, from what the ConfigMap's write did), or observedGeneration came from a "+
			"later read of the Greeting (the cache read again after the ConfigMap's write: take it from the Greeting the "+
			"sync started with)", ns, name, s.observedGeneration, got, s.observedGeneration, want))
	case got != want:
		api.ProblemLocked(fmt.Sprintf("Greeting %s/%s's status says Ready True, observedGeneration %d, "+
			"while its ConfigMap holds %q, and generation %d asks for %q. observedGeneration is the generation of the "+
			"Greeting the worker read from its cache and made the ConfigMap from, not of a later read (a Get before the "+
			"status write, or the cache read again): the spec may have changed in between, and its own event will bring "+
			"the key back", ns, name, s.observedGeneration, got, s.observedGeneration, want))
	}
}

// ex09RV returns an object's resourceVersion, as a number.
func ex09RV(obj map[string]any) int {
	rv, _, _ := unstructured.NestedString(obj, "metadata", "resourceVersion")
	n, _ := strconv.Atoi(rv)
	return n
}

// ex09StatusOf reads a Greeting's status.
func ex09StatusOf(greeting map[string]any) ex09GreetingStatus {
	var s ex09GreetingStatus
	s.generation, _, _ = unstructured.NestedInt64(greeting, "metadata", "generation")
	s.observedGeneration, _, _ = unstructured.NestedInt64(greeting, "status", "observedGeneration")
	list, _, _ := unstructured.NestedSlice(greeting, "status", "conditions")
	for _, c := range list {
		var condition metav1.Condition
		if m, ok := c.(map[string]any); ok && runtime.DefaultUnstructuredConverter.FromUnstructured(m, &condition) == nil {
			s.conditions = append(s.conditions, condition)
		}
	}
	s.ready = meta.FindStatusCondition(s.conditions, "Ready")
	return s
}

// The test's own writes, as another client would make them.

// createLocked stores a new object, with the identity the API server gives
// it. With the lock held.
func (api *ex09API) createLocked(resource, ns, name string, obj map[string]any) {
	rv := api.RVLocked() + 1
	md, _ := obj["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		obj["metadata"] = md
	}
	md["name"], md["namespace"] = name, ns
	md["uid"] = fmt.Sprintf("uid-%s-%d", name[:min(len(name), 10)], rv)
	md["creationTimestamp"] = time.Now().UTC().Format(time.RFC3339)
	if resource == "greetings" {
		md["generation"] = int64(1)
		delete(obj, "status")
		api.specs[ns+"/"+name] = map[int64]any{1: fakeapi.Copy(map[string]any{"spec": obj["spec"]})["spec"]}
		api.specsAt[ns+"/"+name] = map[int64]int{1: rv}
	}
	api.StoreLocked(resource, obj)
}

func (api *ex09API) putGreeting(ns, name string, spec map[string]any) {
	api.Lock()
	defer api.Unlock()
	api.createLocked("greetings", ns, name, map[string]any{"metadata": map[string]any{}, "spec": fakeapi.Whole(spec)})
}

// owner returns a controller owner reference to a Greeting.
func (api *ex09API) owner(ns, name string) map[string]any {
	return map[string]any{"apiVersion": "demo.example.com/v1alpha1", "kind": "Greeting", "name": name,
		"uid": fakeapi.Meta(api.Object("greetings", ns+"/"+name), "uid"), "controller": true, "blockOwnerDeletion": true}
}

// putConfigMap stores a ConfigMap: demo-controller's if owner is given, or
// someone else's (unlabelled).
func (api *ex09API) putConfigMap(ns, name string, owner map[string]any, text string) {
	api.Lock()
	defer api.Unlock()
	md := map[string]any{}
	if owner != nil {
		md["labels"] = map[string]any{"app.kubernetes.io/managed-by": "demo-controller"}
		md["ownerReferences"] = []any{owner}
	}
	api.createLocked("configmaps", ns, name, map[string]any{"metadata": md, "data": map[string]any{"greeting": text}})
}

func (api *ex09API) deleteConfigMap(ns, name string) { api.Remove("configmaps", ns, name) }

// update changes a stored object as a client's write would.
func (api *ex09API) update(resource, ns, name string, change func(obj map[string]any)) {
	api.Lock()
	defer api.Unlock()
	current := api.ObjectLocked(resource, ns+"/"+name)
	next := fakeapi.Copy(current)
	change(next)
	next = fakeapi.Whole(next).(map[string]any)
	if resource == "greetings" && !reflect.DeepEqual(next["spec"], current["spec"]) {
		_ = unstructured.SetNestedField(next, ex09StatusOf(current).generation+1, "metadata", "generation")
	}
	api.storeLocked(resource, current, next)
}

func (api *ex09API) setSpec(ns, name string, spec map[string]any) {
	api.update("greetings", ns, name, func(obj map[string]any) { obj["spec"] = fakeapi.Whole(spec) })
}

func (api *ex09API) setMeta(ns, name, patch string) {
	var p map[string]any
	_ = json.Unmarshal([]byte(patch), &p)
	api.update("greetings", ns, name, func(obj map[string]any) { fakeapi.MergePatch(obj, p) })
}

// setStatus sets one condition in a Greeting's status, as another writer
// would (observedGeneration too, unless it is -1).
func (api *ex09API) setStatus(ns, name string, observedGeneration int64, condition map[string]any) {
	api.update("greetings", ns, name, func(obj map[string]any) {
		status, _ := obj["status"].(map[string]any)
		if status == nil {
			status = map[string]any{}
		}
		if observedGeneration >= 0 {
			status["observedGeneration"] = observedGeneration
		}
		status["conditions"] = fakeapi.MergeList(status["conditions"], []any{condition}, "type")
		obj["status"] = status
	})
}

func (api *ex09API) generation(ns, name string) int64 {
	return ex09StatusOf(api.Object("greetings", ns+"/"+name)).generation
}

func (api *ex09API) configMapText(ns, name string) string {
	return fakeapi.Data(api.Object("configmaps", ns+"/"+name))["greeting"]
}

func (api *ex09API) status(ns, name string) ex09GreetingStatus {
	return ex09StatusOf(api.Object("greetings", ns+"/"+name))
}

// statusWrites returns demo-controller's requests to write a Greeting:
// through /status, and through the Greeting itself; with those refused.
func (api *ex09API) statusWrites(name string) (status, main []ex09Request) {
	api.Lock()
	defer api.Unlock()
	for _, r := range api.requestsLocked() {
		if r.resource == "greetings" && r.name == name && (r.method == http.MethodPut || r.method == http.MethodPatch) {
			if r.subresource == "status" {
				status = append(status, r)
			} else {
				main = append(main, r)
			}
		}
	}
	return status, main
}

func (api *ex09API) statusWriteCount() int {
	api.Lock()
	defer api.Unlock()
	n := 0
	for _, r := range api.requestsLocked() {
		if r.resource == "greetings" && r.subresource == "status" && r.code != 409 && !r.stale {
			n++
		}
	}
	return n
}

func (api *ex09API) statusWriteLines() string {
	api.Lock()
	defer api.Unlock()
	var out []string
	for _, r := range api.requestsLocked() {
		if r.resource == "greetings" && r.subresource == "status" {
			out = append(out, fmt.Sprintf("%s %s/%.20s (%d)", r.method, r.namespace, r.name, r.code))
		}
	}
	return strings.Join(fakeapi.LastLines(out, 10), ", ")
}

// waitForWatchers waits, at most ex09Wait, until the watches of resource
// have sent every event so far.
func (api *ex09API) waitForWatchers(resource string) {
	for deadline := time.Now().Add(ex09Wait); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		api.Lock()
		last := 0
		for _, obj := range api.ObjectsLocked(resource) {
			last = max(last, ex09RV(obj))
		}
		done := api.flushed[resource] >= last
		api.Unlock()
		if done {
			return
		}
	}
}

// eventsAbout counts the Events written about a Greeting.
func (api *ex09API) eventsAbout(name string) int {
	api.Lock()
	defer api.Unlock()
	n := 0
	for _, r := range api.requestsLocked() {
		if r.resource == "events" && r.name == name && r.code < 300 {
			n++
		}
	}
	return n
}

func (api *ex09API) conflicts(name string) int {
	status, _ := api.statusWrites(name)
	n := 0
	for _, r := range status {
		if r.code == 409 {
			n++
		}
	}
	return n
}

// check fails the test at once if a status write said what was not so, or
// if demo-controller wrote a Greeting itself.
func (api *ex09API) check(t *testing.T) {
	t.Helper()
	api.Check(t)
	api.Lock()
	var mainWrites []string
	for _, r := range api.requestsLocked() {
		if r.resource == "greetings" && r.subresource == "" && (r.method == http.MethodPut || r.method == http.MethodPatch || r.method == http.MethodPost) {
			mainWrites = append(mainWrites, fmt.Sprintf("%s /apis/demo.example.com/v1alpha1/namespaces/%s/greetings/%.20s", r.method, r.namespace, r.name))
		}
	}
	api.Unlock()
	if len(mainWrites) > 0 {
		t.Fatalf("demo-controller wrote a Greeting itself (%s), not its status subresource: with the status subresource, "+
			"the API server ignores the status in such a write (and answers 200 OK), and the controller needs no right "+
			"to change a Greeting's spec. Write through /status: UpdateStatus, or an apply or a patch with \"status\" as "+
			"the subresource", mainWrites[0])
	}
}

// waitFor waits until ok, for at most ex09Wait; it fails at once if a
// status write said what was not so, or run returned.
func (api *ex09API) waitFor(t *testing.T, run *fakeapi.Run, failure string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(ex09Wait); ; time.Sleep(5 * time.Millisecond) {
		api.check(t)
		if ok() {
			return
		}
		select {
		case <-run.Ended:
			t.Fatalf("run returned %v, before: %s", run.Err, failure)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("within %v: %s", ex09Wait, failure)
		}
	}
}

// waitForStatus waits until a Greeting's status is as ok says.
func (api *ex09API) waitForStatus(t *testing.T, run *fakeapi.Run, ns, name, what string, ok func(ex09GreetingStatus) bool) ex09GreetingStatus {
	t.Helper()
	var s ex09GreetingStatus
	for deadline := time.Now().Add(ex09Wait); ; time.Sleep(5 * time.Millisecond) {
		api.check(t)
		if s = api.status(ns, name); ok(s) {
			return s
		}
		select {
		case <-run.Ended:
			t.Fatalf("run returned %v, before Greeting %s/%.20s's status said what it should: %s", run.Err, ns, name, what)
		default:
		}
		if !time.Now().After(deadline) {
			continue
		}
		status, _ := api.statusWrites(name)
		why := ""
		switch {
		case len(status) == 0:
			why = "demo-controller never wrote its status (PUT or PATCH /apis/demo.example.com/v1alpha1/namespaces/" + ns + "/greetings/NAME/status)"
		case slices.ContainsFunc(status, func(r ex09Request) bool { return r.code == 409 }) && !slices.ContainsFunc(status, func(r ex09Request) bool { return r.code < 300 }):
			why = "every status write of demo-controller's was refused with 409 Conflict: it wrote from a Greeting older than " +
				"the one stored. Return the error, so that the key is retried, from the cache, which by then has the newer Greeting"
		case status[len(status)-1].code >= 500:
			why = fmt.Sprintf("its last status write was answered %d (by the test's API server, once), and demo-controller "+
				"never wrote it again. The key's retry must write it: a sync that finds the ConfigMap reported already "+
				"(exercise 8's \"reported once\", nothing changed since) still returns the Ready condition it reported",
				status[len(status)-1].code)
		case slices.ContainsFunc(status, func(r ex09Request) bool { return r.code == 404 }):
			why = "a status write was answered 404 Not Found: write to the Greeting's status subresource, " +
				"/apis/demo.example.com/v1alpha1/namespaces/NAMESPACE/greetings/NAME/status"
		default:
			why = fmt.Sprintf("its status writes: %s", api.statusWriteLines())
		}
		t.Fatalf("Greeting %s/%.20s: %s. Within %v its status became: %s; %s", ns, name, what, ex09Wait, s, why)
	}
}

// expectReady checks a Ready condition.
func (api *ex09API) expectReady(t *testing.T, s ex09GreetingStatus, ns, name, want, because string) {
	t.Helper()
	r := s.ready
	switch {
	case r == nil:
		t.Fatalf("Greeting %s/%.20s's status has no Ready condition (%s); want Ready %s: %s", ns, name, s, want, because)
	case string(r.Status) != want:
		t.Fatalf("Greeting %s/%.20s's status says Ready %s, want %s: %s (%s)", ns, name, r.Status, want, because, s)
	case r.Reason == "" || r.LastTransitionTime.IsZero():
		t.Fatalf("Greeting %s/%.20s's Ready condition has no reason or no lastTransitionTime (%s): a metav1.Condition "+
			"has both, and the CRD's schema may require them", ns, name, s)
	case !ex09Reason.MatchString(r.Reason):
		t.Fatalf("Greeting %s/%.20s's Ready condition has the reason %q: a metav1.Condition's reason is one CamelCase "+
			"word (ConfigMapNotOwned), no spaces, as its documentation says; a CRD that declares its pattern makes the "+
			"API server refuse the whole status write (422). Put the words in the message", ns, name, r.Reason)
	case r.ObservedGeneration != 0 && r.ObservedGeneration != s.observedGeneration:
		t.Fatalf("Greeting %s/%.20s: its Ready condition's observedGeneration is %d, and its status's %d: set both from "+
			"the Greeting the worker decided on", ns, name, r.ObservedGeneration, s.observedGeneration)
	}
}

// expectStatusWrites checks how many requests demo-controller made to write
// a Greeting's status. A write that changes nothing is a request too; one
// made from a cache that had not yet seen the controller's own last write
// is not counted: refused with 409 Conflict (it carried the resourceVersion
// it read), or, without one, repeating that write (see handle).
func (api *ex09API) expectStatusWrites(t *testing.T, ns, name string, want int, after string) {
	t.Helper()
	status, _ := api.statusWrites(name)
	var counted []string
	for _, r := range status {
		if r.code != 409 && !r.stale {
			counted = append(counted, fmt.Sprintf("%s .../greetings/%s/status (%d%s)", r.method, name, r.code,
				map[bool]string{true: ", changed nothing"}[!r.changed && r.code < 300]))
		}
	}
	if len(counted) != want {
		t.Fatalf("Greeting %s/%s: %s; demo-controller made %d requests to write its status, want %d: %s. Write the status "+
			"only when it changes: meta.SetStatusCondition returns whether the condition changed; compare observedGeneration "+
			"too. A write that changes nothing is still a request, and a write that changes something each time (a new "+
			"lastTransitionTime) is an event that brings the key back: a loop", ns, name, after, len(counted), want, strings.Join(counted, ", "))
	}
}

// fence changes the spec of the Greeting fence and waits until its status
// follows: one worker and one watch of Greetings, in order, so that once
// it has, every event that came before has been handled.
func (api *ex09API) fence(t *testing.T, run *fakeapi.Run) {
	t.Helper()
	g := api.generation("default", "fence")
	api.setSpec("default", "fence", map[string]any{"to": "Fence" + strings.Repeat("e", int(g))})
	api.waitForStatus(t, run, "default", "fence", fmt.Sprintf("its spec changed (generation %d), and its status must follow", g+1),
		func(s ex09GreetingStatus) bool { return s.observedGeneration == g+1 })
}

// ex09Start runs run, as demo-controller does, against api until the test
// ends (or Stop).
func ex09Start(t *testing.T, api *ex09API, namespace string) *fakeapi.Run {
	t.Helper()
	o := options{kubeconfig: writeKubeconfig(t, api.url, bearer, false), namespace: namespace, startupTimeout: ex09Wait, syncTimeout: ex09Wait}
	return fakeapi.Start(t, ex09Wait, 15, func(ctx context.Context) error { return run(ctx, o) })
}

// ex09Child runs the test that calls it again, in a child process (the test
// binary itself), with client-go's cache mutation detector on, and fails as
// the child did (fakeapi.Child): a data race, an object of the cache
// changed, or a panic, each explained. It returns false in the child.
func ex09Child(t *testing.T) bool {
	t.Helper()
	return fakeapi.Child(t, ex09Crash, "KUBE_CACHE_MUTATION_DETECTOR=true")
}

// ex09Crash explains a line of the child's output that says why it ended
// ("" for any other).
func ex09Crash(line string, rest []string, step string) string {
	switch {
	case line == "WARNING: DATA RACE":
		var where []string
		for _, l := range rest {
			if f := strings.TrimSpace(l); strings.HasPrefix(f, "demo-controller.") && !strings.Contains(f, ".ex09") &&
				!slices.Contains(where, f) && len(where) < 4 {
				where = append(where, f)
			}
		}
		return fmt.Sprintf("the race detector found two goroutines using the same memory at once, at this step of the test: "+
			"%s; on demo-controller's side, in: %s. Most often, an object from the cache was changed in place, while "+
			"the informer reads it too: objects from the cache are shared, read only; DeepCopy one before you set "+
			"its status", step, strings.Join(where, ", called from "))
	case strings.HasPrefix(line, "panic: cache ") && strings.Contains(line, " modified"):
		return fmt.Sprintf("demo-controller changed an object in its cache (client-go's mutation detector found it at this "+
			"step of the test, or soon after: %s). Objects from the cache are shared, read only: copy one "+
			"(DeepCopy) before you set its status.\n  %s", step, line)
	case strings.HasPrefix(line, "panic: ") || strings.HasPrefix(line, "fatal error: "):
		return fmt.Sprintf("the test crashed, at this step: %s.\n  %s\nat %s. A panic in any goroutine of demo-controller's "+
			"takes the whole process down", step, line, strings.Join(fakeapi.Where(rest, 3), ", called from "))
	}
	return ""
}

// checkVerbs fails if demo-controller sent a request that demo-controller.yaml's
// ClusterRole does not grant (on a cluster, a 403 Forbidden), or if the
// ClusterRole grants a write of greetings/status that demo-controller never sent.
func (api *ex09API) checkVerbs(t *testing.T) {
	t.Helper()
	grants, _ := fakeapi.Grants(t, "demo-controller.yaml")
	// Each verb sent, on each resource, as RBAC names them ("update
	// greetings/status"), and the first request that sent it.
	sent := map[string]string{}
	for _, r := range api.Requests(0) {
		verb, resource := r.Verb, r.Resource
		if verb == "apply" {
			verb = "patch"
		}
		if r.Subresource != "" {
			resource += "/" + r.Subresource
		}
		if _, ok := sent[verb+" "+resource]; !ok {
			sent[verb+" "+resource] = ex09Line(r)
		}
	}
	for _, vr := range slices.Sorted(maps.Keys(sent)) {
		verb, resource, _ := strings.Cut(vr, " ")
		granted := grants[fakeapi.Kinds[strings.Split(resource, "/")[0]].Group+"/"+resource]
		if slices.Contains(granted, verb) || slices.Contains(granted, "*") {
			continue
		}
		how := ""
		if resource == "greetings/status" {
			how = " UpdateStatus sends update; an apply or a patch to /status sends patch (task item 5)."
		}
		t.Fatalf("demo-controller sends %s on %s (%s), and demo-controller.yaml's ClusterRole grants only %v there: "+
			"on a cluster, the API server refuses it with 403 Forbidden. Grant the verb the code sends.%s",
			verb, resource, sent[vr], granted, how)
	}
	for _, verb := range grants["demo.example.com/greetings/status"] {
		if _, ok := sent[verb+" greetings/status"]; !ok && verb != "get" {
			t.Fatalf("demo-controller.yaml's ClusterRole grants %s on greetings/status, and demo-controller never sends "+
				"it: grant only the verb the status write uses (UpdateStatus: update; an apply or a patch: patch)", verb)
		}
	}
}

// ex09Line says a request as its first line did: "PUT /apis/.../NAME/status".
func ex09Line(r fakeapi.Request) string {
	method := map[string]string{"create": "POST", "update": "PUT", "patch": "PATCH", "apply": "PATCH", "delete": "DELETE"}[r.Verb]
	if method == "" {
		method = "GET"
	}
	path := "/api/v1"
	if gv := fakeapi.Kinds[r.Resource].GroupVersion(); gv.Group != "" {
		path = "/apis/" + gv.String()
	}
	if r.Namespace != "" {
		path += "/namespaces/" + r.Namespace
	}
	path += "/" + r.Resource
	if r.Name != "" && r.Verb != "create" {
		path += "/" + r.Name
	}
	if r.Subresource != "" {
		path += "/" + r.Subresource
	}
	return method + " " + path
}
