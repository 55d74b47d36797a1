//go:build exercise

// The test of exercise 7 (exercises/07-crd/README.md). It is not part of
// the project's tests: copy it into the project's root and run it with the
// exercise tag, as the exercise's README says.

package main

import (
	"bytes"
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/yaml"

	"demo-controller/internal/fakeapi"
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

// The CRD's schema, read as the API server reads it. Only a real API server
// applies the whole of it (the end-to-end test does), but the rules the task
// names can be tried here, in milliseconds: a pattern is a Go regular
// expression on the server too (RE2, matched anywhere unless anchored).
func TestExercise07CRD(t *testing.T) {
	const path = "exercises/07-crd/greeting-crd.yaml"
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("write the Greeting's CustomResourceDefinition in %s (task, step 1): %v", path, err)
	}
	var crd map[string]any
	if err := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096).Decode(&crd); err != nil {
		t.Fatalf("%s is not YAML that kubectl can read: %v", path, err)
	}
	str := func(fields ...string) string { v, _, _ := unstructured.NestedString(crd, fields...); return v }
	for _, f := range []struct{ path, got, want string }{
		{"apiVersion", str("apiVersion"), "apiextensions.k8s.io/v1"},
		{"kind", str("kind"), "CustomResourceDefinition"},
		{"metadata.name", str("metadata", "name"), "greetings.demo.example.com"},
		{"spec.group", str("spec", "group"), "demo.example.com"},
		{"spec.scope", str("spec", "scope"), "Namespaced"},
		{"spec.names.kind", str("spec", "names", "kind"), "Greeting"},
		{"spec.names.plural", str("spec", "names", "plural"), "greetings"},
	} {
		if f.got != f.want {
			t.Errorf("%s: %s is %q, want %q (the task's step 1; a CRD's name is <plural>.<group>)", path, f.path, f.got, f.want)
		}
	}
	versions, _, _ := unstructured.NestedSlice(crd, "spec", "versions")
	var root map[string]any // the schema
	for _, v := range versions {
		v, _ := v.(map[string]any)
		if v["name"] == "v1alpha1" {
			if v["served"] != true || v["storage"] != true {
				t.Errorf("%s: version v1alpha1 must be served: true and storage: true", path)
			}
			root, _, _ = unstructured.NestedMap(v, "schema", "openAPIV3Schema")
		}
	}
	if root == nil {
		t.Fatalf("%s: no version v1alpha1 with a schema.openAPIV3Schema: the API server needs a schema for each version", path)
	}
	if t.Failed() {
		return
	}
	props := func(m map[string]any, name string) map[string]any {
		p, _, _ := unstructured.NestedMap(m, "properties", name)
		return p
	}
	if root["x-kubernetes-preserve-unknown-fields"] == true && root["properties"] == nil {
		t.Fatalf("%s: the schema is x-kubernetes-preserve-unknown-fields: true with no properties: the API server then "+
			"stores whatever it is sent, and refuses no Greeting. Declare spec, to and language, with their rules", path)
	}
	spec, to, language := props(root, "spec"), props(props(root, "spec"), "to"), props(props(root, "spec"), "language")
	// The field each level keeps: at the top, a field next to spec (inside
	// spec, the API server still prunes by spec's own schema, and strict
	// validation refuses what it would prune); under spec, a field inside it.
	for _, at := range []struct {
		where, example string
		schema         map[string]any
	}{
		{"at the top", "a field next to spec, such as extra", root},
		{"under spec", "a misspelt lanugage inside spec, say", spec},
	} {
		if at.schema["x-kubernetes-preserve-unknown-fields"] == true {
			t.Errorf("%s: the schema has x-kubernetes-preserve-unknown-fields: true %s. The API server still checks the "+
				"fields you declare, but keeps, at that level, any field you do not (%s) instead of "+
				"dropping it: the task's Greeting has a spec with to and language, and nothing else. Remove it", path, at.where, at.example)
		}
	}
	required := func(m map[string]any) []string {
		r, _, _ := unstructured.NestedStringSlice(m, "required")
		return r
	}
	cel := func(m map[string]any) bool { return m["x-kubernetes-validations"] != nil } // rules of its own: the e2e test decides
	switch {
	case spec == nil || to == nil || language == nil:
		t.Fatalf("%s: the schema must declare properties.spec, and under it properties.to and properties.language (hint 1)", path)
	case !cel(root) && !slices.Contains(required(root), "spec"):
		t.Errorf("%s: the schema accepts a Greeting with no spec: required: [to] under spec applies only when there is a "+
			"spec; add required: [spec] at the top (hint 2)", path)
	case !cel(spec) && !slices.Contains(required(spec), "to"):
		t.Errorf("%s: the schema accepts a spec with no to: add required: [to] under spec (the task: to is required)", path)
	}
	for field, m := range map[string]map[string]any{"spec": spec, "spec.to": to, "spec.language": language} {
		want := map[bool]string{true: "object", false: "string"}[field == "spec"]
		if m["type"] != want {
			t.Errorf("%s: %s has type %v, want %s: a Greeting with a number where a string goes must be refused", path, field, m["type"], want)
		}
	}

	// accepts says whether the schema's rules on a string field, as far as
	// they are here, let value in.
	accepts := func(m map[string]any, value string) (bool, error) {
		if max, ok := m["maxLength"].(int64); ok && int64(len(value)) > max {
			return false, nil
		}
		if max, ok := m["maxLength"].(float64); ok && float64(len(value)) > max {
			return false, nil
		}
		if enum, ok := m["enum"].([]any); ok && !slices.Contains(enum, any(value)) {
			return false, nil
		}
		if pattern, ok := m["pattern"].(string); ok {
			re, err := regexp.Compile(pattern)
			if err != nil {
				return false, err
			}
			return re.MatchString(value), nil
		}
		return true, nil
	}
	for _, f := range []struct {
		field       string
		m           map[string]any
		good, bad   []string
		rule, where string
	}{
		{"to", to,
			[]string{"Ada", "Grace Hopper", "Ada Lovelace", "Grace Brewster Hopper", "McCarthy", strings.Repeat("Abcd ", 7) + "Abcde"},
			[]string{"ada", "R2 D2", "Ada lovelace", "Ada ", " Ada", "Ada  Lovelace", "Ada-Lovelace", "Ada\nLovelace", "",
				strings.Repeat("Abcd ", 7) + "Abcdef"},
			"a name of one or more words, each a capital letter followed by letters, one space between two words, at most 40 characters",
			"a pattern in which a word is a capital letter, then letters ([A-Z][A-Za-z]*), and each word after the first " +
				"follows one space; and maxLength: 40"},
		{"language", language, []string{"en", "fr", "de", "es"}, []string{"klingon", "EN", "", "english"},
			"one of en, fr, de, es", "an enum: [en, fr, de, es]"},
	} {
		if cel(f.m) {
			t.Logf("spec.%s has x-kubernetes-validations: only the end-to-end test, on a real API server, tries them", f.field)
			continue
		}
		var wrong []string
		for want, values := range map[bool][]string{true: f.good, false: f.bad} {
			for _, v := range values {
				ok, err := accepts(f.m, v)
				if err != nil {
					t.Fatalf("%s: spec.%s's pattern is not a regular expression the API server can compile: %v", path, f.field, err)
				}
				if ok != want {
					wrong = append(wrong, fmt.Sprintf("%s %q", map[bool]string{true: "accepts", false: "refuses"}[ok], v))
				}
			}
		}
		slices.Sort(wrong)
		pattern, _ := f.m["pattern"].(string)
		switch where := f.where; {
		case len(wrong) == 0:
		case pattern != "" && (!strings.HasPrefix(pattern, "^") || !strings.HasSuffix(pattern, "$")):
			t.Errorf("%s: spec.%s must be %s; the schema %s. Its pattern, %s, is not anchored at both ends: a pattern "+
				"matches anywhere in the value unless it starts with ^ and ends with $ (without $, \"Ada lovelace\" "+
				"matches, at its start)", path, f.field, f.rule, strings.Join(wrong, ", "), pattern)
		default:
			t.Errorf("%s: spec.%s must be %s; the schema %s. Use %s", path, f.field, f.rule, strings.Join(wrong, ", "), where)
		}
	}
}

