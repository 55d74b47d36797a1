//go:build exercise

// The test of exercise 15 (exercises/15-validate/README.md). Copy it into
// the project's root and run:
//
//	go test -race -tags exercise -run TestExercise15 .
//
// It checks what can be checked without an API server: the shape of the
// CRD's rules and of the policy and its binding (it cannot run CEL), and
// the text the controller writes for Greetings the rules would refuse
// today. What the rules and the policy do, the end-to-end tests show
// (make exercise-e2e EX=15-validate).

package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"
	"sigs.k8s.io/yaml"
)

const (
	ex15CRDPath    = "exercises/15-validate/greeting-crd.yaml"
	ex15PolicyPath = "exercises/15-validate/configmap-policy.yaml"
)

// ex15Rule is one entry of x-kubernetes-validations.
type ex15Rule struct {
	Rule              string `json:"rule"`
	Message           string `json:"message"`
	MessageExpression string `json:"messageExpression"`
	FieldPath         string `json:"fieldPath"`
	OptionalOldSelf   *bool  `json:"optionalOldSelf"`
}

// ex15Schema is the part of a CRD's schema the test reads.
type ex15Schema struct {
	Type        string                `json:"type"`
	Pattern     string                `json:"pattern"`
	MaxLength   *int64                `json:"maxLength"`
	Required    []string              `json:"required"`
	Properties  map[string]ex15Schema `json:"properties"`
	Validations []ex15Rule            `json:"x-kubernetes-validations"`
}

func TestExercise15(t *testing.T) {
	t.Run("the CRD's rules", ex15CRDRules)
	t.Run("the policy and its binding", ex15PolicyShape)
	t.Run("sync signs the text, and takes what is stored as it is", ex15Texts)
}

func ex15CRDRules(t *testing.T) {
	data, err := os.ReadFile(ex15CRDPath)
	if err != nil {
		t.Fatalf("the task's CRD (step 1): %v", err)
	}
	var crd struct {
		Metadata struct{ Name string }
		Spec     struct {
			Versions []struct {
				Name   string
				Schema struct {
					OpenAPIV3Schema ex15Schema `json:"openAPIV3Schema"`
				}
			}
		}
	}
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatalf("%s is not a CRD in YAML: %v", ex15CRDPath, err)
	}
	if crd.Metadata.Name != "greetings.demo.example.com" || len(crd.Spec.Versions) != 1 {
		t.Fatalf("%s: want exercise 7's CRD, greetings.demo.example.com with one version, v1alpha1; got %q with %d versions",
			ex15CRDPath, crd.Metadata.Name, len(crd.Spec.Versions))
	}
	spec, ok := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	if !ok {
		t.Fatalf("%s: the schema has no spec", ex15CRDPath)
	}
	to, from := spec.Properties["to"], spec.Properties["from"]
	switch {
	case from.Type != "string":
		t.Errorf("spec.from: type %q, want string (step 1)", from.Type)
	case from.Pattern != to.Pattern:
		t.Errorf("spec.from: pattern %q; step 1 asks for to's, %q", from.Pattern, to.Pattern)
	case from.MaxLength == nil || *from.MaxLength > 40:
		t.Errorf("spec.from: want maxLength: 40 at most (step 1), as for to")
	case slices.Contains(spec.Required, "from"):
		t.Errorf("spec.from is required; step 1 makes it optional (Greetings stored before it have none)")
	}
	for _, rule := range from.Validations {
		if strings.Contains(rule.Rule, "oldSelf") {
			t.Errorf("a transition rule on spec.from (%q) never runs when the new Greeting has no from, so it lets "+
				"from be removed: put it on spec, which every Greeting has (hint 3)", rule.Rule)
		}
	}

	var cross, setOnce *ex15Rule
	for i, rule := range spec.Validations {
		if strings.Contains(rule.Rule, "oldSelf") {
			setOnce = &spec.Validations[i]
		} else if strings.Contains(rule.Rule, "from") && strings.Contains(rule.Rule, "to") {
			cross = &spec.Validations[i]
		}
		for _, self := range []string{"self", "oldSelf"} {
			if strings.Contains(rule.Rule, self+".from") && !strings.Contains(rule.Rule, "has("+self+".from)") {
				t.Errorf("the rule %q reads %s.from without has(%s.from): on a Greeting without from, it errs, "+
					"and an error refuses the write (hint 2)", rule.Rule, self, self)
			}
		}
	}
	if cross == nil {
		t.Errorf("spec has no rule across from and to (x-kubernetes-validations on spec, step 1 and hint 1)")
	} else if cross.MessageExpression == "" {
		t.Errorf("the rule %q has no messageExpression: a fixed message cannot name the bad value (step 1, hint 4)", cross.Rule)
	}
	if setOnce == nil {
		t.Errorf("spec has no transition rule (one that reads oldSelf) keeping from as it was set (step 1, hint 3)")
	}
	t.Logf("the shapes only: the end-to-end tests show what the API server does with these rules")
}

