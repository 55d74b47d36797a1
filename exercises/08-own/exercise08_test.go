//go:build exercise

// The test of exercise 8 (exercises/08-own/README.md). It is not part of
// the project's tests: copy it into the project's root and run it with the
// exercise tag, as the exercise's README says.

package main

import (
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"demo-controller/internal/fakeapi"
)

// ex08Wait bounds each wait: the API server below answers at once.
const ex08Wait = 5 * time.Second

// What the task names.
const (
	ex08Label    = "app.kubernetes.io/managed-by"
	ex08LabelSet = "demo-controller"
	ex08Created  = `"ConfigMap created"`
	ex08Updated  = `"ConfigMap updated"`
	ex08NotOurs  = `"ConfigMap exists and is not this Greeting's; left as it is"`
	ex08Invalid  = `"ConfigMap cannot be made"`
	ex08Dropping = `"Dropping greeting after retries"`
	ex08TooLong  = "must be no more than 253 characters"
)

// demo-controller.yaml's ClusterRole grants exactly the verbs the task's
// controller uses.
func TestExercise08ClusterRole(t *testing.T) {
	verbs, _ := fakeapi.Grants(t, "demo-controller.yaml")
	cm := verbs["/configmaps"]
	switch {
	case slices.Contains(cm, "delete") || slices.Contains(cm, "deletecollection") || slices.Contains(cm, "*"):
		t.Errorf("demo-controller.yaml's ClusterRole lets the controller delete ConfigMaps (%s): it never deletes one. The "+
			"garbage collector deletes a Greeting's ConfigMap with its Greeting; and putting back an owner reference that "+
			"someone removed, which would need delete (the admission plugin's rule), is what the task's controller never "+
			"does: such a ConfigMap is no longer its own", strings.Join(cm, ", "))
	case slices.Contains(cm, "update"):
		t.Errorf("demo-controller.yaml's ClusterRole grants update on ConfigMaps: the controller creates them and applies " +
			"(a PATCH); an update (PUT) of the whole ConfigMap is what it must never send")
	}
	if !slices.Contains(verbs["demo.example.com/greetings/finalizers"], "update") {
		t.Errorf("demo-controller.yaml's ClusterRole grants no update on greetings/finalizers: on a cluster (with the " +
			"OwnerReferencesPermissionEnforcement admission plugin), a ConfigMap created with blockOwnerDeletion: true is " +
			"refused: \"cannot set blockOwnerDeletion if an ownerReference refers to a resource you can't set finalizers on\". " +
			"Add a rule: apiGroups: [\"demo.example.com\"], resources: [\"greetings/finalizers\"], verbs: [\"update\"]")
	}
	want := map[string][]string{
		"/pods":                                 {"list", "watch"},
		"demo.example.com/greetings":            {"list", "watch"},
		"demo.example.com/greetings/finalizers": {"update"},
		"/configmaps":                           {"create", "get", "list", "patch", "watch"},
		"events.k8s.io/events":                  {"create"},
	}
	if !maps.EqualFunc(verbs, want, slices.Equal) {
		t.Errorf("demo-controller.yaml's ClusterRole grants:\n  %s\nwant exactly the verbs the controller uses:\n  %s\n"+
			"(ConfigMaps: list and watch for the informer, create to make one, patch to apply, get to read one whose name is "+
			"taken; events.k8s.io events: create, for the Warning; greetings/finalizers: update, for blockOwnerDeletion)",
			fakeapi.Rules(verbs), fakeapi.Rules(want))
	}
}

// A ConfigMap's event reaches its Greeting through its controller owner
// reference (metav1.GetControllerOf), never through a Greeting's name taken
// from the ConfigMap's name: a ConfigMap someone else made under that name
// would pass for the Greeting's. (Only the source shows it: with the task's
// names, both reach the same key.)
func TestExercise08ChildEventsReachTheOwner(t *testing.T) {
	files, _ := filepath.Glob("*.go")
	controllerOf := false
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if slice, ok := n.(*ast.SliceExpr); ok && slice.Low != nil && slice.High == nil {
				// name[len("greeting-"):]: the same guess as TrimPrefix
				if call, ok := slice.Low.(*ast.CallExpr); ok && len(call.Args) == 1 {
					if lit, ok := call.Args[0].(*ast.BasicLit); ok && strings.Contains(lit.Value, "greeting-") {
						t.Errorf("%s takes a Greeting's name from a ConfigMap's name (a slice after len(%s)): the name "+
							"says nothing about who owns a ConfigMap. Map a ConfigMap's event to the Greeting named by its "+
							"controller owner reference (metav1.GetControllerOf: kind Greeting, group demo.example.com)", name, lit.Value)
					}
				}
			}
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok {
				controllerOf = controllerOf || sel.Sel.Name == "GetControllerOf"
				if slices.Contains([]string{"TrimPrefix", "CutPrefix", "Replace", "ReplaceAll"}, sel.Sel.Name) {
					for _, arg := range call.Args {
						if lit, ok := arg.(*ast.BasicLit); ok && strings.Contains(lit.Value, "greeting-") {
							t.Errorf("%s takes a Greeting's name from a ConfigMap's name (%s with %s): the name says nothing "+
								"about who owns a ConfigMap. Map a ConfigMap's event to the Greeting named by its controller "+
								"owner reference (metav1.GetControllerOf: kind Greeting, group demo.example.com)", name, sel.Sel.Name, lit.Value)
						}
					}
				}
			}
			return true
		})
	}
	if !controllerOf {
		t.Errorf("no Go file of the project's root calls metav1.GetControllerOf: a ConfigMap's event must reach the Greeting " +
			"its controller owner reference names, and a ConfigMap is this Greeting's only if that reference names its UID")
	}
}

