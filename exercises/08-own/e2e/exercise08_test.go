//go:build e2e && exercise

// The end-to-end tests of exercise 8 (exercises/08-own/README.md): a
// Greeting's ConfigMap, made and owned by demo-controller, against a real
// kube-apiserver (with the OwnerReferencesPermissionEnforcement admission
// plugin and an audit log that counts every request for ConfigMaps) and a
// real garbage collector (kube-controller-manager). Run them with
// `make exercise-e2e EX=08-own`; hack/check-exercises.sh runs them on the
// binary built with solution.patch.

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// The controller's identity, as the audit log names it, and what the task
// names.
const (
	ex08User     = "system:serviceaccount:demo-controller:demo-controller"
	ex08GCUser   = "system:serviceaccount:kube-system:generic-garbage-collector"
	ex08Label    = "app.kubernetes.io/managed-by"
	ex08Selector = "labelSelector=app.kubernetes.io%2Fmanaged-by%3Ddemo-controller"
)

// ex08Setup applies the Greeting CRD and the manifest, and waits until
// the API server lets the manifest's ServiceAccount create a ConfigMap
// owned by a Greeting with blockOwnerDeletion. The admission plugin
// resolves the owner's kind through the API server's discovery, which it
// refreshes about every 30 s: until then, such a create is refused ("cannot
// find RESTMapping for APIVersion demo.example.com/v1alpha1 Kind Greeting"),
// whatever the rights. It returns the admin's client for Greetings.
func ex08Setup(t *testing.T, ns string) dynamic.NamespaceableResourceInterface {
	t.Helper()
	establishGreetingCRD(t, greetingCRD, "the Greeting CRD is not established")
	if out, err := manifestOnce(); err != nil {
		t.Fatalf("kubectl create -f demo-controller.yaml: %v\n%s", err, out)
	}
	ex08WaitForMapping(t, kubeClient(t, serviceAccountKubeconfig(t, "demo-controller", "demo-controller")), namespace(t, ns))
	return adminGreetings(t)
}

var ex08MappingOnce sync.Map // by namespace: the wait is done

// ex08WaitForMapping polls, with dry-run creates (checked and admitted,
// never stored), until the API server admits a ConfigMap with a
// blockOwnerDeletion owner reference to a Greeting, as client.
func ex08WaitForMapping(t *testing.T, client kubernetes.Interface, ns string) {
	t.Helper()
	if _, done := ex08MappingOnce.LoadOrStore(ns, true); done {
		return
	}
	started := time.Now()
	var err error
	first := ""
	if werr := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		cerr := dryRunGreetingChild(ctx, client, ns)
		switch {
		case cerr == nil:
			return true, nil
		case ctx.Err() != nil:
			return false, nil // the poll's deadline: keep the server's last answer
		case apierrors.IsForbidden(cerr) && !strings.Contains(cerr.Error(), "RESTMapping"):
			return false, cerr // RBAC, or the admission plugin for want of a right: no wait makes it pass
		}
		if err = cerr; first == "" {
			first = cerr.Error()
		}
		return false, nil
	}); werr != nil {
		if err == nil || apierrors.IsForbidden(werr) {
			err = werr
		}
		t.Fatalf("the API server does not admit a ConfigMap owned by a Greeting with blockOwnerDeletion, created by "+
			"demo-controller's ServiceAccount: %v. The ClusterRole in demo-controller.yaml must grant create on configmaps, "+
			"and update on greetings/finalizers (the task, step 7)", err)
	}
	if first != "" {
		t.Logf("the admission plugin refused a ConfigMap owned by a Greeting for %v after the CRD was installed: %s",
			time.Since(started).Round(100*time.Millisecond), first)
	}
}

// ex08Create creates a Greeting.
func ex08Create(t *testing.T, greetings dynamic.NamespaceableResourceInterface, ns, name, to, language string) *unstructured.Unstructured {
	t.Helper()
	spec := map[string]any{"to": to}
	if language != "" {
		spec["language"] = language
	}
	g := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "demo.example.com/v1alpha1", "kind": "Greeting",
		"metadata": map[string]any{"namespace": ns, "name": name}, "spec": spec}}
	created, err := greetings.Namespace(ns).Create(context.Background(), g, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return created
}

