//go:build exercise

// The test of exercise 7 (exercises/07-crd/README.md). It is not part of
// the project's tests: copy it into the project's root and run it with the
// exercise tag, as the exercise's README says.

package main

import (
	"context"
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
)

// exercise07Wait bounds each wait: the API server below answers at once, so
// a line that has not come within it is not coming.
const exercise07Wait = 5 * time.Second

// The task's resource, and the pods the rest of demo-controller watches.
var (
	exercise07Greetings = schema.GroupVersionResource{Group: "demo.example.com", Version: "v1alpha1", Resource: "greetings"}
	exercise07Pods      = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
)

// Greetings are watched with the dynamic informer, as *unstructured.Unstructured:
// no Go type registered in a scheme, no generated code.
func TestExercise07NoGeneratedCode(t *testing.T) {
	files, _ := filepath.Glob("*.go")
	dynamicInformer := false
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			dynamicInformer = dynamicInformer || imp.Path.Value == `"k8s.io/client-go/dynamic/dynamicinformer"`
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				if slices.Contains([]string{"AddKnownTypes", "AddKnownTypeWithName", "NewSchemeBuilder"}, n.Sel.Name) {
					t.Errorf("%s calls %s: a Go type for Greetings registered in a scheme is the road to generated code "+
						"(DeepCopyObject, typed clients, listers). Read Greetings as *unstructured.Unstructured instead", name, n.Sel.Name)
				}
			case *ast.FuncDecl:
				if n.Name.Name == "DeepCopyObject" {
					t.Errorf("%s declares DeepCopyObject: no Go type needs to be a runtime.Object here. "+
						"The dynamic informer hands out *unstructured.Unstructured", name)
				}
			}
			return true
		})
	}
	if !dynamicInformer {
		t.Errorf("no Go file in the project's root imports k8s.io/client-go/dynamic/dynamicinformer: watch Greetings with " +
			"an informer from its factory (NewFilteredDynamicSharedInformerFactory, then ForResource with the Greetings' " +
			"GroupVersionResource), not with a typed client, a hand-built cache.ListWatch, or by listing them again and again")
	}
}

