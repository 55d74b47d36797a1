//go:build e2e && exercise

// The end-to-end test of exercise 5 (exercises/05-writeback/README.md):
// hack/check-exercises.sh copies it into e2e/ of a copy of the project with
// the solution applied, and runs it against a real kube-apiserver, on the
// binary built with the solution. It counts the controller's writes with the
// API server's own request counter (its /metrics), so an apply that changes
// nothing is counted too.

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

const (
	ex05Key        = "demo-controller.example/phase"
	ex05Controller = "system:serviceaccount:demo-controller:demo-controller"
	ex05MaxRetries = 5 // maxRetries in controller.go
)

// The manifest's ServiceAccount may now patch pods (server-side apply is a
// patch), and still do nothing else to them.
func TestExercise05RBAC(t *testing.T) {
	if out, err := manifestOnce(); err != nil {
		t.Fatalf("kubectl create -f demo-controller.yaml: %v\n%s", err, out)
	}
	for _, check := range []struct{ verb, resource, subresource, want string }{
		{"patch", "pods", "", "yes"}, {"list", "pods", "", "yes"}, {"watch", "pods", "", "yes"},
		{"get", "pods", "", "no"}, {"update", "pods", "", "no"}, {"create", "pods", "", "no"}, {"delete", "pods", "", "no"},
		{"patch", "pods", "status", "no"}, {"patch", "configmaps", "", "no"},
	} {
		out, _ := kubectl(adminKube, "auth", "can-i", check.verb, check.resource, "--subresource="+check.subresource,
			"--all-namespaces", "--as="+ex05Controller)
		if got := strings.TrimSpace(out); got != check.want {
			t.Errorf("kubectl auth can-i %s %s (subresource %q) as the manifest's ServiceAccount: %q, want %q",
				check.verb, check.resource, check.subresource, got, check.want)
		}
	}
}

// Pods through their whole life cost one apply per phase, the controller's
// own writes coming back cost none, and a restarted controller writes
// nothing to pods that already say their phase. The controller runs as the
// manifest's ServiceAccount: its RBAC is enough.
func TestExercise05OneApplyPerPhase(t *testing.T) {
	if out, err := manifestOnce(); err != nil {
		t.Fatalf("kubectl create -f demo-controller.yaml: %v\n%s", err, out)
	}
	const ns, pods = "ex05-life", 5
	kube := serviceAccountKubeconfig(t, "demo-controller", "demo-controller")
	p := startController(t, kube, "--namespace="+ns)
	at := waitForLines(t, p, 0, "Cache synced")
	before := ex05Applies(t)
	for i := range pods {
		name := fmt.Sprintf("web-%d", i)
		pod := func(rest string) string { return fmt.Sprintf(`pod="%s/%s"%s`, ns, name, rest) }
		createPod(t, ns, name)
		at = waitForLines(t, p, at, `"Phase recorded" `+pod(` phase="Pending"`))
		bind(t, ns, name, "node-1")
		at = waitForLines(t, p, at, `"Pod scheduled" `+pod(""))
		setStatus(t, ns, name, corev1.PodRunning, true, 0)
		at = waitForLines(t, p, at, `"Phase recorded" `+pod(` phase="Running"`))
		setStatus(t, ns, name, corev1.PodRunning, false, 1)
		at = waitForLines(t, p, at, `"Container restarted" `+pod(""))
		deletePod(t, ns, name, nil) // bound and running, so it stays terminating
		at = waitForLines(t, p, at, `"Pod terminating" `+pod(""))
		setStatus(t, ns, name, corev1.PodSucceeded, false, 1) // its containers have stopped
		at = waitForLines(t, p, at, `"Phase recorded" `+pod(` phase="Succeeded"`))
		if got := ex05Annotation(t, ns, name); got != "Succeeded" {
			t.Fatalf("%s/%s is Succeeded and its annotation says %q", ns, name, got)
		}
		deletePod(t, ns, name, now)
		at = waitForLines(t, p, at, `"Pod deleted" `+pod(""))
	}
	applies := ex05Applies(t) - before
	t.Logf("%d pods through their lifecycle (created, scheduled, Running, restarted, terminating, Succeeded, deleted): %d applies", pods, applies)
	if applies != 3*pods {
		t.Errorf("%d pods, each through 3 phases, took %d applies, want %d: one per phase", pods, applies, 3*pods)
	}

	// A restart: the pods that are there already say their phase.
	for i := range 3 {
		createPod(t, ns, fmt.Sprintf("stays-%d", i))
	}
	for i := range 3 {
		at = waitForLines(t, p, at, fmt.Sprintf(`"Phase recorded" pod="%s/stays-%d" phase="Pending"`, ns, i))
	}
	p.stop()
	before = ex05Applies(t)
	p = startController(t, kube, "--namespace="+ns)
	for i := range 3 { // found in any order
		waitForLines(t, p, 0, "Cache synced", fmt.Sprintf(`"Pod found" pod="%s/stays-%d"`, ns, i))
	}
	createPod(t, ns, "after-restart") // queued after the found pods: once it is recorded, they are done
	waitForLines(t, p, 0, `"Phase recorded" pod="ex05-life/after-restart" phase="Pending"`)
	if applies := ex05Applies(t) - before; applies != 1 {
		t.Errorf("after a restart, with 3 pods found already saying their phase and one created, the controller applied %d times, want 1", applies)
	}
}

