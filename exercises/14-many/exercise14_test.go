//go:build exercise

// The test of exercise 14 (exercises/14-many/README.md). It is not part of
// the project's tests: copy it into the project's root and run it with the
// exercise tag, as the exercise's README says.

package main

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"

	"demo-controller/internal/fakeapi"
)

// ex14Wait bounds each wait: the API server below answers at once.
const ex14Wait = 5 * time.Second

// What the task names.
const (
	ex14Label    = "app.kubernetes.io/managed-by"
	ex14LabelSet = "demo-controller"
	ex14Created  = `"ConfigMap created"`
	ex14Deleted  = `"ConfigMap deleted"`
	ex14Dropping = `"Dropping greeting after retries"`
	ex14Workers  = 4 // --greeting-workers in this test
)

// demo-controller.yaml's ClusterRole grants exactly the verbs the task's
// controller uses.
func TestExercise14ClusterRole(t *testing.T) {
	verbs, _ := fakeapi.Grants(t, "demo-controller.yaml")
	want := map[string][]string{
		"/pods":                                 {"list", "watch"},
		"demo.example.com/greetings":            {"list", "watch"},
		"demo.example.com/greetings/finalizers": {"update"},
		"/configmaps":                           {"create", "delete", "list", "watch"},
	}
	if !maps.EqualFunc(verbs, want, slices.Equal) {
		t.Errorf("demo-controller.yaml's ClusterRole grants:\n  %s\nwant exactly the verbs the controller uses:\n  %s\n"+
			"(ConfigMaps: list and watch for the informer, create and delete for the copies, no get: the count comes from "+
			"the cache; greetings/finalizers: update, for blockOwnerDeletion)",
			fakeapi.Rules(verbs), fakeapi.Rules(want))
	}
}

// The solution reads the cache as the task says: an index by controller
// UID, the cache's last synced resourceVersion, and CompareResourceVersion
// (only the source shows which function compares).
func TestExercise14ReadsTheCacheAsTheTaskSays(t *testing.T) {
	files, _ := filepath.Glob("*.go")
	called := map[string]bool{}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok {
				called[sel.Sel.Name] = true
			}
			return true
		})
	}
	for _, c := range []struct{ name, why string }{
		{"AddTypedIndexers", "find a Greeting's copies through an index of the ConfigMap cache by controller UID " +
			"(TypedInformer().AddTypedIndexers), not by listing every ConfigMap and filtering"},
		{"ByTypedIndex", "read a Greeting's copies with the index (GetTypedIndexer().ByTypedIndex(name, uid))"},
		{"LastStoreSyncResourceVersion", "ask the ConfigMap cache how far it has seen (GetStore().LastStoreSyncResourceVersion())"},
		{"CompareResourceVersion", "compare resourceVersions with resourceversion.CompareResourceVersion " +
			"(k8s.io/apimachinery/pkg/util/resourceversion): never as strings (\"9\" sorts after \"10\")"},
	} {
		if !called[c.name] {
			t.Errorf("no Go file of the project's root uses %s: %s", c.name, c.why)
		}
	}
}