// demo-controller.yaml's ClusterRole lets the controller list and watch
// Greetings, and nothing more.
func TestExercise07ClusterRole(t *testing.T) {
	verbs, rules := fakeapi.Grants(t, "demo-controller.yaml") // by "group/resource"
	for _, rule := range rules {
		if len(rule.ResourceNames) > 0 {
			t.Errorf("demo-controller.yaml's ClusterRole limits a rule to resourceNames %v: an informer lists and "+
				"watches every object of its resource, and a list cannot be limited by name", rule.ResourceNames)
		}
	}
	switch got := verbs["demo.example.com/greetings"]; {
	case len(got) == 0:
		t.Errorf("demo-controller.yaml's ClusterRole grants nothing on greetings: on a cluster, the Greeting informer " +
			"is refused (greetings.demo.example.com is forbidden) and never syncs. Add a rule: apiGroups: " +
			"[\"demo.example.com\"], resources: [\"greetings\"], verbs: [\"list\", \"watch\"] (task, step 4)")
	case !slices.Equal(got, []string{"list", "watch"}):
		t.Errorf("demo-controller.yaml's ClusterRole grants %s on greetings: an informer needs list and watch, and the "+
			"controller does nothing else (task, step 4: and nothing more)", strings.Join(got, ", "))
	}
	delete(verbs, "demo.example.com/greetings")
	if want := map[string][]string{"/pods": {"list", "watch"}}; !maps.EqualFunc(verbs, want, slices.Equal) {
		t.Errorf("demo-controller.yaml's ClusterRole grants, besides greetings: %v; want what it granted before, %v", verbs, want)
	}
}