// The controller, run as demo-controller runs it, against an API server of
// the test's own that serves Greetings, ConfigMaps and Events over HTTP,
// and answers creates and applies as kube-apiserver v1.36 does.
func TestExercise08OwnsItsConfigMap(t *testing.T) {
	long := strings.Repeat("a", 250) // greeting- and 250 letters: 259 characters, where a name may have 253
	api := ex08NewAPI(t)
	api.greeting("default", "hello", "uid-hello", "Ada", "fr")
	api.greeting("default", "done", "uid-done", "Alan", "de")
	api.greeting("default", "taken", "uid-taken", "Grace", "")
	api.greeting("default", "stale", "uid-stale-2", "Ada", "")
	api.greeting("shop", "hola", "uid-hola", "Ada", "es")
	api.greeting("default", long, "uid-long", "Alan", "")
	api.configMap("default", "greeting-done", "Hallo, Alan", true, ex08Ref("done", "uid-done"))           // right already
	api.configMap("default", "greeting-taken", "someone else's", false)                                   // kubectl create configmap
	api.configMap("default", "greeting-stale", "Hello, Ada (old)", true, ex08Ref("stale", "uid-stale-1")) // an older Greeting's
	api.configMap("default", "unrelated", "x", false)

	r := ex08Start(t, api, "", 0)
	r.expect(t, "a Greeting asks for a ConfigMap greeting-<name> in its namespace, with its text: the controller creates it",
		ex08Created+` greeting="default/hello"`, ex08Created+` greeting="shop/hola"`)
	r.expect(t, "a ConfigMap greeting-taken that someone else made (no label, no owner reference) is left as it is, "+
		"and reported in one line", ex08NotOurs+` greeting="default/taken"`)
	r.expect(t, "a ConfigMap greeting-stale controlled by another Greeting (an older one of the same name: another "+
		"UID) is not this Greeting's: left as it is, and reported in one line", ex08NotOurs+` greeting="default/stale"`)
	r.expect(t, "a Greeting whose ConfigMap's name is too long once prefixed is reported in one line, with the API "+
		"server's words", ex08Invalid)
	api.settle(t, r)
	api.check(t)
	for _, c := range []struct{ name, text string }{{"greeting-hello", "Bonjour, Ada"}, {"greeting-done", "Hallo, Alan"}} {
		if got := api.data("default", c.name)["greeting"]; got != c.text {
			t.Errorf("ConfigMap default/%s says %q, want %q (fr: Bonjour, de: Hallo, es: Hola, en or no language: Hello)", c.name, got, c.text)
		}
	}
	if got := api.data("shop", "greeting-hola")["greeting"]; got != "Hola, Ada" {
		t.Errorf("ConfigMap shop/greeting-hola says %q, want \"Hola, Ada\"", got)
	}
	r.once(t, ex08Invalid, ex08TooLong)
	api.noWrites(t, "at start, for a ConfigMap that already says what its Greeting asks", "greeting-done")
	api.writes(t, "greeting-taken", []string{"create 409", "get 200"}, "the name taken by a ConfigMap the "+
		"controller does not control: a create, refused (AlreadyExists), and one read to learn whose it is; no apply, "+
		"which would take it over; no retry")
	api.writes(t, "greeting-stale", nil, "a ConfigMap in the cache that another Greeting controls (its controller "+
		"owner reference names another UID): the controller's own ConfigMap is the one its owner reference says, "+
		"whatever its name")
	api.writes(t, "greeting-"+long, []string{"create 422"}, "a name too long: the API server refuses it (422 "+
		"Invalid), and will refuse it every time: report it, once, and do not retry")
	for _, name := range []string{"taken", "stale", long} {
		api.warnings(t, name, 1)
	}
	if t.Failed() {
		t.FailNow()
	}

	// Another writer adds a key of its own; someone edits the text.
	mark := ex08MarkOf(api, r)
	api.edit(t, "default", "greeting-hello", "other", map[string]string{"note": "mine"})
	api.Lock()
	api.fail["greeting-hello"] = 1 // the first apply fails: a passing error of the server's
	api.Unlock()
	api.edit(t, "default", "greeting-hello", "kubectl-edit", map[string]string{"greeting": "Hi"})
	r.expectAfter(t, mark, "someone edited the text of the ConfigMap: the controller puts it back, and logs it (the "+
		"server answers its first apply with 500 Internal Server Error, which passes)",
		ex08Updated+` greeting="default/hello"`)
	api.settle(t, r)
	api.check(t)
	if got := api.data("default", "greeting-hello"); got["greeting"] != "Bonjour, Ada" || got["note"] != "mine" {
		t.Fatalf("after someone edited greeting-hello's text, and another writer added a key, it holds %v; want the text "+
			"put back, and the other key kept (greeting: Bonjour, Ada, note: mine)", got)
	}
	api.writesSince(t, mark, "greeting-hello", []string{"apply 500", "apply 200"}, "an edit: one apply puts the text "+
		"back (the server answered the first with 500 Internal Server Error, which passes: return the error, and the "+
		"worker retries)")

	// Edited again, and the server fails 5 applies in a row: the first try
	// and 5 retries. The retries of the edit above must not count: the
	// worker forgets a key's failures once its sync succeeds.
	mark = ex08MarkOf(api, r)
	api.Lock()
	api.fail["greeting-hello"] = 5
	api.Unlock()
	api.edit(t, "default", "greeting-hello", "kubectl-edit", map[string]string{"greeting": "Hi again"})
	api.settle(t, r)
	api.check(t)
	if lines := r.matchingAfter(mark, ex08Dropping); len(lines) > 0 {
		t.Fatalf("the server failed 5 applies in a row, and the controller gave up after 5 calls, not 6 (the first and "+
			"maxRetries = 5 retries):\n  %s\nThe 500 of the edit before still counted: after a sync that succeeds, call "+
			"queue.Forget(key), as controller.go does, so that a key's next change gets every retry again", lines[0])
	}
	api.writesSince(t, mark, "greeting-hello", []string{"apply 500", "apply 500", "apply 500", "apply 500", "apply 500",
		"apply 200"}, "the server failed 5 applies in a row: the first call and 5 retries (maxRetries), the last succeeding")

	// A server that fails every apply: given up after the first call and 5
	// retries, in one line.
	mark = ex08MarkOf(api, r)
	api.Lock()
	api.fail["greeting-hello"] = 100
	api.Unlock()
	api.edit(t, "default", "greeting-hello", "kubectl-edit", map[string]string{"greeting": "Hi for good"})
	r.expectAfter(t, mark, "the server fails every apply: after the first call and maxRetries (5) retries, the "+
		"controller gives up on the key in one line, and calls queue.Forget(key)", ex08Dropping)
	api.settle(t, r)
	api.Lock()
	api.fail["greeting-hello"] = 0
	api.Unlock()
	api.writesSince(t, mark, "greeting-hello", slices.Repeat([]string{"apply 500"}, 6), "the server fails every apply: "+
		"the first call and maxRetries = 5 retries, then no more (until the Greeting or the ConfigMap changes)")

	// Someone deletes it.
	mark = ex08MarkOf(api, r)
	api.Remove("configmaps", "default", "greeting-hello")
	r.expectAfter(t, mark, "someone deleted the ConfigMap: the controller makes it again", ex08Created+` greeting="default/hello"`)
	api.settle(t, r)
	api.check(t)
	api.writesSince(t, mark, "greeting-hello", []string{"create 201"}, "a ConfigMap deleted: one create")
	if got := api.data("default", "greeting-hello")["greeting"]; got != "Bonjour, Ada" {
		t.Fatalf("ConfigMap greeting-hello, made again, says %q, want \"Bonjour, Ada\"", got)
	}

	// The Greeting changes, and its ConfigMap is deleted just as the apply
	// is on its way.
	mark = ex08MarkOf(api, r)
	api.Lock()
	api.before["greeting-hello"] = func() { api.RemoveLocked("configmaps", "default", "greeting-hello") }
	api.Unlock()
	api.greeting("default", "hello", "uid-hello", "Ada", "es")
	r.expectAfter(t, mark, "the ConfigMap was deleted as the apply was on its way: the controller makes it again",
		ex08Created+` greeting="default/hello"`)
	api.settle(t, r)
	api.check(t)
	var got []string
	for _, req := range api.Requests(mark.req) {
		if req.Resource == "configmaps" && req.Name == "greeting-hello" {
			got = append(got, fmt.Sprintf("%s %d", req.Verb, req.Code))
		}
	}
	// (A sync of the key that comes before the cache has seen the new
	// ConfigMap tries to create it, and finds it is its own: allowed.)
	for len(got) >= 3 && slices.Equal(got[len(got)-2:], []string{"create 409", "get 200"}) {
		got = got[:len(got)-2]
	}
	if n := len(got); n < 2 || n > 7 || got[n-1] != "create 201" || slices.ContainsFunc(got[:n-1], func(s string) bool { return s != "apply 409" }) {
		t.Fatalf("the ConfigMap was deleted just before the controller's apply reached the server; its requests for it were:\n  %s\n"+
			"want: the apply refused (409: it names the UID of a ConfigMap that is gone), then, once the cache has seen the "+
			"delete, one create", strings.Join(got, "\n  "))
	}
	if got := api.data("default", "greeting-hello")["greeting"]; got != "Hola, Ada" {
		t.Fatalf("ConfigMap greeting-hello says %q, want \"Hola, Ada\"", got)
	}
	if lines := r.matchingAfter(mark, ex08NotOurs); len(lines) > 0 {
		t.Fatalf("the apply to greeting-hello was refused with 409 (it named the UID of a ConfigMap deleted just "+
			"before), and the controller said:\n  %s\nA 409 there means the ConfigMap is gone, not someone else's: "+
			"return the error, and the retry, once the cache has seen the delete, creates it", lines[0])
	}

	// A Greeting created, then changed before the cache has seen the
	// ConfigMap made for it (the ConfigMaps' watch events held back).
	mark = ex08MarkOf(api, r)
	api.holdConfigMapEvents(true)
	api.greeting("default", "slow", "uid-slow", "Ada", "")
	r.expectAfter(t, mark, "a Greeting created: its ConfigMap made", ex08Created+` greeting="default/slow"`)
	api.greeting("default", "slow", "uid-slow", "Ada", "de")
	api.settle(t, r)
	api.holdConfigMapEvents(false)
	r.expectAfter(t, mark, "the Greeting changed (de): its ConfigMap follows, once the cache has seen it", ex08Updated+` greeting="default/slow"`)
	api.settle(t, r)
	api.check(t)
	if lines := r.matchingAfter(mark, ex08Dropping); len(lines) > 0 {
		t.Fatalf("the Greeting changed before the cache had seen the ConfigMap the controller had just made; the "+
			"controller then tried to create it again, and gave up after retries:\n  %s\nA ConfigMap not in the cache may "+
			"be there all the same (a cache is behind the server): AlreadyExists is no failure. Read it from the API "+
			"server (Get): if this Greeting controls it, it is yours, and its event will come; if not, it is someone else's", lines[0])
	}
	if got := api.data("default", "greeting-slow")["greeting"]; got != "Hallo, Ada" {
		t.Fatalf("ConfigMap greeting-slow says %q, want \"Hallo, Ada\"", got)
	}
	// (A sync between the two held events, ADDED then MODIFIED, sees the
	// older text in the cache and applies once more, changing nothing: as
	// a real cache would.)
	api.writesSinceOr(t, mark, "greeting-slow", []string{"create 201", "create 409", "get 200", "apply 200"}, "apply 200", "a Greeting "+
		"changed before the cache had seen the ConfigMap just made for it, with an older text: made once; then, not "+
		"in the cache, a create refused (AlreadyExists), one read that finds it is this Greeting's but says the older "+
		"text, and one apply of the new text (its event, when it comes, finds it right: no write)")

	// A Greeting created, then changed in a way that leaves its text as it
	// is, before the cache has seen its ConfigMap: nothing to write.
	mark = ex08MarkOf(api, r)
	api.holdConfigMapEvents(true)
	api.greeting("default", "ada", "uid-ada", "Ada", "fr")
	r.expectAfter(t, mark, "a Greeting created: its ConfigMap made", ex08Created+` greeting="default/ada"`)
	api.greeting("default", "ada", "uid-ada", "Ada", "fr") // a new resourceVersion, the same spec
	r.expectAfter(t, mark, "a Greeting changed is logged", `"Greeting updated" greeting="default/ada"`)
	api.settle(t, r)
	api.holdConfigMapEvents(false)
	api.settle(t, r)
	api.check(t)
	api.writesSince(t, mark, "greeting-ada", []string{"create 201", "create 409", "get 200"}, "a Greeting changed, its "+
		"text the same, before the cache had seen the ConfigMap just made for it: a create refused (AlreadyExists), and "+
		"one read that finds it is this Greeting's and says what it asks. Nothing differs: no apply")

	// Someone removes its label (kubectl label configmap greeting-ada
	// app.kubernetes.io/managed-by-). The ConfigMap informer lists and
	// watches only labelled ConfigMaps: kube-apiserver tells it the
	// ConfigMap is DELETED. It is still there, and still the Greeting's.
	mark = ex08MarkOf(api, r)
	api.unlabel(t, "default", "greeting-ada", nil)
	r.expectAfter(t, mark, ex08Unlabelled("someone removed the label of ConfigMap greeting-ada"), ex08Updated+` greeting="default/ada"`)
	api.settle(t, r)
	api.check(t)
	api.rightNow(t, "greeting-ada", "Bonjour, Ada", "after someone removed its label")
	api.writesSince(t, mark, "greeting-ada", []string{"create 409", "get 200", "apply 200"}, "someone removed the label "+
		"of ConfigMap greeting-ada: out of the cache, so a create, refused (AlreadyExists), one read that finds it is "+
		"this Greeting's, and one apply that puts the label back")

	// Someone removes its label and edits its text, in one write.
	mark = ex08MarkOf(api, r)
	api.unlabel(t, "default", "greeting-ada", map[string]string{"greeting": "Hi"})
	r.expectAfter(t, mark, ex08Unlabelled("someone removed the label of ConfigMap greeting-ada and edited its text"),
		ex08Updated+` greeting="default/ada"`)
	api.settle(t, r)
	api.check(t)
	api.rightNow(t, "greeting-ada", "Bonjour, Ada", "after someone removed its label and edited its text")
	api.writesSince(t, mark, "greeting-ada", []string{"create 409", "get 200", "apply 200"}, "someone removed the label "+
		"of ConfigMap greeting-ada and edited its text: one apply puts both back")

	// Someone deletes greeting-stale, the older Greeting's ConfigMap, whose
	// name stood in the way: the Greeting of that name can have its own now.
	mark = ex08MarkOf(api, r)
	api.Remove("configmaps", "default", "greeting-stale")
	r.expectAfter(t, mark, "the ConfigMap that stood in the way of Greeting stale (another Greeting's) was deleted: "+
		"its delete event reaches the Greeting of that name, whose sync then makes its own. What was reported once is "+
		"tried again when the Greeting or that ConfigMap changes: remember the ConfigMap's resourceVersion (none, once "+
		"it is gone) beside the Greeting's, not the Greeting's alone", ex08Created+` greeting="default/stale"`)
	api.settle(t, r)
	api.check(t)
	if got := api.data("default", "greeting-stale")["greeting"]; got != "Hello, Ada" {
		t.Fatalf("ConfigMap greeting-stale, made for a Greeting with no language, says %q; want \"Hello, Ada\": a "+
			"Greeting with no language says Hello, as en does", got)
	}

	// Someone adds an owner reference in front of greeting-ada's controller
	// reference (to Greeting hello, not as its controller), then edits its
	// text: greeting-ada is still Greeting ada's, whose controller reference
	// is second.
	mark = ex08MarkOf(api, r)
	api.addOwnerFirst(t, "default", "greeting-ada", map[string]any{"apiVersion": "demo.example.com/v1alpha1",
		"kind": "Greeting", "name": "hello", "uid": "uid-hello"})
	api.edit(t, "default", "greeting-ada", "kubectl-edit", map[string]string{"greeting": "Hi"})
	api.settle(t, r)
	api.check(t)
	if lines := r.matchingAfter(mark, ex08NotOurs); len(lines) > 0 {
		t.Fatalf("someone added an owner reference (not a controller one) before greeting-ada's controller reference; "+
			"the controller then said:\n  %s\nA ConfigMap's controller is the owner reference with controller: true, "+
			"wherever it is in the list: metav1.GetControllerOf finds it; OwnerReferences[0] does not", lines[0])
	}
	if got := api.data("default", "greeting-ada")["greeting"]; got != "Bonjour, Ada" {
		t.Fatalf("someone edited greeting-ada, whose controller reference is second in its owner references (another "+
			"owner's, not a controller's, is first); it still says %q, want \"Bonjour, Ada\" put back. Its event must reach "+
			"the Greeting its controller reference names (metav1.GetControllerOf), not OwnerReferences[0]'s", got)
	}

	// Someone strips the owner reference of greeting-done.
	mark = ex08MarkOf(api, r)
	api.stripOwner(t, "default", "greeting-done")
	r.expectAfter(t, mark, "someone removed the owner reference of greeting-done: the update reaches its Greeting "+
		"through the old object's controller (the new one has none). It is no longer the Greeting's: left as it is, "+
		"and reported once. Its text is still right: a sync that looks at the text before the controller reference "+
		"finds nothing to do, and reports nothing", ex08NotOurs+` greeting="default/done"`)
	api.settle(t, r)
	api.check(t)
	api.writesSince(t, mark, "greeting-done", nil, "a ConfigMap whose owner reference someone removed: not the controller's any more")

	// Greetings deleted: their ConfigMaps are the garbage collector's.
	mark = ex08MarkOf(api, r)
	api.Remove("greetings", "default", "hello")
	api.beingDeleted(t, "default", "slow")
	r.expectAfter(t, mark, "a Greeting being deleted (its deletionTimestamp set) is an update: logged \"Greeting updated\"",
		`"Greeting updated" greeting="default/slow"`)
	api.Remove("configmaps", "default", "greeting-slow") // the collector, in a foreground deletion
	r.expectAfter(t, mark, "a Greeting deleted is logged", `"Greeting deleted" greeting="default/hello"`)
	api.settle(t, r)
	api.check(t)
	api.writesSince(t, mark, "greeting-slow", nil, "a Greeting being deleted (in the foreground: the garbage collector "+
		"deletes its ConfigMap first, then the Greeting): a ConfigMap made now would only be deleted too. Make none "+
		"for a Greeting with a deletionTimestamp")

	// The watches break and the informers list again.
	mark = ex08MarkOf(api, r)
	api.expireWatches()
	api.waitForRelist(t, mark)
	api.settle(t, r)
	api.check(t)
	api.noWritesSince(t, mark, "after the informers listed again (every Greeting and ConfigMap handed over again, unchanged)")
	if n := len(r.matchingAfter(mark, ex08NotOurs)) + len(r.matchingAfter(mark, ex08Invalid)); n > 0 {
		t.Errorf("after the informers listed again, the controller reported again %d ConfigMap(s) it had reported "+
			"already: report each once (until the Greeting or that ConfigMap changes)", n)
	}

	// greeting-ada is deleted while the ConfigMaps' watch is down: the
	// informer learns of it when it lists again, and hands the delete
	// handler a tombstone (DeletedObject.FinalStateUnknown set), holding the
	// ConfigMap as last seen. Only its controller reference can bring
	// Greeting ada's key back: the Greetings' watch is fine.
	mark = ex08MarkOf(api, r)
	api.Lock()
	delete(api.ObjectsLocked("configmaps"), "default/greeting-ada") // no watch hears it
	api.Unlock()
	api.Expire("configmaps")
	r.expectAfter(t, mark, "ConfigMap greeting-ada was deleted while the ConfigMaps' watch was down: when the informer "+
		"listed again, it handed the delete handler a tombstone (DeletedObject with FinalStateUnknown set). Its "+
		"OptionalObj is the ConfigMap as last seen: queue the Greeting its controller reference names, tombstone "+
		"or not, so that the ConfigMap is made again", ex08Created+` greeting="default/ada"`)
	api.settle(t, r)
	api.check(t)

	// While the controller is stopped, someone removes the label of
	// greeting-ada and edits its text, and the Greeting changes. Restarted,
	// the controller's cache never holds that ConfigMap.
	r.Stop(t)
	mark = ex08MarkOf(api, r)
	api.unlabel(t, "default", "greeting-ada", map[string]string{"greeting": "Hi"})
	api.greeting("default", "ada", "uid-ada", "Ada", "es")
	r = ex08Start(t, api, "", 0)
	r.expect(t, ex08Unlabelled("restarted, with the label of ConfigMap greeting-ada removed, its text edited, and the "+
		"Greeting changed (es) meanwhile"), ex08Updated+` greeting="default/ada"`)
	api.settle(t, r)
	api.check(t)
	api.rightNow(t, "greeting-ada", "Hola, Ada", "restarted, after its label was removed, its text edited and the Greeting changed")
	api.writesSince(t, mark, "greeting-ada", []string{"create 409", "get 200", "apply 200"}, "restarted, with "+
		"ConfigMap greeting-ada unlabelled, edited, and the Greeting changed: one apply puts the label and the new text")

	// Restarted, with a ConfigMap list that comes late.
	r.Stop(t)
	mark = ex08MarkOf(api, r)
	api.delayConfigMapList(300 * time.Millisecond)
	r = ex08Start(t, api, "", 0)
	r.expect(t, "restarted, the controller finds the Greetings", `"Greeting found" greeting="shop/hola"`)
	api.settle(t, r)
	api.check(t)
	for _, name := range []string{"greeting-done", "greeting-hola", "greeting-stale", "greeting-ada"} {
		api.writesSince(t, mark, name, nil, "restarted, with the ConfigMaps as they should be (or not the controller's)")
	}
}

