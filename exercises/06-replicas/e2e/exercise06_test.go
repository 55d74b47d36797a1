//go:build e2e && exercise

// The end-to-end test of exercise 6 (exercises/06-replicas/README.md):
// hack/check-exercises.sh copies it into e2e/ of a copy of the project with
// the solution applied, and runs it against the suite's kube-apiserver.

package e2e

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Replicas of the binary, each named as the manifest names a pod (POD_NAME),
// with the manifest's ServiceAccount and so its RBAC, and the Lease's
// default timings. One leads. SIGKILLed, it leaves the Lease to expire: the
// other takes over a lease duration later. Sent SIGTERM, the leader releases
// the Lease: a waiting replica takes over at its next try. Both takeovers
// are measured, from the signal to the new leader's "Successfully acquired
// lease".
func TestExercise06Failover(t *testing.T) {
	const ns, lease = "demo-controller", "demo-controller"
	if out, err := manifestOnce(); err != nil {
		t.Fatalf("kubectl create -f demo-controller.yaml: %v\n%s", err, out)
	}
	as := "--as=system:serviceaccount:demo-controller:demo-controller"
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, lineTimeout, true, func(context.Context) (bool, error) {
		out, _ := kubectl(adminKube, "auth", "can-i", "create", "leases", "-n", ns, as)
		return strings.TrimSpace(out) == "yes", nil
	})
	if err != nil {
		t.Fatalf("the manifest's ServiceAccount may not create Leases in %s", ns)
	}
	// Exactly what leaderelection needs, on this Lease only.
	for _, check := range []struct{ verb, what, ns, want string }{
		{"get", "leases/" + lease, ns, "yes"}, {"update", "leases/" + lease, ns, "yes"}, {"create", "leases", ns, "yes"},
		{"update", "leases/other", ns, "no"}, {"delete", "leases/" + lease, ns, "no"}, {"list", "leases", ns, "no"},
		{"create", "leases", "default", "no"}, {"update", "leases/" + lease, "kube-system", "no"},
	} {
		out, _ := kubectl(adminKube, "auth", "can-i", check.verb, check.what, "-n", check.ns, as)
		if got := strings.TrimSpace(out); got != check.want {
			t.Errorf("kubectl auth can-i %s %s -n %s: %q, want %q", check.verb, check.what, check.ns, got, check.want)
		}
	}

	// The ServiceAccount's kubeconfig, with the namespace a pod of the
	// Deployment would have: the Lease goes there.
	kube := serviceAccountKubeconfig(t, ns, "demo-controller")
	if out, err := kubectl(kube, "config", "set-context", "--current", "--namespace="+ns); err != nil {
		t.Fatalf("kubectl config set-context: %v: %s", err, out)
	}
	createPod(t, "replicas", "web")
	start := func(name string) *process {
		t.Helper()
		t.Setenv("POD_NAME", name) // the process reads its environment as it starts
		return startController(t, kube, "--namespace=replicas")
	}
	holder := func() string {
		l, err := admin.CoordinationV1().Leases(ns).Get(context.Background(), lease, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the Lease %s/%s: %v", ns, lease, err)
		}
		if l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}

	a := start("replica-a")
	waitForLines(t, a, 0, "Successfully acquired lease", "Cache synced", `"Pod found" pod="replicas/web"`)
	b := start("replica-b")
	atB := waitForLines(t, b, 0, "Attempting to acquire leader lease", `"New leader" leader="replica-a"`)
	if got := holder(); got != "replica-a" {
		t.Fatalf("the Lease's holder is %q, want replica-a", got)
	}

	// SIGKILL: no release; replica-b waits for the Lease to expire.
	a.signal(syscall.SIGKILL)
	killed := time.Now()
	waitForLines(t, b, atB, "Successfully acquired lease")
	afterKill := time.Since(killed)
	waitForLines(t, b, atB, "Cache synced", `"Pod found" pod="replicas/web"`)
	if got := holder(); got != "replica-b" {
		t.Fatalf("after replica-a was killed the Lease's holder is %q, want replica-b", got)
	}

	// SIGTERM: replica-b stops its worker, releases the Lease and exits 0;
	// replica-c takes it at its next try.
	c := start("replica-c")
	atC := waitForLines(t, c, 0, "Attempting to acquire leader lease", `"New leader" leader="replica-b"`)
	b.signal(syscall.SIGTERM)
	stopped := time.Now()
	waitForLines(t, c, atC, "Successfully acquired lease")
	afterTerm := time.Since(stopped)
	if code := b.waitExit(5 * time.Second); code != 0 {
		t.Errorf("replica-b: exit code %d after SIGTERM, want 0 (-1: still running after 5 s)", code)
	}
	waitForLines(t, c, atC, "Cache synced", `"Pod found" pod="replicas/web"`)
	waitForLines(t, b, atB, "Worker stopped")

	t.Logf("takeover after the leader's SIGKILL: %v; after its SIGTERM: %v", afterKill.Round(10*time.Millisecond), afterTerm.Round(10*time.Millisecond))
	// The defaults: a 15 s lease duration, renewed every 2 s.
	if afterKill < 10*time.Second {
		t.Errorf("replica-b took over %v after replica-a was killed: before the Lease could expire", afterKill)
	}
	if afterTerm > 5*time.Second {
		t.Errorf("replica-c took over %v after replica-b's SIGTERM: a released Lease is taken at the next try (2-4.4 s)", afterTerm)
	}
	for _, p := range []*process{a, b, c} {
		for _, line := range p.lines() {
			if l := strings.ToLower(line); strings.Contains(l, "forbidden") {
				t.Errorf("with the manifest's RBAC, a replica logged: %s", line)
			}
		}
	}
}
