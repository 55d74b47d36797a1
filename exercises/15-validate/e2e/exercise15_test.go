//go:build e2e && exercise

// The end-to-end tests of exercise 15 (exercises/15-validate/README.md): the
// Greeting CRD's CEL rules and the ValidatingAdmissionPolicy on the
// controller's ConfigMaps, against a real kube-apiserver (which is the only
// place either runs) and kube-controller-manager's garbage collector. Run
// them with `make exercise-e2e EX=15-validate`; hack/check-exercises.sh runs
// them on the binary built with solution.patch.

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"
)

const (
	ex15CRD    = "exercises/15-validate/greeting-crd.yaml"
	ex15Policy = "exercises/15-validate/configmap-policy.yaml"
	ex15SA     = "system:serviceaccount:demo-controller:demo-controller"
	ex15Label  = "app.kubernetes.io/managed-by=demo-controller"
)

// ex15Apply applies a manifest of the repository with kubectl, as the admin.
func ex15Apply(t *testing.T, path string) {
	t.Helper()
	if out, err := kubectl(adminKube, "apply", "-f", filepath.Join(repoRoot, path)); err != nil {
		t.Fatalf("kubectl apply -f %s: %v\n%s", path, err, out)
	}
}

// ex15ApplyCRD applies the Greeting CRD at path (or the YAML in data, if
// any) and waits until it is established.
func ex15ApplyCRD(t *testing.T, path string, data []byte) {
	t.Helper()
	if data != nil {
		path = filepath.Join(t.TempDir(), "crd.yaml")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	} else {
		path = filepath.Join(repoRoot, path)
	}
	establishGreetingCRD(t, path, "the Greeting CRD is not established")
}

// ex15CRDWithoutRules returns the task's CRD with every
// x-kubernetes-validations removed: the schema as it was before the rules.
func ex15CRDWithoutRules(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, ex15CRD))
	if err != nil {
		t.Fatal(err)
	}
	var crd map[string]any
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatalf("%s: %v", ex15CRD, err)
	}
	var strip func(any)
	strip = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			delete(v, "x-kubernetes-validations")
			for _, child := range v {
				strip(child)
			}
		case []any:
			for _, child := range v {
				strip(child)
			}
		}
	}
	strip(crd)
	out, err := yaml.Marshal(crd)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func ex15Greeting(ns, name string, spec map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "demo.example.com/v1alpha1", "kind": "Greeting",
		"metadata": map[string]any{"namespace": ns, "name": name}, "spec": spec}}
}

// ex15Eventually polls try until it returns nil, for up to 30 s: a changed
// CRD or policy reaches the API server's handlers a moment after it is
// stored. It fails the test with the last error and what it means.
func ex15Eventually(t *testing.T, what string, try func(context.Context) error) {
	t.Helper()
	var last error
	if werr := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		err := try(ctx)
		if err != nil && ctx.Err() != nil {
			return false, nil // the poll's deadline cut this try short: keep the last answer
		}
		last = err
		return err == nil, nil
	}); werr != nil {
		t.Fatalf("%s: %v", what, last)
	}
}