// run, as demo-controller runs it, against an API server that serves pods
// and Greetings: Greetings that exist at the start are found, in two
// namespaces under one name and without the optional language; one is then
// created, updated and deleted; and one is deleted while the controller's
// watch is down, so that the informer hands its delete over as a tombstone.
// Pods are still watched, beside them.
func TestExercise07Greetings(t *testing.T) {
	if fakeapi.Child(t, exercise07Crash) {
		return
	}
	api := newGreetingAPI(t,
		testGreeting("default", "hello", "uid-1", "Ada", ""),
		testGreeting("shop", "hello", "uid-2", "Grace", "fr"),
		testPodObject("default", "web", "uid-p1"))
	run := startRun(t, api, "", time.Minute)

	fakeapi.Step("the Greetings there at the start are found (default/hello has no language)")
	run.expect(t, api, "Greetings that exist when demo-controller starts are each logged \"Greeting found\", with "+
		"their namespace and the fields of their spec. Read a field with unstructured.NestedString(obj.Object, "+
		"\"spec\", \"to\"), one argument for each level; it returns \"\" and false for a field that is not there, "+
		"and a Greeting with no language is in English",
		`"Greeting found" greeting="default/hello" to="Ada" language="en"`,
		`"Greeting found" greeting="shop/hello" to="Grace" language="fr"`)
	fakeapi.Step("the pod there at the start is found")
	run.expect(t, api, "demo-controller logs the life of each Greeting beside its pods (the task): the pod there at "+
		"the start is logged \"Pod found\", as today", `"Pod found" pod="default/web"`)

	api.waitForWatch(t, exercise07Greetings)
	fakeapi.Step("a Greeting is created")
	welcome := testGreeting("shop", "welcome", "uid-3", "Grace", "fr")
	api.Store("greetings", welcome)
	run.expect(t, api, "a Greeting created while demo-controller runs is logged \"Greeting created\"",
		`"Greeting created" greeting="shop/welcome" to="Grace" language="fr"`)

	fakeapi.Step("a Greeting is updated")
	api.Change("greetings", "shop/welcome", func(obj map[string]any) {
		_ = unstructured.SetNestedField(obj, "de", "spec", "language")
	})
	run.expect(t, api, "a Greeting changed is logged \"Greeting updated\", with its spec as it is now",
		`"Greeting updated" greeting="shop/welcome" to="Grace" language="de"`)

	fakeapi.Step("a Greeting is deleted")
	api.Remove("greetings", "shop", "welcome")
	run.expect(t, api, "a Greeting deleted is logged \"Greeting deleted\"",
		`"Greeting deleted" greeting="shop/welcome"`)

	// The watch breaks; meanwhile default/hello is deleted. The informer
	// lists again and finds it gone: it hands that delete to the delete
	// handler as a cache.DeletedFinalStateUnknown, not as the object.
	fakeapi.Step("a Greeting is deleted while the watch is down (the informer hands its delete over as a tombstone)")
	api.deleteWhileWatchIsDown("default", "hello")
	run.expect(t, api, "a Greeting deleted while the watch was down is logged \"Greeting deleted\" too. The informer "+
		"hands such a delete to the delete handler as a tombstone (cache.DeletedFinalStateUnknown): the typed "+
		"handler's cache.DeletedObject gives its key with GetObjectName, whatever OptionalObj holds",
		`"Greeting deleted" greeting="default/hello"`)

	fakeapi.Step("a pod is created")
	api.waitForWatch(t, exercise07Pods)
	api.Store("pods", testPodObject("default", "web-2", "uid-p2"))
	run.expect(t, api, "a pod created while demo-controller runs is still logged \"Pod created\", beside the Greetings",
		`"Pod created" pod="default/web-2"`)

	want := []string{
		`"Greeting found" greeting="default/hello" to="Ada" language="en"`,
		`"Greeting found" greeting="shop/hello" to="Grace" language="fr"`,
		`"Greeting created" greeting="shop/welcome" to="Grace" language="fr"`,
		`"Greeting updated" greeting="shop/welcome" to="Grace" language="de"`,
		`"Greeting deleted" greeting="shop/welcome"`,
		`"Greeting deleted" greeting="default/hello"`,
	}
	got := run.greetingLines()
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
	if fakeapi.Child(t, exercise07Crash) {
		return
	}
	api := newGreetingAPI(t,
		testGreeting("default", "hello", "uid-1", "Ada", ""),
		testGreeting("shop", "hello", "uid-2", "Grace", "fr"))
	run := startRun(t, api, "shop", time.Minute)
	fakeapi.Step("with --namespace=shop, the Greetings there at the start are found")
	run.expect(t, api, "with --namespace=shop, the Greeting in shop is found",
		`"Greeting found" greeting="shop/hello" to="Grace" language="fr"`)
	api.waitForWatch(t, exercise07Greetings)
	fakeapi.Step("with --namespace=shop, Greetings are created in default and in shop")
	api.Store("greetings", testGreeting("default", "other", "uid-3", "Alan", ""))
	api.Store("greetings", testGreeting("shop", "other", "uid-4", "Alan", "")) // last: once it is seen, the other would have been
	run.expect(t, api, "with --namespace=shop, a Greeting created in shop is logged",
		`"Greeting created" greeting="shop/other" to="Alan" language="en"`)
	for _, line := range run.greetingLines() {
		if strings.Contains(line, `greeting="default/`) {
			t.Errorf("with --namespace=shop, demo-controller logged %s: give the dynamic informer factory the "+
				"namespace (NewFilteredDynamicSharedInformerFactory), as runController gives it to the pod informers", line)
		}
	}
}