// With --namespace, the ConfigMap informer watches that namespace only, as
// the Greeting informer does.
func TestExercise08WatchesOnlyItsNamespace(t *testing.T) {
	api := ex08NewAPI(t)
	api.greeting("default", "hello", "uid-hello", "Ada", "")
	api.greeting("shop", "hola", "uid-hola", "Ada", "es")
	r := ex08Start(t, api, "shop", 0)
	r.expect(t, "with --namespace=shop, the Greeting in shop gets its ConfigMap", ex08Created+` greeting="shop/hola"`)
	api.settle(t, r)
	api.check(t)
	for _, req := range api.Requests(0) {
		if req.Resource == "configmaps" && req.Namespace != "shop" {
			t.Fatalf("with --namespace=shop, the controller sent a %s of ConfigMaps in %q: give the ConfigMap informer's "+
				"factory the namespace (informers.WithNamespace), as the Greetings' and the pods' have it", req.Verb,
				ex08Or(req.Namespace, "every namespace"))
		}
	}
}

func ex08Or(s, or string) string {
	if s == "" {
		return or
	}
	return s
}

// ex08Ref returns a controller owner reference to a Greeting.
func ex08Ref(name, uid string) map[string]any {
	return map[string]any{"apiVersion": "demo.example.com/v1alpha1", "kind": "Greeting", "name": name, "uid": uid,
		"controller": true, "blockOwnerDeletion": true}
}