// The controller, run as demo-controller runs it with --greeting-workers=4
// (or with one worker, until that flag exists), against an API server of the test's own that serves Greetings and
// ConfigMaps over HTTP, can hold back the ConfigMaps' watch events while it
// delivers the Greetings', and counts every create and delete.
func TestExercise14ManyCopies(t *testing.T) {
	api := ex14NewAPI(t)
	api.greeting("default", "hello", "uid-hello", "Ada", 2)
	// Too many copies of "old": three, two of them made in the same second.
	api.greeting("default", "old", "uid-old", "Grace", 1)
	api.copyAt("default", "greeting-old-aaaaa", "uid-old", "old", 0)
	api.copyAt("default", "greeting-old-bbbbb", "uid-old", "old", 60)
	api.copyAt("default", "greeting-old-ccccc", "uid-old", "old", 60)
	// Labelled ConfigMaps that "hello" does not control.
	api.copyAt("default", "greeting-hello-orphan", "", "", 0)
	api.copyAt("default", "greeting-hello-older", "uid-hello-before", "hello", 0)
	// A tie to break: two copies of "tie" made in the same second, and an
	// older one with the greatest name.
	api.greeting("default", "tie", "uid-tie", "Ada", 2)
	api.copyAt("default", "greeting-tie-zzzzz", "uid-tie", "tie", 0)
	api.copyAt("default", "greeting-tie-bbbbb", "uid-tie", "tie", 60)
	api.copyAt("default", "greeting-tie-ccccc", "uid-tie", "tie", 60)
	// A Greeting being deleted, that a finalizer holds.
	api.Store("greetings", map[string]any{"metadata": map[string]any{"namespace": "default", "name": "leaving",
		"uid": "uid-leaving", "deletionTimestamp": "2026-01-01T00:00:00Z", "finalizers": []any{"example.com/hold"}},
		"spec": map[string]any{"to": "Ada", "copies": int64(2)}})
	// A ConfigMap that names "shared" among its owners, not as its controller.
	api.greeting("default", "shared", "uid-shared", "Ada", 1)
	shared := ex14Copy("default", "greeting-shared-owned", "uid-shared", "shared", 0)
	_ = unstructured.SetNestedSlice(shared, []any{map[string]any{"apiVersion": "demo.example.com/v1alpha1",
		"kind": "Greeting", "name": "shared", "uid": "uid-shared"}}, "metadata", "ownerReferences")
	api.Store("configmaps", shared)
	// The only copy of "held" is being deleted: a finalizer holds it.
	api.greeting("default", "held", "uid-held", "Ada", 1)
	held := ex14Copy("default", "greeting-held-aaaaa", "uid-held", "held", 0)
	fakeapi.SetMeta(held, "deletionTimestamp", "2026-01-01T00:00:00Z")
	_ = unstructured.SetNestedStringSlice(held, []string{"example.com/hold"}, "metadata", "finalizers")
	api.Store("configmaps", held)

	r := ex14Start(t, api, false)
	api.settle(t, r)
	api.check(t)
	api.count(t, "hello", 2, "a Greeting with copies: 2 gets two ConfigMaps, made with generateName greeting-hello-; "+
		"the labelled ConfigMaps it does not control (one with no owner reference, one controlled by an older Greeting "+
		"of the same name) are not its copies")
	api.names(t, "old", []string{"greeting-old-aaaaa"}, "Greeting old asks for 1 copy and has 3: the controller "+
		"deletes the newest first (the latest creationTimestamp; in the same second, the greatest name): "+
		"greeting-old-ccccc, then greeting-old-bbbbb")
	api.writesSince(t, 0, "hello", []string{"create 201", "create 201"}, "at start, two copies missing")
	switch got := api.controlled("tie"); {
	case slices.Equal(got, []string{"greeting-tie-bbbbb", "greeting-tie-zzzzz"}):
	case !slices.Contains(got, "greeting-tie-zzzzz"):
		t.Errorf("Greeting tie asks for 2 copies and has 3: greeting-tie-zzzzz, and an hour later greeting-tie-bbbbb and "+
			"greeting-tie-ccccc, in the same second. The controller deleted greeting-tie-zzzzz, the oldest; its ConfigMaps "+
			"are %q. The newest goes first, by creationTimestamp; the name only breaks a tie between copies made in the "+
			"same second (task, step 2)", got)
	case slices.Equal(got, []string{"greeting-tie-ccccc", "greeting-tie-zzzzz"}):
		t.Errorf("Greeting tie asks for 2 copies and has 3: greeting-tie-zzzzz, and an hour later greeting-tie-bbbbb and " +
			"greeting-tie-ccccc, in the same second. The controller deleted greeting-tie-bbbbb: between copies made in the " +
			"same second, the greatest name goes first, greeting-tie-ccccc (task, step 2)")
	default:
		t.Errorf("Greeting tie asks for 2 copies and has 3: greeting-tie-zzzzz, and an hour later greeting-tie-bbbbb and "+
			"greeting-tie-ccccc, in the same second; its ConfigMaps are %q, want greeting-tie-bbbbb and greeting-tie-zzzzz "+
			"(the newest first: the latest creationTimestamp; in the same second, the greatest name)", got)
	}
	if got := api.requestsSince(0, "leaving"); len(got) > 0 {
		t.Errorf("Greeting leaving is being deleted (its deletionTimestamp is set; a finalizer holds it), and the controller "+
			"sent:\n  %s\nwant nothing: a Greeting being deleted gets no new copy (task, step 2)", strings.Join(got, "\n  "))
	}
	if got := api.live("shared"); got != 1 {
		t.Errorf("Greeting shared asks for 1 copy and has none: the one labelled ConfigMap that names it, greeting-shared-owned, "+
			"names it among its owners, not as its controller (controller unset). Greeting shared has %d copies, want 1; "+
			"the requests for its copies:\n  %s\nA copy is a ConfigMap whose controller reference names the Greeting: index "+
			"by the UID of metav1.GetControllerOf only, not of every owner reference (task, step 2)",
			got, strings.Join(fakeapi.OrNone(api.requestsSince(0, "shared")), "\n  "))
	}
	if got := api.requestsSince(0, "held"); !slices.Equal(got, []string{"create 201"}) {
		t.Errorf("Greeting held asks for 1 copy, and its one ConfigMap is being deleted (its deletionTimestamp set; a "+
			"finalizer holds it). The controller sent:\n  %s\nwant one create: a copy being deleted counts as gone, as "+
			"the ReplicaSet controller counts only pods not being deleted (task, step 2)",
			strings.Join(fakeapi.OrNone(got), "\n  "))
	}
	if t.Failed() {
		t.FailNow()
	}

	// The lesson: a Greeting's second event comes before its copies'.
	// Its new copy's event is held back; the resourceVersions cross a
	// power of ten meanwhile (another writer's work).
	mark := api.mark(r)
	api.hold(true)
	api.jump(98)
	api.greeting("default", "hello", "uid-hello", "Ada", 3)
	r.expectAfter(t, mark, "copies: 3, one more", ex14Created+` greeting="default/hello"`)
	api.settle(t, r)
	api.greeting("default", "hello", "uid-hello", "Grace", 3) // a second event, the copy's still held
	r.expectAfter(t, mark, "the Greeting changed again", `"Greeting updated" greeting="default/hello" to="Grace"`)
	api.settleFor(t, r, 600*time.Millisecond)
	if got := api.requestsSince(mark, "hello"); len(got) > 1 {
		t.Fatalf("Greeting hello asked for 3 copies, had 2, and the controller made one; then the Greeting changed again "+
			"before the ConfigMap cache had seen that copy, and the controller sent:\n  %s\nOne too many: it counted "+
			"from a cache that had not seen its own create. Remember the resourceVersion of each create, per Greeting "+
			"UID, and defer the sync until the cache's LastStoreSyncResourceVersion() is at least that (task, step "+
			"3).%s", strings.Join(got, "\n  "), api.stringHint())
	}
	if lines := r.matchingAfter(mark, ex14Dropping); len(lines) > 0 {
		t.Fatalf("while the ConfigMap cache was behind for 0.6 s, the controller gave up on Greeting hello:\n  %s\n"+
			"A sync deferred for a cache behind is no failure: returned as an error, it is retried with backoff "+
			"(5 to 80 ms) and counts toward maxRetries. Put the key back with AddAfter, without AddRateLimited "+
			"(task, step 4)", lines[0])
	}
	r.markLine = len(r.Lines())
	api.greeting("default", "hello", "uid-hello", "Ada", 3) // a third event, the copy's still held
	r.expectAfter(t, mark, "the Greeting changed a third time", `"Greeting updated" greeting="default/hello" to="Ada"`)
	api.settleFor(t, r, 300*time.Millisecond)
	if got := api.requestsSince(mark, "hello"); len(got) > 1 {
		t.Fatalf("Greeting hello asked for 3 copies, had 2, and the controller made one; then the Greeting changed twice "+
			"before the ConfigMap cache had seen that copy, and the controller sent:\n  %s\nOne too many, at the second "+
			"change: the first forgot the create's resourceVersion while the cache was still behind it. Forget it only "+
			"once LastStoreSyncResourceVersion() is as new (task, step 3)", strings.Join(got, "\n  "))
	}
	api.hold(false)
	api.settle(t, r)
	api.check(t)
	api.count(t, "hello", 3, "once the cache has seen the copy, the Greeting has its 3")

	// Scale down while the deletes' events are held back, and a second
	// event comes: the deletes are not sent again.
	mark = api.mark(r)
	newest := api.newest("hello", 2)
	api.hold(true)
	api.greeting("default", "hello", "uid-hello", "Grace", 1)
	r.expectAfter(t, mark, "copies: 1, two fewer", ex14Deleted+` greeting="default/hello"`)
	api.settle(t, r)
	api.greeting("default", "hello", "uid-hello", "Ada", 1)
	r.expectAfter(t, mark, "the Greeting changed again", `"Greeting updated" greeting="default/hello" to="Ada"`)
	api.settle(t, r)
	if got := api.requestsSince(mark, "hello"); len(got) != 2 {
		t.Fatalf("Greeting hello went from 3 copies to 1; then it changed again before the ConfigMap cache had seen "+
			"the deletes, and the controller sent:\n  %s\nwant two deletes. It counted from a cache that still held the "+
			"copies it had deleted (had it chosen other ones, one too few). A delete returns no resourceVersion: "+
			"remember the UIDs of the copies deleted, and defer the sync while the cache still holds one (task, step 3)",
			strings.Join(got, "\n  "))
	}
	r.markLine = len(r.Lines())
	api.greeting("default", "hello", "uid-hello", "Grace", 1)
	r.expectAfter(t, mark, "the Greeting changed a third time", `"Greeting updated" greeting="default/hello" to="Grace"`)
	api.settle(t, r)
	if got := api.requestsSince(mark, "hello"); len(got) != 2 {
		t.Fatalf("Greeting hello went from 3 copies to 1; then it changed twice before the ConfigMap cache had seen the "+
			"deletes, and the controller sent:\n  %s\nwant two deletes. The deletes were sent again at the second change: "+
			"the first forgot the deleted copies' UIDs while the cache still held them. Forget them only once the cache "+
			"holds none (task, step 3)", strings.Join(got, "\n  "))
	}
	api.hold(false)
	api.settle(t, r)
	api.check(t)
	api.count(t, "hello", 1, "copies: 1")
	api.deletedSince(t, mark, newest, "Greeting hello went from 3 copies to 1: the two newest go")

	// A delete fails once (500): retried, and nothing is left waiting.
	api.greeting("default", "hello", "uid-hello", "Ada", 3)
	api.settle(t, r)
	mark = api.mark(r)
	api.setFail("delete", "hello", 1)
	api.greeting("default", "hello", "uid-hello", "Ada", 2)
	api.settle(t, r)
	api.check(t)
	api.writesOr(t, mark, "hello", []string{"delete 500", "delete 200"}, "copies: 3 to 2, the first delete failing (500)",
		"\nThe delete failed, and nothing was sent again: a failed delete deleted nothing. Remember a deleted copy's UID "+
			"only once the delete has succeeded (or found it gone), else the sync waits for ever for a delete event "+
			"that will never come (task, step 3)")

	// A create fails once (500): retried.
	mark = api.mark(r)
	api.setFail("create", "hello", 1)
	api.greeting("default", "hello", "uid-hello", "Ada", 3)
	api.settle(t, r)
	api.check(t)
	api.writesOr(t, mark, "hello", []string{"create 500", "create 201"}, "copies: 2 to 3, the first create failing (500)",
		"\nThe create failed, and nothing was sent again: a failed create made nothing, and left nothing to wait for. "+
			"Return its error to the worker, which retries it (task, step 3)")

	// Someone deletes a copy: it is replaced.
	mark = api.mark(r)
	api.remove("default", api.newest("hello", 1)[0])
	api.settle(t, r)
	api.check(t)
	api.writesSince(t, mark, "hello", []string{"create 201"}, "someone deleted one of hello's 3 copies: one create replaces it")

	// A copy's event that never comes: made, then deleted by someone while
	// the cache was behind, and the watch lost and listed again. No event
	// of a copy of "lone" is left to come; its sync is deferred.
	api.greeting("default", "lone", "uid-lone", "Ada", 0)
	api.settle(t, r)
	mark = api.mark(r)
	api.hold(true)
	api.greeting("default", "lone", "uid-lone", "Ada", 1)
	r.expectAfter(t, mark, "copies: 1", ex14Created+` greeting="default/lone"`)
	api.settle(t, r)
	api.greeting("default", "lone", "uid-lone", "Grace", 1) // deferred: the cache has not seen the copy
	r.expectAfter(t, mark, "the Greeting changed again", `"Greeting updated" greeting="default/lone" to="Grace"`)
	api.settle(t, r)
	api.remove("default", api.newest("lone", 1)[0])
	api.relist()
	deadline := time.Now().Add(ex14Wait)
	for api.live("lone") == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if api.live("lone") == 0 {
		t.Fatalf("Greeting lone asks for 1 copy; its copy was deleted while the cache was behind, and the ConfigMaps' "+
			"watch was lost and listed again, so no event of it will ever come. Within %v the controller made none: "+
			"a deferred sync that nothing wakes. The copy's event usually brings the key back; for the one that never "+
			"comes, put the key back with AddAfter too (task, step 4)", ex14Wait)
	}
	api.settle(t, r)
	api.check(t)
	api.count(t, "lone", 1, "copies: 1, after a lost watch")

	// The Greeting goes: its copies are the garbage collector's.
	mark = api.mark(r)
	api.removeGreeting("default", "hello")
	r.expectAfter(t, mark, "the Greeting deleted", `"Greeting deleted" greeting="default/hello"`)
	api.settle(t, r)
	if got := api.requestsSince(mark, "hello"); len(got) > 0 {
		t.Fatalf("Greeting hello was deleted, and the controller sent:\n  %s\nwant nothing: the garbage collector deletes "+
			"a Greeting's copies (their owner reference), whether the controller runs or not", strings.Join(got, "\n  "))
	}
}

