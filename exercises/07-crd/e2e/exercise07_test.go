//go:build e2e && exercise

// The end-to-end test of exercise 7 (exercises/07-crd/README.md): the
// Greeting CRD and demo-controller against a real kube-apiserver. Copy it
// into e2e/ and run it as the exercise's README says; hack/check-exercises.sh
// runs it on the binary built with solution.patch.

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
)

// e2eGreeting returns a Greeting with the given spec.
func e2eGreeting(namespace, name string, spec map[string]any) *unstructured.Unstructured {
	g := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "demo.example.com/v1alpha1", "kind": "Greeting"}}
	g.SetNamespace(namespace)
	g.SetName(name)
	if spec != nil {
		g.Object["spec"] = spec
	}
	return g
}

// applyGreetingCRD applies exercises/07-crd/greeting-crd.yaml, waits until
// the API server serves it, and returns a client for Greetings.
func applyGreetingCRD(t *testing.T) dynamic.NamespaceableResourceInterface {
	t.Helper()
	establishGreetingCRD(t, greetingCRD,
		"the CRD greetings.demo.example.com is not established (a CRD's name is <plural>.<group>)")
	greetings := adminGreetings(t)
	if _, err := greetings.List(context.Background(), metav1.ListOptions{}); err != nil {
		t.Fatalf("the CRD is established, but the API server does not serve %s: the CRD must serve version v1alpha1 "+
			"of group demo.example.com, plural greetings, namespaced: %v", greetingsGVR, err)
	}
	return greetings
}

// Where the Greeting CRD is not installed, the API server answers 404 for
// Greetings: demo-controller says so in one line, and watches pods as
// before, with the manifest's rights. (The suite's other tests of exercise 7
// apply the CRD: this one runs first.)
func TestExercise07WithoutTheCRD(t *testing.T) {
	if out, err := kubectl(adminKube, "delete", "crd", "greetings.demo.example.com", "--ignore-not-found", "--timeout=60s"); err != nil {
		t.Fatalf("kubectl delete crd greetings.demo.example.com: %v\n%s", err, out)
	}
	greetings := adminGreetings(t)
	var err error
	if werr := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err = greetings.List(ctx, metav1.ListOptions{Limit: 1})
		return apierrors.IsNotFound(err), nil
	}); werr != nil {
		t.Fatalf("with the CRD deleted, the API server still answers a list of Greetings with: %v", err)
	}
	t.Logf("without the CRD, the API server answers a list of Greetings: %v", err)
	if out, err := manifestOnce(); err != nil {
		t.Fatalf("kubectl create -f demo-controller.yaml: %v\n%s", err, out)
	}
	ns := namespace(t, "greetings-none")
	p := startController(t, serviceAccountKubeconfig(t, "demo-controller", "demo-controller"), "--namespace="+ns)
	waitForLines(t, p, 0, `"Not watching greetings: their CRD is not installed"`)
	at := waitForLines(t, p, 0, "Cache synced")
	createPod(t, ns, "web")
	waitForLines(t, p, at, `"Pod created" pod="greetings-none/web"`)
	if p.exited() {
		t.Errorf("demo-controller exited, although it should go on watching pods without the Greeting CRD")
	}
}

// The CRD's schema makes the API server refuse a Greeting that does not fit,
// when it is written: a controller never sees one.
func TestExercise07SchemaRefusesInvalidGreetings(t *testing.T) {
	greetings := applyGreetingCRD(t).Namespace(namespace(t, "greetings-schema"))
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}} // validated, never stored
	for _, tc := range []struct {
		name string
		spec map[string]any
		rule string // what in the schema refuses it; "" for a valid Greeting
	}{
		{"a name", map[string]any{"to": "Ada"}, ""},
		{"a name of two words and a language", map[string]any{"to": "Grace Hopper", "language": "fr"}, ""},
		{"no spec at all", nil, "required: [spec] at the top of the schema (required under spec applies only when there is a spec)"},
		{"a spec with no to", map[string]any{"language": "en"}, "required: [to] under spec"},
		{"to that is not a string", map[string]any{"to": 42}, "type: string"},
		{"to that starts with a small letter", map[string]any{"to": "ada"}, "a pattern: each word a capital letter, then letters"},
		{"to with digits", map[string]any{"to": "R2 D2"}, "a pattern: each word a capital letter, then letters"},
		{"to of 41 letters", map[string]any{"to": "A" + strings.Repeat("a", 40)}, "maxLength: 40"},
		{"to of 40 characters", map[string]any{"to": strings.Repeat("Abcd ", 7) + "Abcde"}, ""},
		{"to of three words", map[string]any{"to": "Grace Brewster Hopper"}, ""},
		{"to with a capital inside a word", map[string]any{"to": "McCarthy"}, ""},
		{"to whose second word starts with a small letter", map[string]any{"to": "Ada lovelace"}, "a pattern that ends with $"},
		{"to that ends with a space", map[string]any{"to": "Ada "}, "a pattern that ends with $"},
		{"to that starts with a space", map[string]any{"to": " Ada"}, "a pattern that starts with ^"},
		{"to with two spaces between words", map[string]any{"to": "Ada  Lovelace"}, "a pattern with one space between two words"},
		{"to with a line break", map[string]any{"to": "Ada\nLovelace"}, "a pattern with one space between two words"},
		{"to that is empty", map[string]any{"to": ""}, "a pattern that asks for one word at least"},
		{"a language not in the list", map[string]any{"to": "Ada", "language": "klingon"}, "an enum"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := greetings.Create(context.Background(), e2eGreeting("greetings-schema", "g", tc.spec), dryRun)
			switch {
			case tc.rule == "" && err != nil:
				t.Errorf("the API server refused a valid Greeting, with spec %v: %v", tc.spec, err)
			case tc.rule != "" && err == nil:
				t.Errorf("the API server accepted a Greeting with %s: the CRD's schema must refuse it, with %s", tc.name, tc.rule)
			case tc.rule != "" && !apierrors.IsInvalid(err):
				t.Errorf("a Greeting with %s was refused, but not by the schema (422 Invalid): %v", tc.name, err)
			}
		})
	}

	// A field the schema does not declare is dropped (pruned); with strict
	// field validation, kubectl's default, it is refused.
	g := e2eGreeting("greetings-schema", "g", map[string]any{"to": "Ada", "lanugage": "fr"})
	g.Object["extra"] = "x"
	got, err := greetings.Create(context.Background(), g, dryRun)
	if err != nil {
		t.Fatalf("the API server refused a valid Greeting with fields the schema does not declare (extra, spec.lanugage): "+
			"%v; it drops them, unless asked for strict validation", err)
	}
	_, extra := got.Object["extra"]
	_, lanugage, _ := unstructured.NestedFieldNoCopy(got.Object, "spec", "lanugage")
	if extra || lanugage {
		t.Errorf("the API server stored fields the schema does not declare (extra: %v, spec.lanugage: %v): the schema "+
			"keeps unknown fields (x-kubernetes-preserve-unknown-fields: true); remove it, and they are dropped", extra, lanugage)
	}
	strict := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: metav1.FieldValidationStrict}
	if _, err := greetings.Create(context.Background(), g, strict); err == nil {
		t.Errorf("with strict field validation (kubectl's default), the API server accepted a Greeting with fields the " +
			"schema does not declare (extra, spec.lanugage): the schema keeps unknown fields (x-kubernetes-preserve-unknown-fields: true)")
	} else {
		t.Logf("with strict field validation, the API server answers: %v", err)
	}
}