// Where the Greeting CRD is not installed, the API server answers 404 for
// Greetings: demo-controller says so in one line, asks no more, and watches
// pods as before.
func TestExercise07WithoutTheCRD(t *testing.T) {
	if fakeapi.Child(t, exercise07Crash) {
		return
	}
	api := newGreetingAPI(t, testPodObject("default", "web", "uid-p1"))
	api.noCRD = true
	run := startRun(t, api, "", time.Minute)
	fakeapi.Step("the API server has no Greeting CRD")
	run.expect(t, api, "where the API server does not serve Greetings (no CRD: 404 Not Found), demo-controller says "+
		"so at start, in one line, and watches pods only (the task). Check once, before starting the Greeting "+
		"controller: a list of Greetings with Limit: 1 answers 404 (apierrors.IsNotFound)",
		exercise07NoCRD)
	run.expect(t, api, "without the Greeting CRD, pods are still watched: the pod there at the start is logged \"Pod found\"",
		`"Pod found" pod="default/web"`)
	api.waitForWatch(t, exercise07Pods)
	api.Store("pods", testPodObject("default", "web-2", "uid-p2"))
	run.expect(t, api, "without the Greeting CRD, a pod created is logged \"Pod created\"", `"Pod created" pod="default/web-2"`)
}

// A refusal of the Greetings other than 404 (here a 403: the ClusterRole
// lacks its rule) is no missing CRD: run returns the error at start.
func TestExercise07GreetingsForbidden(t *testing.T) {
	if fakeapi.Child(t, exercise07Crash) {
		return
	}
	api := newGreetingAPI(t)
	api.forbid = true
	run := startRun(t, api, "", time.Minute)
	fakeapi.Step("the API server refuses every request for Greetings with 403 Forbidden")
	deadline := time.After(exercise07Wait + 2*time.Second) // the start-up check's deadline, and some
	for tick := time.Tick(5 * time.Millisecond); ; <-tick {
		api.checkServed(t)
		if n := api.count(func(r apiRequest) bool { return r.greetings }); n > 1 {
			t.Fatalf("the API server refused demo-controller's request for Greetings with 403 Forbidden (%s), and "+
				"demo-controller asked again (%d requests): an informer retries a refused list for ever, and the run "+
				"ends only at --sync-timeout. Check at start, as run does for pods, and return that error from run", exercise07Forbidden, n)
		}
		if lines := run.Matching(0, exercise07NoCRD); len(lines) > 0 {
			t.Fatalf("the API server refused demo-controller's request for Greetings with 403 Forbidden (%s), and "+
				"demo-controller said: %s. Only a 404 Not Found means that the CRD is not installed: a 403 means that "+
				"the ClusterRole does not grant list on greetings. Return any other error from run, as it does for pods",
				exercise07Forbidden, lines[0])
		}
		select {
		case <-run.Ended:
			if run.Err == nil {
				t.Fatal("run returned no error, although the API server refused every request for Greetings (403)")
			}
			if !strings.Contains(run.Err.Error(), "forbidden") {
				t.Errorf("run returned %q: let its error carry the API server's words, %s, which name what is missing", run.Err, exercise07Forbidden)
			}
			return
		case <-deadline:
			t.Fatalf("demo-controller still runs %v after it started, although the API server refuses every request for "+
				"Greetings (403 Forbidden: %s). Check at start, as run does for pods: a 404 means no CRD (say so, watch "+
				"pods only); any other error ends run with that error, at once, not after --sync-timeout", exercise07Wait+2*time.Second, exercise07Forbidden)
		default:
		}
	}
}