func ex15PolicyShape(t *testing.T) {
	data, err := os.ReadFile(ex15PolicyPath)
	if err != nil {
		t.Fatalf("the task's policy (step 2): %v", err)
	}
	var policy *admissionv1.ValidatingAdmissionPolicy
	var bindings []*admissionv1.ValidatingAdmissionPolicyBinding
	for doc := range strings.SplitSeq(string(data), "\n---") {
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatalf("%s: %v", ex15PolicyPath, err)
		}
		switch meta.Kind {
		case "ValidatingAdmissionPolicy":
			policy = &admissionv1.ValidatingAdmissionPolicy{}
			if err := yaml.UnmarshalStrict([]byte(doc), policy); err != nil {
				t.Fatalf("%s: the policy: %v", ex15PolicyPath, err)
			}
		case "ValidatingAdmissionPolicyBinding":
			binding := &admissionv1.ValidatingAdmissionPolicyBinding{}
			if err := yaml.UnmarshalStrict([]byte(doc), binding); err != nil {
				t.Fatalf("%s: the binding: %v", ex15PolicyPath, err)
			}
			bindings = append(bindings, binding)
		}
	}
	if policy == nil {
		t.Fatalf("%s has no ValidatingAdmissionPolicy (step 2)", ex15PolicyPath)
	}
	if policy.Name != "demo-controller-configmaps" {
		t.Errorf("the policy is named %q; step 2 names it demo-controller-configmaps", policy.Name)
	}
	var bound *admissionv1.ValidatingAdmissionPolicyBinding
	for _, b := range bindings {
		if b.Spec.PolicyName == policy.Name {
			bound = b
		}
	}
	switch {
	case bound == nil:
		t.Errorf("no ValidatingAdmissionPolicyBinding names the policy %q in policyName: a policy without a binding "+
			"does nothing (hint 6)", policy.Name)
	case bound.Name != "demo-controller-configmaps":
		t.Errorf("the binding is named %q; step 2 names it demo-controller-configmaps", bound.Name)
	case !slices.Equal(bound.Spec.ValidationActions, []admissionv1.ValidationAction{admissionv1.Deny}):
		t.Errorf("the binding's validationActions: %v; step 2 asks for [Deny] (Warn and Audit admit the request)",
			bound.Spec.ValidationActions)
	case bound.Spec.MatchResources != nil:
		t.Logf("the binding narrows the policy with matchResources: the end-to-end tests check what it still refuses")
	}
	if fp := policy.Spec.FailurePolicy; fp != nil && *fp != admissionv1.Fail {
		t.Errorf("the policy's failurePolicy: %s; step 2 asks for Fail (Ignore admits a request when an expression errs)", *fp)
	}
	mc := policy.Spec.MatchConstraints
	if mc == nil {
		t.Fatalf("the policy has no matchConstraints: it must match ConfigMaps (hint 5)")
	}
	ops := map[admissionv1.OperationType]bool{}
	for _, rule := range mc.ResourceRules {
		if (slices.Contains(rule.Resources, "configmaps") || slices.Contains(rule.Resources, "*")) &&
			(slices.Contains(rule.APIGroups, "") || slices.Contains(rule.APIGroups, "*")) {
			for _, op := range rule.Operations {
				ops[op] = true
			}
		}
	}
	for _, op := range []admissionv1.OperationType{admissionv1.Create, admissionv1.Update, admissionv1.Delete} {
		if !ops[op] && !ops[admissionv1.OperationAll] {
			t.Errorf("the policy's resourceRules do not cover %s of configmaps (group \"\"): step 2 refuses creates, "+
				"updates and deletes", op)
		}
	}
	if sel := mc.ObjectSelector; sel == nil || (sel.MatchLabels["app.kubernetes.io/managed-by"] != "demo-controller" &&
		len(sel.MatchExpressions) == 0) {
		t.Errorf("the policy has no objectSelector for app.kubernetes.io/managed-by: demo-controller: it would refuse "+
			"changes to every ConfigMap of the cluster (hint 5); objectSelector: %v", sel)
	}
	var expressions strings.Builder
	for _, v := range policy.Spec.Validations {
		expressions.WriteString(v.Expression + "\n")
	}
	for _, c := range policy.Spec.MatchConditions {
		expressions.WriteString(c.Expression + "\n")
	}
	for _, who := range []struct{ user, why string }{
		{"system:serviceaccount:demo-controller:demo-controller", "the controller could not create or repair its ConfigMaps"},
		{"system:serviceaccount:kube-system:generic-garbage-collector", "the garbage collector could not delete them with their Greeting"},
		{"system:serviceaccount:kube-system:namespace-controller", "a namespace holding one could never be deleted"},
	} {
		if !strings.Contains(expressions.String(), who.user) {
			t.Errorf("no expression of the policy names %s: %s (step 2)", who.user, who.why)
		}
	}
	if strings.Contains(expressions.String(), "groups") {
		t.Errorf("an expression of the policy reads request.userInfo.groups: its exceptions are three names, not a "+
			"group (step 2). The group system:serviceaccounts:kube-system would let every controller of kube-system "+
			"edit the ConfigMaps; system:masters, every admin:\n%s", expressions.String())
	}
	t.Logf("the shapes only: the end-to-end tests show what the API server refuses and admits")
}