// demo-controller, with the rights of the manifest's ServiceAccount, logs
// each step of a Greeting's life; that ServiceAccount may list and watch
// Greetings, and do nothing else with them.
func TestExercise07ControllerWatchesGreetings(t *testing.T) {
	greetings := applyGreetingCRD(t)
	if out, err := manifestOnce(); err != nil {
		t.Fatalf("kubectl create -f demo-controller.yaml: %v\n%s", err, out)
	}
	as := "--as=system:serviceaccount:demo-controller:demo-controller"
	for _, check := range []struct{ verb, resource, want string }{
		{"list", "greetings.demo.example.com", "yes"}, {"watch", "greetings.demo.example.com", "yes"},
		{"get", "greetings.demo.example.com", "no"}, {"create", "greetings.demo.example.com", "no"},
		{"update", "greetings.demo.example.com", "no"}, {"delete", "greetings.demo.example.com", "no"},
		{"list", "customresourcedefinitions.apiextensions.k8s.io", "no"}, {"list", "pods", "yes"},
	} {
		out, _ := kubectl(adminKube, "auth", "can-i", check.verb, check.resource, "--all-namespaces", as)
		if got := strings.TrimSpace(out); got != check.want {
			t.Errorf("kubectl auth can-i %s %s (as demo-controller's ServiceAccount): %q, want %q: the ClusterRole in "+
				"demo-controller.yaml grants list and watch on greetings, and nothing more", check.verb, check.resource, got, check.want)
		}
	}
	if t.Failed() {
		t.FailNow() // with the wrong rights, the controller would only wait for a cache that never syncs
	}

	ctx := context.Background()
	ns := namespace(t, "greetings-life")
	if _, err := greetings.Namespace(ns).Create(ctx, e2eGreeting(ns, "hello", map[string]any{"to": "Ada"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p := startController(t, serviceAccountKubeconfig(t, "demo-controller", "demo-controller"))
	at := waitForLines(t, p, 0, `"Greeting found" greeting="greetings-life/hello" to="Ada" language="en"`)

	welcome, err := greetings.Namespace(ns).Create(ctx, e2eGreeting(ns, "welcome", map[string]any{"to": "Grace Hopper", "language": "fr"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	at = waitForLines(t, p, at, `"Greeting created" greeting="greetings-life/welcome" to="Grace Hopper" language="fr"`)
	if err := unstructured.SetNestedField(welcome.Object, "de", "spec", "language"); err != nil {
		t.Fatal(err)
	}
	if _, err := greetings.Namespace(ns).Update(ctx, welcome, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	at = waitForLines(t, p, at, `"Greeting updated" greeting="greetings-life/welcome" to="Grace Hopper" language="de"`)
	if err := greetings.Namespace(ns).Delete(ctx, "welcome", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForLines(t, p, at, `"Greeting deleted" greeting="greetings-life/welcome"`)

	// A Greeting the schema refuses is never stored, so never seen.
	_, err = greetings.Namespace(ns).Create(ctx, e2eGreeting(ns, "invalid", map[string]any{"to": "ada", "language": "klingon"}), metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) {
		t.Fatalf("creating a Greeting with to: ada and language: klingon: %v, want 422 Invalid, from the CRD's schema", err)
	}
	for _, want := range []string{`spec.language: Unsupported value: "klingon"`, `spec.to: Invalid value: "ada"`} {
		if !strings.Contains(err.Error(), want) { // the API server's words, as README.md shows them
			t.Errorf("the API server's refusal does not say %q: %v", want, err)
		}
	}
	if _, err := greetings.Namespace(ns).Create(ctx, e2eGreeting(ns, "last", map[string]any{"to": "Alan"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForLines(t, p, at, `"Greeting created" greeting="greetings-life/last"`)
	for _, line := range p.lines() {
		if strings.Contains(line, "greetings-life/invalid") {
			t.Errorf("demo-controller saw the Greeting the API server refused: %s", line)
		}
	}
}