// ex08API is fakeapi's API server, serving pods (none), Greetings and
// ConfigMaps, with what this test adds, as kube-apiserver v1.36 does with
// demo-controller.yaml's rights: creates, applies (with field managers,
// Force, the UID as a precondition, and the admission plugin's rule on
// owner references), Events, and failures on demand. It records a problem
// for each request the task rules out.
type ex08API struct {
	*fakeapi.Server
	fields        fakeapi.Fields    // of ConfigMaps: "data.key" or "metadata.labels.key": manager
	events        []map[string]any  // Events the server took
	refusedEvents []string          // Events the server refused, and why (their names)
	before        map[string]func() // by ConfigMap name: run once, with the lock held, when an apply to it arrives
	fail          map[string]int    // by ConfigMap name: the next applies to it fail with 500, this many
}

func ex08NewAPI(t *testing.T) *ex08API {
	api := &ex08API{Server: fakeapi.New(t, "pods", "greetings", "configmaps"), fields: fakeapi.Fields{},
		before: map[string]func(){}, fail: map[string]int{}}
	api.Filter, api.Write = api.filter, api.write
	return api
}

// filter records a problem with a list or watch of ConfigMaps that asks for
// more than the labelled ones.
func (api *ex08API) filter(r *fakeapi.Request) (int, any) {
	if r.Resource == "configmaps" && (r.Verb == "list" || r.Verb == "watch") && r.Query.Get("labelSelector") != ex08Label+"="+ex08LabelSet {
		api.ProblemLocked(fmt.Sprintf("the controller asked to %s ConfigMaps with labelSelector %q: its ConfigMap informer must "+
			"ask only for those labelled %s=%s (informers.WithTweakListOptions, setting ListOptions.LabelSelector), "+
			"never for every ConfigMap of the cluster (its cache would hold them all, and every change to any of them "+
			"would reach it)", r.Verb, r.Query.Get("labelSelector"), ex08Label, ex08LabelSet))
	}
	return 0, nil
}