// When the API server answers the check a controller makes at start but
// never sends a cache's full list (a server too slow, a watch that keeps
// failing), demo-controller gives up after --sync-timeout with an error,
// as it does for pods, instead of running on an empty cache; and it stops
// the other controller before run returns.
func TestExercise07GivesUpWhenACacheDoesNotSync(t *testing.T) {
	if fakeapi.Child(t, exercise07Crash) {
		return
	}
	for _, held := range []schema.GroupVersionResource{exercise07Greetings, exercise07Pods} {
		t.Run(held.Resource, func(t *testing.T) {
			api := newGreetingAPI(t, testGreeting("default", "hello", "uid-1", "Ada", ""))
			api.hold = held.Resource
			const syncTimeout = time.Second
			run := startRun(t, api, "", syncTimeout)
			fakeapi.Step("the API server never sends the list of " + held.Resource)
			deadline := time.After(syncTimeout + exercise07Wait)
			for tick := time.Tick(5 * time.Millisecond); ; <-tick {
				api.checkServed(t)
				select {
				case <-run.Ended:
					if run.Err == nil {
						t.Fatalf("run returned no error, although the %s never synced", held.Resource)
					}
					t.Logf("run returned: %v", run.Err)
					api.waitForNoRequests(t, fmt.Sprintf("run returned, since the %s never synced", held.Resource))
					return
				case <-deadline:
					if held == exercise07Pods && api.count(func(r apiRequest) bool { return r.pods && r.informer }) == 0 {
						t.Fatalf("demo-controller never started its pod informer: the Greeting controller runs, and the pod " +
							"controller never does. Run the Greeting controller in a goroutine beside runController, not before it")
					}
					t.Fatalf("demo-controller still runs %v after it started, although the API server never answered its "+
						"list of %s (the informer's list, or its watch that streams the list). Wait for each cache at most "+
						"--sync-timeout (%v), as Run does for pods (cache.WaitFor, with a context that has a deadline), "+
						"and return an error when it has not synced; run returns it, once the other controller is stopped "+
						"too (a goroutine's error that nobody reads is lost)", syncTimeout+exercise07Wait, held.Resource, syncTimeout)
				default:
				}
			}
		})
	}
}

// testGreeting returns a Greeting as the API server would hold it; language ""
// leaves the optional field out.
func testGreeting(namespace, name, uid, to, language string) map[string]any {
	spec := map[string]any{"to": to}
	if language != "" {
		spec["language"] = language
	}
	return map[string]any{
		"apiVersion": "demo.example.com/v1alpha1",
		"kind":       "Greeting",
		"metadata":   map[string]any{"namespace": namespace, "name": name, "uid": uid},
		"spec":       spec,
	}
}

// testPodObject returns a Running pod as the API server sends it.
func testPodObject(namespace, name, uid string) map[string]any {
	return map[string]any{
		"apiVersion": "v1",
		"kind":       "Pod",
		"metadata":   map[string]any{"namespace": namespace, "name": name, "uid": uid},
		"spec":       map[string]any{"containers": []any{map[string]any{"name": "app", "image": "example/app"}}},
		"status":     map[string]any{"phase": "Running"},
	}
}

// What demo-controller logs where Greetings are not served, and what the
// API server answers a request for them that RBAC refuses.
const (
	exercise07NoCRD     = `"Not watching greetings: their CRD is not installed"`
	exercise07Forbidden = `greetings.demo.example.com is forbidden: User "test" cannot list resource "greetings" in API group "demo.example.com" at the cluster scope`
)

// greetingAPI is fakeapi's API server, serving pods and Greetings as a
// kube-apiserver with the Greeting CRD would, behind a front of this test's
// own. The front serves Greetings at their group and version only (404 for
// any other path), and the discovery document of demo.example.com/v1alpha1;
// it answers for the cases the test sets up (no CRD, a 403, a list never
// answered), and records every request as an apiRequest.
type greetingAPI struct {
	*fakeapi.Server
	url string

	// Set before the run starts:
	noCRD  bool   // Greetings are not served: 404, as without their CRD
	forbid bool   // every request for Greetings gets 403, as RBAC answers
	hold   string // a resource: hold every request for it but a first check (a list with limit=1, a plain watch)

	// With the server's lock held:
	requests []apiRequest
	open     int // requests not answered in full yet, watches too
}

