package fakeapi

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/kubernetes/scheme"
)

// Grants reads the rules of the ClusterRole in a manifest
// (demo-controller.yaml), and the verbs they grant by "group/resource"
// ("/pods" for the core group), sorted, each once.
func Grants(t testing.TB, manifest string) (map[string][]string, []rbacv1.PolicyRule) {
	t.Helper()
	data, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	verbs := map[string][]string{}
	var rules []rbacv1.PolicyRule
	for _, doc := range strings.Split(string(data), "\n---\n") {
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", manifest, err)
		}
		if role, ok := obj.(*rbacv1.ClusterRole); ok {
			rules = append(rules, role.Rules...)
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
	return verbs, rules
}

// Rules says verbs by resource, one a line: "group/resource: verb, verb".
func Rules(verbs map[string][]string) string {
	var lines []string
	for _, k := range slices.Sorted(maps.Keys(verbs)) {
		lines = append(lines, fmt.Sprintf("%s: %s", k, strings.Join(verbs[k], ", ")))
	}
	return strings.Join(lines, "\n  ")
}