// The CRD's rules: from differs from to, and the refusal names the value;
// from is set once, then never changed or removed; a Greeting without from
// can still be changed. Each refusal is shown in the API server's words.
func TestExercise15RulesInTheCRD(t *testing.T) {
	ex15ApplyCRD(t, ex15CRD, nil)
	ns := namespace(t, "validate-rules")
	greetings := adminGreetings(t).Namespace(ns)
	ctx := context.Background()
	dryCreate := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	dryUpdate := metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}}

	// The rule across two fields, and its message naming the value.
	ex15Eventually(t, "a Greeting from the one it greets ({to: Ada, from: Ada}) was admitted: the CRD needs a rule on spec, "+
		"such as !has(self.from) || self.from != self.to", func(ctx context.Context) error {
		_, err := greetings.Create(ctx, ex15Greeting(ns, "self", map[string]any{"to": "Ada", "from": "Ada"}), dryCreate)
		if err == nil {
			return fmt.Errorf("admitted")
		}
		if !apierrors.IsInvalid(err) {
			return err
		}
		t.Logf("{to: Ada, from: Ada} refused: %v", err)
		if !strings.Contains(err.Error(), "spec.from") || !strings.Contains(err.Error(), "Ada") {
			t.Errorf("the refusal of {to: Ada, from: Ada} should name the field (fieldPath: .from, shown as spec.from) "+
				"and the bad value, Ada, with a messageExpression; it says: %v", err)
		}
		return nil
	})
	for _, spec := range []map[string]any{{"to": "Ada", "from": "Grace Hopper"}, {"to": "Ada"}} {
		if _, err := greetings.Create(ctx, ex15Greeting(ns, "valid", spec), dryCreate); err != nil {
			t.Errorf("a valid Greeting, %v, was refused: %v", spec, err)
		}
	}

	// The transition rule: set once, then never changed or removed.
	unsigned, err := greetings.Create(ctx, ex15Greeting(ns, "unsigned", map[string]any{"to": "Ada"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	signed, err := greetings.Create(ctx, ex15Greeting(ns, "signed", map[string]any{"to": "Ada", "from": "Grace"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		from   *unstructured.Unstructured
		change func(spec map[string]any)
		refuse string // why it must be refused; "" if it must be admitted
	}{
		{"a Greeting without from, its language changed", unsigned, func(s map[string]any) { s["language"] = "fr" },
			""},
		{"a Greeting without from, given one", unsigned, func(s map[string]any) { s["from"] = "Grace" }, ""},
		{"a Greeting with from, its language changed", signed, func(s map[string]any) { s["language"] = "fr" }, ""},
		{"a Greeting's from changed", signed, func(s map[string]any) { s["from"] = "Alan" },
			"from is set once, then never changed"},
		{"a Greeting's from removed", signed, func(s map[string]any) { delete(s, "from") },
			"from is never removed: a rule on the field from never runs when the new object lacks it; put it on spec"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := tc.from.DeepCopy()
			tc.change(g.Object["spec"].(map[string]any))
			_, err := greetings.Update(ctx, g, dryUpdate)
			switch {
			case tc.refuse == "" && err != nil:
				hint := ""
				if strings.Contains(err.Error(), "no such key") {
					hint = " (a rule reads self.from or oldSelf.from without has(): on a Greeting without from, it errs, and an error refuses)"
				}
				t.Errorf("%s was refused%s: %v", tc.name, hint, err)
			case tc.refuse != "" && err == nil:
				t.Errorf("%s was admitted: %s", tc.name, tc.refuse)
			case err != nil:
				t.Logf("%s: refused: %v", tc.name, err)
				if !strings.Contains(err.Error(), "Grace") {
					hint := ""
					if strings.Contains(err.Error(), "failed rule") {
						hint = " (its messageExpression erred, and the API server fell back to the rule itself: on a " +
							"removal, self.from does not exist; oldSelf.from is there for a change and a removal alike)"
					}
					t.Errorf("the refusal of %s should name the from it keeps, Grace (step 1)%s; it says: %v",
						tc.name, hint, err)
				}
			}
		})
	}
}

// A Greeting stored before the rules existed stays, and ratcheting lets it
// be updated as long as what a rule checks is left as it is: a rule on spec
// runs again once anything in spec changes. A new one like it is refused.
func TestExercise15Ratcheting(t *testing.T) {
	ex15ApplyCRD(t, "", ex15CRDWithoutRules(t))
	ns := namespace(t, "validate-ratchet")
	greetings := adminGreetings(t).Namespace(ns)
	ctx := context.Background()
	ex15Eventually(t, "storing {to: Ada, from: Ada} with the CRD without its rules", func(ctx context.Context) error {
		_, err := greetings.Create(ctx, ex15Greeting(ns, "before", map[string]any{"to": "Ada", "from": "Ada"}), metav1.CreateOptions{})
		return err
	})
	ex15ApplyCRD(t, ex15CRD, nil)
	ex15Eventually(t, "with the rules, a new {to: Ada, from: Ada} is still admitted", func(ctx context.Context) error {
		_, err := greetings.Create(ctx, ex15Greeting(ns, "after", map[string]any{"to": "Ada", "from": "Ada"}),
			metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil {
			return fmt.Errorf("admitted")
		}
		t.Logf("with the rules, a new {to: Ada, from: Ada}: %v", err)
		return nil
	})
	stored, err := greetings.Get(ctx, "before", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the Greeting stored before the rules: %v", err)
	}
	t.Logf("the Greeting stored before the rules is still there, unchanged: spec %v", stored.Object["spec"])

	labelled := stored.DeepCopy()
	labelled.SetLabels(map[string]string{"reviewed": "yes"})
	if _, err := greetings.Update(ctx, labelled, metav1.UpdateOptions{}); err != nil {
		t.Errorf("the Greeting stored before the rules, given a label (its spec as it was), was refused: ratcheting "+
			"should admit it: %v", err)
	} else {
		t.Logf("the Greeting stored before the rules, given a label: admitted (ratcheting: spec unchanged)")
	}
	stored, _ = greetings.Get(ctx, "before", metav1.GetOptions{})
	french := stored.DeepCopy()
	french.Object["spec"].(map[string]any)["language"] = "fr"
	if _, err := greetings.Update(ctx, french, metav1.UpdateOptions{}); err == nil {
		t.Errorf("the Greeting stored before the rules, its language changed, was admitted: the rule on spec " +
			"runs again when anything in spec changes")
	} else {
		t.Logf("the Greeting stored before the rules, its language changed: refused: %v", err)
	}
}

// A rule whose estimated cost is too high is refused when the CRD is
// written; maxItems and maxLength bring the estimate down.
func TestExercise15CostlyRuleRefused(t *testing.T) {
	// crd returns the CRD of a Roster, a list of names, with the bounds
	// given (YAML flow fields, each starting with ", ") on the list and on
	// each name.
	crd := func(listBounds, nameBounds string) string {
		return `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: rosters.demo.example.com}
spec:
  group: demo.example.com
  scope: Namespaced
  names: {kind: Roster, plural: rosters}
  versions:
  - name: v1alpha1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              names:
                type: array` + listBounds + `
                items: {type: string` + nameBounds + `}
                x-kubernetes-validations:
                - rule: self.all(a, self.all(b, a == b || !a.startsWith(b)))
                  message: no name starts with another
`
	}
	apply := func(yamlText string) (string, error) {
		path := filepath.Join(t.TempDir(), "roster.yaml")
		if err := os.WriteFile(path, []byte(yamlText), 0o600); err != nil {
			t.Fatal(err)
		}
		return kubectl(adminKube, "create", "--dry-run=server", "-f", path)
	}
	out, err := apply(crd("", ""))
	if err == nil {
		t.Errorf("a CRD whose rule compares every pair of an unbounded list of unbounded strings was admitted:\n%s", out)
	} else {
		t.Logf("without maxItems and maxLength, refused: %s", strings.TrimSpace(out))
		if !strings.Contains(out, "cost") {
			t.Errorf("the refusal does not speak of the rule's cost:\n%s", out)
		}
	}
	if out, err := apply(crd("\n                maxItems: 20", ", maxLength: 40")); err != nil {
		t.Errorf("the same rule with maxItems: 20 and maxLength: 40 was refused: %v\n%s", err, out)
	} else {
		t.Logf("with maxItems: 20 and maxLength: 40, admitted: %s", strings.TrimSpace(out))
	}
}

// ex15OtherController is a ServiceAccount of kube-system that is none of the
// policy's exceptions; impersonated, it is in the group
// system:serviceaccounts:kube-system.
const ex15OtherController = "kube-system:other-controller"

// ex15Alice lets the ordinary user alice, and ex15OtherController, do
// anything to ConfigMaps in ns, so that what refuses them is the policy, not
// RBAC. (A Role of its own: the
// bootstrap role edit gets its rules by aggregation, a controller of
// kube-controller-manager's that this suite does not run.)
func ex15Alice(t *testing.T, ns string) {
	t.Helper()
	for _, args := range [][]string{
		{"create", "role", "configmap-editor", "--verb=get,list,watch,create,update,patch,delete", "--resource=configmaps", "-n", ns},
		{"create", "rolebinding", "alice-configmap-editor", "--role=configmap-editor", "--user=alice", "-n", ns},
		{"create", "rolebinding", "other-controller-configmap-editor", "--role=configmap-editor",
			"--serviceaccount=" + ex15OtherController, "-n", ns},
	} {
		if out, err := kubectl(adminKube, args...); err != nil && !strings.Contains(out, "AlreadyExists") {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// ex15As runs kubectl as user (impersonated by the admin), or as the admin
// itself (user "admin", in group system:masters), in ns.
func ex15As(user, ns string, args ...string) (string, error) {
	if user == "admin" {
		return kubectl(adminKube, append([]string{"-n", ns}, args...)...)
	}
	return kubectl(adminKube, append([]string{"--as=" + user, "-n", ns}, args...)...)
}

// ex15Refused waits until kubectl, as user, is refused by the policy, and
// returns the refusal. The policy reaches the admission plugin a moment
// after it is stored, so a first try may be admitted: each try is a dry run.
func ex15Refused(t *testing.T, why, user, ns string, args ...string) string {
	t.Helper()
	var out string
	ex15Eventually(t, fmt.Sprintf("kubectl --as=%s %s was admitted: %s", user, strings.Join(args, " "), why), func(context.Context) error {
		var err error
		out, err = ex15As(user, ns, append(args, "--dry-run=server")...)
		if err == nil {
			return fmt.Errorf("admitted: %s", strings.TrimSpace(out))
		}
		if !strings.Contains(out, "ValidatingAdmissionPolicy") {
			return fmt.Errorf("refused, but not by a ValidatingAdmissionPolicy: %s", strings.TrimSpace(out))
		}
		return nil
	})
	t.Logf("kubectl --as=%s %s: %s", user, strings.Join(args, " "), strings.TrimSpace(out))
	if !strings.Contains(out, "denied request: ") || !strings.Contains(out[strings.Index(out, "denied request: "):], user) {
		t.Errorf("the policy's refusal of %s does not name who was refused (%s): step 2 asks its message to, "+
			"with a messageExpression (request.userInfo.username): %s", user, user, strings.TrimSpace(out))
	}
	return out
}

// ex15Admitted checks that kubectl, as user, is admitted (for real, not a
// dry run), and returns what it said, warnings included.
func ex15Admitted(t *testing.T, why, user, ns string, args ...string) string {
	t.Helper()
	out, err := ex15As(user, ns, args...)
	if err != nil {
		t.Errorf("kubectl --as=%s %s was refused: %s: %v\n%s", user, strings.Join(args, " "), why, err, out)
	}
	return out
}

// ex15ConfigMapText waits until the ConfigMap's data key greeting is text.
func ex15ConfigMapText(t *testing.T, ns, name, text, why string) {
	t.Helper()
	ex15Eventually(t, why, func(ctx context.Context) error {
		cm, err := admin.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got := cm.Data["greeting"]; got != text {
			return fmt.Errorf("ConfigMap %s/%s says %q, want %q", ns, name, got, text)
		}
		return nil
	})
}

// The policy and its binding: the controller's ConfigMaps are changed by
// demo-controller alone, and deleted by the garbage collector with their
// Greeting; no one else may edit, relabel, delete or forge one, not even an
// admin; other ConfigMaps are not its business. Without the binding, or
// with a binding that only warns, the policy refuses nothing.
func TestExercise15PolicyGuardsTheChildren(t *testing.T) {
	ex15ApplyCRD(t, ex15CRD, nil)
	if out, err := manifestOnce(); err != nil {
		t.Fatalf("kubectl create -f demo-controller.yaml: %v\n%s", err, out)
	}
	ns := namespace(t, "validate-policy")
	ex15Alice(t, ns)
	gc := startGarbageCollector(t)
	ex15Apply(t, ex15Policy)
	t.Cleanup(func() { kubectl(adminKube, "delete", "-f", filepath.Join(repoRoot, ex15Policy), "--ignore-not-found") })

	p := startController(t, serviceAccountKubeconfig(t, "demo-controller", "demo-controller"), "--namespace="+ns)
	waitForLines(t, p, 0, "Greetings synced")
	greetings := adminGreetings(t).Namespace(ns)
	ctx := context.Background()
	hello, err := greetings.Create(ctx, ex15Greeting(ns, "hello", map[string]any{"to": "Ada", "from": "Grace"}), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitForLines(t, p, 0, `"ConfigMap created" greeting="validate-policy/hello"`)
	ex15ConfigMapText(t, ns, "greeting-hello", "Hello, Ada, from Grace",
		"the controller's create, under the policy, should make the ConfigMap, signed with from")

	// Refused: an ordinary user's edit, relabel, delete and forgery, and an admin's edit.
	edit := []string{"patch", "configmap", "greeting-hello", "--type=merge", "-p", `{"data":{"greeting":"Hi, Ada"}}`}
	ex15Refused(t, "the policy, bound with validationActions [Deny], refuses a hand edit of a ConfigMap labelled "+ex15Label+
		" (a policy without a binding, or bound in Warn or Audit only, refuses nothing)", "alice", ns, edit...)
	ex15Refused(t, "the policy refuses removing the label (on an update, the old object matches the objectSelector)",
		"alice", ns, "label", "configmap", "greeting-hello", "app.kubernetes.io/managed-by-")
	ex15Refused(t, "the policy refuses a delete (DELETE among its operations)", "alice", ns, "delete", "configmap", "greeting-hello")
	forged := filepath.Join(t.TempDir(), "forged.yaml")
	if err := os.WriteFile(forged, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: forged, labels: {app.kubernetes.io/managed-by: demo-controller}}\ndata: {greeting: Hi}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ex15Refused(t, "the policy refuses a ConfigMap created with the label by someone else (CREATE among its operations)",
		"alice", ns, "create", "-f", forged)
	ex15Refused(t, "the policy applies to admins too (system:masters skips RBAC, not admission)", "admin", ns, edit...)
	ex15Refused(t, "the policy's exceptions are three names, not a group: another controller of kube-system (in the "+
		"group system:serviceaccounts:kube-system) may not edit the ConfigMaps", "system:serviceaccount:"+ex15OtherController,
		ns, edit...)

	// Admitted: other ConfigMaps, and the controller's own identity.
	ex15Admitted(t, "the policy must match only ConfigMaps labelled "+ex15Label+" (an objectSelector), not every ConfigMap",
		"alice", ns, "create", "configmap", "notes", "--from-literal=note=mine")
	ex15Admitted(t, "the policy must match only labelled ConfigMaps", "alice", ns,
		"patch", "configmap", "notes", "--type=merge", "-p", `{"data":{"note":"changed"}}`)
	if out, err := kubectl(serviceAccountKubeconfig(t, "demo-controller", "demo-controller"), "-n", ns,
		"patch", "configmap", "greeting-hello", "--type=merge", "-p", `{"data":{"extra":"x"}}`, "--dry-run=server"); err != nil {
		t.Errorf("demo-controller's ServiceAccount's patch of its ConfigMap was refused: the policy must admit %s: %v\n%s", ex15SA, err, out)
	}

	// The controller's write, admitted: the Greeting changes, the controller applies.
	hello.Object["spec"].(map[string]any)["language"] = "fr"
	if hello, err = greetings.Update(ctx, hello, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	ex15ConfigMapText(t, ns, "greeting-hello", "Bonjour, Ada, from Grace",
		"the controller's apply, under the policy, should change the ConfigMap when its Greeting changes")

	// Without the binding, the policy does nothing: an edit is admitted,
	// and the controller repairs it. With the binding back, the edit made
	// meanwhile is still there for the controller to repair (here it
	// already has).
	if out, err := kubectl(adminKube, "delete", "validatingadmissionpolicybinding", "demo-controller-configmaps"); err != nil {
		t.Fatalf("deleting the binding: %v\n%s", err, out)
	}
	ex15Eventually(t, "without its binding, the policy should refuse nothing", func(context.Context) error {
		out, err := ex15As("alice", ns, append(edit, "--dry-run=server")...)
		if err != nil {
			return fmt.Errorf("still refused: %s", strings.TrimSpace(out))
		}
		return nil
	})
	at := len(p.lines())
	ex15Admitted(t, "without its binding, a policy does nothing", "alice", ns, edit...)
	t.Logf("without the binding, alice's edit was admitted")
	waitForLines(t, p, at, `"ConfigMap updated" greeting="validate-policy/hello"`)
	ex15ConfigMapText(t, ns, "greeting-hello", "Bonjour, Ada, from Grace", "the controller should repair the edit")

	// A binding in Warn: admitted, with a warning.
	warn := filepath.Join(t.TempDir(), "warn.yaml")
	if err := os.WriteFile(warn, []byte(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: demo-controller-configmaps-warn}
spec: {policyName: demo-controller-configmaps, validationActions: [Warn]}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := kubectl(adminKube, "apply", "-f", warn); err != nil {
		t.Fatalf("applying a binding in Warn: %v\n%s", err, out)
	}
	ex15Eventually(t, "with a binding in Warn, an edit should be admitted with a warning", func(context.Context) error {
		out, err := ex15As("alice", ns, append(edit, "--dry-run=server")...)
		if err != nil || !strings.Contains(out, "Warning") {
			return fmt.Errorf("%v: %s", err, strings.TrimSpace(out))
		}
		t.Logf("with a binding in Warn, alice's edit: admitted, and kubectl says: %s", strings.TrimSpace(out))
		return nil
	})
	if out, err := kubectl(adminKube, "delete", "-f", warn); err != nil {
		t.Fatalf("deleting the binding in Warn: %v\n%s", err, out)
	}
	ex15Apply(t, ex15Policy)
	ex15Refused(t, "with the binding back, the policy refuses a hand edit again", "alice", ns, edit...)

	// The collector's delete, admitted: the Greeting goes, its ConfigMap with it.
	waitForCollection(t, gc, "demo.example.com/v1alpha1", "Greeting", func(ctx context.Context) (metav1.Object, error) {
		return greetings.Create(ctx, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "demo.example.com/v1alpha1",
			"kind": "Greeting", "metadata": map[string]any{"generateName": "canary-", "namespace": ns},
			"spec": map[string]any{"to": "Canary"}}}, metav1.CreateOptions{})
	}, func(ctx context.Context, name string) error {
		return greetings.Delete(ctx, name, metav1.DeleteOptions{})
	})
	if err := greetings.Delete(ctx, "hello", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ex15Eventually(t, "the garbage collector should delete the Greeting's ConfigMap under the policy (it deletes as "+
		"system:serviceaccount:kube-system:generic-garbage-collector, which the policy must admit)", func(ctx context.Context) error {
		_, err := admin.CoreV1().ConfigMaps(ns).Get(ctx, "greeting-hello", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("ConfigMap greeting-hello still there (%v)", err)
	})
	t.Logf("the garbage collector deleted greeting-hello, labelled %s, with its Greeting", ex15Label)

	// The namespace controller's delete, admitted: a namespace holding a
	// labelled ConfigMap with no owner (the garbage collector does not
	// delete it) is emptied and goes.
	doomed := namespace(t, "validate-doomed")
	orphan := filepath.Join(t.TempDir(), "orphan.yaml")
	if err := os.WriteFile(orphan, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: orphan, labels: {app.kubernetes.io/managed-by: demo-controller}}\ndata: {greeting: Hi}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := kubectl(serviceAccountKubeconfig(t, "demo-controller", "demo-controller"), "-n", doomed, "create", "-f", orphan); err != nil {
		t.Fatalf("demo-controller's ServiceAccount creating a labelled ConfigMap: %v\n%s", err, out)
	}
	if err := admin.CoreV1().Namespaces().Delete(ctx, doomed, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ex15Eventually(t, "the namespace "+doomed+", which holds a ConfigMap labelled "+ex15Label+", should go: the namespace "+
		"controller deletes its ConfigMaps as system:serviceaccount:kube-system:namespace-controller, which the policy must admit",
		func(ctx context.Context) error {
			ns, err := admin.CoreV1().Namespaces().Get(ctx, doomed, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			if err != nil {
				return err
			}
			return fmt.Errorf("namespace %s still there, %s: %v", doomed, ns.Status.Phase, ns.Status.Conditions)
		})
	t.Logf("the namespace controller emptied and deleted %s, with its labelled ConfigMap", doomed)
}

// A transition rule runs only when there is an old value; with
// optionalOldSelf: true it runs on a create, and on an update whose old
// object lacks the field, with oldSelf a CEL optional. Shown on a CRD of
// the test's own, a Stamp whose mark starts as draft and then never
// changes.
func TestExercise15OptionalOldSelf(t *testing.T) {
	gvr := schema.GroupVersionResource{Group: "demo.example.com", Version: "v1alpha1", Resource: "stamps"}
	ns := namespace(t, "validate-stamps")
	stamps := dynamicClient(t, adminKube, 0).Resource(gvr).Namespace(ns)
	ctx := context.Background()
	stamp := func(name string, mark string) *unstructured.Unstructured {
		spec := map[string]any{}
		if mark != "" {
			spec["mark"] = mark
		}
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "demo.example.com/v1alpha1", "kind": "Stamp",
			"metadata": map[string]any{"namespace": ns, "name": name}, "spec": spec}}
	}
	for _, tc := range []struct {
		rule, optional string
		want           map[string]bool // what is admitted: a create with final, an update adding final to a Stamp without mark
	}{
		{"self == oldSelf", "false", map[string]bool{"create": true, "add": true}},
		{"oldSelf.hasValue() ? self == oldSelf.value() : self == 'draft'", "true", map[string]bool{"create": false, "add": false}},
	} {
		crd := `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: stamps.demo.example.com}
spec:
  group: demo.example.com
  scope: Namespaced
  names: {kind: Stamp, plural: stamps}
  versions:
  - name: v1alpha1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              mark:
                type: string
                maxLength: 20
                x-kubernetes-validations:
                - {rule: "` + tc.rule + `", optionalOldSelf: ` + tc.optional + `, message: a mark starts as draft and never changes}
`
		path := filepath.Join(t.TempDir(), "stamp.yaml")
		if err := os.WriteFile(path, []byte(crd), 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := kubectl(adminKube, "apply", "-f", path); err != nil {
			t.Fatalf("applying the Stamp CRD with the rule %q: %v\n%s", tc.rule, err, out)
		}
		if out, err := kubectl(adminKube, "wait", "--for=condition=Established", "--timeout=30s", "crd/stamps.demo.example.com"); err != nil {
			t.Fatalf("the Stamp CRD is not established: %v\n%s", err, out)
		}
		dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
		ex15Eventually(t, fmt.Sprintf("with the rule %q (optionalOldSelf: %s), a create of a Stamp marked final", tc.rule, tc.optional),
			func(ctx context.Context) error {
				_, err := stamps.Create(ctx, stamp("final", "final"), dry)
				if (err == nil) != tc.want["create"] {
					return fmt.Errorf("want admitted %v, got %v", tc.want["create"], err)
				}
				t.Logf("rule %q, optionalOldSelf: %s: a create of a Stamp marked final: %v (nil: admitted)", tc.rule, tc.optional, err)
				return nil
			})
		blank, err := stamps.Create(ctx, stamp("blank-"+tc.optional, ""), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		blank.Object["spec"] = map[string]any{"mark": "final"}
		_, err = stamps.Update(ctx, blank, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}})
		if (err == nil) != tc.want["add"] {
			t.Errorf("rule %q, optionalOldSelf: %s: an update marking final a Stamp without mark: want admitted %v, got %v",
				tc.rule, tc.optional, tc.want["add"], err)
		} else {
			t.Logf("rule %q, optionalOldSelf: %s: an update marking final a Stamp without mark: %v (nil: admitted)", tc.rule, tc.optional, err)
		}
	}
}