// apiRequest is what greetingAPI records of a request.
type apiRequest struct {
	path      string
	greetings bool // for Greetings, or their discovery document
	pods      bool
	watch     bool
	informer  bool // an informer's list or watch, not a first check
	served    bool // false: 404
}

// newGreetingAPI starts a greetingAPI that holds objects (pods and
// Greetings), until the test ends.
func newGreetingAPI(t *testing.T, objects ...map[string]any) *greetingAPI {
	api := &greetingAPI{Server: fakeapi.New(t, "pods", "greetings")}
	for _, obj := range objects {
		api.Store(map[any]string{"Pod": "pods", "Greeting": "greetings"}[obj["kind"]], obj)
	}
	server := httptest.NewServer(http.HandlerFunc(api.front))
	t.Cleanup(func() { server.CloseClientConnections(); server.Close() })
	api.url = server.URL
	return api
}

// greetingAPIPath matches the paths a kube-apiserver serves pods and Greetings at.
var greetingAPIPath = regexp.MustCompile(`^/(api/v1|apis/demo\.example\.com/v1alpha1)(?:/namespaces/([^/]+))?/([^/]+)$`)

// front records a request, answers it if the test's case or its path says
// so, and hands the rest to fakeapi's server.
func (api *greetingAPI) front(w http.ResponseWriter, r *http.Request) {
	m := greetingAPIPath.FindStringSubmatch(r.URL.Path)
	query := r.URL.Query()
	watching := query.Get("watch") == "true" || query.Get("watch") == "1"
	resource := ""
	switch {
	case m != nil && m[1] == "api/v1" && m[3] == "pods":
		resource = "pods"
	case m != nil && m[1] == "apis/demo.example.com/v1alpha1" && m[3] == "greetings":
		resource = "greetings"
	}
	discovery := r.URL.Path == "/apis/demo.example.com/v1alpha1"
	greetings := resource == "greetings" || discovery
	request := apiRequest{path: r.URL.Path, greetings: greetings, pods: resource == "pods", watch: watching,
		served: resource != "" || discovery,
		// An informer's list (not a first check's, limit=1), or its watch,
		// which goes on from a list or streams one (a check's names neither).
		informer: resource != "" && (!watching && query.Get("limit") != "1" ||
			watching && (query.Get("resourceVersion") != "" || query.Get("sendInitialEvents") == "true"))}
	if greetings && api.noCRD {
		request.served = false
	}
	api.Lock()
	api.requests = append(api.requests, request)
	api.open++
	api.Unlock()
	defer func() {
		api.Lock()
		api.open--
		api.Unlock()
	}()

	switch {
	case greetings && api.forbid:
		apiStatus(w, http.StatusForbidden, "Forbidden", exercise07Forbidden)
	case !request.served:
		apiStatus(w, http.StatusNotFound, "NotFound", "the server could not find the requested resource")
	case discovery:
		fakeapi.Write(w, http.StatusOK, metav1.APIResourceList{
			TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
			GroupVersion: "demo.example.com/v1alpha1",
			APIResources: []metav1.APIResource{{Name: "greetings", SingularName: "greeting", Namespaced: true,
				Kind: "Greeting", Verbs: metav1.Verbs{"delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"}}},
		})
	case api.hold == resource && request.informer:
		<-r.Context().Done()
	default:
		api.ServeHTTP(w, r)
	}
}

// count returns how many requests so far match.
func (api *greetingAPI) count(match func(apiRequest) bool) int {
	api.Lock()
	defer api.Unlock()
	n := 0
	for _, r := range api.requests {
		if match(r) {
			n++
		}
	}
	return n
}