// run, as demo-controller runs it, against an API server that serves pods
// and Greetings: Greetings that exist at the start are found, in two
// namespaces under one name and without the optional language; one is then
// created, updated and deleted; and one is deleted while the controller's
// watch is down, so that the informer hands its delete over as a tombstone.
func TestExercise07Greetings(t *testing.T) {
	api := newGreetingAPI(t,
		testGreeting("default", "hello", "uid-1", "5", "Ada", ""),
		testGreeting("shop", "hello", "uid-2", "6", "Grace", "fr"))
	log, _ := startRun(t, api, "", time.Minute)

	log.expect(t, api, "Greetings that exist when demo-controller starts are each logged \"Greeting found\", with "+
		"their namespace and the fields of their spec. Read a field with unstructured.NestedString(obj.Object, "+
		"\"spec\", \"to\"), one argument for each level; it returns \"\" and false for a field that is not there, "+
		"and a Greeting with no language is in English",
		`"Greeting found" greeting="default/hello" to="Ada" language="en"`,
		`"Greeting found" greeting="shop/hello" to="Grace" language="fr"`)

	api.waitForWatch(t)
	welcome := testGreeting("shop", "welcome", "uid-3", "7", "Grace", "fr")
	api.write(t, welcome)
	log.expect(t, api, "a Greeting created while demo-controller runs is logged \"Greeting created\"",
		`"Greeting created" greeting="shop/welcome" to="Grace" language="fr"`)

	welcome.SetResourceVersion("8")
	if err := unstructured.SetNestedField(welcome.Object, "de", "spec", "language"); err != nil {
		t.Fatal(err)
	}
	api.write(t, welcome)
	log.expect(t, api, "a Greeting changed is logged \"Greeting updated\", with its spec as it is now",
		`"Greeting updated" greeting="shop/welcome" to="Grace" language="de"`)

	api.remove(t, "shop", "welcome")
	log.expect(t, api, "a Greeting deleted is logged \"Greeting deleted\"",
		`"Greeting deleted" greeting="shop/welcome"`)

	// The watch breaks; meanwhile default/hello is deleted. The informer
	// lists again and finds it gone: it hands that delete to the delete
	// handler as a cache.DeletedFinalStateUnknown, not as the object.
	api.deleteWhileWatchIsDown(t, "default", "hello")
	log.expect(t, api, "a Greeting deleted while the watch was down is logged \"Greeting deleted\" too. The informer "+
		"hands such a delete to the delete handler as a cache.DeletedFinalStateUnknown tombstone, not as an "+
		"*unstructured.Unstructured: cache.DeletionHandlingObjectToName takes both",
		`"Greeting deleted" greeting="default/hello"`)

	want := []string{
		`"Greeting found" greeting="default/hello" to="Ada" language="en"`,
		`"Greeting found" greeting="shop/hello" to="Grace" language="fr"`,
		`"Greeting created" greeting="shop/welcome" to="Grace" language="fr"`,
		`"Greeting updated" greeting="shop/welcome" to="Grace" language="de"`,
		`"Greeting deleted" greeting="shop/welcome"`,
		`"Greeting deleted" greeting="default/hello"`,
	}
	got := log.greetingLines()
	if len(got) >= 2 {
		slices.Sort(got[:2]) // the two found may come in either order
	}
	if !slices.Equal(got, want) {
		why := ""
		if slices.ContainsFunc(got, func(line string) bool {
			return strings.HasPrefix(line, `"Greeting updated"`) && !slices.Contains(want, line)
		}) {
			why = "\nAn update that changes nothing is no change: each time the informer lists again, it hands " +
				"every Greeting over again, with the resourceVersion it had. Compare resourceVersions, as sync does for pods."
		}
		t.Errorf("demo-controller logged these lines about Greetings:\n  %s\nwant exactly:\n  %s%s",
			strings.Join(got, "\n  "), strings.Join(want, "\n  "), why)
	}
	if lists := api.count(func(r apiRequest) bool { return r.greetings && !r.watch }); lists > 4 {
		t.Errorf("demo-controller listed Greetings %d times: an informer lists them once, then watches (and lists "+
			"again only when a watch cannot resume); never list in a loop", lists)
	}
}

// With --namespace, demo-controller watches the Greetings of that namespace
// only, as it does pods.
func TestExercise07WatchesOnlyItsNamespace(t *testing.T) {
	api := newGreetingAPI(t,
		testGreeting("default", "hello", "uid-1", "5", "Ada", ""),
		testGreeting("shop", "hello", "uid-2", "6", "Grace", "fr"))
	log, _ := startRun(t, api, "shop", time.Minute)
	log.expect(t, api, "with --namespace=shop, the Greeting in shop is found",
		`"Greeting found" greeting="shop/hello" to="Grace" language="fr"`)
	api.waitForWatch(t)
	api.write(t, testGreeting("default", "other", "uid-3", "7", "Alan", ""))
	api.write(t, testGreeting("shop", "other", "uid-4", "8", "Alan", "")) // last: once it is seen, the other would have been
	log.expect(t, api, "with --namespace=shop, a Greeting created in shop is logged",
		`"Greeting created" greeting="shop/other" to="Alan" language="en"`)
	for _, line := range log.greetingLines() {
		if strings.Contains(line, `greeting="default/`) {
			t.Errorf("with --namespace=shop, demo-controller logged %s: give the dynamic informer factory the "+
				"namespace (NewFilteredDynamicSharedInformerFactory), as runController gives it to the pod informers", line)
		}
	}
}