// Another field manager sets the annotation, as a person with kubectl
// would: the controller's apply is refused with a conflict, retried, and
// dropped, and the other manager's value stays.
func TestExercise05Conflict(t *testing.T) {
	const ns = "ex05-conflict"
	createPod(t, ns, "shared")
	p := startController(t, adminKube, "--namespace="+ns)
	at := waitForLines(t, p, 0, `"Phase recorded" pod="ex05-conflict/shared" phase="Pending"`)
	before := ex05Applies(t)
	if out, err := kubectl(adminKube, "annotate", "pod", "shared", "-n", ns, "--overwrite", "--field-manager=other", ex05Key+"=manual"); err != nil {
		t.Fatalf("kubectl annotate: %v: %s", err, out)
	}
	waitForLines(t, p, at, `"Dropping pod after retries" err="Apply failed with 1 conflict: conflict with \"other\"`)
	if got := ex05Annotation(t, ns, "shared"); got != "manual" {
		t.Errorf("after another field manager set the annotation to manual, it says %q", got)
	}
	if applies := ex05Applies(t) - before; applies != 1+ex05MaxRetries {
		t.Errorf("the change refused with a conflict took %d applies, want 1 + maxRetries = %d", applies, 1+ex05MaxRetries)
	}
	for _, line := range p.lines() {
		if strings.Contains(line, "Dropping pod after retries") {
			t.Logf("the controller's log: %s", line[strings.Index(line, "]")+2:])
		}
	}
}

// The pod is deleted (or deleted and created again under its name) while
// the controller's apply is in flight: a validating webhook that the test
// serves deletes it when the apply reaches admission. The apply is refused,
// the handler takes that as "gone", nothing is retried, and no pod comes back.
func TestExercise05PodGoneDuringApply(t *testing.T) {
	const ns = "ex05-race"
	hook := ex05StartWebhook(t, ns)
	p := startController(t, adminKube, "--namespace="+ns, "-v=4")
	at := waitForLines(t, p, 0, "Cache synced")

	t.Run("deleted", func(t *testing.T) {
		createPod(t, ns, "gone")
		at = waitForLines(t, p, at, `"Phase recorded" pod="ex05-race/gone" phase="Pending"`)
		before := ex05Applies(t)
		hook.arm("gone", func() error {
			return admin.CoreV1().Pods(ns).Delete(context.Background(), "gone", metav1.DeleteOptions{GracePeriodSeconds: now})
		})
		setStatus(t, ns, "gone", corev1.PodRunning, true, 0)
		at = waitForLines(t, p, at, `"Pod gone before its phase was recorded" pod="ex05-race/gone"`, `"Pod deleted" pod="ex05-race/gone"`)
		hook.wasFired(t, "gone")
		if _, err := admin.CoreV1().Pods(ns).Get(context.Background(), "gone", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("gone was deleted during the controller's apply, and is there again (get: %v)", err)
		}
		if applies := ex05Applies(t) - before; applies != 1 {
			t.Errorf("the apply that met the deleted pod was made %d times, want once", applies)
		}
		t.Logf("the API server's answer: %s", ex05Answer(p, "gone"))
	})

	t.Run("deleted and created again", func(t *testing.T) {
		createPod(t, ns, "again")
		at = waitForLines(t, p, at, `"Phase recorded" pod="ex05-race/again" phase="Pending"`)
		before := ex05Applies(t)
		hook.arm("again", func() error {
			pods := admin.CoreV1().Pods(ns)
			if err := pods.Delete(context.Background(), "again", metav1.DeleteOptions{GracePeriodSeconds: now}); err != nil {
				return err
			}
			_, err := pods.Create(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "again"},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}}}, metav1.CreateOptions{})
			return err
		})
		setStatus(t, ns, "again", corev1.PodRunning, true, 0)
		at = waitForLines(t, p, at, `"Pod gone before its phase was recorded" pod="ex05-race/again"`,
			`"Pod deleted" pod="ex05-race/again"`, `"Pod created" pod="ex05-race/again"`, `"Phase recorded" pod="ex05-race/again" phase="Pending"`)
		hook.wasFired(t, "again")
		if got := ex05Annotation(t, ns, "again"); got != "Pending" {
			t.Errorf("the new pod again (Pending) says %q", got)
		}
		if applies := ex05Applies(t) - before; applies != 2 {
			t.Errorf("the old pod's apply and the new pod's took %d applies, want 2", applies)
		}
		t.Logf("the API server's answer: %s", ex05Answer(p, "again"))
	})

	for _, line := range p.lines() {
		if strings.Contains(line, "Dropping pod after retries") {
			t.Errorf("a pod gone during an apply made the controller give up after retries: %s", line)
		}
	}
}