// checkServed fails the test at once if demo-controller asked for a
// resource that the API server does not serve, or, where Greetings are not
// served, asked for them more than once.
func (api *greetingAPI) checkServed(t *testing.T) {
	t.Helper()
	api.Lock()
	defer api.Unlock()
	var greetings []string
	for _, r := range api.requests {
		switch {
		case r.greetings && api.noCRD:
			greetings = append(greetings, fmt.Sprintf("%q", r.path))
		case r.served:
		case strings.HasPrefix(r.path, "/apis/apiextensions.k8s.io/"):
			t.Fatalf("demo-controller asked the API server for %s: the CRD itself. That needs the right to read "+
				"customresourcedefinitions, which the ClusterRole does not grant, and should not (it would read every "+
				"CRD of the cluster). Ask for Greetings: where their CRD is not installed, the API server answers 404 Not "+
				"Found (apierrors.IsNotFound)", fmt.Sprintf("%q", r.path))
		case strings.Contains(r.path, "greeting") || strings.HasPrefix(r.path, "/apis/demo.example.com/"):
			t.Fatalf("demo-controller asked the API server for %s, which it does not serve (404). The Greeting CRD "+
				"serves /apis/demo.example.com/v1alpha1/greetings, and .../namespaces/NAMESPACE/greetings: a "+
				"GroupVersionResource names the group, the version the CRD serves (v1alpha1), and the resource, "+
				"the plural in lower case (spec.names.plural), not the Kind. The dynamic client has no scheme to "+
				"find it from a Go type", fmt.Sprintf("%q", r.path))
		default:
			t.Fatalf("demo-controller asked the API server for %s, which this test's API server does not serve: it "+
				"serves pods, Greetings, and the discovery document /apis/demo.example.com/v1alpha1. To learn whether "+
				"Greetings are served, list them (Limit: 1): 404 Not Found means no CRD", fmt.Sprintf("%q", r.path))
		}
	}
	if len(greetings) > 1 {
		t.Fatalf("the API server has no Greeting CRD, and answered 404 Not Found to %s; demo-controller asked again (%s). "+
			"Check once, at start: on a 404, log %s and start no Greeting informer. An informer for a resource that "+
			"is not served lists, fails and lists again, for ever, and its cache never syncs: the run would end at "+
			"--sync-timeout, and the pods with it", greetings[0], strings.Join(greetings[1:], ", "), exercise07NoCRD)
	}
}

// waitForWatch waits until demo-controller's informer watches the
// resource: an object written before that would reach it only by chance.
func (api *greetingAPI) waitForWatch(t *testing.T, gvr schema.GroupVersionResource) {
	t.Helper()
	for deadline := time.Now().Add(exercise07Wait); api.Watching(gvr.Resource) == 0; time.Sleep(5 * time.Millisecond) {
		api.checkServed(t)
		if time.Now().After(deadline) {
			if gvr == exercise07Pods {
				t.Fatalf("demo-controller never watched pods within %v: the pod controller must run beside the "+
					"Greeting one (runController, as today)", exercise07Wait)
			}
			t.Fatalf("demo-controller listed Greetings but never watched them: an informer lists, then watches, and " +
				"only the watch tells it what changes")
		}
	}
}

// waitForNoRequests waits until demo-controller has no request open: once
// run has returned, neither controller may still watch.
func (api *greetingAPI) waitForNoRequests(t *testing.T, after string) {
	t.Helper()
	var open int
	var watching []string
	for deadline := time.Now().Add(exercise07Wait); ; time.Sleep(5 * time.Millisecond) {
		api.Lock()
		open, watching = api.open, nil
		api.Unlock()
		for _, resource := range []string{"pods", "greetings"} {
			for range api.Watching(resource) {
				watching = append(watching, resource)
			}
		}
		if open == 0 {
			return
		}
		if time.Now().After(deadline) {
			break
		}
	}
	t.Fatalf("%s, and %v later demo-controller still had %d request(s) open to the API server (watches of: %v): the "+
		"other controller still runs. When one controller returns, stop the other (a context both run under, cancelled "+
		"when either returns), wait for it, and return both errors (errors.Join)", after, exercise07Wait, open, watching)
}

// deleteWhileWatchIsDown deletes a Greeting while the watches of Greetings
// are down: its event is held back, then the watches end, and the next gets
// 410 Gone (its resourceVersion too old, as when the API server's watch
// cache has moved on), so the informer lists again, without the Greeting.
func (api *greetingAPI) deleteWhileWatchIsDown(namespace, name string) {
	api.Hold("greetings")
	api.Remove("greetings", namespace, name) // no watch sends it: no one hears of it
	api.Expire("greetings")
}

// greetingRun is a run of run, and what it logs.
type greetingRun struct{ *fakeapi.Run }

// startRun runs run, as demo-controller does, against api until the test
// ends.
func startRun(t *testing.T, api *greetingAPI, namespace string, syncTimeout time.Duration) *greetingRun {
	t.Helper()
	o := options{kubeconfig: writeKubeconfig(t, api.url, bearer, false), namespace: namespace,
		startupTimeout: exercise07Wait, syncTimeout: syncTimeout}
	return &greetingRun{fakeapi.Start(t, exercise07Wait, 15, func(ctx context.Context) error { return run(ctx, o) })}
}

// greetingLines returns the lines logged about single Greetings.
func (g *greetingRun) greetingLines() []string { return g.Matching(0, `"Greeting `) }