// ex08ConfigMap waits until the ConfigMap exists and says what it should
// (text in its data key greeting), and returns it.
func ex08ConfigMap(t *testing.T, ns, name, text string) *corev1.ConfigMap {
	t.Helper()
	var cm *corev1.ConfigMap
	var err error
	if werr := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, lineTimeout, true, func(ctx context.Context) (bool, error) {
		cm, err = admin.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		return err == nil && cm.Data["greeting"] == text, nil
	}); werr != nil {
		t.Fatalf("ConfigMap %s/%s: want data greeting: %q; got %v (err %v)", ns, name, text, cm, err)
	}
	return cm
}

// ex08Writes returns the writes (create, patch, update, delete) the
// controller asked for, of ConfigMaps in ns, from the audit log.
func ex08Writes(t *testing.T, ns string, name string) []auditEvent {
	return auditEvents(t, ex08User, ns, func(e auditEvent) bool {
		return isWrite(e) && e.ObjectRef.Resource == "configmaps" && !strings.Contains(e.RequestURI, "dryRun=") && (name == "" || e.ObjectRef.Name == name)
	})
}

// The controller makes a Greeting's ConfigMap, with a controller owner
// reference; puts it back, once, after an edit and after a delete, keeping
// another writer's data key; writes nothing when nothing changed, across a
// restart; leaves a ConfigMap it does not control alone, and says so once;
// reports a name too long in the server's words, once; never re-adds an
// owner reference someone removed (it may not: no delete right); and its
// ConfigMap informer asks only for labelled ConfigMaps.
func TestExercise08OwnsItsConfigMap(t *testing.T) {
	ns := "own"
	greetings := ex08Setup(t, ns)
	ctx := context.Background()
	kubeconfig := serviceAccountKubeconfig(t, "demo-controller", "demo-controller")
	p := startController(t, kubeconfig, "--namespace="+ns)
	waitForLines(t, p, 0, "Greetings synced")

	// Made, with a controller owner reference.
	hello := ex08Create(t, greetings, ns, "hello", "Ada", "fr")
	at := waitForLines(t, p, 0, `"ConfigMap created" greeting="own/hello" configMap="own/greeting-hello"`)
	cm := ex08ConfigMap(t, ns, "greeting-hello", "Bonjour, Ada")
	want := metav1.OwnerReference{APIVersion: "demo.example.com/v1alpha1", Kind: "Greeting", Name: "hello", UID: hello.GetUID(),
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
	if got := cm.OwnerReferences; len(got) != 1 || !ex08SameRef(got[0], want) {
		t.Errorf("ConfigMap greeting-hello's owner references: %+v, want one: %+v", got, want)
	}
	if cm.Labels[ex08Label] != "demo-controller" {
		t.Errorf("ConfigMap greeting-hello's labels: %v, want %s=demo-controller", cm.Labels, ex08Label)
	}

	// The Greeting changes: so does its ConfigMap.
	if _, err := greetings.Namespace(ns).Patch(ctx, "hello", types.MergePatchType, []byte(`{"spec":{"language":"de"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	at = waitForLines(t, p, at, `"ConfigMap updated" greeting="own/hello"`)
	ex08ConfigMap(t, ns, "greeting-hello", "Hallo, Ada")

	// Another writer adds a key of its own; someone edits the text: put
	// back, once, and the other key stays.
	if _, err := admin.CoreV1().ConfigMaps(ns).Patch(ctx, "greeting-hello", types.MergePatchType, []byte(`{"data":{"note":"mine"}}`), metav1.PatchOptions{FieldManager: "other"}); err != nil {
		t.Fatal(err)
	}
	before := len(ex08Writes(t, ns, "greeting-hello"))
	if _, err := admin.CoreV1().ConfigMaps(ns).Patch(ctx, "greeting-hello", types.MergePatchType, []byte(`{"data":{"greeting":"Hi"}}`), metav1.PatchOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	at = waitForLines(t, p, at, `"ConfigMap updated" greeting="own/hello"`)
	cm = ex08ConfigMap(t, ns, "greeting-hello", "Hallo, Ada")
	if cm.Data["note"] != "mine" {
		t.Errorf("after demo-controller put the text back, the data key another writer added is gone: %v", cm.Data)
	}

	// Deleted: made again, once.
	if err := admin.CoreV1().ConfigMaps(ns).Delete(ctx, "greeting-hello", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	at = waitForLines(t, p, at, `"ConfigMap created" greeting="own/hello"`)
	ex08ConfigMap(t, ns, "greeting-hello", "Hallo, Ada")

	// A ConfigMap of that name made by someone else (kubectl create
	// configmap: no label, no owner): left alone, reported once.
	if _, err := admin.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "greeting-taken"},
		Data: map[string]string{"greeting": "someone else's"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ex08Create(t, greetings, ns, "taken", "Grace", "")
	at = waitForLines(t, p, at, `"ConfigMap exists and is not this Greeting's; left as it is" greeting="own/taken" configMap="own/greeting-taken" controller="none"`)

	// A name too long once prefixed (greeting- and 250 letters: 259, where
	// the API server allows 253): reported with the server's words, once.
	long := strings.Repeat("a", 250)
	ex08Create(t, greetings, ns, long, "Alan", "es")
	at = waitForLines(t, p, at, `"ConfigMap cannot be made"`)
	if line := p.lines()[at-1]; !strings.Contains(line, "must be no more than 253 characters") {
		t.Errorf("the line for a name too long does not carry the API server's words (must be no more than 253 characters): %s", line)
	}

	// Stripped of its owner reference: no longer ours; not re-added.
	if _, err := admin.CoreV1().ConfigMaps(ns).Patch(ctx, "greeting-hello", types.JSONPatchType, []byte(`[{"op":"remove","path":"/metadata/ownerReferences"}]`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	at = waitForLines(t, p, at, `"ConfigMap exists and is not this Greeting's; left as it is" greeting="own/hello" configMap="own/greeting-hello" controller="none"`)
	// Putting it back would need delete on configmaps: the server says so.
	sa := kubeClient(t, kubeconfig)
	putBack := corev1ac.ConfigMap("greeting-hello", ns).WithOwnerReferences(metav1ac.OwnerReference().WithAPIVersion(want.APIVersion).
		WithKind(want.Kind).WithName(want.Name).WithUID(want.UID).WithController(true).WithBlockOwnerDeletion(true))
	if _, err := sa.CoreV1().ConfigMaps(ns).Apply(ctx, putBack, metav1.ApplyOptions{FieldManager: "demo-controller", Force: true, DryRun: []string{metav1.DryRunAll}}); !apierrors.IsForbidden(err) ||
		!strings.Contains(err.Error(), "cannot set an ownerRef on a resource you can't delete") {
		t.Errorf("putting an owner reference back on an existing ConfigMap, as demo-controller's ServiceAccount (dry run): %v; "+
			"want 403, cannot set an ownerRef on a resource you can't delete", err)
	} else {
		t.Logf("putting the owner reference back, as demo-controller's ServiceAccount: %v", err)
	}

	// A marker: once its ConfigMap is made, the single worker is past
	// every key queued before it.
	ex08Create(t, greetings, ns, "marker", "Ada", "")
	waitForLines(t, p, at, `"ConfigMap created" greeting="own/marker"`)
	writes := ex08Writes(t, ns, "")
	hellos := slices.DeleteFunc(slices.Clone(writes), func(e auditEvent) bool { return e.ObjectRef.Name != "greeting-hello" })
	if got := hellos[before:]; len(got) != 2 || got[0].Verb != "patch" || got[1].Verb != "create" {
		t.Errorf("after the edit of greeting-hello, demo-controller's writes to it were:\n%s\nwant one apply (patch) to put the "+
			"text back, one create once it was deleted, and nothing after its owner reference was removed", strings.Join(eventLines(got), "\n"))
	}
	for name, n := range map[string]int{"greeting-taken": 1, "greeting-" + long: 1} {
		if got := slices.DeleteFunc(slices.Clone(writes), func(e auditEvent) bool { return e.ObjectRef.Name != name }); len(got) != n || got[0].Verb != "create" {
			t.Errorf("demo-controller's writes to %s: want one create, refused:\n%s", name[:min(len(name), 20)], strings.Join(eventLines(got), "\n"))
		}
	}
	if taken, err := admin.CoreV1().ConfigMaps(ns).Get(ctx, "greeting-taken", metav1.GetOptions{}); err != nil || taken.Data["greeting"] != "someone else's" || len(taken.OwnerReferences) != 0 {
		t.Errorf("the ConfigMap greeting-taken, not demo-controller's, was changed: %v (err %v)", taken, err)
	}
	for _, name := range []string{"taken", long, "hello"} {
		events, err := admin.EventsV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "regarding.name=" + name})
		if err != nil {
			t.Fatal(err)
		}
		if warnings := slices.DeleteFunc(events.Items, func(e eventsv1.Event) bool { return e.Type != "Warning" }); len(warnings) != 1 {
			t.Errorf("Greeting %s has %d Warning Events, want one", name[:min(len(name), 20)], len(warnings))
		} else {
			t.Logf("Warning Event on Greeting %s: %s: %s", name[:min(len(name), 20)], warnings[0].Reason, warnings[0].Note)
		}
	}

	// Restarted: found, and no write at all.
	p.stop()
	since := len(ex08Writes(t, ns, ""))
	p = startController(t, kubeconfig, "--namespace="+ns)
	at = waitForLines(t, p, 0, "Greetings synced", `"Greeting found" greeting="own/marker"`)
	ex08Create(t, greetings, ns, "second-marker", "Ada", "")
	waitForLines(t, p, at, `"ConfigMap created" greeting="own/second-marker"`)
	// The ConfigMaps that are right get no write. The two it could not
	// make are tried once more (it keeps no memory across a restart): one
	// refused create each.
	var got []string
	for _, e := range ex08Writes(t, ns, "")[since:] {
		got = append(got, fmt.Sprintf("%s %s (%d)", e.Verb, e.ObjectRef.Name[:min(len(e.ObjectRef.Name), 30)], e.ResponseStatus.Code))
	}
	slices.Sort(got)
	if want := []string{"create greeting-aaaaaaaaaaaaaaaaaaaaa (422)", "create greeting-second-marker (201)", "create greeting-taken (409)"}; !slices.Equal(got, want) {
		t.Errorf("restarted, demo-controller wrote:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	for _, e := range auditEvents(t, ex08User, ns, func(e auditEvent) bool {
		return e.ObjectRef.Resource == "configmaps" && (e.Verb == "list" || e.Verb == "watch")
	}) {
		if !strings.Contains(e.RequestURI, ex08Selector) {
			t.Errorf("demo-controller listed or watched ConfigMaps without its label selector: %s %s", e.Verb, e.RequestURI)
		}
	}
}

// A ConfigMap whose label someone removed leaves the controller's cache
// (kube-apiserver tells a watch with a label selector that it is DELETED),
// but it is still there, and still its Greeting's: the controller puts the
// label and the text back, once, running or restarted; and a ConfigMap
// that already says what its Greeting asks gets no write.
func TestExercise08UnlabelledConfigMapIsRepaired(t *testing.T) {
	ns := "own-label"
	greetings := ex08Setup(t, ns)
	ctx := context.Background()
	kubeconfig := serviceAccountKubeconfig(t, "demo-controller", "demo-controller")
	p := startController(t, kubeconfig, "--namespace="+ns)
	at := waitForLines(t, p, 0, "Greetings synced")
	ex08Create(t, greetings, ns, "ada", "Ada", "fr")
	at = waitForLines(t, p, at, `"ConfigMap created" greeting="own-label/ada"`)
	ex08ConfigMap(t, ns, "greeting-ada", "Bonjour, Ada")
	configMaps := admin.CoreV1().ConfigMaps(ns)
	// unlabel removes the label as kubectl label does (a merge patch with
	// null), and sets the text in the same write if text is not empty.
	unlabel := func(text string) {
		t.Helper()
		patch := `{"metadata":{"labels":{"app.kubernetes.io/managed-by":null}}}`
		if text != "" {
			patch = `{"metadata":{"labels":{"app.kubernetes.io/managed-by":null}},"data":{"greeting":"` + text + `"}}`
		}
		if _, err := configMaps.Patch(ctx, "greeting-ada", types.MergePatchType, []byte(patch), metav1.PatchOptions{FieldManager: "kubectl-label"}); err != nil {
			t.Fatal(err)
		}
	}
	// repaired waits until greeting-ada says text, with the label (it takes
	// milliseconds: 10 s is plenty), and that the controller logged it; then
	// checks that it wrote to it once since writes: a create refused, and
	// one apply.
	repaired := func(when, text string, writes int) {
		t.Helper()
		var cm *corev1.ConfigMap
		var err error
		if werr := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			cm, err = configMaps.Get(ctx, "greeting-ada", metav1.GetOptions{})
			return err == nil && cm.Data["greeting"] == text && cm.Labels[ex08Label] == "demo-controller", nil
		}); werr != nil {
			t.Fatalf("%s, ConfigMap greeting-ada was not repaired within %v: want %q and the label %s=demo-controller; "+
				"it has %v and labels %v (err %v). Out of the label-selected cache, no event of it will come: after "+
				"AlreadyExists, a Get that finds it controlled by the Greeting but not as asked means apply now",
				when, 10*time.Second, text, ex08Label, cm.Data, cm.Labels, err)
		}
		at = waitForLines(t, p, at, `"ConfigMap updated" greeting="own-label/ada"`)
		// A marker: once its ConfigMap is made, the worker is past the key.
		marker := fmt.Sprintf("marker-%d", writes)
		ex08Create(t, greetings, ns, marker, "Ada", "")
		at = waitForLines(t, p, at, `"ConfigMap created" greeting="own-label/`+marker+`"`)
		var got []string
		for _, e := range ex08Writes(t, ns, "greeting-ada")[writes:] {
			got = append(got, fmt.Sprintf("%s %d", e.Verb, e.ResponseStatus.Code))
		}
		if want := []string{"create 409", "patch 200"}; !slices.Equal(got, want) {
			t.Errorf("%s, demo-controller's writes to greeting-ada were %v; want %v: a create refused (AlreadyExists), "+
				"and one apply that puts the label and the text back", when, got, want)
		}
	}

	// The label removed: put back at once.
	writes := len(ex08Writes(t, ns, "greeting-ada"))
	unlabel("")
	repaired("after someone removed its label", "Bonjour, Ada", writes)

	// The label removed, then the Greeting changed: the ConfigMap follows.
	writes = len(ex08Writes(t, ns, "greeting-ada"))
	unlabel("")
	repaired("after someone removed its label again", "Bonjour, Ada", writes)
	if _, err := greetings.Namespace(ns).Patch(ctx, "ada", types.MergePatchType, []byte(`{"spec":{"language":"de"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	at = waitForLines(t, p, at, `"ConfigMap updated" greeting="own-label/ada"`)
	ex08ConfigMap(t, ns, "greeting-ada", "Hallo, Ada")

	// The label removed and the text edited in one write.
	writes = len(ex08Writes(t, ns, "greeting-ada"))
	unlabel("Hi")
	repaired("after someone removed its label and edited its text", "Hallo, Ada", writes)

	// Stopped; the label removed, the text edited, the Greeting changed;
	// restarted: repaired once.
	p.stop()
	writes = len(ex08Writes(t, ns, "greeting-ada"))
	unlabel("Hi")
	if _, err := greetings.Namespace(ns).Patch(ctx, "ada", types.MergePatchType, []byte(`{"spec":{"language":"es"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	p = startController(t, kubeconfig, "--namespace="+ns)
	at = waitForLines(t, p, 0, "Greetings synced")
	repaired("restarted, after its label was removed, its text edited and the Greeting changed (es)", "Hola, Ada", writes)

	// Restarted again: everything as asked, so no write at all.
	p.stop()
	since := len(ex08Writes(t, ns, ""))
	p = startController(t, kubeconfig, "--namespace="+ns)
	at = waitForLines(t, p, 0, "Greetings synced", `"Greeting found" greeting="own-label/ada"`)
	ex08Create(t, greetings, ns, "last-marker", "Ada", "")
	waitForLines(t, p, at, `"ConfigMap created" greeting="own-label/last-marker"`)
	var got []string
	for _, e := range ex08Writes(t, ns, "")[since:] {
		got = append(got, fmt.Sprintf("%s %s (%d)", e.Verb, e.ObjectRef.Name, e.ResponseStatus.Code))
	}
	if want := []string{"create greeting-last-marker (201)"}; !slices.Equal(got, want) {
		t.Errorf("restarted with every ConfigMap as its Greeting asks, demo-controller wrote:\n  %s\nwant only the "+
			"marker's create", strings.Join(got, "\n  "))
	}
}

// Without a garbage collector, nothing deletes the ConfigMap of a deleted
// Greeting: the test above depends on the collector.
func TestExercise08WithoutCollectorTheConfigMapStays(t *testing.T) {
	ns := "own-nogc"
	greetings := ex08Setup(t, ns)
	ctx := context.Background()
	p := startController(t, serviceAccountKubeconfig(t, "demo-controller", "demo-controller"), "--namespace="+ns)
	waitForLines(t, p, 0, "Greetings synced")
	ex08Create(t, greetings, ns, "orphan", "Ada", "")
	at := waitForLines(t, p, 0, `"ConfigMap created" greeting="own-nogc/orphan"`)
	if err := greetings.Namespace(ns).Delete(ctx, "orphan", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForLines(t, p, at, `"Greeting deleted" greeting="own-nogc/orphan"`)
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 5*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := admin.CoreV1().ConfigMaps(ns).Get(ctx, "greeting-orphan", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil // (not any error: the poll's last Get may fail on its deadline)
	}); err == nil {
		t.Fatalf("with no garbage collector running, the ConfigMap of a deleted Greeting went away: something else deleted it:\n%s",
			strings.Join(eventLines(auditEvents(t, "", ns, nil)), "\n"))
	}
	t.Logf("with no garbage collector, the ConfigMap of a deleted Greeting was still there 5 s later")
}

// The garbage collector, not the controller, deletes a Greeting's
// ConfigMap: in the background (the Greeting goes at once, the ConfigMap
// after) and in the foreground (the Greeting stays, being deleted, until
// its ConfigMap, which blocks it, is gone).
func TestExercise08CollectorDeletesTheConfigMap(t *testing.T) {
	ns := "own-gc"
	greetings := ex08Setup(t, ns)
	ctx := context.Background()
	gc := startGarbageCollector(t)
	// The collector learns the kinds it can see from discovery, at start
	// and about every 30 s: prove that it knows Greetings.
	canaries := greetings.Namespace(ns)
	waitForCollection(t, gc, "demo.example.com/v1alpha1", "Greeting", func(ctx context.Context) (metav1.Object, error) {
		return canaries.Create(ctx, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "demo.example.com/v1alpha1",
			"kind": "Greeting", "metadata": map[string]any{"generateName": "canary-"}, "spec": map[string]any{"to": "Canary"}}}, metav1.CreateOptions{})
	}, func(ctx context.Context, name string) error {
		return canaries.Delete(ctx, name, metav1.DeleteOptions{})
	})
	p := startController(t, serviceAccountKubeconfig(t, "demo-controller", "demo-controller"), "--namespace="+ns)
	waitForLines(t, p, 0, "Greetings synced")

	for _, policy := range []metav1.DeletionPropagation{metav1.DeletePropagationBackground, metav1.DeletePropagationForeground} {
		name := "bye-" + strings.ToLower(string(policy))
		ex08Create(t, greetings, ns, name, "Ada", "")
		waitForLines(t, p, 0, fmt.Sprintf(`"ConfigMap created" greeting="%s/%s"`, ns, name))
		started := time.Now()
		if err := greetings.Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{PropagationPolicy: &policy}); err != nil {
			t.Fatal(err)
		}
		if policy == metav1.DeletePropagationForeground {
			deleting, err := greetings.Namespace(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil || deleting.GetDeletionTimestamp() == nil || !slices.Contains(deleting.GetFinalizers(), "foregroundDeletion") {
				t.Fatalf("right after a foreground delete, the Greeting should still be there, being deleted, with the finalizer "+
					"foregroundDeletion: %v (err %v)", deleting, err)
			}
		}
		var cmGone, greetingGone time.Duration
		if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			if _, err := admin.CoreV1().ConfigMaps(ns).Get(ctx, "greeting-"+name, metav1.GetOptions{}); apierrors.IsNotFound(err) && cmGone == 0 {
				cmGone = time.Since(started)
			}
			if _, err := greetings.Namespace(ns).Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) && greetingGone == 0 {
				greetingGone = time.Since(started)
			}
			return cmGone > 0 && greetingGone > 0, nil
		}); err != nil {
			t.Fatalf("%s deletion of Greeting %s: within 30 s, its ConfigMap gone after %v, the Greeting gone after %v (0: not gone)", policy, name, cmGone, greetingGone)
		}
		t.Logf("%s deletion: the ConfigMap was gone after %v, the Greeting after %v", policy, cmGone.Round(10*time.Millisecond), greetingGone.Round(10*time.Millisecond))
		if policy == metav1.DeletePropagationForeground && greetingGone < cmGone {
			t.Errorf("foreground deletion: the Greeting was gone before its ConfigMap: blockOwnerDeletion should make it wait")
		}
		if deletes := auditEvents(t, ex08GCUser, ns, func(e auditEvent) bool { return e.Verb == "delete" && e.ObjectRef.Name == "greeting-"+name }); len(deletes) == 0 {
			t.Errorf("no delete of greeting-%s by the garbage collector in the audit log", name)
		}
	}
	if deletes := auditEvents(t, ex08User, ns, func(e auditEvent) bool { return e.Verb == "delete" || e.Verb == "deletecollection" }); len(deletes) > 0 {
		t.Errorf("demo-controller deleted something itself:\n%s", strings.Join(eventLines(deletes), "\n"))
	}
	if creates := ex08Writes(t, ns, ""); len(creates) != 2 {
		t.Errorf("demo-controller's writes in %s (want the two creates): \n%s", ns, strings.Join(eventLines(creates), "\n"))
	}
	if gc.exited() {
		t.Errorf("kube-controller-manager exited")
	}
}

// Without update on greetings/finalizers, the API server refuses a
// ConfigMap with blockOwnerDeletion: the controller reports the server's
// words, after its few retries.
func TestExercise08BlockOwnerDeletionNeedsFinalizers(t *testing.T) {
	ns := "own-rbac"
	greetings := ex08Setup(t, ns)
	ctx := context.Background()
	var role *rbacv1.ClusterRole
	for _, obj := range manifestObjects(t) {
		if r, ok := obj.(*rbacv1.ClusterRole); ok {
			role = r.DeepCopy()
		}
	}
	role.ObjectMeta = metav1.ObjectMeta{Name: "ex08-no-finalizers"}
	role.Rules = slices.DeleteFunc(role.Rules, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.Resources, "greetings/finalizers") })
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := admin.CoreV1().ServiceAccounts("demo-controller").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "ex08-no-finalizers"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "ex08-no-finalizers"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "ex08-no-finalizers", Namespace: "demo-controller"}}}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	kubeconfig := serviceAccountKubeconfig(t, "demo-controller", "ex08-no-finalizers")
	// RBAC takes effect once the API server's informers have the binding.
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		_, err := kubeClient(t, kubeconfig).CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil, nil
	}); err != nil {
		t.Fatal("the ServiceAccount ex08-no-finalizers may not list ConfigMaps")
	}
	p := startController(t, kubeconfig, "--namespace="+ns)
	waitForLines(t, p, 0, "Greetings synced")
	ex08Create(t, greetings, ns, "blocked", "Ada", "")
	at := waitForLines(t, p, 0, `"Dropping greeting after retries"`)
	line := p.lines()[at-1]
	if !strings.Contains(line, "cannot set blockOwnerDeletion if an ownerReference refers to a resource you can't set finalizers on") {
		t.Errorf("without update on greetings/finalizers, demo-controller's create should be refused, in the API server's "+
			"words, cannot set blockOwnerDeletion...; it logged: %s", line)
	}
	t.Logf("without update on greetings/finalizers: %s", line[strings.Index(line, `"Dropping`):])
	// A refusal is no retry storm: the first try and maxRetries more.
	if creates := ex08Writes(t, ns, "greeting-blocked"); len(creates) > 6 {
		t.Errorf("demo-controller tried %d times to create greeting-blocked; want at most 6 (one, and 5 retries)", len(creates))
	}
}

// ex08SameRef compares two owner references, field by field.
func ex08SameRef(a, b metav1.OwnerReference) bool {
	return a.APIVersion == b.APIVersion && a.Kind == b.Kind && a.Name == b.Name && a.UID == b.UID &&
		ptr.Deref(a.Controller, false) == ptr.Deref(b.Controller, false) &&
		ptr.Deref(a.BlockOwnerDeletion, false) == ptr.Deref(b.BlockOwnerDeletion, false)
}