// One sync makes two copies, at resourceVersions 99 and 100; the cache sees
// the first and not the second when the Greeting changes again. Caught up
// only at 100: the Greeting's own resourceVersion (98) is no measure, nor
// is 99, and as strings "100" sorts before "99".
func TestExercise14WaitsForItsLastCreate(t *testing.T) {
	api := ex14NewAPI(t)
	api.greeting("default", "ten", "uid-ten", "Ada", 0)
	adds := fakeapi.QueueAdds("greetings") // nil if the test cannot count them
	r := ex14Start(t, api, false)
	api.settle(t, r)
	mark := api.mark(r)
	api.JumpRV(97)
	api.HoldAfter("configmaps", 99)
	api.greeting("default", "ten", "uid-ten", "Ada", 2) // at 98; its copies at 99 and 100
	r.expectAfter(t, mark, "copies: 2", ex14Created+` greeting="default/ten"`)
	api.settle(t, r)
	api.greeting("default", "ten", "uid-ten", "Grace", 2)
	r.expectAfter(t, mark, "the Greeting changed again", `"Greeting updated" greeting="default/ten" to="Grace"`)
	var before int64
	if adds != nil {
		before = adds.Load()
	}
	api.settleFor(t, r, 600*time.Millisecond)
	if adds != nil && adds.Load()-before > 10 {
		t.Fatalf("while the ConfigMap cache was behind the controller's own create, Greeting ten's key was put back "+
			"on the queue %d times in about 0.6 s: a deferred sync went straight back with queue.Add, and the worker "+
			"synced it again and again until the cache caught up. Put a deferred key back with "+
			"queue.AddAfter(key, time.Second): the copy's own event almost always wakes it sooner (task, step 4)",
			adds.Load()-before)
	}
	if got := api.requestsSince(mark, "ten"); len(got) > 2 {
		t.Fatalf("Greeting ten asked for 2 copies; the controller made them, at resourceVersions 99 and 100. The "+
			"ConfigMap cache had seen the first and not the second when the Greeting changed again, and the "+
			"controller sent:\n  %s\nOne too many: it took the cache for caught up at 99, or at the Greeting's own 98. "+
			"Remember the resourceVersion the API server answered for each create, keep the greatest as "+
			"resourceversion.CompareResourceVersion orders them (as strings, \"100\" < \"99\"), and defer the sync "+
			"until the cache's LastStoreSyncResourceVersion() is at least that (task, step 3)", strings.Join(got, "\n  "))
	}
	api.Release("configmaps")
	api.settle(t, r)
	api.check(t)
	api.count(t, "ten", 2, "once the cache has seen both copies, the Greeting has its 2")
}