// write answers a write, with the server's lock held.
func (api *ex08API) write(r *fakeapi.Request) (int, any) {
	switch {
	case r.Resource == "events" && r.Verb == "create":
		return api.event(r)
	case api.ObjectsLocked(r.Resource) == nil:
		return fakeapi.Status(apierrors.NewNotFound(r.GroupResource(), r.Name))
	case r.Resource != "configmaps":
		api.ProblemLocked(fmt.Sprintf("the controller sent a %s of %s %s: it only reads Greetings (from its cache)", r.Verb, r.Resource, r.Key()))
		return fakeapi.Status(apierrors.NewForbidden(r.GroupResource(), r.Name, fmt.Errorf("the task's controller does not %s %s", r.Verb, r.Resource)))
	case r.Verb == "create":
		return api.create(r.Namespace, r.Body, r.Query.Get("fieldManager"))
	case r.Verb == "apply" && api.fail[r.Name] > 0:
		api.fail[r.Name]--
		return fakeapi.Status(apierrors.NewInternalError(fmt.Errorf("etcdserver: request timed out")))
	case r.Verb == "apply":
		if hook := api.before[r.Name]; hook != nil {
			delete(api.before, r.Name)
			hook()
		}
		return api.apply(r)
	case r.Verb == "update":
		api.ProblemLocked(fmt.Sprintf("the controller sent an update (PUT) of the whole ConfigMap %s: an update replaces "+
			"everything, so it drops what another writer added (a data key of their own), and needs the resourceVersion "+
			"the cache has (409 Conflict when it is stale). Write with server-side apply (Apply, with a field manager, "+
			"Force: true): only your fields", r.Key()))
	case r.Verb == "patch":
		api.ProblemLocked(fmt.Sprintf("the controller sent a patch of type %s to ConfigMap %s: the task asks for server-side "+
			"apply (the typed client's Apply, with corev1ac.ConfigMap(name, namespace)), which sends only your fields, "+
			"and records you as their owner", r.ContentType, r.Key()))
	case r.Verb == "delete":
		api.ProblemLocked(fmt.Sprintf("the controller deleted ConfigMap %s. It never deletes a Greeting's ConfigMap: the "+
			"garbage collector does, once the Greeting is gone, because of the owner reference (and a controller that "+
			"deletes when it sees a Greeting go misses every deletion that happened while it was not running)", r.Key()))
	}
	return fakeapi.Status(apierrors.NewForbidden(r.GroupResource(), r.Name, fmt.Errorf("the test does not allow this")))
}

// event takes an Event, as kube-apiserver does: its name, or the prefix its
// generateName gives, must be a DNS subdomain ("hello." is not; "hello-" is).
func (api *ex08API) event(r *fakeapi.Request) (int, any) {
	event, err := fakeapi.Decode(r.Body)
	if err != nil {
		return fakeapi.Status(apierrors.NewBadRequest(err.Error()))
	}
	eventName, generateName := fakeapi.Meta(event, "name"), fakeapi.Meta(event, "generateName")
	var problems field.ErrorList
	if generateName != "" {
		for _, msg := range apivalidation.NameIsDNSSubdomain(generateName, true) {
			problems = append(problems, field.Invalid(field.NewPath("metadata", "generateName"), generateName, msg))
		}
	} else {
		for _, msg := range apivalidation.NameIsDNSSubdomain(eventName, false) {
			problems = append(problems, field.Invalid(field.NewPath("metadata", "name"), eventName, msg))
		}
	}
	if len(problems) > 0 {
		api.refusedEvents = append(api.refusedEvents, fmt.Sprintf("%q (generateName %q): %v", eventName[:min(len(eventName), 60)], generateName[:min(len(generateName), 60)], problems.ToAggregate()))
		return fakeapi.Status(apierrors.NewInvalid(schema.GroupKind{Group: "events.k8s.io", Kind: "Event"}, eventName+generateName, problems))
	}
	api.events = append(api.events, event)
	fakeapi.SetMeta(event, "name", fmt.Sprintf("e%d", len(api.events)))
	return http.StatusCreated, event
}

func (api *ex08API) create(ns string, body []byte, manager string) (int, any) {
	obj, err := fakeapi.Decode(body)
	if err != nil {
		return fakeapi.Status(apierrors.NewBadRequest(err.Error()))
	}
	name := fakeapi.Meta(obj, "name")
	key := ns + "/" + name
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return fakeapi.Status(apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, name,
			field.ErrorList{field.Invalid(field.NewPath("metadata", "name"), name, strings.Join(msgs, "; "))}))
	}
	if api.ObjectLocked("configmaps", key) != nil {
		return fakeapi.Status(apierrors.NewAlreadyExists(schema.GroupResource{Resource: "configmaps"}, name))
	}
	api.checkChild(key, obj, "created")
	fakeapi.SetMeta(obj, "namespace", ns)
	fakeapi.SetMeta(obj, "uid", fmt.Sprintf("uid-cm-%d", api.RVLocked()+1))
	api.fields.Own(key, obj, manager, "data", "metadata.labels")
	api.StoreLocked("configmaps", obj)
	return http.StatusCreated, obj
}