// When the API server answers the check a controller makes at start but
// never sends the Greetings' full list (a server too slow, a watch that
// keeps failing), demo-controller gives up after --sync-timeout with an
// error, as it does for pods, instead of running on an empty cache.
func TestExercise07GivesUpWhenGreetingsDoNotSync(t *testing.T) {
	api := newGreetingAPI(t, testGreeting("default", "hello", "uid-1", "5", "Ada", ""))
	api.hold = true
	const syncTimeout = time.Second
	_, done := startRun(t, api, "", syncTimeout)
	deadline := time.After(syncTimeout + exercise07Wait)
	for served := time.Tick(5 * time.Millisecond); ; <-served {
		api.checkServed(t)
		select {
		case err := <-done:
			if err == nil {
				t.Fatal("run returned no error, although the Greetings never synced")
			}
			t.Logf("run returned, as it should: %v", err)
			return
		case <-deadline:
			t.Fatalf("demo-controller still runs %v after it started, although the API server never answered its list of "+
				"Greetings (the informer's list, or its watch that streams the list). Wait for the Greeting informer's cache "+
				"at most --sync-timeout (%v), as Run does for pods (cache.WaitFor, with a context that has a deadline), "+
				"and return an error when it has not synced: run must return it", syncTimeout+exercise07Wait, syncTimeout)
		default:
		}
	}
}

// testGreeting returns a Greeting as the API server would hold it; language ""
// leaves the optional field out.
func testGreeting(namespace, name, uid, resourceVersion, to, language string) *unstructured.Unstructured {
	spec := map[string]any{"to": to}
	if language != "" {
		spec["language"] = language
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "demo.example.com/v1alpha1",
		"kind":       "Greeting",
		"metadata":   map[string]any{"namespace": namespace, "name": name, "uid": uid, "resourceVersion": resourceVersion},
		"spec":       spec,
	}}
}

// greetingAPI is an API server, over HTTP, that serves pods and Greetings
// from client-go's dynamic fake, as a kube-apiserver with the Greeting CRD
// would: a list, or a watch that streams each change. It answers 404 for
// anything else, and records every apiRequest.
type greetingAPI struct {
	store *dynamicfake.FakeDynamicClient
	url   string

	mu       sync.Mutex
	requests []apiRequest
	watches  map[chan struct{}]bool // the open watches of Greetings; closing one ends it
	gone     chan struct{}          // while set, a watch of Greetings gets 410 Gone, and a list waits for it to close
	hold     bool                   // hold every apiRequest for Greetings but a list with limit=1
}

// apiRequest is what greetingAPI records of a apiRequest.
type apiRequest struct {
	path             string
	greetings, watch bool
	limit            string // of a list
	served           bool   // false: 404
}

func newGreetingAPI(t *testing.T, greetings ...runtime.Object) *greetingAPI {
	api := &greetingAPI{watches: map[chan struct{}]bool{}}
	api.store = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{exercise07Greetings: "GreetingList", exercise07Pods: "PodList"}, greetings...)
	server := httptest.NewServer(api)
	t.Cleanup(server.Close)
	api.url = server.URL
	return api
}

// greetingAPIPath matches the paths a kube-apiserver serves pods and Greetings at.
var greetingAPIPath = regexp.MustCompile(`^/(api/v1|apis/demo\.example\.com/v1alpha1)(?:/namespaces/([^/]+))?/([^/]+)$`)