// With --greeting-workers=4, two Greetings are synced at once: the first
// creates of w1 and w2 wait for each other at the API server.
func TestExercise14SeveralWorkers(t *testing.T) {
	api := ex14NewAPI(t)
	for i, to := range []string{"Ada", "Alan", "Grace", "Edsger"} {
		api.greeting("default", fmt.Sprintf("w%d", i+1), fmt.Sprintf("uid-w%d", i+1), to, 1)
	}
	api.barrier = map[string]bool{"w1": false, "w2": false}
	r := ex14Start(t, api, true)
	api.settle(t, r)
	api.check(t)
	for i := range 4 {
		api.count(t, fmt.Sprintf("w%d", i+1), 1, "a Greeting with copies: 1 gets one ConfigMap")
	}
}

// spec.copies in the CRD, as the task's step 1 says.
func TestExercise14CRD(t *testing.T) {
	const path = "exercises/07-crd/greeting-crd.yaml"
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v: the Greeting's CRD is exercise 7's, and this exercise starts from its solution", err)
	}
	var crd map[string]any
	if err := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096).Decode(&crd); err != nil {
		t.Fatalf("%s is not YAML that kubectl can read: %v", path, err)
	}
	var copies map[string]any
	versions, _, _ := unstructured.NestedSlice(crd, "spec", "versions")
	for _, v := range versions {
		if v, _ := v.(map[string]any); v["name"] == "v1alpha1" {
			copies, _, _ = unstructured.NestedMap(v, "schema", "openAPIV3Schema", "properties", "spec", "properties", "copies")
		}
	}
	if copies == nil {
		t.Fatalf("%s: the spec of v1alpha1 has no field copies: give it one, an integer, minimum 0, maximum 20, "+
			"default 1 (task, step 1)", path)
	}
	for _, f := range []struct{ field, want, why string }{
		{"type", "integer", "a number of ConfigMaps"},
		{"minimum", "0", "a Greeting may ask for no copies"},
		{"maximum", "20", "no Greeting asks for more"},
		{"default", "1", "the API server fills it in when a Greeting is written without it, and when one stored " +
			"before is read"},
	} {
		if got, ok := copies[f.field]; !ok || fmt.Sprint(got) != f.want {
			t.Errorf("%s: spec.copies has %s: %v, want %s: %s (task, step 1)", path, f.field, got, f.want, f.why)
		}
	}
}

// Each sync of Greeting flaky makes a copy, then fails on the next create
// (500); its retry finds the ConfigMap cache behind that copy, and is
// deferred. The deferrals leave the key's count of failures as it was:
// the sixth failed sync in a row is the last (maxRetries: 5 retries).
func TestExercise14DeferralIsNoFailure(t *testing.T) {
	api := ex14NewAPI(t)
	api.greeting("default", "flaky", "uid-flaky", "Ada", 0)
	r := ex14Start(t, api, false)
	api.settle(t, r)
	mark := api.mark(r)
	api.hold(true)
	api.Lock()
	api.flaky["flaky"] = 0
	api.Unlock()
	api.greeting("default", "flaky", "uid-flaky", "Ada", 8)
	failed := func() int {
		return len(slices.DeleteFunc(api.requestsSince(mark, "flaky"), func(r string) bool { return r != "create 500" }))
	}
	for round := 1; ; round++ {
		for deadline := time.Now().Add(ex14Wait); failed() < round && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		api.check(t)
		if failed() < round {
			t.Fatalf("Greeting flaky asks for 8 copies; each create of the controller succeeds, the next fails (500). "+
				"After %d failed syncs, and the ConfigMap cache caught up with the copy made, within %v the controller "+
				"sent no create; the requests for its copies:\n  %s", round-1, ex14Wait,
				strings.Join(fakeapi.OrNone(api.requestsSince(mark, "flaky")), "\n  "))
		}
		api.settle(t, r)
		dropped := r.matchingAfter(mark, ex14Dropping)
		if round < 6 && len(dropped) > 0 {
			t.Fatalf("Greeting flaky asks for 8 copies; each sync made one, then failed on the next create (500), and its "+
				"retry was deferred: the ConfigMap cache had not seen the copy made. After %d failed syncs the "+
				"controller gave up:\n  %s\nIt counted the deferrals as failures: maxRetries is 5 retries of failed "+
				"syncs. A deferral is no failure: put the key back with queue.AddAfter(key, time.Second), not "+
				"AddRateLimited (task, step 4)", round, dropped[0])
		}
		if round == 6 {
			if len(dropped) == 0 {
				t.Fatalf("Greeting flaky asks for 8 copies; each sync made one, then failed on the next create (500), " +
					"and its retry was deferred: the ConfigMap cache had not seen the copy made. After 6 failed syncs in " +
					"a row the controller had not given up, as it does after maxRetries (5 retries): a deferral reset the " +
					"key's count of failures. Put the key back with AddAfter, and neither AddRateLimited nor Forget: " +
					"the key's count of failures stays as it was (task, step 4)")
			}
			break
		}
		api.ReleaseAndHold("configmaps") // the cache sees the copy made, and not the next
	}
	api.Lock()
	delete(api.flaky, "flaky")
	api.Unlock()
	api.Release("configmaps")
	for deadline := time.Now().Add(ex14Wait); api.live("flaky") < 8 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	api.settle(t, r)
	api.check(t)
	api.count(t, "flaky", 8, "once its creates no longer fail, Greeting flaky has its 8")
}