// checkChild records a problem if a ConfigMap the controller writes is not
// what the task asks for: the label, and one controller owner reference.
func (api *ex08API) checkChild(key string, obj map[string]any, how string) {
	if fakeapi.Labels(obj)[ex08Label] != ex08LabelSet {
		api.ProblemLocked(fmt.Sprintf("the controller %s ConfigMap %s without the label %s=%s: its ConfigMap informer, which "+
			"asks only for labelled ConfigMaps, never sees it", how, key, ex08Label, ex08LabelSet))
	}
	refs := fakeapi.Refs(obj)
	if len(refs) != 1 {
		api.ProblemLocked(fmt.Sprintf("the controller %s ConfigMap %s with %d owner references; want one, to its Greeting, made "+
			"with metav1.NewControllerRef(greeting, schema.GroupVersionKind{Group: \"demo.example.com\", Version: "+
			"\"v1alpha1\", Kind: \"Greeting\"})", how, key, len(refs)))
		return
	}
	ref, _ := refs[0].(map[string]any)
	greeting := api.ObjectLocked("greetings", strings.Split(key, "/")[0]+"/"+fmt.Sprint(ref["name"]))
	switch {
	case ref["apiVersion"] != "demo.example.com/v1alpha1" || ref["kind"] != "Greeting":
		api.ProblemLocked(fmt.Sprintf("ConfigMap %s's owner reference names apiVersion %v, kind %v; want demo.example.com/v1alpha1, "+
			"Greeting: the garbage collector finds the owner by them", key, ref["apiVersion"], ref["kind"]))
	case greeting == nil || ref["uid"] != fakeapi.Meta(greeting, "uid"):
		api.ProblemLocked(fmt.Sprintf("ConfigMap %s's owner reference names Greeting %v with UID %v, which is not the UID of the "+
			"Greeting it was made for: the owner is known by its UID (a new Greeting under the same name is another owner)", key, ref["name"], ref["uid"]))
	case ref["controller"] != true:
		api.ProblemLocked(fmt.Sprintf("ConfigMap %s's owner reference has no controller: true: metav1.GetControllerOf finds no "+
			"controller on it, so its events reach no Greeting, and nothing says that this Greeting, and no one else, "+
			"manages it. Build the reference with metav1.NewControllerRef", key))
	case ref["blockOwnerDeletion"] != true:
		api.ProblemLocked(fmt.Sprintf("ConfigMap %s's owner reference has no blockOwnerDeletion: true: a foreground deletion of "+
			"the Greeting would not wait for it. Build the reference with metav1.NewControllerRef, which sets both", key))
	}
}

func (api *ex08API) apply(r *fakeapi.Request) (int, any) {
	ns, name, key := r.Namespace, r.Name, r.Key()
	patch, manager, force, serr := fakeapi.ParseApply(r)
	if serr != nil {
		return fakeapi.Status(serr)
	}
	if rv := fakeapi.Meta(patch, "resourceVersion"); rv != "" {
		api.ProblemLocked(fmt.Sprintf("the apply to ConfigMap %s carries a resourceVersion (%s): it then fails with a conflict "+
			"whenever the ConfigMap changed after the cache saw it. An apply of the fields you own needs none", key, rv))
	}
	obj := api.ObjectLocked("configmaps", key)
	uid := fakeapi.Meta(patch, "uid")
	if uid == "" {
		api.ProblemLocked(fmt.Sprintf("the apply to ConfigMap %s carries no UID: apply is create-or-update, so were the "+
			"ConfigMap deleted just before it arrived, it would make one, with no owner reference. Apply with the UID of "+
			"the ConfigMap you read (WithUID): the server then refuses (409), and the retry creates it", key))
	}
	switch {
	case obj == nil && uid != "":
		return fakeapi.Status(apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, name,
			fmt.Errorf("uid mismatch: the provided object specified uid %s, and no existing object was found", uid)))
	case obj == nil:
		api.ProblemLocked(fmt.Sprintf("the controller applied to ConfigMap %s, which the API server did not have: apply is "+
			"create-or-update, and it created one. Create a ConfigMap that is not in the cache with Create, which the "+
			"server refuses (AlreadyExists) if any ConfigMap has the name; apply only to your own, with its UID "+
			"(WithUID): then the server refuses to create one", key))
		return api.create(ns, r.Body, manager)
	case uid != "" && uid != fakeapi.Meta(obj, "uid"):
		return fakeapi.Status(apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, name,
			field.ErrorList{field.Invalid(field.NewPath("metadata", "uid"), uid, "field is immutable")}))
	}
	oldRefs := fakeapi.Refs(obj)
	newRefs, set, _ := unstructured.NestedSlice(patch, "metadata", "ownerReferences")
	if set && !ex08SameUIDs(oldRefs, newRefs) {
		controller := ex08ControllerOf(oldRefs)
		api.ProblemLocked(fmt.Sprintf("the controller applied owner references to ConfigMap %s, whose controller is %s: that "+
			"takes over a ConfigMap that is not its own (apply adopts). On a cluster the API server refuses it: "+
			"\"cannot set an ownerRef on a resource you can't delete\"; with delete granted, it would adopt it. A "+
			"ConfigMap this Greeting does not control (metav1.GetControllerOf, and the Greeting's UID) is left as it is", key, controller))
		return fakeapi.Status(apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, name,
			fmt.Errorf("cannot set an ownerRef on a resource you can't delete")))
	}
	if greeting := api.ObjectLocked("greetings", ns+"/"+strings.TrimPrefix(name, "greeting-")); greeting != nil && !ex08Controls(oldRefs, fakeapi.Meta(greeting, "uid")) {
		api.ProblemLocked(fmt.Sprintf("the controller applied to ConfigMap %s, which Greeting %s does not control (its controller "+
			"owner reference names %s): it took a ConfigMap for the Greeting's by its name. A ConfigMap is the Greeting's "+
			"only if metav1.GetControllerOf(configMap) names the Greeting's UID; any other is left as it is, and reported once",
			key, fakeapi.Meta(greeting, "name"), ex08ControllerOf(oldRefs)))
	}
	merged, changed, serr := api.fields.Apply(key, obj, patch, manager, force, "data", "metadata.labels")
	switch {
	case serr != nil:
		return fakeapi.Status(serr)
	case !changed:
		return http.StatusOK, merged // as the API server: no change, no new resourceVersion, no event
	}
	api.StoreLocked("configmaps", merged)
	return http.StatusOK, merged
}

// ex08Controls says whether refs' controller has the UID uid.
func ex08Controls(refs []any, uid string) bool {
	ref := fakeapi.Controller(refs)
	return ref != nil && ref["uid"] == uid
}

func ex08ControllerOf(refs []any) string {
	if r := fakeapi.Controller(refs); r != nil {
		return fmt.Sprintf("%v %v, UID %v", r["kind"], r["name"], r["uid"])
	}
	return "none"
}

func ex08SameUIDs(a, b []any) bool {
	uids := func(refs []any) []string {
		var out []string
		for _, ref := range refs {
			r, _ := ref.(map[string]any)
			out = append(out, fmt.Sprint(r["uid"], r["controller"], r["blockOwnerDeletion"]))
		}
		slices.Sort(out)
		return out
	}
	return slices.Equal(uids(a), uids(b))
}

func (api *ex08API) check(t *testing.T) { t.Helper(); api.Check(t) }

// The test's side: objects written as kubectl would.

func (api *ex08API) greeting(ns, name, uid, to, language string) {
	spec := map[string]any{"to": to}
	if language != "" {
		spec["language"] = language
	}
	api.Store("greetings", map[string]any{"metadata": map[string]any{"namespace": ns, "name": name, "uid": uid}, "spec": spec})
}

func (api *ex08API) configMap(ns, name, text string, labelled bool, refs ...map[string]any) {
	meta := map[string]any{"namespace": ns, "name": name, "uid": "uid-" + name}
	if labelled {
		meta["labels"] = map[string]any{ex08Label: ex08LabelSet}
	}
	if len(refs) > 0 {
		meta["ownerReferences"] = []any{refs[0]}
	}
	api.Lock()
	defer api.Unlock()
	api.fields[ns+"/"+name] = map[string]string{"data.greeting": "before"}
	api.StoreLocked("configmaps", map[string]any{"metadata": meta, "data": map[string]any{"greeting": text}})
}

func (api *ex08API) edit(t *testing.T, ns, name, manager string, data map[string]string) {
	api.Change("configmaps", ns+"/"+name, func(obj map[string]any) {
		for k, v := range data {
			_ = unstructured.SetNestedField(obj, v, "data", k)
			api.fields.Set(ns+"/"+name, "data."+k, manager)
		}
	})
}