// ex05Answer returns the error the controller's V(4) line quotes for a pod.
func ex05Answer(p *process, name string) string {
	for _, line := range p.lines() {
		if strings.Contains(line, "Pod gone before its phase was recorded") && strings.Contains(line, "/"+name+`"`) {
			if i := strings.Index(line, "err="); i >= 0 {
				return line[i:]
			}
		}
	}
	return "(none logged)"
}

// ex05Applies returns how many applies to pods the API server has served so
// far, whatever their answer, as its request counter says.
func ex05Applies(t *testing.T) int {
	t.Helper()
	data, err := admin.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatalf("reading the API server's metrics: %v", err)
	}
	total := 0
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "apiserver_request_total{") && strings.Contains(line, `resource="pods"`) &&
			strings.Contains(line, `subresource=""`) && strings.Contains(line, `verb="APPLY"`) {
			n, err := strconv.Atoi(line[strings.LastIndex(line, " ")+1:])
			if err != nil {
				t.Fatalf("reading the API server's metrics: %q: %v", line, err)
			}
			total += n
		}
	}
	return total
}

func ex05Annotation(t *testing.T, ns, name string) string {
	t.Helper()
	pod, err := admin.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pod.Annotations[ex05Key]
}

// ex05Webhook is a validating admission webhook for updates of pods in one
// namespace. Armed for a pod, it runs a function when an update of that pod
// reaches admission, before it allows it: the API server then retries the
// write on the pod as that function left it.
type ex05Webhook struct {
	mu    sync.Mutex
	armed map[string]func() error
	fired map[string]error // what each function returned
}

func (h *ex05Webhook) arm(name string, f func() error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.armed[name] = f
}

func (h *ex05Webhook) wasFired(t *testing.T, name string) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	if err, fired := h.fired[name]; !fired {
		t.Fatalf("the controller's apply to %s never reached the webhook", name)
	} else if err != nil {
		t.Fatalf("the webhook failed to change %s during the controller's apply: %v", name, err)
	}
}

func (h *ex05Webhook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	review := readReview(w, r)
	if review == nil {
		return
	}
	h.mu.Lock()
	f := h.armed[review.Request.Name]
	delete(h.armed, review.Request.Name)
	h.mu.Unlock()
	if f != nil {
		err := f()
		h.mu.Lock()
		h.fired[review.Request.Name] = err
		h.mu.Unlock()
	}
	allowReview(w, review)
}

// ex05StartWebhook serves the webhook over TLS on loopback, registers it for
// updates of pods in namespace ns, and waits until the API server calls it.
func ex05StartWebhook(t *testing.T, ns string) *ex05Webhook {
	t.Helper()
	hook := &ex05Webhook{armed: map[string]func() error{}, fired: map[string]error{}}
	serveWebhook(t, hook, "ex05", "race.exercise05.example", ns, admissionregistrationv1.RuleWithOperations{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
	})

	// The API server picks the configuration up within a moment: probe it
	// with updates of a pod of the namespace until the webhook sees one.
	createPod(t, ns, "probe")
	hook.arm("probe", func() error { return nil })
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		patch := []byte(fmt.Sprintf(`{"metadata":{"labels":{"probe":"%d"}}}`, time.Now().UnixNano()))
		if _, err := admin.CoreV1().Pods(ns).Patch(ctx, "probe", "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
			return false, err
		}
		hook.mu.Lock()
		defer hook.mu.Unlock()
		_, probed := hook.fired["probe"]
		return probed, nil
	})
	if err != nil {
		t.Fatalf("the API server never called the webhook: %v", err)
	}
	deletePod(t, ns, "probe", now)
	return hook
}