// ex15Texts runs the Greeting controller on fake clients, with Greetings
// with and without from, and one stored before the rules, and checks the
// text of each ConfigMap.
func ex15Texts(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	gvr := schema.GroupVersionResource{Group: "demo.example.com", Version: "v1alpha1", Resource: "greetings"}
	greeting := func(name string, spec map[string]any) runtime.Object {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "demo.example.com/v1alpha1", "kind": "Greeting",
			"metadata": map[string]any{"namespace": "default", "name": name, "uid": "uid-" + name, "resourceVersion": "1"},
			"spec":     spec}}
	}
	cases := []struct{ name, want, what string }{
		{"signed", "Bonjour, Ada, from Grace Hopper", "a Greeting with from (step 3)"},
		{"unsigned", "Bonjour, Ada", "a Greeting without from (step 4: every Greeting written before the field)"},
		{"before-the-rules", "Hello, Ada, from Ada", "a Greeting stored before the rules, from equal to to (step 4: written as it is)"},
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{gvr: "GreetingList"},
		greeting("signed", map[string]any{"to": "Ada", "from": "Grace Hopper", "language": "fr"}),
		greeting("unsigned", map[string]any{"to": "Ada", "language": "fr"}),
		greeting("before-the-rules", map[string]any{"to": "Ada", "from": "Ada"}))
	client := fake.NewClientset()
	done := make(chan error, 1)
	go func() { done <- runGreetings(ctx, dyn, client, "default", 10*time.Second) }()

	texts := map[string]string{}
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		for _, c := range cases {
			cm, err := client.CoreV1().ConfigMaps("default").Get(ctx, "greeting-"+c.name, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			texts[c.name] = cm.Data["greeting"]
		}
		return true, nil // made once each: nothing changes them after
	})
	cancel()
	select {
	case <-done:
	case <-time.After(wait.ForeverTestTimeout):
		t.Errorf("runGreetings did not return within %v of its context's end", wait.ForeverTestTimeout)
	}
	var report bytes.Buffer
	for _, c := range cases {
		if got, ok := texts[c.name]; !ok {
			fmt.Fprintf(&report, "\n  %s: no ConfigMap greeting-%s was made within 10 s (%v)", c.what, c.name, err)
		} else if got != c.want {
			fmt.Fprintf(&report, "\n  %s: ConfigMap greeting-%s says %q, want %q", c.what, c.name, got, c.want)
		}
	}
	if report.Len() > 0 {
		t.Errorf("the ConfigMaps do not say what the task asks:%s", report.String())
	}
}
