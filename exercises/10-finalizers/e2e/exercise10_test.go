//go:build e2e && exercise

// The end-to-end test of exercise 10 (exercises/10-finalizers/README.md):
// finalizers, on a real kube-apiserver, with the garbage collector and the
// namespace controller of kube-controller-manager where they matter. Run it
// with `make exercise-e2e EX=10-finalizers`; hack/check-exercises.sh runs it
// on the binary built with solution.patch.

package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
)

// The task's names.
const (
	ex10Finalizer = "demo.example.com/greeting-record"
	ex10Other     = "other.example.com/keep" // another controller's finalizer
	ex10User      = "system:serviceaccount:demo-controller:demo-controller"
)

// ex10Setup applies the Greeting CRD (exercise 7's) and demo-controller.yaml,
// and returns a client for Greetings, as the admin.
func ex10Setup(t *testing.T) dynamic.NamespaceableResourceInterface {
	t.Helper()
	establishGreetingCRD(t, greetingCRD, "the CRD greetings.demo.example.com is not established")
	if out, err := manifestOnce(); err != nil {
		t.Fatalf("kubectl create -f demo-controller.yaml: %v\n%s", err, out)
	}
	greetings := dynamicClient(t, adminKube, 100).Resource(greetingsGVR)
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := greetings.List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, nil
	}); err != nil {
		t.Fatalf("the API server does not serve Greetings: %v", err)
	}
	return greetings
}

// ex10Create creates a Greeting.
func ex10Create(t *testing.T, greetings dynamic.NamespaceableResourceInterface, ns, name, to string, finalizers ...string) *unstructured.Unstructured {
	t.Helper()
	g := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "demo.example.com/v1alpha1", "kind": "Greeting",
		"spec": map[string]any{"to": to}}}
	g.SetNamespace(ns)
	g.SetName(name)
	g.SetFinalizers(finalizers)
	created, err := greetings.Namespace(ns).Create(context.Background(), g, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return created
}

// ex10Records returns the records: the data of the ConfigMap demo-controller/greetings.
func ex10Records(t *testing.T) map[string]string {
	t.Helper()
	cm, err := admin.CoreV1().ConfigMaps("demo-controller").Get(context.Background(), "greetings", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the ConfigMap demo-controller/greetings, which demo-controller.yaml creates: %v", err)
	}
	return cm.Data
}

// ex10Poll waits up to timeout for cond, and fails with what otherwise.
func ex10Poll(t *testing.T, timeout time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return cond(), nil
	}); err != nil {
		t.Fatalf("within %v: %s", timeout, what)
	}
	return time.Since(start)
}

// ex10PollOr waits up to timeout for cond, and fails with what() otherwise.
func ex10PollOr(t *testing.T, timeout time.Duration, what func() string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		return cond(), nil
	}); err != nil {
		t.Fatalf("within %v: %s", timeout, what())
	}
	return time.Since(start)
}