// A delete answered 404 found the copy gone: the cache still holds it.
func TestExercise14RemembersA404(t *testing.T) {
	api := ex14NewAPI(t)
	api.greeting("default", "gone", "uid-gone", "Ada", 3)
	r := ex14Start(t, api, false)
	api.settle(t, r)
	api.check(t)
	api.count(t, "gone", 3, "a Greeting with copies: 3 gets three ConfigMaps")
	if t.Failed() {
		t.FailNow()
	}
	mark := api.mark(r)
	api.hold(true)
	api.remove("default", api.newest("gone", 1)[0]) // by someone else; the cache still holds it
	api.greeting("default", "gone", "uid-gone", "Ada", 2)
	for deadline := time.Now().Add(ex14Wait); len(api.requestsSince(mark, "gone")) == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	api.settle(t, r)
	if got := api.requestsSince(mark, "gone"); !slices.Equal(got, []string{"delete 404"}) {
		t.Fatalf("Greeting gone went from 3 copies to 2 just after someone deleted its newest copy, before the ConfigMap "+
			"cache had seen that delete; the controller sent:\n  %s\nwant one delete, of the newest copy, answered 404",
			strings.Join(fakeapi.OrNone(got), "\n  "))
	}
	r.markLine = len(r.Lines())
	api.greeting("default", "gone", "uid-gone", "Grace", 2)
	r.expectAfter(t, mark, "the Greeting changed again", `"Greeting updated" greeting="default/gone" to="Grace"`)
	api.settle(t, r)
	if got := api.requestsSince(mark, "gone"); len(got) > 1 {
		t.Fatalf("Greeting gone went from 3 copies to 2: the controller's delete of the newest copy was answered 404, "+
			"someone having deleted it already; then the Greeting changed again before the ConfigMap cache had seen "+
			"that copy go, and the controller sent:\n  %s\nThe cache still held the copy, and the controller counted it. "+
			"A delete answered 404 found the copy gone already: remember its UID all the same, and defer the sync while "+
			"the cache holds it (task, step 3)", strings.Join(got, "\n  "))
	}
	api.hold(false)
	api.settle(t, r)
	api.check(t)
	api.count(t, "gone", 2, "copies: 2")
}

// A Greeting deleted and made again under the same name is another owner,
// with no writes of its own yet.
func TestExercise14RecordsByUID(t *testing.T) {
	api := ex14NewAPI(t)
	api.greeting("default", "again", "uid-again-1", "Ada", 0)
	r := ex14Start(t, api, false)
	api.settle(t, r)
	mark := api.mark(r)
	api.hold(true)
	api.greeting("default", "again", "uid-again-1", "Ada", 1)
	r.expectAfter(t, mark, "copies: 1", ex14Created+` greeting="default/again"`)
	api.settle(t, r)
	api.removeGreeting("default", "again")
	api.greeting("default", "again", "uid-again-2", "Grace", 1)
	for deadline := time.Now().Add(ex14Wait); api.live("again") == 0 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	api.check(t)
	if api.live("again") == 0 {
		t.Fatalf("Greeting again (UID uid-again-1) made a copy, and was deleted and made again under the same name (UID "+
			"uid-again-2) before the ConfigMap cache had seen that copy. Within %v the new Greeting got no copy: it "+
			"waited for a write of the old one. Key the records by the Greeting's UID, not its name; when the sync "+
			"finds the Greeting gone, or replaced by one with another UID, it forgets the old one's records (task, "+
			"step 3)", ex14Wait)
	}
	api.hold(false)
	api.settle(t, r)
	api.check(t)
	api.count(t, "again", 1, "the Greeting made again has its copy")
}

// A copy's delete found by a relist, and an update that takes a copy away
// from its Greeting, each wake the Greeting.
func TestExercise14EveryEventWakesItsGreeting(t *testing.T) {
	api := ex14NewAPI(t)
	api.greeting("default", "tomb", "uid-tomb", "Ada", 1)
	api.greeting("default", "orph", "uid-orph", "Ada", 1)
	r := ex14Start(t, api, false)
	api.settle(t, r)
	api.check(t)
	api.count(t, "orph", 1, "a Greeting with copies: 1 gets one ConfigMap")
	api.count(t, "tomb", 1, "a Greeting with copies: 1 gets one ConfigMap")
	if t.Failed() {
		t.FailNow()
	}
	wait := func(greeting string) bool {
		for deadline := time.Now().Add(ex14Wait); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if api.live(greeting) == 1 {
				return true
			}
		}
		return false
	}

	// Someone takes the copy of orph away from it: its owner reference removed.
	api.Change("configmaps", "default/"+api.controlled("orph")[0], func(obj map[string]any) {
		unstructured.RemoveNestedField(obj, "metadata", "ownerReferences")
	})
	if !wait("orph") {
		api.check(t)
		t.Fatalf("someone removed the owner reference of Greeting orph's only copy: the ConfigMap stays, no longer its "+
			"copy. Within %v the controller made no new one: the update's new ConfigMap names no Greeting, its old one "+
			"names orph. A ConfigMap's update queues the Greeting of the old object's controller and of the new's, as "+
			"in exercise 8 (task, step 2)", ex14Wait)
	}
	api.settle(t, r)

	// The copy of tomb is deleted while its event is held back, and the
	// ConfigMaps' watch lost: the list that follows finds it gone.
	api.hold(true)
	api.remove("default", api.controlled("tomb")[0])
	api.relist()
	if !wait("tomb") {
		api.check(t)
		t.Fatalf("Greeting tomb's only copy was deleted while the ConfigMaps' watch was lost; the informer listed again, "+
			"found the copy gone, and called the delete handler with a tombstone (FinalStateUnknown set; OptionalObj "+
			"the ConfigMap as last seen). Within %v the controller made no new copy: a ConfigMap's delete, a tombstone "+
			"too, queues the key of the Greeting its controller reference names (task, step 2)", ex14Wait)
	}
	api.settle(t, r)
	api.check(t)
	api.count(t, "orph", 1, "its copy taken away, Greeting orph has a new one")
	api.count(t, "tomb", 1, "its copy deleted, Greeting tomb has a new one")
}

// Run waits for both caches: a Greeting's copies are counted from a
// ConfigMap cache that has listed them.
func TestExercise14WaitsForBothCaches(t *testing.T) {
	api := ex14NewAPI(t)
	api.greeting("default", "kept", "uid-kept", "Ada", 2)
	api.copyAt("default", "greeting-kept-aaaaa", "uid-kept", "kept", 0)
	api.copyAt("default", "greeting-kept-bbbbb", "uid-kept", "kept", 1)
	api.DelayLists("configmaps", 300*time.Millisecond)
	r := ex14Start(t, api, false)
	api.settle(t, r)
	api.check(t)
	if got := api.requestsSince(0, "kept"); len(got) > 0 {
		t.Fatalf("Greeting kept asks for 2 copies and has them; the ConfigMap list came 0.3 s late, and the controller "+
			"sent:\n  %s\nwant nothing. It counted from a ConfigMap cache that had not listed them yet: in Run, wait for "+
			"both registrations' HasSyncedChecker(), the Greetings' and the ConfigMaps' (hint 1)", strings.Join(got, "\n  "))
	}
}

