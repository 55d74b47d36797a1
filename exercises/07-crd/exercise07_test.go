//go:build exercise

// The test of exercise 7 (exercises/07-crd/README.md). It is not part of
// the project's tests: copy it into the project's root and run it with the
// exercise tag, as the exercise's README says.

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/yaml"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/scheme"
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
	data, err := os.ReadFile("demo-controller.yaml")
	if err != nil {
		t.Fatal(err)
	}
	verbs := map[string][]string{} // by "group/resource"
	for _, doc := range strings.Split(string(data), "\n---\n") {
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
		if err != nil {
			t.Fatalf("demo-controller.yaml: %v", err)
		}
		if role, ok := obj.(*rbacv1.ClusterRole); ok {
			for _, rule := range role.Rules {
				if len(rule.ResourceNames) > 0 {
					t.Errorf("demo-controller.yaml's ClusterRole limits a rule to resourceNames %v: an informer lists and "+
						"watches every object of its resource, and a list cannot be limited by name", rule.ResourceNames)
				}
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
	if exercise07Child(t) {
		return
	}
	api := newGreetingAPI(t,
		testGreeting("default", "hello", "uid-1", "5", "Ada", ""),
		testGreeting("shop", "hello", "uid-2", "6", "Grace", "fr"),
		testUnstructuredPod("default", "web", "uid-p1", "7"))
	run := startRun(t, api, "", time.Minute)

	exercise07Step("the Greetings there at the start are found (default/hello has no language)")
	run.expect(t, api, "Greetings that exist when demo-controller starts are each logged \"Greeting found\", with "+
		"their namespace and the fields of their spec. Read a field with unstructured.NestedString(obj.Object, "+
		"\"spec\", \"to\"), one argument for each level; it returns \"\" and false for a field that is not there, "+
		"and a Greeting with no language is in English",
		`"Greeting found" greeting="default/hello" to="Ada" language="en"`,
		`"Greeting found" greeting="shop/hello" to="Grace" language="fr"`)
	exercise07Step("the pod there at the start is found")
	run.expect(t, api, "demo-controller logs the life of each Greeting beside its pods (the task): the pod there at "+
		"the start is logged \"Pod found\", as today", `"Pod found" pod="default/web"`)

	api.waitForWatch(t, exercise07Greetings)
	exercise07Step("a Greeting is created")
	welcome := testGreeting("shop", "welcome", "uid-3", "8", "Grace", "fr")
	api.write(t, welcome)
	run.expect(t, api, "a Greeting created while demo-controller runs is logged \"Greeting created\"",
		`"Greeting created" greeting="shop/welcome" to="Grace" language="fr"`)

	exercise07Step("a Greeting is updated")
	welcome.SetResourceVersion("9")
	if err := unstructured.SetNestedField(welcome.Object, "de", "spec", "language"); err != nil {
		t.Fatal(err)
	}
	api.write(t, welcome)
	run.expect(t, api, "a Greeting changed is logged \"Greeting updated\", with its spec as it is now",
		`"Greeting updated" greeting="shop/welcome" to="Grace" language="de"`)

	exercise07Step("a Greeting is deleted")
	api.remove(t, exercise07Greetings, "shop", "welcome")
	run.expect(t, api, "a Greeting deleted is logged \"Greeting deleted\"",
		`"Greeting deleted" greeting="shop/welcome"`)

	// The watch breaks; meanwhile default/hello is deleted. The informer
	// lists again and finds it gone: it hands that delete to the delete
	// handler as a cache.DeletedFinalStateUnknown, not as the object.
	exercise07Step("a Greeting is deleted while the watch is down (the informer hands its delete over as a tombstone)")
	api.deleteWhileWatchIsDown(t, "default", "hello")
	run.expect(t, api, "a Greeting deleted while the watch was down is logged \"Greeting deleted\" too. The informer "+
		"hands such a delete to the delete handler as a tombstone (cache.DeletedFinalStateUnknown): the typed "+
		"handler's cache.DeletedObject gives its key with GetObjectName, whatever OptionalObj holds",
		`"Greeting deleted" greeting="default/hello"`)

	exercise07Step("a pod is created")
	api.waitForWatch(t, exercise07Pods)
	api.write(t, testUnstructuredPod("default", "web-2", "uid-p2", "10"))
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
	if exercise07Child(t) {
		return
	}
	api := newGreetingAPI(t,
		testGreeting("default", "hello", "uid-1", "5", "Ada", ""),
		testGreeting("shop", "hello", "uid-2", "6", "Grace", "fr"))
	run := startRun(t, api, "shop", time.Minute)
	exercise07Step("with --namespace=shop, the Greetings there at the start are found")
	run.expect(t, api, "with --namespace=shop, the Greeting in shop is found",
		`"Greeting found" greeting="shop/hello" to="Grace" language="fr"`)
	api.waitForWatch(t, exercise07Greetings)
	exercise07Step("with --namespace=shop, Greetings are created in default and in shop")
	api.write(t, testGreeting("default", "other", "uid-3", "7", "Alan", ""))
	api.write(t, testGreeting("shop", "other", "uid-4", "8", "Alan", "")) // last: once it is seen, the other would have been
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
	if exercise07Child(t) {
		return
	}
	api := newGreetingAPI(t, testUnstructuredPod("default", "web", "uid-p1", "5"))
	api.noCRD = true
	run := startRun(t, api, "", time.Minute)
	exercise07Step("the API server has no Greeting CRD")
	run.expect(t, api, "where the API server does not serve Greetings (no CRD: 404 Not Found), demo-controller says "+
		"so at start, in one line, and watches pods only (the task). Check once, before starting the Greeting "+
		"controller: a list of Greetings with Limit: 1 answers 404 (apierrors.IsNotFound)",
		exercise07NoCRD)
	run.expect(t, api, "without the Greeting CRD, pods are still watched: the pod there at the start is logged \"Pod found\"",
		`"Pod found" pod="default/web"`)
	api.waitForWatch(t, exercise07Pods)
	api.write(t, testUnstructuredPod("default", "web-2", "uid-p2", "6"))
	run.expect(t, api, "without the Greeting CRD, a pod created is logged \"Pod created\"", `"Pod created" pod="default/web-2"`)
}

// A refusal of the Greetings other than 404 (here a 403: the ClusterRole
// lacks its rule) is no missing CRD: run returns the error at start.
func TestExercise07GreetingsForbidden(t *testing.T) {
	if exercise07Child(t) {
		return
	}
	api := newGreetingAPI(t)
	api.forbid = true
	run := startRun(t, api, "", time.Minute)
	exercise07Step("the API server refuses every request for Greetings with 403 Forbidden")
	deadline := time.After(exercise07Wait + 2*time.Second) // the start-up check's deadline, and some
	for tick := time.Tick(5 * time.Millisecond); ; <-tick {
		api.checkServed(t)
		if n := api.count(func(r apiRequest) bool { return r.greetings }); n > 1 {
			t.Fatalf("the API server refused demo-controller's request for Greetings with 403 Forbidden (%s), and "+
				"demo-controller asked again (%d requests): an informer retries a refused list for ever, and the run "+
				"ends only at --sync-timeout. Check at start, as run does for pods, and return that error from run", exercise07Forbidden, n)
		}
		if lines := run.matching(exercise07NoCRD); len(lines) > 0 {
			t.Fatalf("the API server refused demo-controller's request for Greetings with 403 Forbidden (%s), and "+
				"demo-controller said: %s. Only a 404 Not Found means that the CRD is not installed: a 403 means that "+
				"the ClusterRole does not grant list on greetings. Return any other error from run, as it does for pods",
				exercise07Forbidden, lines[0])
		}
		select {
		case <-run.ended:
			if run.err == nil {
				t.Fatal("run returned no error, although the API server refused every request for Greetings (403)")
			}
			if !strings.Contains(run.err.Error(), "forbidden") {
				t.Errorf("run returned %q: let its error carry the API server's words, %s, which name what is missing", run.err, exercise07Forbidden)
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
	if exercise07Child(t) {
		return
	}
	for _, held := range []schema.GroupVersionResource{exercise07Greetings, exercise07Pods} {
		t.Run(held.Resource, func(t *testing.T) {
			api := newGreetingAPI(t, testGreeting("default", "hello", "uid-1", "5", "Ada", ""))
			api.hold = held
			const syncTimeout = time.Second
			run := startRun(t, api, "", syncTimeout)
			exercise07Step("the API server never sends the list of " + held.Resource)
			deadline := time.After(syncTimeout + exercise07Wait)
			for tick := time.Tick(5 * time.Millisecond); ; <-tick {
				api.checkServed(t)
				select {
				case <-run.ended:
					if run.err == nil {
						t.Fatalf("run returned no error, although the %s never synced", held.Resource)
					}
					t.Logf("run returned: %v", run.err)
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

// testUnstructuredPod returns a Running pod as the API server sends it.
func testUnstructuredPod(namespace, name, uid, resourceVersion string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "Pod",
		"metadata":   map[string]any{"namespace": namespace, "name": name, "uid": uid, "resourceVersion": resourceVersion},
		"spec":       map[string]any{"containers": []any{map[string]any{"name": "app", "image": "example/app"}}},
		"status":     map[string]any{"phase": "Running"},
	}}
}

// What demo-controller logs where Greetings are not served, and what the
// API server answers a request for them that RBAC refuses.
const (
	exercise07NoCRD     = `"Not watching greetings: their CRD is not installed"`
	exercise07Forbidden = `greetings.demo.example.com is forbidden: User "test" cannot list resource "greetings" in API group "demo.example.com" at the cluster scope`
)

// greetingAPI is an API server, over HTTP, that serves pods and Greetings
// from client-go's dynamic fake, as a kube-apiserver with the Greeting CRD
// would: a list, or a watch that streams each change, and the discovery
// document of demo.example.com/v1alpha1. It answers 404 for anything else,
// and records every apiRequest.
type greetingAPI struct {
	store *dynamicfake.FakeDynamicClient
	url   string

	// Set before the run starts:
	noCRD  bool                        // Greetings are not served: 404, as without their CRD
	forbid bool                        // every request for Greetings gets 403, as RBAC answers
	hold   schema.GroupVersionResource // hold every request for it but a first check (a list with limit=1, a plain watch)

	mu       sync.Mutex
	requests []apiRequest
	open     int                                           // requests not answered in full yet
	watches  map[chan struct{}]schema.GroupVersionResource // the open watches; closing one ends it
	gone     chan struct{}                                 // while set, a watch of Greetings gets 410 Gone, and a list waits for it to close
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

func newGreetingAPI(t *testing.T, objects ...runtime.Object) *greetingAPI {
	api := &greetingAPI{watches: map[chan struct{}]schema.GroupVersionResource{}}
	api.store = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{exercise07Greetings: "GreetingList", exercise07Pods: "PodList"}, objects...)
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
	discovery := r.URL.Path == "/apis/demo.example.com/v1alpha1"
	greetings := gvr == exercise07Greetings || discovery
	api.mu.Lock()
	request := apiRequest{path: r.URL.Path, greetings: greetings, pods: gvr == exercise07Pods, watch: watching,
		served: gvr.Resource != "" || discovery,
		// An informer's list (not a first check's, limit=1), or its watch,
		// which goes on from a list or streams one (a check's names neither).
		informer: gvr.Resource != "" && (!watching && query.Get("limit") != "1" ||
			watching && (query.Get("resourceVersion") != "" || query.Get("sendInitialEvents") == "true"))}
	if greetings && api.noCRD {
		request.served = false
	}
	api.requests = append(api.requests, request)
	hold := api.hold == gvr && request.informer
	gone := api.gone
	api.open++
	api.mu.Unlock()
	defer func() {
		api.mu.Lock()
		api.open--
		api.mu.Unlock()
	}()

	switch {
	case greetings && api.forbid:
		apiStatus(w, http.StatusForbidden, "Forbidden", exercise07Forbidden)
		return
	case !request.served:
		apiStatus(w, http.StatusNotFound, "NotFound", "the server could not find the requested resource")
		return
	case discovery:
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(metav1.APIResourceList{
			TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
			GroupVersion: "demo.example.com/v1alpha1",
			APIResources: []metav1.APIResource{{Name: "greetings", SingularName: "greeting", Namespaced: true,
				Kind: "Greeting", Verbs: metav1.Verbs{"delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"}}},
		})
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
	api.mu.Lock()
	api.watches[end] = gvr
	api.mu.Unlock()
	defer func() {
		api.mu.Lock()
		delete(api.watches, end)
		api.mu.Unlock()
	}()
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
// resource that the API server does not serve, or, where Greetings are not
// served, asked for them more than once.
func (api *greetingAPI) checkServed(t *testing.T) {
	t.Helper()
	api.mu.Lock()
	defer api.mu.Unlock()
	var greetings []string
	for _, r := range api.requests {
		switch {
		case r.greetings && api.noCRD:
			greetings = append(greetings, strconv.Quote(r.path))
		case r.served:
		case strings.HasPrefix(r.path, "/apis/apiextensions.k8s.io/"):
			t.Fatalf("demo-controller asked the API server for %s: the CRD itself. That needs the right to read "+
				"customresourcedefinitions, which the ClusterRole does not grant, and should not (it would read every "+
				"CRD of the cluster). Ask for Greetings: where their CRD is not installed, the API server answers 404 Not "+
				"Found (apierrors.IsNotFound)", strconv.Quote(r.path))
		case strings.Contains(r.path, "greeting") || strings.HasPrefix(r.path, "/apis/demo.example.com/"):
			t.Fatalf("demo-controller asked the API server for %s, which it does not serve (404). The Greeting CRD "+
				"serves /apis/demo.example.com/v1alpha1/greetings, and .../namespaces/NAMESPACE/greetings: a "+
				"GroupVersionResource names the group, the version the CRD serves (v1alpha1), and the resource, "+
				"the plural in lower case (spec.names.plural), not the Kind. The dynamic client has no scheme to "+
				"find it from a Go type", strconv.Quote(r.path))
		default:
			t.Fatalf("demo-controller asked the API server for %s, which this test's API server does not serve: it "+
				"serves pods, Greetings, and the discovery document /apis/demo.example.com/v1alpha1. To learn whether "+
				"Greetings are served, list them (Limit: 1): 404 Not Found means no CRD", strconv.Quote(r.path))
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
	watching := func() bool {
		api.mu.Lock()
		defer api.mu.Unlock()
		for _, w := range api.watches {
			if w == gvr {
				return true
			}
		}
		return false
	}
	for deadline := time.Now().Add(exercise07Wait); !watching(); time.Sleep(5 * time.Millisecond) {
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
		api.mu.Lock()
		open, watching = api.open, nil
		for _, gvr := range api.watches {
			watching = append(watching, gvr.Resource)
		}
		api.mu.Unlock()
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

// write creates or updates an object, as kubectl apply would.
func (api *greetingAPI) write(t *testing.T, obj *unstructured.Unstructured) {
	t.Helper()
	gvr := exercise07Greetings
	if obj.GetKind() == "Pod" {
		gvr = exercise07Pods
	}
	objects := api.store.Resource(gvr).Namespace(obj.GetNamespace())
	_, err := objects.Update(context.Background(), obj.DeepCopy(), metav1.UpdateOptions{})
	if err != nil {
		_, err = objects.Create(context.Background(), obj.DeepCopy(), metav1.CreateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
}

func (api *greetingAPI) remove(t *testing.T, gvr schema.GroupVersionResource, namespace, name string) {
	t.Helper()
	if err := api.store.Resource(gvr).Namespace(namespace).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
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
	for end, gvr := range api.watches {
		if gvr == exercise07Greetings {
			close(end)
			delete(api.watches, end)
		}
	}
	api.mu.Unlock()
	api.remove(t, exercise07Greetings, namespace, name) // no watch open: no one hears of it
	close(gone)
}

// greetingRun is a run of run, and what it logs.
type greetingRun struct {
	buf   *syncBuffer
	start time.Time
	ended chan struct{} // closed when run has returned
	err   error         // what run returned, once ended is closed
}

// startRun runs run, as demo-controller does, against api until the test
// ends.
func startRun(t *testing.T, api *greetingAPI, namespace string, syncTimeout time.Duration) *greetingRun {
	t.Helper()
	g := &greetingRun{buf: &syncBuffer{}, start: time.Now(), ended: make(chan struct{})}
	logger := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(g.buf)))
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	o := options{kubeconfig: writeKubeconfig(t, api.url, bearer, false), namespace: namespace,
		startupTimeout: exercise07Wait, syncTimeout: syncTimeout}
	go func() { defer close(g.ended); g.err = run(ctx, o) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-g.ended:
		case <-time.After(exercise07Wait):
			t.Errorf("run did not return within %v of its context's end", exercise07Wait)
		}
		if t.Failed() {
			t.Logf("the last lines demo-controller logged:\n%s", strings.Join(lastLines(g.lines(), 15), "\n"))
		}
	})
	return g
}

// lines returns what run logged, without klog's headers.
func (g *greetingRun) lines() []string {
	var lines []string
	for _, line := range strings.Split(strings.TrimSpace(g.buf.String()), "\n") {
		if line != "" {
			lines = append(lines, klogHeader.ReplaceAllString(line, ""))
		}
	}
	return lines
}

// matching returns the lines logged that start with prefix.
func (g *greetingRun) matching(prefix string) []string {
	return slices.DeleteFunc(g.lines(), func(line string) bool { return !strings.HasPrefix(line, prefix) })
}

// greetingLines returns the lines logged about single Greetings.
func (g *greetingRun) greetingLines() []string { return g.matching(`"Greeting `) }

// expect waits until, for each of wants, a line starts with it. It fails at
// once if demo-controller asked for a resource the API server does not
// serve, or if run returned; and if the lines do not come, it says why, in
// the task's words.
func (g *greetingRun) expect(t *testing.T, api *greetingAPI, why string, wants ...string) {
	t.Helper()
	for deadline := time.Now().Add(exercise07Wait); ; time.Sleep(5 * time.Millisecond) {
		api.checkServed(t)
		lines := g.lines()
		missing := slices.DeleteFunc(slices.Clone(wants), func(want string) bool {
			return slices.ContainsFunc(lines, func(line string) bool { return strings.HasPrefix(line, want) })
		})
		if len(missing) == 0 {
			return
		}
		select {
		case <-g.ended:
			t.Fatalf("run returned %v after %v, before demo-controller logged:\n  %s\nrun returns only when its "+
				"context ends, or a controller fails: it runs both controllers until then, and waits for them",
				g.err, time.Since(g.start).Round(time.Millisecond), strings.Join(missing, "\n  "))
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
			why, exercise07Wait, strings.Join(missing, "\n  "), strings.Join(lastLines(greetings, 10), "\n  "))
	}
}

// lastLines returns the last n of lines, or "(none)".
func lastLines(lines []string, n int) []string {
	if len(lines) == 0 {
		return []string{"(none)"}
	}
	return lines[max(0, len(lines)-n):]
}

// exercise07Step says, in a child process of exercise07Child, what the test
// does next: if demo-controller then panics, the parent names the step.
func exercise07Step(step string) {
	if os.Getenv("EXERCISE07_CHILD") != "" {
		fmt.Fprintf(os.Stderr, "exercise07 step: %s\n", step)
	}
}

// exercise07Child runs the test that calls it again, in a child process
// (the test binary itself, as TestSignalContext in main_test.go does), and
// fails as the child did. A panic in one of demo-controller's goroutines
// ends the process it runs in: here, the child's, which the parent then
// explains. It returns false in the child, which goes on with the test.
func exercise07Child(t *testing.T) bool {
	t.Helper()
	const running = "exercise07 child: running "
	if os.Getenv("EXERCISE07_CHILD") == t.Name() {
		fmt.Fprintln(os.Stderr, running+t.Name())
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), "EXERCISE07_CHILD="+t.Name())
	out, err := cmd.CombinedOutput()
	if !bytes.Contains(out, []byte(running+t.Name()+"\n")) {
		t.Fatalf("the child process that runs %s did not run it (%v):\n%s", t.Name(), err, out)
	}
	if err == nil {
		return true
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	step, kept := "starting", []string(nil)
	for i, line := range lines {
		switch {
		case strings.HasPrefix(line, "exercise07 step: "):
			step = strings.TrimPrefix(line, "exercise07 step: ")
		case strings.HasPrefix(line, "panic: ") || strings.HasPrefix(line, "fatal error: "):
			t.Fatalf("demo-controller crashed, at this step of the test: %s.\n  %s\nat %s. %s", step, line, exercise07CrashSite(lines[i:]), exercise07CrashAdvice(line))
		case klogHeader.MatchString(line), strings.HasPrefix(line, running), strings.HasPrefix(line, "--- FAIL: "+t.Name()+" ("),
			line == "FAIL", strings.HasPrefix(line, "exit status "):
		default:
			kept = append(kept, strings.TrimPrefix(line, "    "))
		}
	}
	if ctx.Err() != nil {
		kept = append(kept, fmt.Sprintf("(the test did not finish within 2 minutes: it was stopped while %s)", step))
	}
	t.Fatalf("\n%s", strings.Join(lastLines(kept, 60), "\n"))
	return true
}

// exercise07CrashSite returns the first place in the project's own Go files
// in a crash's stack.
func exercise07CrashSite(stack []string) string {
	dir, _ := os.Getwd()
	for i, line := range stack {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, dir+"/") || strings.Contains(line, "_test.go:") || i == 0 {
			continue
		}
		fn := stack[i-1]
		if j := strings.LastIndex(fn, "("); j > 0 {
			fn = fn[:j]
		}
		return strings.Fields(strings.TrimPrefix(line, dir+"/"))[0] + " (" + fn[strings.LastIndex(fn, "/")+1:] + ")"
	}
	return "(no line of the project's files in the stack)"
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