func (api *greetingAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	m := greetingAPIPath.FindStringSubmatch(r.URL.Path)
	query := r.URL.Query()
	watching := query.Get("watch") == "true" || query.Get("watch") == "1"
	var gvr schema.GroupVersionResource
	switch {
	case m != nil && m[1] == "api/v1" && m[3] == "pods":
		gvr = exercise07Pods
	case m != nil && m[1] == "apis/demo.example.com/v1alpha1" && m[3] == "greetings":
		gvr = exercise07Greetings
	}
	api.mu.Lock()
	api.requests = append(api.requests, apiRequest{path: r.URL.Path, greetings: gvr == exercise07Greetings,
		watch: watching, limit: query.Get("limit"), served: gvr.Resource != ""})
	hold := api.hold && gvr == exercise07Greetings && (watching || query.Get("limit") != "1")
	gone := api.gone
	api.mu.Unlock()

	switch {
	case gvr.Resource == "":
		apiStatus(w, http.StatusNotFound, "NotFound", "the server could not find the requested resource")
		return
	case hold:
		<-r.Context().Done()
		return
	case watching && query.Get("sendInitialEvents") == "true":
		// As an API server that cannot stream a list: client-go lists instead.
		apiStatus(w, http.StatusBadRequest, "BadRequest", "sendInitialEvents is not supported here")
		return
	case gvr == exercise07Greetings && gone != nil && watching:
		apiStatus(w, http.StatusGone, "Expired", "too old resource version")
		return
	case gvr == exercise07Greetings && gone != nil:
		select {
		case <-gone:
		case <-r.Context().Done():
			return
		}
		api.mu.Lock()
		api.gone = nil // this list tells the informer what it missed: back to normal
		api.mu.Unlock()
	}
	resource := api.store.Resource(gvr).Namespace(m[2])
	if !watching {
		list, err := resource.List(r.Context(), metav1.ListOptions{})
		if err != nil {
			apiStatus(w, http.StatusInternalServerError, "InternalError", err.Error())
			return
		}
		list.SetResourceVersion("100")
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(list)
		return
	}
	watcher, err := resource.Watch(r.Context(), metav1.ListOptions{})
	if err != nil {
		apiStatus(w, http.StatusInternalServerError, "InternalError", err.Error())
		return
	}
	defer watcher.Stop()
	end := make(chan struct{})
	if gvr == exercise07Greetings {
		api.mu.Lock()
		api.watches[end] = true
		api.mu.Unlock()
		defer func() {
			api.mu.Lock()
			delete(api.watches, end)
			api.mu.Unlock()
		}()
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	for {
		select {
		case event, ok := <-watcher.ResultChan():
			if !ok {
				return
			}
			object, _ := json.Marshal(event.Object)
			_ = json.NewEncoder(w).Encode(map[string]any{"type": event.Type, "object": json.RawMessage(object)})
			w.(http.Flusher).Flush()
		case <-end:
			return
		case <-r.Context().Done():
			return
		}
	}
}

// count returns how many requests so far match.
func (api *greetingAPI) count(match func(apiRequest) bool) int {
	api.mu.Lock()
	defer api.mu.Unlock()
	n := 0
	for _, r := range api.requests {
		if match(r) {
			n++
		}
	}
	return n
}

// checkServed fails the test at once if demo-controller asked for a
// resource that the API server does not serve.
func (api *greetingAPI) checkServed(t *testing.T) {
	t.Helper()
	api.mu.Lock()
	defer api.mu.Unlock()
	for _, r := range api.requests {
		if !r.served {
			t.Fatalf("demo-controller asked the API server for %s, which it does not serve (404). The Greeting CRD "+
				"serves /apis/demo.example.com/v1alpha1/greetings, and .../namespaces/NAMESPACE/greetings: a "+
				"GroupVersionResource names the group, the version the CRD serves (v1alpha1), and the resource, "+
				"the plural in lower case (spec.names.plural), not the Kind. The dynamic client has no scheme to "+
				"find it from a Go type", strconv.Quote(r.path))
		}
	}
}

// openWatches returns how many watches of Greetings are open.
func (api *greetingAPI) openWatches() int {
	api.mu.Lock()
	defer api.mu.Unlock()
	return len(api.watches)
}

// waitForWatch waits until demo-controller watches Greetings: a Greeting
// written before that would reach it only by chance.
func (api *greetingAPI) waitForWatch(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(exercise07Wait); api.openWatches() == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("demo-controller listed Greetings but never watched them: an informer lists, then watches, and " +
				"only the watch tells it what changes")
		}
	}
}