// unlabel removes the ConfigMap's label, as kubectl label NAME
// app.kubernetes.io/managed-by- does, and sets data keys in the same write.
func (api *ex08API) unlabel(t *testing.T, ns, name string, data map[string]string) {
	api.Change("configmaps", ns+"/"+name, func(obj map[string]any) {
		unstructured.RemoveNestedField(obj, "metadata", "labels", ex08Label)
		api.fields.Drop(ns+"/"+name, "metadata.labels."+ex08Label) // a removed field has no manager
		for k, v := range data {
			_ = unstructured.SetNestedField(obj, v, "data", k)
			api.fields.Set(ns+"/"+name, "data."+k, "kubectl-edit")
		}
	})
}

// rightNow checks that the ConfigMap says text and has the label.
func (api *ex08API) rightNow(t *testing.T, name, text, when string) {
	t.Helper()
	obj := api.Object("configmaps", "default/"+name)
	if got := fakeapi.Data(obj)["greeting"]; got != text || fakeapi.Labels(obj)[ex08Label] != ex08LabelSet {
		t.Fatalf("%s, ConfigMap %s says %q with labels %v; want %q and %s=%s", when, name, got, fakeapi.Labels(obj), text, ex08Label, ex08LabelSet)
	}
}

// ex08Unlabelled is why a controller that waits for the event of a
// ConfigMap without the label fails: the event never comes.
func ex08Unlabelled(what string) string {
	return what + ". The ConfigMap informer sees only labelled ConfigMaps, so this one left the cache (as DELETED) and " +
		"no event of it will ever come; but it is still there, and still this Greeting's. A create is refused " +
		"(AlreadyExists), and one Get finds it controlled by this Greeting: when its text or label is not what the " +
		"Greeting asks, apply them now (hint 4), and log \"ConfigMap updated\""
}

// addOwnerFirst puts a (non-controller) owner reference before the others.
func (api *ex08API) addOwnerFirst(t *testing.T, ns, name string, ref map[string]any) {
	api.Change("configmaps", ns+"/"+name, func(obj map[string]any) {
		_ = unstructured.SetNestedSlice(obj, append([]any{ref}, fakeapi.Refs(obj)...), "metadata", "ownerReferences")
	})
}

func (api *ex08API) stripOwner(t *testing.T, ns, name string) {
	api.Change("configmaps", ns+"/"+name, func(obj map[string]any) {
		unstructured.RemoveNestedField(obj, "metadata", "ownerReferences")
	})
}

func (api *ex08API) beingDeleted(t *testing.T, ns, name string) {
	api.Change("greetings", ns+"/"+name, func(obj map[string]any) {
		_ = unstructured.SetNestedField(obj, time.Now().UTC().Format(time.RFC3339), "metadata", "deletionTimestamp")
		_ = unstructured.SetNestedStringSlice(obj, []string{"foregroundDeletion"}, "metadata", "finalizers")
	})
}

// holdConfigMapEvents holds back the ConfigMaps' watch events from now on,
// or sends those held back.
func (api *ex08API) holdConfigMapEvents(hold bool) {
	if hold {
		api.Hold("configmaps")
	} else {
		api.Release("configmaps")
	}
}

func (api *ex08API) delayConfigMapList(d time.Duration) { api.DelayLists("configmaps", d) }

// expireWatches ends the watches of Greetings and ConfigMaps; their next
// watch gets 410 Gone, so the informers list again.
func (api *ex08API) expireWatches() { api.Expire("greetings", "configmaps") }

func (api *ex08API) waitForRelist(t *testing.T, mark ex08Mark) {
	t.Helper()
	for deadline := time.Now().Add(ex08Wait); ; time.Sleep(10 * time.Millisecond) {
		lists := 0
		for _, r := range api.Requests(mark.req) {
			if r.Verb == "list" && (r.Resource == "greetings" || r.Resource == "configmaps") {
				lists++
			}
		}
		if lists >= 2 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("within %v of their watches ending with 410 Gone, the informers did not list Greetings and ConfigMaps again", ex08Wait)
		}
	}
}

// ex08Mark is a point in a run: the requests and the lines so far.
type ex08Mark struct{ req, line int }

func ex08MarkOf(api *ex08API, r *ex08Run) ex08Mark {
	return ex08Mark{api.Mark(), len(r.Lines())}
}

func (api *ex08API) data(ns, name string) map[string]string {
	return fakeapi.Data(api.Object("configmaps", ns+"/"+name))
}

// settle waits until the controller has made no request for 200 ms (after
// its retries: 5 to 80 ms apart), and has none open but its watches.
func (api *ex08API) settle(t *testing.T, r *ex08Run) { api.settleFor(t, r, 200*time.Millisecond) }

func (api *ex08API) settleFor(t *testing.T, _ *ex08Run, quiet time.Duration) {
	t.Helper()
	if api.Settle(quiet, ex08Wait) {
		return
	}
	api.check(t)
	t.Fatalf("the controller has not stopped sending requests for %v: %s\nA write that changes nothing is still a "+
		"request, and each write that changes something comes back as an event: compare the ConfigMap in the cache "+
		"with what the Greeting asks (its text, its label), and write only when they differ", ex08Wait, api.LastRequests(10))
}

// diagnose says what the controller's requests for ConfigMaps since mark
// point at, when what the test waited for did not come.
func (api *ex08API) diagnose(mark ex08Mark) string {
	var got []string
	for _, r := range api.Requests(mark.req) {
		if r.Resource == "configmaps" && r.Verb != "list" && r.Verb != "watch" {
			got = append(got, fmt.Sprintf("%s %d", r.Verb, r.Code))
		}
	}
	count := func(s string) int {
		return len(slices.DeleteFunc(slices.Clone(got), func(g string) bool { return g != s }))
	}
	hint := "\nIts requests for ConfigMaps meanwhile: " + strings.Join(fakeapi.OrNone(got), ", ") + "."
	switch {
	case len(got) == 0:
		hint += "\nNone at all: did the event reach the Greeting's key? A ConfigMap's add, update and delete must queue " +
			"the key of the Greeting its controller owner reference names (metav1.GetControllerOf), in the ConfigMap " +
			"informer's event handlers. If it did, the sync found nothing to write or report."
	case count("apply 409") > 0 && count("apply 200") == 0:
		hint += "\nThe apply was refused with a conflict: another field manager (kubectl edit's) holds the field. On " +
			"your own ConfigMap you decide: apply with Force: true."
	case got[len(got)-1] == "apply 500":
		hint += "\nThe server answered the apply with 500 Internal Server Error, and the controller did not apply " +
			"again. Either the failed write's error did not reach the worker (return it: the worker puts the key back " +
			"on the queue, AddRateLimited, up to maxRetries, as controller.go does), or the retry found nothing to " +
			"write: did the first try change the cached ConfigMap in place (its Data or Labels)? A lister's objects " +
			"are the cache's own, so the retry reads that change as if the server held it: build what you send anew " +
			"(or from a DeepCopy)."
	case count("create 409") > 1 && count("get 200") == 0:
		hint += "\nA create answered 409 AlreadyExists, tried again and again: a ConfigMap not in the cache may be " +
			"there all the same. Read it from the server (Get), once: this Greeting's (its controller owner reference " +
			"names the Greeting's UID), or someone else's (report it once; no retry)."
	}
	return hint
}