// expect waits until, for each of wants, a line starts with it. It fails at
// once if demo-controller asked for a resource the API server does not
// serve, or if run returned; and if the lines do not come, it says why, in
// the task's words.
func (g *greetingRun) expect(t *testing.T, api *greetingAPI, why string, wants ...string) {
	t.Helper()
	for deadline := time.Now().Add(exercise07Wait); ; time.Sleep(5 * time.Millisecond) {
		api.checkServed(t)
		missing := g.Missing(0, wants...)
		if len(missing) == 0 {
			return
		}
		select {
		case <-g.Ended:
			t.Fatalf("run returned %v after %v, before demo-controller logged:\n  %s\nrun returns only when its "+
				"context ends, or a controller fails: it runs both controllers until then, and waits for them",
				g.Err, time.Since(g.Start).Round(time.Millisecond), strings.Join(missing, "\n  "))
		default:
		}
		for _, line := range g.greetingLines() {
			if strings.Contains(line, `greeting="`) && !strings.Contains(line, `greeting="shop/`) && !strings.Contains(line, `greeting="default/`) {
				t.Fatalf("demo-controller logged %s: a Greeting is named by its namespace and its name (two namespaces "+
					"each have one called hello). Keys must hold both, as cache.MetaObjectToName makes them, "+
					"the lookup use both (lister.Namespace(namespace).Get(name)), and the logger name both "+
					"(klog.KRef(namespace, name))", line)
			}
		}
		if time.Now().Before(deadline) {
			continue
		}
		greetings := g.greetingLines()
		switch {
		case strings.HasPrefix(missing[0], `"Pod `) && api.count(func(r apiRequest) bool { return r.pods && r.informer }) == 0:
			why = "demo-controller never started its pod informer: the Greeting controller runs, and the pod " +
				"controller never does. Run the Greeting controller in a goroutine beside runController, not before it " +
				"(a controller's Run returns only when its context ends or it fails), and return both errors. " + why
		case strings.HasPrefix(missing[0], `"Greeting `) && api.count(func(r apiRequest) bool { return r.greetings && r.informer }) == 0:
			t.Fatalf("demo-controller never listed or watched Greetings (a first check apart). Make an informer " +
				"for them from the dynamic informer factory (ForResource), start the factory after that (Start " +
				"starts only the informers asked for so far), and run a controller on the informer, beside the " +
				"pod controller")
		case strings.HasPrefix(missing[0], `"Greeting `) && len(greetings) == 0:
			why = "the API server has sent the Greetings, and demo-controller logged nothing about them: does the " +
				"worker find them in the cache? Greetings in two namespaces share the name hello: a key must hold the " +
				"namespace and the name (cache.MetaObjectToName), and the lookup use both " +
				"(lister.Namespace(namespace).Get(name)). What the test waited for: " + why
		}
		t.Fatalf("%s. Within %v demo-controller did not log:\n  %s\nIts lines about Greetings were:\n  %s",
			why, exercise07Wait, strings.Join(missing, "\n  "), strings.Join(fakeapi.LastLines(greetings, 10), "\n  "))
	}
}

// exercise07Crash explains a crash of demo-controller in the child process
// of fakeapi.Child, from the first line of its panic; "" for any other line.
func exercise07Crash(line string, stack []string, step string) string {
	if !strings.HasPrefix(line, "panic: ") && !strings.HasPrefix(line, "fatal error: ") {
		return ""
	}
	site := "(no line of the project's files in the stack)"
	if where := fakeapi.Where(stack, 1); len(where) > 0 {
		site = where[0]
	}
	return fmt.Sprintf("demo-controller crashed, at this step of the test: %s.\n  %s\nat %s. %s", step, line, site,
		exercise07CrashAdvice(line))
}

// exercise07CrashAdvice says what a crash's first line points at.
func exercise07CrashAdvice(line string) string {
	switch {
	case strings.Contains(line, "DeletedFinalStateUnknown"):
		return "The delete handler was handed a cache.DeletedFinalStateUnknown, not a Greeting: a delete that the " +
			"informer learnt of only by listing again, after its watch was down. Register typed handlers " +
			"(AddTypedEventHandler), and take a delete's key with DeletedObject.GetObjectName (hint 6)"
	case strings.Contains(line, "interface conversion") && strings.Contains(line, "is nil"):
		return "A field that a Greeting does not have is nil in its map, and a type assertion on it panics: " +
			"language is optional. Read fields with unstructured.NestedString(obj.Object, \"spec\", \"language\"), " +
			"which returns \"\" and false for a field that is not there (hint 5)"
	case strings.Contains(line, "interface conversion"):
		return "A type assertion on what the informer handed over failed: read Greetings as *unstructured.Unstructured, " +
			"their fields with unstructured.NestedString (hint 5), and register typed handlers (hint 4), " +
			"which are handed *unstructured.Unstructured and a cache.DeletedObject"
	case strings.Contains(line, "concurrent map"):
		return "Two goroutines used one map at once: the worker alone may touch what it reported; the event " +
			"handlers only queue keys (and note found ones in a sync.Map), as in controller.go"
	}
	return "A panic in any goroutine takes the whole controller down."
}