// With --namespace, the ConfigMap informer lists and watches that namespace
// only, as the Greeting informer does.
func TestExercise14WatchesOnlyItsNamespace(t *testing.T) {
	api := ex14NewAPI(t)
	api.ns = "shop"
	api.greeting("default", "hello", "uid-hello", "Ada", 1)
	api.greeting("shop", "hola", "uid-hola", "Ada", 1)
	r := ex14Start(t, api, false)
	r.expectAfter(t, 0, "with --namespace=shop, the Greeting in shop gets its copy",
		ex14Created+` greeting="shop/hola"`)
	api.settle(t, r)
	api.check(t)
}

// ex14API is fakeapi's API server, serving pods (none), Greetings and
// ConfigMaps, with what this test adds: creates with generateName, deletes,
// failures on demand, and a barrier that holds the first creates of some
// Greetings until each has arrived. A request's Note is the Greeting its
// copy is for.
type ex14API struct {
	*fakeapi.Server
	cond    *sync.Cond      // on the server's lock: broadcast when a barrier may open
	seq     int             // copies made
	fail    map[string]int  // "create hello": fail the next this many with 500
	barrier map[string]bool // Greeting names whose first create waits for the others'
	flaky   map[string]int  // "hello": its creates so far; every second one fails with 500
	ns      string          // with --namespace=ns: a ConfigMap request elsewhere is a problem
}

func ex14NewAPI(t *testing.T) *ex14API {
	api := &ex14API{Server: fakeapi.New(t, "pods", "greetings", "configmaps"), fail: map[string]int{}, flaky: map[string]int{}}
	api.cond = sync.NewCond(&api.Mutex)
	api.Filter, api.Write = api.filter, api.write
	return api
}

// filter records a problem with a list or watch of ConfigMaps not selected
// by the label, or a get.
func (api *ex14API) filter(r *fakeapi.Request) (int, any) {
	if r.Resource == "configmaps" && (r.Verb == "list" || r.Verb == "watch") && r.Query.Get("labelSelector") != ex14Label+"="+ex14LabelSet {
		api.ProblemLocked(fmt.Sprintf("the controller asked to %s ConfigMaps with labelSelector %q: its ConfigMap informer "+
			"must ask only for those labelled %s=%s (informers.WithTweakListOptions), never for every ConfigMap",
			r.Verb, r.Query.Get("labelSelector"), ex14Label, ex14LabelSet))
	}
	where := cmp.Or(r.Namespace, "every namespace")
	if api.ns != "" && r.Resource == "configmaps" && where != api.ns {
		api.ProblemLocked(fmt.Sprintf("with --namespace=%s, the controller sent a %s of "+
			"ConfigMaps in %s: give the ConfigMap informer's factory the namespace "+
			"(informers.WithNamespace), as the Greetings' factory has it", api.ns, r.Verb, where))
	}
	if r.Verb == "get" && r.Resource == "configmaps" {
		return api.write(r)
	}
	if r.Verb == "get" && api.ObjectsLocked(r.Resource) != nil {
		api.ProblemLocked(fmt.Sprintf("the controller sent a get of %s %s: it only reads Greetings, from its cache", r.Resource, r.Key()))
		return fakeapi.Status(apierrors.NewForbidden(r.GroupResource(), r.Name, fmt.Errorf("not in the task")))
	}
	return 0, nil
}

// write answers a write, with the server's lock held.
func (api *ex14API) write(r *fakeapi.Request) (int, any) {
	switch {
	case api.ObjectsLocked(r.Resource) == nil:
		return fakeapi.Status(apierrors.NewNotFound(r.GroupResource(), r.Name))
	case r.Resource != "configmaps":
		api.ProblemLocked(fmt.Sprintf("the controller sent a %s of %s %s: it only reads Greetings, from its cache", r.Verb, r.Resource, r.Key()))
		return fakeapi.Status(apierrors.NewForbidden(r.GroupResource(), r.Name, fmt.Errorf("not in the task")))
	case r.Verb == "create":
		return api.create(r)
	case r.Verb == "delete":
		return api.delete(r)
	}
	api.ProblemLocked(fmt.Sprintf("the controller sent a %s of ConfigMap %s: it only creates and deletes copies, and "+
		"counts them from its cache", r.Verb, r.Key()))
	return fakeapi.Status(apierrors.NewForbidden(r.GroupResource(), r.Name, fmt.Errorf("not in the task")))
}

// wait holds a create for a Greeting of api.barrier until a create for
// each of them has arrived, or 2 s have passed.
func (api *ex14API) wait(owner string) {
	if done, ok := api.barrier[owner]; !ok || done {
		return
	}
	api.barrier[owner] = true
	deadline := time.Now().Add(2 * time.Second)
	go func() { time.Sleep(2 * time.Second); api.Lock(); api.cond.Broadcast(); api.Unlock() }()
	for slices.Contains(slices.Collect(maps.Values(api.barrier)), false) {
		if time.Now().After(deadline) {
			api.ProblemLocked(fmt.Sprintf("with --greeting-workers=%d, the controller synced one Greeting at a time: Greeting "+
				"%s's first create waited 2 s for the create of another Greeting, synced at the same time, which never "+
				"came. Start that many workers in GreetingController.Run, each running processNextItem (task, step 5)",
				ex14Workers, owner))
			api.barrier = nil
			return
		}
		api.cond.Wait()
	}
	api.cond.Broadcast()
}

func (api *ex14API) create(r *fakeapi.Request) (int, any) {
	obj, err := fakeapi.Decode(r.Body)
	if err != nil {
		return fakeapi.Status(apierrors.NewBadRequest(err.Error()))
	}
	owner := ex14Owner(obj)
	r.Note = owner
	api.wait(owner)
	if api.fail["create "+owner] > 0 {
		api.fail["create "+owner]--
		return fakeapi.Status(apierrors.NewInternalError(fmt.Errorf("etcdserver: request timed out")))
	}
	if n, ok := api.flaky[owner]; ok {
		api.flaky[owner]++
		if n%2 == 1 {
			return fakeapi.Status(apierrors.NewInternalError(fmt.Errorf("etcdserver: request timed out")))
		}
	}
	meta, _ := obj["metadata"].(map[string]any)
	prefix, _ := meta["generateName"].(string)
	refs := fakeapi.Refs(obj)
	greeting := api.ObjectLocked("greetings", r.Namespace+"/"+owner)
	var ref map[string]any
	if len(refs) == 1 {
		ref, _ = refs[0].(map[string]any)
	}
	switch {
	case prefix != "greeting-"+owner+"-" || meta["name"] != nil && meta["name"] != "":
		api.ProblemLocked(fmt.Sprintf("the controller created a ConfigMap named %v, generateName %q: make each copy with "+
			"generateName greeting-<the Greeting's name>- and no name (the API server adds 5 characters)", meta["name"], prefix))
	case fakeapi.Labels(obj)[ex14Label] != ex14LabelSet:
		api.ProblemLocked(fmt.Sprintf("the controller created a copy of %s without the label %s=%s: its ConfigMap informer "+
			"never sees it, and it counts it as missing for ever", owner, ex14Label, ex14LabelSet))
	case ref == nil || greeting == nil || ref["uid"] != fakeapi.Meta(greeting, "uid") || ref["controller"] != true ||
		ref["blockOwnerDeletion"] != true || ref["kind"] != "Greeting" || ref["apiVersion"] != "demo.example.com/v1alpha1":
		api.ProblemLocked(fmt.Sprintf("the controller created a copy of %s with owner references %v: want one, made with "+
			"metav1.NewControllerRef(greeting, the Greeting's GroupVersionKind): its UID, controller and "+
			"blockOwnerDeletion true", owner, refs))
	}
	api.seq++
	name := fmt.Sprintf("%s%05d", prefix, api.seq)
	meta["name"], meta["namespace"] = name, r.Namespace
	meta["uid"] = fmt.Sprintf("uid-cm-%d", api.seq)
	meta["creationTimestamp"] = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(api.RVLocked()+1) * time.Minute).Format(time.RFC3339)
	delete(meta, "generateName")
	api.StoreLocked("configmaps", obj)
	return http.StatusCreated, obj
}