// ex10Get returns a Greeting, or nil once it is gone.
func ex10Get(t *testing.T, greetings dynamic.NamespaceableResourceInterface, ns, name string) *unstructured.Unstructured {
	t.Helper()
	g, err := greetings.Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// The controller adds its finalizer, then writes the record; the record
// follows the spec; deleted, the Greeting loses its record, then the
// finalizer, and another controller's finalizer stays; the API server
// refuses a finalizer added to a Greeting being deleted. With the rights of
// the manifest's ServiceAccount, which are exactly the verbs the controller
// sends (patch or update, as the task allows: the audit log says which).
func TestExercise10FinalizerAndRecord(t *testing.T) {
	greetings := ex10Setup(t)
	ctx := context.Background()
	as := "--as=" + ex10User
	for _, check := range []struct {
		want string
		args []string
	}{
		{"no", []string{"get", "greetings.demo.example.com", "-A"}},
		{"no", []string{"delete", "greetings.demo.example.com", "-A"}},
		{"no", []string{"create", "greetings.demo.example.com", "-A"}},
		{"no", []string{"patch", "configmap/other", "-n", "demo-controller"}},
		{"no", []string{"update", "configmap/other", "-n", "demo-controller"}},
		{"no", []string{"create", "configmaps", "-n", "demo-controller"}},
		{"no", []string{"list", "configmaps", "-n", "demo-controller"}},
		{"no", []string{"patch", "configmaps", "-n", "default"}},
	} {
		out, _ := kubectl(adminKube, append(append([]string{"auth", "can-i"}, check.args...), as)...)
		if got := strings.TrimSpace(out); got != check.want {
			t.Errorf("kubectl auth can-i %s (as demo-controller's ServiceAccount): %q, want %q", strings.Join(check.args, " "), got, check.want)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	ns := namespace(t, "ex10-life")
	ex10Create(t, greetings, ns, "hello", "Ada")
	p := startController(t, serviceAccountKubeconfig(t, "demo-controller", "demo-controller"))
	took := ex10PollOr(t, 30*time.Second, func() string {
		return "the record ex10-life.hello was not written" + ex10Rights(t, ns, false)
	}, func() bool { return ex10Records(t)["ex10-life.hello"] == "Hello, Ada" })
	t.Logf("record written %v after the controller started", took.Round(10*time.Millisecond))
	ex10FinalizerFirst(t, ns, "hello", 0)
	recordPatches := len(ex10RecordPatches(t))
	ex10Create(t, greetings, ns, "shared", "Grace", ex10Other)
	ex10Poll(t, 30*time.Second, "the record ex10-life.shared was not written", func() bool { return ex10Records(t)["ex10-life.shared"] == "Hello, Grace" })
	ex10FinalizerFirst(t, ns, "shared", recordPatches)
	if g := ex10Get(t, greetings, ns, "shared"); !slices.Equal(g.GetFinalizers(), []string{ex10Other, ex10Finalizer}) {
		t.Errorf("ex10-life/shared has the finalizers %q; want %q", g.GetFinalizers(), []string{ex10Other, ex10Finalizer})
	}

	// The spec changes: the record follows.
	if _, err := greetings.Namespace(ns).Patch(ctx, "hello", types.MergePatchType, []byte(`{"spec":{"language":"de"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	ex10Poll(t, 30*time.Second, "the record ex10-life.hello did not become \"Hallo, Ada\"", func() bool { return ex10Records(t)["ex10-life.hello"] == "Hallo, Ada" })

	// Deleted with another controller's finalizer: cleaned up, and kept
	// by the other finalizer, Terminating.
	before := ex10Get(t, greetings, ns, "shared")
	if err := greetings.Namespace(ns).Delete(ctx, "shared", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	at := time.Now()
	ex10Poll(t, 30*time.Second, "ex10-life/shared, deleted, did not lose its record and demo-controller's finalizer", func() bool {
		g := ex10Get(t, greetings, ns, "shared")
		_, recorded := ex10Records(t)["ex10-life.shared"]
		return g != nil && !recorded && slices.Equal(g.GetFinalizers(), []string{ex10Other})
	})
	shared := ex10Get(t, greetings, ns, "shared")
	t.Logf("deleted, with finalizers %q: generation %d -> %d, deletionTimestamp %v; cleaned up in %v; still there with %q",
		before.GetFinalizers(), before.GetGeneration(), shared.GetGeneration(), shared.GetDeletionTimestamp(), time.Since(at).Round(10*time.Millisecond), shared.GetFinalizers())
	// The API server refuses a finalizer added now, in its words.
	_, err := greetings.Namespace(ns).Patch(ctx, "shared", types.JSONPatchType, []byte(`[{"op":"add","path":"/metadata/finalizers/-","value":"`+ex10Finalizer+`"}]`), metav1.PatchOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "no new finalizers can be added if the object is being deleted") {
		t.Errorf("adding a finalizer to a Greeting being deleted: %v; want 422, no new finalizers can be added if the object is being deleted", err)
	}
	t.Logf("the API server, to a finalizer added to a Greeting being deleted: %v", err)
	// The other controller is done: the Greeting goes.
	if _, err := greetings.Namespace(ns).Patch(ctx, "shared", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	ex10Poll(t, 10*time.Second, "ex10-life/shared, its last finalizer removed, is still there", func() bool { return ex10Get(t, greetings, ns, "shared") == nil })
	if refused := auditEvents(t, ex10User, ns, func(e auditEvent) bool {
		return isWrite(e) && e.ResponseStatus != nil && e.ResponseStatus.Code >= 400 && e.ResponseStatus.Code != 409
	}); len(refused) > 0 {
		t.Errorf("the API server refused writes of demo-controller's:\n%s", strings.Join(eventLines(refused), "\n"))
	}

	// Deleted with only its finalizer: gone once cleaned up.
	if err := greetings.Namespace(ns).Delete(ctx, "hello", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	at = time.Now()
	ex10Poll(t, 30*time.Second, "ex10-life/hello, deleted, is still there", func() bool { return ex10Get(t, greetings, ns, "hello") == nil })
	t.Logf("ex10-life/hello deleted and gone in %v", time.Since(at).Round(10*time.Millisecond))
	if _, recorded := ex10Records(t)["ex10-life.hello"]; recorded {
		t.Errorf("ex10-life/hello is gone and its record is still there")
	}
	waitForLines(t, p, 0, `"Greeting record removed" greeting="ex10-life/hello"`, `"Greeting deleted" greeting="ex10-life/hello"`)

	// Every write counts, even one that changes nothing: the audit log has
	// them all. Each Greeting: its finalizer added, then removed; the
	// records: hello's twice (en, then de), shared's once, and two removals.
	for _, name := range []string{"hello", "shared"} {
		if patches := auditEvents(t, ex10User, ns, func(e auditEvent) bool { return isWrite(e) && e.ObjectRef.Name == name }); len(patches) != 2 {
			t.Errorf("demo-controller wrote %s/%s %d times; want 2 (its finalizer added, then removed):\n%s", ns, name, len(patches), strings.Join(eventLines(patches), "\n"))
		}
	}
	if patches := ex10RecordPatches(t)[recordPatches-1:]; len(patches) != 5 {
		t.Errorf("demo-controller wrote the records %d times since the first Greeting's; want 5 (hello in English, shared, "+
			"hello in German, shared's removal, hello's removal):\n%s", len(patches), strings.Join(eventLines(patches), "\n"))
	}
	if wrong := ex10Rights(t, ns, true); wrong != "" {
		t.Error("demo-controller.yaml does not grant exactly the verbs demo-controller sends:" + wrong)
	}
}

// ex10Rights compares the verbs that demo-controller.yaml grants on
// greetings and on the ConfigMap demo-controller/greetings (kubectl auth
// can-i, as the ServiceAccount) with the verbs that demo-controller sent
// (the audit log: its requests for Greetings of ns, and for the records).
// It returns what differs, one line each, or "". With unused, a verb
// granted and never sent differs too.
func ex10Rights(t *testing.T, ns string, unused bool) string {
	t.Helper()
	var wrong []string
	for _, on := range []struct {
		resource, what, ns string
		args               []string
		verbs              []string
	}{
		{"greetings", "greetings", ns, []string{"greetings.demo.example.com", "-A"}, []string{"patch", "update"}},
		{"configmaps", "the ConfigMap greetings", "demo-controller", []string{"configmap/greetings", "-n", "demo-controller"}, []string{"get", "patch", "update"}},
	} {
		sent := map[string]bool{}
		for _, e := range auditEvents(t, ex10User, on.ns, func(e auditEvent) bool {
			return e.ObjectRef.Resource == on.resource && e.ObjectRef.Subresource == "" && (on.resource == "greetings" || e.ObjectRef.Name == "greetings")
		}) {
			sent[e.Verb] = true
		}
		for _, verb := range on.verbs {
			out, _ := kubectl(adminKube, append(append([]string{"auth", "can-i", verb}, on.args...), "--as="+ex10User)...)
			granted := strings.TrimSpace(out) == "yes"
			switch {
			case sent[verb] && !granted:
				wrong = append(wrong, fmt.Sprintf("the code sends %s on %s, and demo-controller.yaml does not grant it "+
					"(the API server answers 403): grant the verbs the code sends", verb, on.what))
			case unused && granted && !sent[verb]:
				wrong = append(wrong, fmt.Sprintf("demo-controller.yaml grants %s on %s, and the code never sends it "+
					"(it sent %q): grant only what the code sends", verb, on.what, slices.Sorted(maps.Keys(sent))))
			}
		}
		if unused && !sent["patch"] && !sent["update"] {
			wrong = append(wrong, fmt.Sprintf("demo-controller never wrote %s (no patch, no update in the audit log)", on.what))
		}
	}
	if len(wrong) == 0 {
		return ""
	}
	return "\n  " + strings.Join(wrong, "\n  ")
}

// ex10RecordPatches returns the writes (patches or updates) of the
// records' ConfigMap by demo-controller that succeeded, in the API
// server's audit log.
func ex10RecordPatches(t *testing.T) []auditEvent {
	return auditEvents(t, ex10User, "demo-controller", func(e auditEvent) bool {
		return isWrite(e) && e.ObjectRef.Name == "greetings" && e.ResponseStatus != nil && e.ResponseStatus.Code == 200
	})
}

// ex10FinalizerFirst checks, in the audit log, that demo-controller's first
// write of the Greeting came before its first write of the records after
// the first skip ones (the audit log names no key: the test writes one
// Greeting at a time).
func ex10FinalizerFirst(t *testing.T, ns, name string, skip int) {
	t.Helper()
	fin := auditEvents(t, ex10User, ns, func(e auditEvent) bool {
		return isWrite(e) && e.ObjectRef.Name == name && e.ResponseStatus != nil && e.ResponseStatus.Code == 200
	})
	rec := ex10RecordPatches(t)
	if len(fin) == 0 || len(rec) <= skip || rec[skip].StageTimestamp.Before(&fin[0].StageTimestamp) {
		t.Errorf("demo-controller did not write the finalizer of %s/%s before its record; its writes of the Greeting:\n%s\nof the records:\n%s",
			ns, name, strings.Join(eventLines(fin), "\n"), strings.Join(eventLines(rec[min(skip, len(rec)):]), "\n"))
	}
}

// Killed (SIGKILL) after it removed a record and before it removed the
// finalizer, the controller finishes the deletion once it runs again; a
// Greeting deleted while it is down is cleaned up when it comes back. To
// stop it exactly there, it runs once with the rights to remove the record
// but not to write Greetings: the API server refuses the finalizer's
// removal (403), and the test kills it then.
func TestExercise10KilledMidCleanup(t *testing.T) {
	greetings := ex10Setup(t)
	ctx := context.Background()
	ns := namespace(t, "ex10-kill")
	ex10Create(t, greetings, ns, "hello", "Ada")
	ex10Create(t, greetings, ns, "down", "Grace")
	a := startController(t, serviceAccountKubeconfig(t, "demo-controller", "demo-controller"), "--namespace="+ns)
	ex10Poll(t, 30*time.Second, "the records of ex10-kill/hello and ex10-kill/down were not written", func() bool {
		r := ex10Records(t)
		return r["ex10-kill.hello"] != "" && r["ex10-kill.down"] != ""
	})
	a.stop()

	// A ServiceAccount with the manifest's rights, less writes of greetings.
	limited := `apiVersion: v1
kind: ServiceAccount
metadata: {name: ex10-limited, namespace: demo-controller}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: ex10-limited}
rules:
  - {apiGroups: [""], resources: [pods], verbs: [list, watch]}
  - {apiGroups: [demo.example.com], resources: [greetings], verbs: [list, watch]}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: ex10-limited}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: ex10-limited}
subjects: [{kind: ServiceAccount, name: ex10-limited, namespace: demo-controller}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: ex10-limited, namespace: demo-controller}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: demo-controller-records}
subjects: [{kind: ServiceAccount, name: ex10-limited, namespace: demo-controller}]
`
	if out, err := ex10KubectlIn(limited, "apply", "-f", "-"); err != nil {
		t.Fatalf("creating the limited ServiceAccount: %v\n%s", err, out)
	}
	limitedUser := "system:serviceaccount:demo-controller:ex10-limited"
	ex10Poll(t, 10*time.Second, "RBAC does not let ex10-limited write the ConfigMap greetings yet", func() bool {
		for _, verb := range []string{"patch", "update"} { // the Role's: either, as the task allows
			if out, _ := kubectl(adminKube, "auth", "can-i", verb, "configmap/greetings", "-n", "demo-controller", "--as="+limitedUser); strings.TrimSpace(out) == "yes" {
				return true
			}
		}
		return false
	})

	if err := greetings.Namespace(ns).Delete(ctx, "hello", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	b := startController(t, serviceAccountKubeconfig(t, "demo-controller", "ex10-limited"), "--namespace="+ns)
	ex10Poll(t, 30*time.Second, "demo-controller, without rights to write greetings, did not remove the record of ex10-kill/hello and try to remove its finalizer", func() bool {
		refused := auditEvents(t, limitedUser, ns, func(e auditEvent) bool {
			return isWrite(e) && e.ObjectRef.Name == "hello" && e.ResponseStatus != nil && e.ResponseStatus.Code == 403
		})
		return len(refused) > 0
	})
	b.signal(syscall.SIGKILL)
	b.waitExit(10 * time.Second)
	if _, recorded := ex10Records(t)["ex10-kill.hello"]; recorded {
		t.Fatalf("demo-controller tried to remove the finalizer of ex10-kill/hello before its record: the record is still there")
	}
	g := ex10Get(t, greetings, ns, "hello")
	if g == nil || !slices.Contains(g.GetFinalizers(), ex10Finalizer) || g.GetDeletionTimestamp() == nil {
		t.Fatalf("after the kill, ex10-kill/hello should be Terminating with demo-controller's finalizer: %v", g)
	}
	t.Logf("killed between the record's removal and the finalizer's: ex10-kill/hello Terminating, finalizers %q, no record", g.GetFinalizers())

	// Deleted while no controller runs.
	if err := greetings.Namespace(ns).Delete(ctx, "down", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	startController(t, serviceAccountKubeconfig(t, "demo-controller", "demo-controller"), "--namespace="+ns)
	took := ex10Poll(t, 30*time.Second, "after the restart, ex10-kill/hello and ex10-kill/down were not both deleted", func() bool {
		return ex10Get(t, greetings, ns, "hello") == nil && ex10Get(t, greetings, ns, "down") == nil
	})
	t.Logf("after the restart, both deletions finished within %v", took.Round(10*time.Millisecond))
	if _, recorded := ex10Records(t)["ex10-kill.down"]; recorded {
		t.Errorf("ex10-kill/down is gone and its record is still there")
	}
}

// With no controller running (uninstalled), a Greeting that has its
// finalizer stays Terminating when it is deleted, and so does its
// namespace; a finalizer stripped by hand lets the Greeting go and leaves
// its record behind for good; the controller, back, finishes the rest.
func TestExercise10Uninstalled(t *testing.T) {
	greetings := ex10Setup(t)
	startGarbageCollector(t) // and the namespace controller
	ctx := context.Background()
	ns := namespace(t, "ex10-uninstall")
	ex10Create(t, greetings, ns, "hello", "Ada")
	ex10Create(t, greetings, ns, "strip", "Grace")
	p := startController(t, serviceAccountKubeconfig(t, "demo-controller", "demo-controller"), "--namespace="+ns)
	ex10Poll(t, 30*time.Second, "the records of ex10-uninstall/hello and ex10-uninstall/strip were not written", func() bool {
		r := ex10Records(t)
		return r["ex10-uninstall.hello"] != "" && r["ex10-uninstall.strip"] != ""
	})
	p.stop() // uninstalled

	if err := admin.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	at := time.Now()
	var condition corev1.NamespaceCondition
	ex10Poll(t, 60*time.Second, "the namespace controller did not report the finalizers that hold namespace "+ns, func() bool {
		n, err := admin.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NamespaceFinalizersRemaining && c.Status == corev1.ConditionTrue {
				condition = c
				return true
			}
		}
		return false
	})
	t.Logf("namespace %s deleted; %v later, still Terminating: %s: %s", ns, time.Since(at).Round(100*time.Millisecond), condition.Reason, condition.Message)
	for _, name := range []string{"hello", "strip"} {
		g := ex10Get(t, greetings, ns, name)
		if g == nil || g.GetDeletionTimestamp() == nil || !slices.Contains(g.GetFinalizers(), ex10Finalizer) {
			t.Fatalf("with no controller running, %s/%s should be Terminating with its finalizer: %v", ns, name, g)
		}
	}

	// The wrong way out: strip the finalizer by hand.
	if out, err := kubectl(adminKube, "patch", "greeting", "strip", "-n", ns, "--type=merge", "-p", `{"metadata":{"finalizers":null}}`); err != nil {
		t.Fatalf("kubectl patch: %v\n%s", err, out)
	}
	ex10Poll(t, 10*time.Second, "ex10-uninstall/strip, its finalizer stripped, is still there", func() bool { return ex10Get(t, greetings, ns, "strip") == nil })

	// The right way out: the controller back.
	startController(t, serviceAccountKubeconfig(t, "demo-controller", "demo-controller"), "--namespace="+ns)
	at = time.Now()
	ex10Poll(t, 30*time.Second, "with the controller back, ex10-uninstall/hello was not deleted", func() bool { return ex10Get(t, greetings, ns, "hello") == nil })
	t.Logf("the controller back, ex10-uninstall/hello gone in %v", time.Since(at).Round(10*time.Millisecond))
	took := ex10Poll(t, 60*time.Second, "namespace "+ns+" was not deleted once its Greetings were gone", func() bool {
		_, err := admin.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	t.Logf("namespace %s gone %v after that", ns, took.Round(100*time.Millisecond))
	records := ex10Records(t)
	if _, ok := records["ex10-uninstall.hello"]; ok {
		t.Errorf("the record of ex10-uninstall/hello is still there")
	}
	if text, ok := records["ex10-uninstall.strip"]; !ok {
		t.Errorf("the record of ex10-uninstall/strip, whose finalizer was stripped by hand, is gone: what removed it?")
	} else {
		t.Logf("the record of ex10-uninstall/strip, whose finalizer was stripped by hand, stays: %q", text)
	}
}

// An owner reference across namespaces: what the API server and the
// garbage collector do with one. (Why the record is guarded by a finalizer.)
func TestExercise10CrossNamespaceOwnerReference(t *testing.T) {
	greetings := ex10Setup(t)
	gc := startGarbageCollector(t)
	ctx := context.Background()
	ns := namespace(t, "ex10-owner")
	waitForCollection(t, gc, "demo.example.com/v1alpha1", "Greeting", func(ctx context.Context) (metav1.Object, error) {
		g := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "demo.example.com/v1alpha1", "kind": "Greeting", "spec": map[string]any{"to": "Canary"}}}
		g.SetGenerateName("canary-")
		g.SetNamespace(ns)
		return greetings.Namespace(ns).Create(ctx, g, metav1.CreateOptions{})
	}, func(ctx context.Context, name string) error {
		return greetings.Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{})
	})
	owner := ex10Create(t, greetings, ns, "hello", "Ada")
	elsewhere := namespace(t, "ex10-elsewhere")
	dependent, err := admin.CoreV1().ConfigMaps(elsewhere).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "record",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "demo.example.com/v1alpha1", Kind: "Greeting", Name: owner.GetName(), UID: owner.GetUID()}}},
		Data: map[string]string{"ex10-owner.hello": "Hello, Ada"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("the API server refused a ConfigMap whose owner is a Greeting of another namespace: %v", err)
	}
	t.Logf("the API server accepted a ConfigMap in %s owned by the Greeting %s/%s", elsewhere, ns, owner.GetName())
	var said string
	took := ex10Poll(t, 30*time.Second, "the garbage collector did not delete the ConfigMap whose owner is in another namespace, "+
		"and say why in an Event (OwnerRefInvalidNamespace)", func() bool {
		events, _ := admin.CoreV1().Events(elsewhere).List(ctx, metav1.ListOptions{})
		for _, e := range events.Items {
			if e.InvolvedObject.UID == dependent.UID && e.Reason == "OwnerRefInvalidNamespace" {
				said = e.Message
			}
		}
		_, err := admin.CoreV1().ConfigMaps(elsewhere).Get(ctx, dependent.Name, metav1.GetOptions{})
		return said != "" && apierrors.IsNotFound(err)
	})
	if ex10Get(t, greetings, ns, owner.GetName()) == nil {
		t.Errorf("the owner, the Greeting %s/%s, is gone too", ns, owner.GetName())
	}
	deletes := auditEvents(t, "system:serviceaccount:kube-system:generic-garbage-collector", elsewhere, func(e auditEvent) bool { return e.Verb == "delete" })
	t.Logf("within %v, the garbage collector deleted the ConfigMap, although its owner is alive in %s (%s), and said "+
		"(Event OwnerRefInvalidNamespace on it): %s", took.Round(10*time.Millisecond), ns, strings.Join(eventLines(deletes), ";"), said)
}

// ex10KubectlIn runs kubectl as the admin with stdin.
func ex10KubectlIn(stdin string, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(serversDir, "kubectl"), append([]string{"--kubeconfig", adminKube}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// The controller never reads the records: it remembers the text it last
// wrote for each Greeting. A record edited or deleted by hand, the
// ConfigMap and its namespace relabelled, the ConfigMap deleted and made
// again: none of it is seen, and nothing is written, until the Greeting's
// text changes or the controller restarts; then the record is written
// once. (What the task says of it, in its traps.)
func TestExercise10RecordByHand(t *testing.T) {
	greetings := ex10Setup(t)
	ctx := context.Background()
	ns := namespace(t, "ex10-hand")
	record := ns + ".hello"
	ex10Create(t, greetings, ns, "hello", "Ada")
	kubeconfig := serviceAccountKubeconfig(t, "demo-controller", "demo-controller")
	p := startController(t, kubeconfig, "--namespace="+ns)
	ex10Poll(t, 30*time.Second, "the record "+record+" was not written", func() bool { return ex10Records(t)[record] == "Hello, Ada" })

	// settle waits until every change made so far has been synced: with one
	// worker and a queue in order, a Greeting created now is synced after
	// them, and its record (one more write) marks it.
	marks := 0
	settle := func() {
		t.Helper()
		marks++
		name := fmt.Sprintf("mark-%d", marks)
		ex10Create(t, greetings, ns, name, "Mark")
		ex10Poll(t, 30*time.Second, "the record of the Greeting "+ns+"/"+name+", created to mark the end of the changes before it, "+
			"was not written", func() bool { return ex10Records(t)[ns+"."+name] == "Hello, Mark" })
	}
	// expect checks the record, and demo-controller's record writes since from.
	expect := func(from int, text string, writes int, why string) {
		t.Helper()
		got, ok := ex10Records(t)[record]
		if want := text != ""; ok != want || got != text {
			t.Errorf("%s: the record %s is %q (there: %v); the task's controller leaves it %q. It never reads the records: "+
				"it writes a Greeting's record only when the Greeting's text differs from the one it last wrote, or after "+
				"a restart (the task's traps: the controller sees the Greetings, never the records)", why, record, got, ok, text)
		}
		if since := ex10RecordPatches(t)[from:]; len(since) != writes {
			t.Errorf("%s: demo-controller wrote the records %d times; want %d. A record is written only when its Greeting's "+
				"text differs from the one last written, and once after a restart (a write that changes nothing is still "+
				"a request):\n%s", why, len(since), writes, strings.Join(eventLines(since), "\n"))
		}
	}
	label := func(value string) { // a change of the Greeting that leaves its text as it is
		t.Helper()
		if _, err := greetings.Namespace(ns).Patch(ctx, "hello", types.MergePatchType, []byte(`{"metadata":{"labels":{"ex10":"`+value+`"}}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setRecord := func(patch string) {
		t.Helper()
		if _, err := admin.CoreV1().ConfigMaps("demo-controller").Patch(ctx, "greetings", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	kubectlOK := func(args ...string) {
		t.Helper()
		if out, err := kubectl(adminKube, args...); err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}

	// Edited by hand, the ConfigMap and its namespace relabelled, the
	// Greeting's labels changed: nothing is written but the mark's record.
	from := len(ex10RecordPatches(t))
	setRecord(`{"data":{"` + record + `":"Hi, Eve"}}`)
	kubectlOK("label", "configmap", "greetings", "-n", "demo-controller", "ex10=relabelled")
	kubectlOK("label", "namespace", "demo-controller", "ex10=relabelled")
	t.Cleanup(func() {
		_, _ = kubectl(adminKube, "label", "configmap", "greetings", "-n", "demo-controller", "ex10-")
		_, _ = kubectl(adminKube, "label", "namespace", "demo-controller", "ex10-")
	})
	label("a")
	settle()
	expect(from, "Hi, Eve", 1, "the record edited by hand, then the Greeting relabelled (its text the same)")

	// The Greeting's text changes: the record is written, once.
	from = len(ex10RecordPatches(t))
	if _, err := greetings.Namespace(ns).Patch(ctx, "hello", types.MergePatchType, []byte(`{"spec":{"language":"de"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	settle()
	expect(from, "Hallo, Ada", 2, "the Greeting's language changed to de (want its record written once, and the mark's)")
	if !t.Failed() {
		t.Logf("a record edited by hand stayed so until its Greeting's text changed; then it was written once")
	}

	// Deleted by hand: not written again, until a restart.
	from = len(ex10RecordPatches(t))
	setRecord(`{"data":{"` + record + `":null}}`)
	label("b")
	settle()
	expect(from, "", 1, "the record deleted by hand, then the Greeting relabelled")
	p.stop()
	from = len(ex10RecordPatches(t))
	p = startController(t, kubeconfig, "--namespace="+ns)
	settle()
	expect(from, "Hallo, Ada", 1+marks, fmt.Sprintf("after a restart (want each of the %d Greetings' records written once)", 1+marks))
	if !t.Failed() {
		t.Logf("a record deleted by hand stayed deleted until the controller restarted; then each record was written once")
	}

	// The ConfigMap deleted and made again, empty: the same.
	if err := admin.CoreV1().ConfigMaps("demo-controller").Delete(ctx, "greetings", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().ConfigMaps("demo-controller").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "greetings",
		Labels: map[string]string{"app.kubernetes.io/name": "demo-controller"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	from = len(ex10RecordPatches(t))
	label("c")
	settle()
	expect(from, "", 1, "the ConfigMap deleted and made again, empty, then the Greeting relabelled")
	from = len(ex10RecordPatches(t))
	if _, err := greetings.Namespace(ns).Patch(ctx, "hello", types.MergePatchType, []byte(`{"spec":{"language":"fr"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	settle()
	expect(from, "Bonjour, Ada", 2, "the Greeting's language changed to fr (want its record written once, and the mark's)")
	if !t.Failed() {
		t.Logf("the ConfigMap deleted and made again stayed empty of the record until its Greeting's text changed")
	}
}

// kubectl create -f creates a file's objects in its order, one request
// each: a ConfigMap before its Namespace is refused, and the Namespace after
// it is created all the same. (Exercise 10's unit test asks for the
// Namespace first, on the strength of this.)
func TestExercise10ManifestOrder(t *testing.T) {
	const ns = "ex10-order"
	file := filepath.Join(t.TempDir(), "order.yaml")
	manifest := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: greetings, namespace: " + ns + "}\n---\n" +
		"apiVersion: v1\nkind: Namespace\nmetadata: {name: " + ns + "}\n"
	if err := os.WriteFile(file, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	out, err := kubectl(adminKube, "create", "-f", file)
	if err == nil || !strings.Contains(out, `namespaces "`+ns+`" not found`) {
		t.Fatalf("kubectl create -f with a ConfigMap before its Namespace: want the ConfigMap refused (namespaces %q not "+
			"found); got %v:\n%s", ns, err, out)
	}
	if _, err := admin.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{}); err != nil {
		t.Fatalf("kubectl create -f went on after the refused ConfigMap, and should have created the Namespace: %v\n%s", err, out)
	}
	t.Logf("kubectl create -f, a ConfigMap before its Namespace:\n%s", out)
}
