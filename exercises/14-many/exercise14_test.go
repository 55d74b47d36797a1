//go:build exercise

// The test of exercise 14 (exercises/14-many/README.md). It is not part of
// the project's tests: copy it into the project's root and run it with the
// exercise tag, as the exercise's README says.

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
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
	data, err := os.ReadFile("demo-controller.yaml")
	if err != nil {
		t.Fatal(err)
	}
	verbs := map[string][]string{}
	for _, doc := range strings.Split(string(data), "\n---\n") {
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
		if err != nil {
			t.Fatalf("demo-controller.yaml: %v", err)
		}
		if role, ok := obj.(*rbacv1.ClusterRole); ok {
			for _, rule := range role.Rules {
				for _, g := range rule.APIGroups {
					for _, r := range rule.Resources {
						verbs[g+"/"+r] = append(verbs[g+"/"+r], rule.Verbs...)
					}
				}
			}
		}
	}
	for key := range verbs {
		slices.Sort(verbs[key])
		verbs[key] = slices.Compact(verbs[key])
	}
	want := map[string][]string{
		"/pods":                                 {"list", "watch"},
		"demo.example.com/greetings":            {"list", "watch"},
		"demo.example.com/greetings/finalizers": {"update"},
		"/configmaps":                           {"create", "delete", "list", "watch"},
	}
	if !maps.EqualFunc(verbs, want, slices.Equal) {
		var got, wanted []string
		for _, k := range slices.Sorted(maps.Keys(verbs)) {
			got = append(got, k+": "+strings.Join(verbs[k], ", "))
		}
		for _, k := range slices.Sorted(maps.Keys(want)) {
			wanted = append(wanted, k+": "+strings.Join(want[k], ", "))
		}
		t.Errorf("demo-controller.yaml's ClusterRole grants:\n  %s\nwant exactly the verbs the controller uses:\n  %s\n"+
			"(ConfigMaps: list and watch for the informer, create and delete for the copies, no get: the count comes from "+
			"the cache; greetings/finalizers: update, for blockOwnerDeletion)",
			strings.Join(got, "\n  "), strings.Join(wanted, "\n  "))
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

// ex14API is an API server over HTTP that serves pods (none), Greetings and
// ConfigMaps (with label selectors), watches that resume from a
// resourceVersion, and creates with generateName. It can hold back every
// ConfigMap watch event, and records every request.
type ex14API struct {
	url string

	mu       sync.Mutex
	cond     *sync.Cond // broadcast at each new event, release, or watch end
	rv       int
	seq      int
	objects  map[string]map[string]map[string]any // resource, "ns/name", object
	log      []ex14Event                          // every change, in order
	holding  bool                                 // ConfigMap events past heldFrom wait
	heldFrom int
	gone     map[string]int // resource: a watch from before this resourceVersion gets 410 Gone
	epoch    int            // bumped by relist: older ConfigMap watches end
	closed   bool           // the test is over: every watch ends
	requests []ex14Request
	problems []string
	fail     map[string]int  // "create hello": fail the next this many with 500
	barrier  map[string]bool // Greeting names whose first create waits for the others'
	open     int
}

type ex14Event struct {
	resource, typ string
	rv            int
	obj, old      map[string]any
}

type ex14Request struct {
	verb, resource, name, greeting string
	code                           int
}

func ex14NewAPI(t *testing.T) *ex14API {
	api := &ex14API{objects: map[string]map[string]map[string]any{"pods": {}, "greetings": {}, "configmaps": {}},
		gone: map[string]int{}, fail: map[string]int{}}
	api.cond = sync.NewCond(&api.mu)
	server := httptest.NewServer(api)
	t.Cleanup(func() { api.mu.Lock(); api.closed = true; api.cond.Broadcast(); api.mu.Unlock(); server.Close() })
	api.url = server.URL
	return api
}

var ex14Path = regexp.MustCompile(`^/(api/v1|apis/demo\.example\.com/v1alpha1)(?:/namespaces/([^/]+))?/([^/]+)(?:/([^/]+))?$`)

func (api *ex14API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m := ex14Path.FindStringSubmatch(r.URL.Path)
	if m == nil {
		ex14WriteErr(w, apierrors.NewNotFound(schema.GroupResource{}, r.URL.Path))
		return
	}
	resource, ns, name, q := m[3], m[2], m[4], r.URL.Query()
	verb := map[string]string{"GET": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}[r.Method]
	if r.Method == "GET" && name == "" {
		verb = map[bool]string{true: "watch", false: "list"}[q.Get("watch") == "true" || q.Get("watch") == "1"]
	}
	body, _ := io.ReadAll(r.Body)
	if verb == "watch" && q.Get("sendInitialEvents") == "true" {
		ex14WriteErr(w, apierrors.NewBadRequest("sendInitialEvents is not supported here")) // client-go lists instead
		return
	}
	if verb == "watch" {
		api.watch(w, r, resource, ns, q.Get("labelSelector"), q.Get("resourceVersion"))
		return
	}
	api.mu.Lock()
	api.open++ // settle waits for it, a create held at the barrier too
	api.mu.Unlock()
	if verb == "create" && resource == "configmaps" {
		api.wait(body)
	}
	api.mu.Lock()
	code, answer, greeting := api.serve(verb, resource, ns, name, q, body)
	api.requests = append(api.requests, ex14Request{verb, resource, name, greeting, code})
	api.open--
	api.mu.Unlock()
	ex14Write(w, code, answer)
}

// wait holds a create for a Greeting of api.barrier until a create for
// each of them has arrived, or 2 s have passed.
func (api *ex14API) wait(body []byte) {
	obj, err := ex14Decode(body)
	if err != nil {
		return
	}
	owner := ex14Owner(obj)
	api.mu.Lock()
	defer api.mu.Unlock()
	if done, ok := api.barrier[owner]; !ok || done {
		return
	}
	api.barrier[owner] = true
	deadline := time.Now().Add(2 * time.Second)
	go func() { time.Sleep(2 * time.Second); api.mu.Lock(); api.cond.Broadcast(); api.mu.Unlock() }()
	for slices.Contains(slices.Collect(maps.Values(api.barrier)), false) {
		if time.Now().After(deadline) {
			api.problem(fmt.Sprintf("with --greeting-workers=%d, the controller synced one Greeting at a time: Greeting "+
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

// serve answers one request but a watch, with api.mu held.
func (api *ex14API) serve(verb, resource, ns, name string, q map[string][]string, body []byte) (int, any, string) {
	gr := schema.GroupResource{Resource: resource}
	switch {
	case api.objects[resource] == nil:
		return ex14ErrG(apierrors.NewNotFound(gr, name))
	case verb == "list":
		if resource == "configmaps" && q["labelSelector"] != nil && q["labelSelector"][0] != ex14Label+"="+ex14LabelSet {
			api.problem(fmt.Sprintf("the controller listed ConfigMaps with labelSelector %q: its ConfigMap informer "+
				"must ask only for those labelled %s=%s (informers.WithTweakListOptions), never for every ConfigMap",
				q["labelSelector"][0], ex14Label, ex14LabelSet))
		}
		selector, _ := labels.Parse(strings.Join(q["labelSelector"], ""))
		var items []any
		for _, k := range slices.Sorted(maps.Keys(api.objects[resource])) {
			obj := api.objects[resource][k]
			if (ns == "" || ex14Meta(obj, "namespace") == ns) && selector.Matches(labels.Set(ex14Labels(obj))) {
				items = append(items, obj)
			}
		}
		kind := map[string]string{"greetings": "GreetingList", "configmaps": "ConfigMapList", "pods": "PodList"}[resource]
		apiVersion := map[bool]string{true: "demo.example.com/v1alpha1", false: "v1"}[resource == "greetings"]
		return 200, map[string]any{"kind": kind, "apiVersion": apiVersion,
			"metadata": map[string]any{"resourceVersion": strconv.Itoa(api.rv)}, "items": items}, ""
	case resource != "configmaps":
		api.problem(fmt.Sprintf("the controller sent a %s of %s %s/%s: it only reads Greetings, from its cache", verb, resource, ns, name))
		return ex14ErrG(apierrors.NewForbidden(gr, name, fmt.Errorf("not in the task")))
	case verb == "create":
		return api.create(ns, body)
	case verb == "delete":
		return api.delete(ns, name, body)
	}
	api.problem(fmt.Sprintf("the controller sent a %s of ConfigMap %s/%s: it only creates and deletes copies, and "+
		"counts them from its cache", verb, ns, name))
	return ex14ErrG(apierrors.NewForbidden(gr, name, fmt.Errorf("not in the task")))
}

func (api *ex14API) create(ns string, body []byte) (int, any, string) {
	obj, err := ex14Decode(body)
	if err != nil {
		return ex14ErrG(apierrors.NewBadRequest(err.Error()))
	}
	owner := ex14Owner(obj)
	if api.fail["create "+owner] > 0 {
		api.fail["create "+owner]--
		return 500, ex14Status(apierrors.NewInternalError(fmt.Errorf("etcdserver: request timed out"))), owner
	}
	meta, _ := obj["metadata"].(map[string]any)
	prefix, _ := meta["generateName"].(string)
	refs, _, _ := unstructured.NestedSlice(obj, "metadata", "ownerReferences")
	greeting := api.objects["greetings"][ns+"/"+owner]
	var ref map[string]any
	if len(refs) == 1 {
		ref, _ = refs[0].(map[string]any)
	}
	switch {
	case prefix != "greeting-"+owner+"-" || meta["name"] != nil && meta["name"] != "":
		api.problem(fmt.Sprintf("the controller created a ConfigMap named %v, generateName %q: make each copy with "+
			"generateName greeting-<the Greeting's name>- and no name (the API server adds 5 characters)", meta["name"], prefix))
	case ex14Labels(obj)[ex14Label] != ex14LabelSet:
		api.problem(fmt.Sprintf("the controller created a copy of %s without the label %s=%s: its ConfigMap informer "+
			"never sees it, and it counts it as missing for ever", owner, ex14Label, ex14LabelSet))
	case ref == nil || greeting == nil || ref["uid"] != ex14Meta(greeting, "uid") || ref["controller"] != true ||
		ref["blockOwnerDeletion"] != true || ref["kind"] != "Greeting" || ref["apiVersion"] != "demo.example.com/v1alpha1":
		api.problem(fmt.Sprintf("the controller created a copy of %s with owner references %v: want one, made with "+
			"metav1.NewControllerRef(greeting, the Greeting's GroupVersionKind): its UID, controller and "+
			"blockOwnerDeletion true", owner, refs))
	}
	api.seq++
	name := fmt.Sprintf("%s%05d", prefix, api.seq)
	meta["name"], meta["namespace"] = name, ns
	meta["uid"] = fmt.Sprintf("uid-cm-%d", api.seq)
	meta["creationTimestamp"] = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(api.rv+1) * time.Minute).Format(time.RFC3339)
	delete(meta, "generateName")
	api.store("configmaps", obj)
	return 201, obj, owner
}

func (api *ex14API) delete(ns, name string, body []byte) (int, any, string) {
	obj := api.objects["configmaps"][ns+"/"+name]
	owner := ex14Owner(obj)
	if obj == nil {
		return ex14ErrG(apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, name))
	}
	if api.fail["delete "+owner] > 0 {
		api.fail["delete "+owner]--
		return 500, ex14Status(apierrors.NewInternalError(fmt.Errorf("etcdserver: request timed out"))), owner
	}
	refs, _, _ := unstructured.NestedSlice(obj, "metadata", "ownerReferences")
	if ex14ControllerUID(refs) == "" || ex14ControllerUID(refs) != ex14Meta(api.objects["greetings"][ns+"/"+owner], "uid") {
		api.problem(fmt.Sprintf("the controller deleted ConfigMap %s, which no Greeting of that name controls (its "+
			"controller's UID: %q): it adopts nothing, and deletes only its own copies, those the index by controller "+
			"UID finds", name, ex14ControllerUID(refs)))
	}
	if opts, err := ex14Decode(body); err == nil {
		if uid, _, _ := unstructured.NestedString(opts, "preconditions", "uid"); uid != "" && uid != ex14Meta(obj, "uid") {
			return ex14ErrG(apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, name, fmt.Errorf("uid precondition")))
		}
	}
	api.removeLocked(ns, name)
	return 200, map[string]any{"kind": "Status", "apiVersion": "v1", "status": "Success"}, owner
}

// store writes obj at a new resourceVersion and logs the change.
func (api *ex14API) store(resource string, obj map[string]any) {
	key := ex14Meta(obj, "namespace") + "/" + ex14Meta(obj, "name")
	old := api.objects[resource][key]
	api.rv++
	_ = unstructured.SetNestedField(obj, strconv.Itoa(api.rv), "metadata", "resourceVersion")
	obj["kind"] = map[string]string{"greetings": "Greeting", "configmaps": "ConfigMap"}[resource]
	obj["apiVersion"] = map[bool]string{true: "demo.example.com/v1alpha1", false: "v1"}[resource == "greetings"]
	api.objects[resource][key] = obj
	api.log = append(api.log, ex14Event{resource, map[bool]string{true: "MODIFIED", false: "ADDED"}[old != nil], api.rv, obj, old})
	api.cond.Broadcast()
}

func (api *ex14API) removeLocked(ns, name string) {
	obj := ex14Copy(api.objects["configmaps"][ns+"/"+name])
	delete(api.objects["configmaps"], ns+"/"+name)
	api.rv++
	_ = unstructured.SetNestedField(obj, strconv.Itoa(api.rv), "metadata", "resourceVersion")
	api.log = append(api.log, ex14Event{"configmaps", "DELETED", api.rv, obj, obj})
	api.cond.Broadcast()
}

// watch streams the changes of a resource after resourceVersion from, as
// kube-apiserver's watch cache does for a label selector. ConfigMap events
// wait while they are held back.
func (api *ex14API) watch(w http.ResponseWriter, r *http.Request, resource, ns, selectorText, from string) {
	api.mu.Lock()
	api.requests = append(api.requests, ex14Request{"watch", resource, "", "", 200})
	at, _ := strconv.Atoi(from)
	if at < api.gone[resource] {
		api.mu.Unlock()
		ex14WriteErr(w, apierrors.NewResourceExpired("too old resource version"))
		return
	}
	epoch := api.epoch
	api.mu.Unlock()
	selector, _ := labels.Parse(selectorText)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(200)
	w.(http.Flusher).Flush()
	stop := context.AfterFunc(r.Context(), func() { api.mu.Lock(); api.cond.Broadcast(); api.mu.Unlock() })
	defer stop()
	next := 0
	for {
		api.mu.Lock()
		var send []byte
		for send == nil {
			if r.Context().Err() != nil || api.closed || resource == "configmaps" && api.epoch != epoch {
				api.mu.Unlock()
				return
			}
			if next < len(api.log) && !(api.holding && resource == "configmaps" && api.log[next].rv > api.heldFrom) {
				e := api.log[next]
				next++
				if e.resource != resource || e.rv <= at {
					continue
				}
				matches := func(o map[string]any) bool {
					return o != nil && (ns == "" || ex14Meta(o, "namespace") == ns) && selector.Matches(labels.Set(ex14Labels(o)))
				}
				if e.typ == "DELETED" && matches(e.old) || e.typ != "DELETED" && matches(e.obj) {
					send, _ = json.Marshal(map[string]any{"type": e.typ, "object": e.obj})
				}
				continue
			}
			api.cond.Wait()
		}
		api.mu.Unlock()
		if _, err := w.Write(append(send, '\n')); err != nil {
			return
		}
		w.(http.Flusher).Flush()
	}
}

// The test's side.

func (api *ex14API) greeting(ns, name, uid, to string, copies int) {
	api.mu.Lock()
	defer api.mu.Unlock()
	api.store("greetings", map[string]any{"metadata": map[string]any{"namespace": ns, "name": name, "uid": uid},
		"spec": map[string]any{"to": to, "copies": int64(copies)}})
}

// copyAt stores a labelled ConfigMap controlled by the Greeting with uid
// (none if ""), made minutes after the epoch.
func (api *ex14API) copyAt(ns, name, uid, owner string, minutes int) {
	meta := map[string]any{"namespace": ns, "name": name, "uid": "uid-" + name,
		"labels":            map[string]any{ex14Label: ex14LabelSet},
		"creationTimestamp": time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(minutes) * time.Minute).Format(time.RFC3339)}
	if uid != "" {
		meta["ownerReferences"] = []any{map[string]any{"apiVersion": "demo.example.com/v1alpha1", "kind": "Greeting",
			"name": owner, "uid": uid, "controller": true, "blockOwnerDeletion": true}}
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	api.store("configmaps", map[string]any{"metadata": meta, "data": map[string]any{"greeting": "x"}})
}

func (api *ex14API) remove(ns, name string) {
	api.mu.Lock()
	defer api.mu.Unlock()
	api.removeLocked(ns, name)
}

func (api *ex14API) removeGreeting(ns, name string) {
	api.mu.Lock()
	defer api.mu.Unlock()
	obj := ex14Copy(api.objects["greetings"][ns+"/"+name])
	delete(api.objects["greetings"], ns+"/"+name)
	api.rv++
	_ = unstructured.SetNestedField(obj, strconv.Itoa(api.rv), "metadata", "resourceVersion")
	api.log = append(api.log, ex14Event{"greetings", "DELETED", api.rv, obj, obj})
	api.cond.Broadcast()
}

// hold holds back, or releases, the ConfigMaps' watch events from now on.
func (api *ex14API) hold(hold bool) {
	api.mu.Lock()
	defer api.mu.Unlock()
	api.holding, api.heldFrom = hold, api.rv
	api.cond.Broadcast()
}

// jump moves the resourceVersion on, as other writes to the cluster do.
func (api *ex14API) jump(to int) {
	api.mu.Lock()
	defer api.mu.Unlock()
	api.rv = max(api.rv, to)
}

// relist ends the ConfigMaps' watches; their next watch from before now
// gets 410 Gone, so the informer lists again. The events held back are
// never sent: the list has what they said.
func (api *ex14API) relist() {
	api.mu.Lock()
	defer api.mu.Unlock()
	api.gone["configmaps"] = api.rv
	api.epoch++
	api.holding = false
	api.cond.Broadcast()
}

func (api *ex14API) setFail(verb, greeting string, n int) {
	api.mu.Lock()
	defer api.mu.Unlock()
	api.fail[verb+" "+greeting] = n
}

func (api *ex14API) problem(p string) { api.problems = append(api.problems, p) }

func (api *ex14API) check(t *testing.T) {
	t.Helper()
	api.mu.Lock()
	defer api.mu.Unlock()
	if len(api.problems) > 0 {
		t.Fatal(api.problems[0])
	}
}

// copies returns the names of the Greeting's copies, oldest first.
func (api *ex14API) copies(greeting string) []string {
	api.mu.Lock()
	defer api.mu.Unlock()
	var names []string
	for _, obj := range api.objects["configmaps"] {
		if ex14Owner(obj) == greeting && strings.HasPrefix(ex14Meta(obj, "uid"), "uid-cm-") {
			names = append(names, ex14Meta(obj, "name"))
		}
	}
	slices.Sort(names)
	return names
}

func (api *ex14API) live(greeting string) int {
	api.mu.Lock()
	defer api.mu.Unlock()
	n := 0
	for _, obj := range api.objects["configmaps"] {
		refs, _, _ := unstructured.NestedSlice(obj, "metadata", "ownerReferences")
		if g := api.objects["greetings"]["default/"+greeting]; g != nil && ex14ControllerUID(refs) == ex14Meta(g, "uid") {
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
	api.mu.Lock()
	var got []string
	for _, obj := range api.objects["configmaps"] {
		if ex14Owner(obj) == greeting {
			got = append(got, ex14Meta(obj, "name"))
		}
	}
	api.mu.Unlock()
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("%s; its ConfigMaps are %q, want %q", why, got, want)
	}
}

func (api *ex14API) deletedSince(t *testing.T, mark int, want []string, why string) {
	t.Helper()
	api.mu.Lock()
	var got []string
	for _, r := range api.requests[mark:] {
		if r.verb == "delete" && r.code == 200 {
			got = append(got, r.name)
		}
	}
	api.mu.Unlock()
	slices.Sort(got)
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(got, want) {
		t.Errorf("%s: the controller deleted %q, want %q (the newest first: the latest creationTimestamp, then the "+
			"greatest name)", why, got, want)
	}
}

func (api *ex14API) mark(r *ex14Run) int {
	api.mu.Lock()
	defer api.mu.Unlock()
	r.markLine = len(r.lines())
	return len(api.requests)
}

// requestsSince returns the creates and deletes of the Greeting's copies
// since mark: each "verb code".
func (api *ex14API) requestsSince(mark int, greeting string) []string {
	api.mu.Lock()
	defer api.mu.Unlock()
	var got []string
	for _, r := range api.requests[mark:] {
		if r.resource == "configmaps" && r.greeting == greeting && (r.verb == "create" || r.verb == "delete") {
			got = append(got, fmt.Sprintf("%s %d", r.verb, r.code))
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
		greeting, strings.Join(ex14OrNone(got), "\n  "), strings.Join(want, "\n  "), hint)
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

func (api *ex14API) settleFor(t *testing.T, r *ex14Run, quiet time.Duration) {
	t.Helper()
	last, since := -1, time.Now()
	for deadline := time.Now().Add(ex14Wait); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		api.mu.Lock()
		n, busy := len(api.requests), api.open > 0
		api.mu.Unlock()
		if n != last || busy {
			last, since = n, time.Now()
		} else if time.Since(since) >= quiet {
			return
		}
	}
	api.check(t)
	t.Fatalf("the controller has not stopped sending requests for %v", ex14Wait)
}

func ex14Owner(obj map[string]any) string {
	refs, _, _ := unstructured.NestedSlice(obj, "metadata", "ownerReferences")
	for _, ref := range refs {
		if r, _ := ref.(map[string]any); r["controller"] == true {
			return fmt.Sprint(r["name"])
		}
	}
	return ""
}

func ex14ControllerUID(refs []any) string {
	for _, ref := range refs {
		if r, _ := ref.(map[string]any); r["controller"] == true {
			return fmt.Sprint(r["uid"])
		}
	}
	return ""
}

func ex14OrNone(s []string) []string {
	if len(s) == 0 {
		return []string{"(none)"}
	}
	return s
}

func ex14Meta(obj map[string]any, field string) string {
	v, _, _ := unstructured.NestedString(obj, "metadata", field)
	return v
}

func ex14Labels(obj map[string]any) map[string]string {
	v, _, _ := unstructured.NestedStringMap(obj, "metadata", "labels")
	return v
}

func ex14Copy(obj map[string]any) map[string]any {
	return (&unstructured.Unstructured{Object: obj}).DeepCopy().Object
}

// ex14Decode reads a request's body, in JSON or in protobuf (client-go's
// typed clients send built-in types as protobuf).
func ex14Decode(body []byte) (map[string]any, error) {
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, nil)
	if err != nil {
		var m map[string]any
		if json.Unmarshal(body, &m) == nil {
			return m, nil
		}
		return nil, err
	}
	return runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
}

func ex14Status(err *apierrors.StatusError) any {
	status := err.Status()
	status.Kind, status.APIVersion = "Status", "v1"
	return status
}

func ex14Err(err *apierrors.StatusError) (int, any) {
	return int(err.Status().Code), ex14Status(err)
}

func ex14ErrG(err *apierrors.StatusError) (int, any, string) {
	code, answer := ex14Err(err)
	return code, answer, ""
}

func ex14WriteErr(w http.ResponseWriter, err *apierrors.StatusError) {
	code, answer := ex14Err(err)
	ex14Write(w, code, answer)
}

func ex14Write(w http.ResponseWriter, code int, answer any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(answer)
}

// ex14Run is a run of run, and what it logs.
type ex14Run struct {
	buf      *syncBuffer
	cancel   context.CancelFunc
	ended    chan struct{}
	err      error
	markLine int
	api      *ex14API
}

// ex14Start runs run with --greeting-workers=4; without that flag, with
// one worker, unless workers is true.
func ex14Start(t *testing.T, api *ex14API, workers bool) *ex14Run {
	t.Helper()
	r := &ex14Run{api: api, buf: &syncBuffer{}, ended: make(chan struct{})}
	args := []string{"--kubeconfig", writeKubeconfig(t, api.url, bearer, false), "--startup-timeout=5s", "--sync-timeout=5s"}
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
	logger := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(r.buf)))
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	r.cancel = cancel
	go func() { defer close(r.ended); r.err = run(ctx, o) }()
	t.Cleanup(func() {
		r.cancel()
		select {
		case <-r.ended:
		case <-time.After(ex14Wait):
			t.Errorf("run did not return within %v of its context's end", ex14Wait)
		}
		if t.Failed() {
			lines := r.lines()
			t.Logf("the last lines demo-controller logged:\n%s", strings.Join(lines[max(0, len(lines)-20):], "\n"))
		}
	})
	return r
}

func (r *ex14Run) lines() []string {
	var lines []string
	for _, line := range strings.Split(strings.TrimSpace(r.buf.String()), "\n") {
		if line != "" {
			lines = append(lines, klogHeader.ReplaceAllString(line, ""))
		}
	}
	return lines
}

func (r *ex14Run) matchingAfter(_ int, s string) []string {
	lines := r.lines()
	return slices.DeleteFunc(slices.Clone(lines[min(r.markLine, len(lines)):]), func(l string) bool { return !strings.Contains(l, s) })
}

// expectAfter waits for a line that starts with each of wants, logged
// since the last mark.
func (r *ex14Run) expectAfter(t *testing.T, _ int, why string, wants ...string) {
	t.Helper()
	for deadline := time.Now().Add(ex14Wait); ; time.Sleep(5 * time.Millisecond) {
		r.api.check(t)
		lines := r.lines()[min(r.markLine, len(r.lines())):]
		missing := slices.DeleteFunc(slices.Clone(wants), func(want string) bool {
			return slices.ContainsFunc(lines, func(line string) bool { return strings.HasPrefix(line, want) })
		})
		if len(missing) == 0 {
			return
		}
		select {
		case <-r.ended:
			t.Fatalf("run returned %v before demo-controller logged:\n  %s", r.err, strings.Join(missing, "\n  "))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s. Within %v demo-controller did not log:\n  %s", why, ex14Wait, strings.Join(missing, "\n  "))
		}
	}
}