func (api *ex14API) delete(r *fakeapi.Request) (int, any) {
	obj := api.ObjectLocked("configmaps", r.Key())
	owner := ex14Owner(obj)
	if obj == nil { // gone: its name says the Greeting, greeting-<name>-<5 characters>
		owner = strings.TrimPrefix(r.Name[:max(0, strings.LastIndex(r.Name, "-"))], "greeting-")
	}
	r.Note = owner
	if obj == nil {
		return fakeapi.Status(apierrors.NewNotFound(r.GroupResource(), r.Name))
	}
	if api.fail["delete "+owner] > 0 {
		api.fail["delete "+owner]--
		return fakeapi.Status(apierrors.NewInternalError(fmt.Errorf("etcdserver: request timed out")))
	}
	controller := fakeapi.ControllerUID(fakeapi.Refs(obj))
	if controller == "" || controller != fakeapi.Meta(api.ObjectLocked("greetings", r.Namespace+"/"+owner), "uid") {
		api.ProblemLocked(fmt.Sprintf("the controller deleted ConfigMap %s, which no Greeting of that name controls (its "+
			"controller's UID: %q): it adopts nothing, and deletes only its own copies, those the index by controller "+
			"UID finds", r.Name, controller))
	}
	if opts, err := fakeapi.Decode(r.Body); err == nil {
		if uid, _, _ := unstructured.NestedString(opts, "preconditions", "uid"); uid != "" && uid != fakeapi.Meta(obj, "uid") {
			return fakeapi.Status(apierrors.NewConflict(r.GroupResource(), r.Name, fmt.Errorf("uid precondition")))
		}
	}
	api.RemoveLocked("configmaps", r.Namespace, r.Name)
	return http.StatusOK, map[string]any{"kind": "Status", "apiVersion": "v1", "status": "Success"}
}

// The test's side.

func (api *ex14API) greeting(ns, name, uid, to string, copies int) {
	api.Store("greetings", map[string]any{"metadata": map[string]any{"namespace": ns, "name": name, "uid": uid},
		"spec": map[string]any{"to": to, "copies": int64(copies)}})
}

// copyAt stores a labelled ConfigMap controlled by the Greeting with uid
// (none if ""), made minutes after the epoch.
func (api *ex14API) copyAt(ns, name, uid, owner string, minutes int) {
	api.Store("configmaps", ex14Copy(ns, name, uid, owner, minutes))
}

// ex14Copy is the ConfigMap copyAt stores.
func ex14Copy(ns, name, uid, owner string, minutes int) map[string]any {
	meta := map[string]any{"namespace": ns, "name": name, "uid": "uid-" + name,
		"labels":            map[string]any{ex14Label: ex14LabelSet},
		"creationTimestamp": time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(minutes) * time.Minute).Format(time.RFC3339)}
	if uid != "" {
		meta["ownerReferences"] = []any{map[string]any{"apiVersion": "demo.example.com/v1alpha1", "kind": "Greeting",
			"name": owner, "uid": uid, "controller": true, "blockOwnerDeletion": true}}
	}
	return map[string]any{"metadata": meta, "data": map[string]any{"greeting": "x"}}
}

// controlled returns the names of the ConfigMaps the Greeting controls.
func (api *ex14API) controlled(greeting string) []string {
	api.Lock()
	defer api.Unlock()
	var names []string
	g := api.ObjectLocked("greetings", "default/"+greeting)
	for _, obj := range api.ObjectsLocked("configmaps") {
		if g != nil && fakeapi.ControllerUID(fakeapi.Refs(obj)) == fakeapi.Meta(g, "uid") {
			names = append(names, fakeapi.Meta(obj, "name"))
		}
	}
	slices.Sort(names)
	return names
}

func (api *ex14API) remove(ns, name string) { api.Remove("configmaps", ns, name) }

func (api *ex14API) removeGreeting(ns, name string) { api.Remove("greetings", ns, name) }

// hold holds back, or releases, the ConfigMaps' watch events from now on.
func (api *ex14API) hold(hold bool) {
	if hold {
		api.Hold("configmaps")
	} else {
		api.Release("configmaps")
	}
}

// jump moves the resourceVersion on, as other writes to the cluster do.
func (api *ex14API) jump(to int) { api.JumpRV(to) }

// relist ends the ConfigMaps' watches; their next watch gets 410 Gone, so
// the informer lists again. The events held back are never sent: the list
// has what they said.
func (api *ex14API) relist() { api.Expire("configmaps") }

func (api *ex14API) setFail(verb, greeting string, n int) {
	api.Lock()
	defer api.Unlock()
	api.fail[verb+" "+greeting] = n
}

func (api *ex14API) check(t *testing.T) { t.Helper(); api.Check(t) }

// copies returns the names of the Greeting's copies, oldest first.
func (api *ex14API) copies(greeting string) []string {
	api.Lock()
	defer api.Unlock()
	var names []string
	for _, obj := range api.ObjectsLocked("configmaps") {
		if ex14Owner(obj) == greeting && strings.HasPrefix(fakeapi.Meta(obj, "uid"), "uid-cm-") {
			names = append(names, fakeapi.Meta(obj, "name"))
		}
	}
	slices.Sort(names)
	return names
}

func (api *ex14API) live(greeting string) int {
	api.Lock()
	defer api.Unlock()
	n := 0
	for _, obj := range api.ObjectsLocked("configmaps") {
		if g := api.ObjectLocked("greetings", "default/"+greeting); g != nil && fakeapi.ControllerUID(fakeapi.Refs(obj)) == fakeapi.Meta(g, "uid") {
			n++
		}
	}
	return n
}