// writes checks the requests for ConfigMap name (in default) since the start.
func (api *ex08API) writes(t *testing.T, name string, want []string, why string) {
	t.Helper()
	api.writesSince(t, ex08Mark{}, name, want, why)
}

// writesSince checks the requests for ConfigMap name (gets, creates,
// applies, in default) since mark: each "verb code".
func (api *ex08API) writesSince(t *testing.T, mark ex08Mark, name string, want []string, why string) {
	t.Helper()
	got := api.requestsFor(mark, name)
	if !slices.Equal(got, want) {
		hint := ""
		switch {
		case slices.Contains(got, "apply 409"):
			hint = "\nThe apply was refused with a conflict: someone else's field manager holds the field (kubectl edit's). " +
				"On your own ConfigMap, you decide: apply with Force: true."
		case len(got) > len(want)+1 && strings.HasPrefix(got[len(got)-1], "create 4"):
			hint = "\nA create refused for a reason that will not change (AlreadyExists of a ConfigMap you do not " +
				"control, 422 Invalid) is reported once, with no error returned to the worker: an error is retried."
		case len(want) == 0 && slices.Contains(got, "create 409"):
			hint = "\nThe controller did not find in its cache a ConfigMap that was there: wait for the ConfigMap " +
				"informer's cache too, before the worker starts (both HasSynced, within --sync-timeout)."
		case len(got) > len(want) && slices.ContainsFunc(got, func(s string) bool { return strings.HasPrefix(s, "apply") }):
			hint = "\nAn apply that changes nothing is still a request: compare the ConfigMap in the cache with what the " +
				"Greeting asks, and write only when they differ."
		}
		name = name[:min(len(name), 30)]
		t.Errorf("%s: the controller's requests for ConfigMap default/%s were:\n  %s\nwant:\n  %s%s", why, name,
			strings.Join(fakeapi.OrNone(got), "\n  "), strings.Join(fakeapi.OrNone(want), "\n  "), hint)
	}
}

// requestsFor returns the requests for ConfigMap name (in default) since
// mark: each "verb code".
func (api *ex08API) requestsFor(mark ex08Mark, name string) []string {
	var got []string
	for _, r := range api.Requests(mark.req) {
		if r.Resource == "configmaps" && r.Name == name && r.Namespace == "default" {
			got = append(got, fmt.Sprintf("%s %d", r.Verb, r.Code))
		}
	}
	return got
}

// writesSinceOr is writesSince, allowing one more request, extra, at the end.
func (api *ex08API) writesSinceOr(t *testing.T, mark ex08Mark, name string, want []string, extra, why string) {
	t.Helper()
	got := api.requestsFor(mark, name)
	if slices.Equal(got, append(slices.Clone(want), extra)) {
		return
	}
	api.writesSince(t, mark, name, want, why)
}

func (api *ex08API) noWrites(t *testing.T, why, name string) {
	t.Helper()
	api.writesSince(t, ex08Mark{}, name, nil, why)
}

func (api *ex08API) noWritesSince(t *testing.T, mark ex08Mark, why string) {
	t.Helper()
	var got []string
	for _, r := range api.Requests(mark.req) {
		if r.Resource == "configmaps" && r.Verb != "list" && r.Verb != "watch" || r.Resource == "events" {
			got = append(got, fmt.Sprintf("%s %s %s/%s (%d)", r.Verb, r.Resource, r.Namespace, r.Name[:min(len(r.Name), 30)], r.Code))
		}
	}
	if len(got) > 0 {
		t.Errorf("%s, the controller sent:\n  %s\nwant nothing: everything was as it should be, or reported already. "+
			"Compare the ConfigMap in the cache with what the Greeting asks, and write only when they differ", why, strings.Join(got, "\n  "))
	}
}

// warnings checks that the Greeting has n Warning Events.
func (api *ex08API) warnings(t *testing.T, greeting string, n int) {
	t.Helper()
	api.Lock()
	defer api.Unlock()
	var got []string
	for _, e := range api.events {
		if name, _, _ := unstructured.NestedString(e, "regarding", "name"); name == greeting {
			kind, _, _ := unstructured.NestedString(e, "regarding", "kind")
			typ, _ := e["type"].(string)
			note, _ := e["note"].(string)
			if kind != "Greeting" || typ != "Warning" {
				t.Errorf("an Event about %s is of type %q regarding a %q; want a Warning regarding the Greeting", greeting[:min(len(greeting), 20)], typ, kind)
			}
			got = append(got, note)
		}
	}
	if len(got) != n {
		refused := ""
		if len(api.refusedEvents) > 0 {
			refused = fmt.Sprintf("\nThe server refused %d Event(s) the controller sent, as kube-apiserver does: an Event's name, "+
				"or its generateName, must be a lowercase DNS subdomain (letters, digits, '-' and '.', starting and ending with a letter "+
				"or digit; a generateName may end with '-'), and at most 253 characters: %s", len(api.refusedEvents), slices.MinFunc(api.refusedEvents, func(a, b string) int { return len(a) - len(b) }))
		}
		t.Errorf("Greeting %s has %d Warning Events (%q), want %d: report a ConfigMap that cannot be made once, with a Warning "+
			"Event on the Greeting (events.k8s.io/v1, regarding the Greeting) beside the log line%s", greeting[:min(len(greeting), 20)], len(got), got, n, refused)
	}
}

// ex08Run is a run of run, and the API server it runs against.
type ex08Run struct {
	*fakeapi.Run
	api *ex08API
}

func ex08Start(t *testing.T, api *ex08API, namespace string, _ int) *ex08Run {
	t.Helper()
	o := options{kubeconfig: writeKubeconfig(t, api.URL, bearer, false), namespace: namespace, startupTimeout: ex08Wait, syncTimeout: ex08Wait}
	return &ex08Run{api: api, Run: fakeapi.Start(t, ex08Wait, 20, func(ctx context.Context) error { return run(ctx, o) })}
}

// matchingAfter returns the lines logged since mark that contain s.
func (r *ex08Run) matchingAfter(mark ex08Mark, s string) []string { return r.Containing(mark.line, s) }

func (r *ex08Run) expect(t *testing.T, why string, wants ...string) {
	t.Helper()
	r.expectFrom(t, ex08Mark{}, why, wants...)
}

func (r *ex08Run) expectAfter(t *testing.T, mark ex08Mark, why string, wants ...string) {
	t.Helper()
	r.expectFrom(t, mark, why, wants...)
}

func (r *ex08Run) expectFrom(t *testing.T, mark ex08Mark, why string, wants ...string) {
	t.Helper()
	for deadline := time.Now().Add(ex08Wait); ; time.Sleep(5 * time.Millisecond) {
		r.api.check(t)
		missing := r.Missing(mark.line, wants...)
		if len(missing) == 0 {
			return
		}
		if r.Returned() {
			t.Fatalf("run returned %v before demo-controller logged:\n  %s", r.Err, strings.Join(missing, "\n  "))
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s. Within %v demo-controller did not log:\n  %s%s", why, ex08Wait, strings.Join(missing, "\n  "), r.api.diagnose(mark))
		}
	}
}

// once checks that exactly one line starts with prefix, and that it holds s.
func (r *ex08Run) once(t *testing.T, prefix, s string) {
	t.Helper()
	lines := r.Matching(0, prefix)
	if len(lines) != 1 || !strings.Contains(lines[0], s) {
		t.Errorf("want one line %s, with the API server's words (%s); got %d:\n  %s", prefix, s, len(lines), strings.Join(lines, "\n  "))
	}
}