// write creates or updates a Greeting, as kubectl apply would.
func (api *greetingAPI) write(t *testing.T, g *unstructured.Unstructured) {
	t.Helper()
	greetings := api.store.Resource(exercise07Greetings).Namespace(g.GetNamespace())
	_, err := greetings.Update(context.Background(), g.DeepCopy(), metav1.UpdateOptions{})
	if err != nil {
		_, err = greetings.Create(context.Background(), g.DeepCopy(), metav1.CreateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
}

func (api *greetingAPI) remove(t *testing.T, namespace, name string) {
	t.Helper()
	if err := api.store.Resource(exercise07Greetings).Namespace(namespace).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// deleteWhileWatchIsDown ends the watches of Greetings and deletes one
// while none is open. The next watch gets 410 Gone (its resourceVersion too
// old, as when the API server's watch cache has moved on), so the informer
// lists again, and that list is answered only once the Greeting is gone.
func (api *greetingAPI) deleteWhileWatchIsDown(t *testing.T, namespace, name string) {
	t.Helper()
	gone := make(chan struct{})
	api.mu.Lock()
	api.gone = gone
	for end := range api.watches {
		close(end)
		delete(api.watches, end)
	}
	api.mu.Unlock()
	api.remove(t, namespace, name) // no watch open: no one hears of it
	close(gone)
}

// greetingLog is what run logs, and the pieces to read it.
type greetingLog struct{ buf *syncBuffer }

// startRun runs run, as demo-controller does, against api until the test
// ends. The channel receives what run returns.
func startRun(t *testing.T, api *greetingAPI, namespace string, syncTimeout time.Duration) (greetingLog, <-chan error) {
	t.Helper()
	buf := &syncBuffer{}
	logger := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(buf)))
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	o := options{kubeconfig: writeKubeconfig(t, api.url, bearer, false), namespace: namespace,
		startupTimeout: exercise07Wait, syncTimeout: syncTimeout}
	done, ended := make(chan error, 1), make(chan struct{})
	go func() { defer close(ended); done <- run(ctx, o) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-ended:
		case <-time.After(exercise07Wait):
			t.Errorf("run did not return within %v of its context's end", exercise07Wait)
		}
		if t.Failed() {
			lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
			t.Logf("the last lines demo-controller logged:\n%s", strings.Join(lines[max(0, len(lines)-20):], "\n"))
		}
	})
	return greetingLog{buf}, done
}

// greetingLines returns the lines logged about single Greetings, without
// klog's headers.
func (l greetingLog) greetingLines() []string {
	var lines []string
	for _, line := range strings.Split(l.buf.String(), "\n") {
		if line = klogHeader.ReplaceAllString(line, ""); strings.HasPrefix(line, `"Greeting `) {
			lines = append(lines, line)
		}
	}
	return lines
}

// expect waits until each of wants is a line of the log. It fails at once
// if demo-controller asked for a resource the API server does not serve,
// and says why in the task's words, with why, if the lines do not come.
func (l greetingLog) expect(t *testing.T, api *greetingAPI, why string, wants ...string) {
	t.Helper()
	for deadline := time.Now().Add(exercise07Wait); ; time.Sleep(5 * time.Millisecond) {
		api.checkServed(t)
		got := l.greetingLines()
		missing := slices.DeleteFunc(slices.Clone(wants), func(want string) bool { return slices.Contains(got, want) })
		if len(missing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			if api.count(func(r apiRequest) bool { return r.greetings && (r.watch || r.limit != "1") }) == 0 {
				t.Fatalf("demo-controller never listed or watched Greetings (a first check apart). Make an informer " +
					"for them from the dynamic informer factory (ForResource), start the factory after that (Start " +
					"starts only the informers asked for so far), and run a controller on the informer, beside the " +
					"pod controller")
			}
			if len(got) == 0 {
				why += ". The API server has sent the Greetings, yet nothing was logged about them: does the worker " +
					"find them in the cache? Greetings in two namespaces share the name hello: a key must hold the " +
					"namespace and the name (cache.ObjectToName), and the lookup use both " +
					"(lister.ByNamespace(namespace).Get(name))"
			}
			t.Fatalf("%s. Within %v demo-controller did not log:\n  %s\nIts lines about Greetings were:\n  %s",
				why, exercise07Wait, strings.Join(missing, "\n  "), strings.Join(lastLines(got, 10), "\n  "))
		}
	}
}

// lastLines returns the last n of lines, or "(none)".
func lastLines(lines []string, n int) []string {
	if len(lines) == 0 {
		return []string{"(none)"}
	}
	return lines[max(0, len(lines)-n):]
}