// newest returns the n newest copies the controller made for greeting
// (their names grow with time).
func (api *ex14API) newest(greeting string, n int) []string {
	names := api.copies(greeting)
	slices.Reverse(names)
	return names[:min(n, len(names))]
}

func (api *ex14API) count(t *testing.T, greeting string, want int, why string) {
	t.Helper()
	if got := api.live(greeting); got != want {
		t.Errorf("%s: Greeting %s has %d copies (ConfigMaps it controls), want %d; the requests for its copies:\n  %s",
			why, greeting, got, want, strings.Join(api.requestsSince(0, greeting), "\n  "))
	}
}

func (api *ex14API) names(t *testing.T, greeting string, want []string, why string) {
	t.Helper()
	api.Lock()
	var got []string
	for _, obj := range api.ObjectsLocked("configmaps") {
		if ex14Owner(obj) == greeting {
			got = append(got, fakeapi.Meta(obj, "name"))
		}
	}
	api.Unlock()
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("%s; its ConfigMaps are %q, want %q", why, got, want)
	}
}

func (api *ex14API) deletedSince(t *testing.T, mark int, want []string, why string) {
	t.Helper()
	var got []string
	for _, r := range api.Requests(mark) {
		if r.Verb == "delete" && r.Code == http.StatusOK {
			got = append(got, r.Name)
		}
	}
	slices.Sort(got)
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(got, want) {
		t.Errorf("%s: the controller deleted %q, want %q (the newest first: the latest creationTimestamp, then the "+
			"greatest name)", why, got, want)
	}
}

func (api *ex14API) mark(r *ex14Run) int {
	r.markLine = len(r.Lines())
	return api.Mark()
}

// requestsSince returns the creates and deletes of the Greeting's copies
// since mark: each "verb code".
func (api *ex14API) requestsSince(mark int, greeting string) []string {
	var got []string
	for _, r := range api.Requests(mark) {
		if r.Resource == "configmaps" && r.Note == greeting && (r.Verb == "create" || r.Verb == "delete") {
			got = append(got, fmt.Sprintf("%s %d", r.Verb, r.Code))
		}
	}
	return got
}

func (api *ex14API) writesSince(t *testing.T, mark int, greeting string, want []string, why string) {
	t.Helper()
	api.writesOr(t, mark, greeting, want, why, "")
}

func (api *ex14API) writesOr(t *testing.T, mark int, greeting string, want []string, why, hint string) {
	t.Helper()
	got := api.requestsSince(mark, greeting)
	if slices.Equal(got, want) {
		return
	}
	count := func(s []string, verb string) int {
		return len(slices.DeleteFunc(slices.Clone(s), func(r string) bool { return !strings.HasPrefix(r, verb+" ") }))
	}
	switch {
	case count(got, "create") > count(want, "create") || count(got, "delete") > count(want, "delete"):
		hint = "\nMore than the copies missing or over: the controller counted from a cache that had not yet seen " +
			"its own creates or deletes (one copy's event comes, and the sync runs before the next one's). Remember " +
			"the resourceVersion of each create and the UID of each delete, per Greeting UID, and defer the sync " +
			"until the cache has caught up (task, step 3)"
	case len(got) >= len(want):
		hint = ""
	}
	t.Fatalf("%s: the controller's creates and deletes of Greeting %s's copies were:\n  %s\nwant:\n  %s%s", why,
		greeting, strings.Join(fakeapi.OrNone(got), "\n  "), strings.Join(want, "\n  "), hint)
}

// stringHint says what a string comparison of resourceVersions does here.
func (api *ex14API) stringHint() string {
	return "\n(The resourceVersions had just gone from 2 digits to 3: the copy was written at 100 or so while the " +
		"cache was at about 10. Compared as strings, \"100\" < \"11\": compare them with " +
		"resourceversion.CompareResourceVersion.)"
}

// settle waits until the controller has made no request for 200 ms, and
// has none open.
func (api *ex14API) settle(t *testing.T, r *ex14Run) { api.settleFor(t, r, 200*time.Millisecond) }

func (api *ex14API) settleFor(t *testing.T, _ *ex14Run, quiet time.Duration) {
	t.Helper()
	if !api.Settle(quiet, ex14Wait) {
		api.check(t)
		t.Fatalf("the controller has not stopped sending requests for %v", ex14Wait)
	}
}

// ex14Owner is the name in obj's controller owner reference.
func ex14Owner(obj map[string]any) string {
	if ref := fakeapi.Controller(fakeapi.Refs(obj)); ref != nil {
		return fmt.Sprint(ref["name"])
	}
	return ""
}

// ex14Run is a run of run, and the line the last mark was at.
type ex14Run struct {
	*fakeapi.Run
	markLine int
	api      *ex14API
}

// ex14Start runs run with --greeting-workers=4; without that flag, with
// one worker, unless workers is true. With api.ns, it adds --namespace.
func ex14Start(t *testing.T, api *ex14API, workers bool) *ex14Run {
	t.Helper()
	args := []string{"--kubeconfig", writeKubeconfig(t, api.URL, bearer, false), "--startup-timeout=5s", "--sync-timeout=5s"}
	if api.ns != "" {
		args = append(args, "--namespace="+api.ns)
	}
	var o options
	fs := newFlagSet(&o)
	fs.SetOutput(io.Discard)
	if err := fs.Parse(append(args, fmt.Sprintf("--greeting-workers=%d", ex14Workers))); err != nil {
		if workers || !strings.Contains(err.Error(), "greeting-workers") {
			t.Fatalf("demo-controller's flags: %v: add a flag --greeting-workers, the number of workers that sync "+
				"Greetings, 1 by default (task, step 5)", err)
		}
		o = options{}
		fs = newFlagSet(&o)
		fs.SetOutput(io.Discard)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
	}
	return &ex14Run{api: api, Run: fakeapi.Start(t, ex14Wait, 20, func(ctx context.Context) error { return run(ctx, o) })}
}

func (r *ex14Run) matchingAfter(_ int, s string) []string { return r.Containing(r.markLine, s) }

// expectAfter waits for a line that starts with each of wants, logged
// since the last mark.
func (r *ex14Run) expectAfter(t *testing.T, _ int, why string, wants ...string) {
	t.Helper()
	for deadline := time.Now().Add(ex14Wait); ; time.Sleep(5 * time.Millisecond) {
		r.api.check(t)
		missing := r.Missing(r.markLine, wants...)
		if len(missing) == 0 {
			return
		}
		if r.Returned() {
			t.Fatalf("run returned %v before demo-controller logged:\n  %s", r.Err, strings.Join(missing, "\n  "))
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s. Within %v demo-controller did not log:\n  %s", why, ex14Wait, strings.Join(missing, "\n  "))
		}
	}
}
