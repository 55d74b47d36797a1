//go:build e2e && exercise

// The end-to-end test of exercise 6 (exercises/06-replicas/README.md):
// hack/check-exercises.sh copies it into e2e/ of a copy of the project with
// the solution applied, and runs it against the suite's kube-apiserver.

package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
)

// Replicas of the binary, each named as the manifest names a pod (POD_NAME),
// with the manifest's ServiceAccount and so its RBAC, and the Lease's
// default timings (15 s, renewed every 2 s, given up after 10 s). One leads.
// SIGKILLed, it leaves the Lease to expire: the next one takes over a lease
// duration later. Sent SIGTERM, the leader releases the Lease: a waiting
// replica takes over at its next try. Both takeovers are measured from the
// signal to the moment the API server holds the new holder; the Lease's
// changes are watched as they come.
func TestExercise06Failover(t *testing.T) {
	const ns, lease = "demo-controller", "demo-controller"
	const retry, jitter = 2 * time.Second, 1.2 // a standby tries every 2-4.4 s (client-go's JitterFactor)
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
	holders := watchHolders(t, ns, lease)
	start := func(name string) *process {
		t.Helper()
		t.Setenv("POD_NAME", name) // the process reads its environment as it starts
		return startController(t, kube, "--namespace=replicas")
	}

	a := start("replica-a")
	waitForLinesOf(t, a, 0, "Successfully acquired lease", "Cache synced", `"Pod found" pod="replicas/web"`)
	b := start("replica-b")
	atB := waitForLinesOf(t, b, 0, "Attempting to acquire leader lease", `"New leader" leader="replica-a"`)
	if got := holders.now(); got != "replica-a" {
		t.Fatalf("the Lease's holder is %q, want replica-a", got)
	}

	// SIGKILL: no release; replica-b waits for the Lease to expire.
	a.signal(syscall.SIGKILL)
	killed := time.Now()
	waitForLinesOf(t, b, atB, "Successfully acquired lease", "Cache synced", `"Pod found" pod="replicas/web"`)
	afterKill := holders.since(killed, "replica-b")

	// SIGTERM: replica-b stops its worker, releases the Lease and exits 0;
	// replica-c takes it at its next try.
	c := start("replica-c")
	atC := waitForLinesOf(t, c, 0, "Attempting to acquire leader lease", `"New leader" leader="replica-b"`)
	b.signal(syscall.SIGTERM)
	stopped := time.Now()
	if code := b.waitExit(lineTimeout); code != 0 {
		t.Errorf("replica-b: exit code %d after SIGTERM, want 0 (-1: still running after %v)", code, lineTimeout)
	}
	waitForLinesOf(t, b, atB, "Worker stopped")
	waitForLinesOf(t, c, atC, "Successfully acquired lease", "Cache synced", `"Pod found" pod="replicas/web"`)
	released := holders.since(stopped, "")
	afterTerm := holders.since(stopped, "replica-c")

	t.Logf("takeover after the leader's SIGKILL: %v; after its SIGTERM: %v (released %v after the signal, taken %v after the release)",
		afterKill.Round(10*time.Millisecond), afterTerm.Round(10*time.Millisecond), released.Round(10*time.Millisecond), (afterTerm - released).Round(10*time.Millisecond))
	t.Logf("the Lease's holders, as the API server wrote them: %s", holders)
	// The defaults: a 15 s lease duration; a standby tries every 2-4.4 s.
	if afterKill < 10*time.Second {
		t.Errorf("replica-b took over %v after replica-a was killed: before the Lease could expire", afterKill)
	}
	if released < 0 || released > afterTerm {
		t.Fatalf("replica-b did not release the Lease when it was stopped (SIGTERM): replica-c took it %v after the signal, "+
			"once it had expired. The Lease's holders: %s", afterTerm, holders)
	}
	// Margins: 2 s over what the design allows, for a busy machine.
	if limit := 2 * time.Second; released > limit {
		t.Errorf("replica-b released the Lease %v after its SIGTERM: it stops its controller, then releases, at once (want %v at most)", released, limit)
	}
	if limit := time.Duration(float64(retry)*(1+jitter)) + 2*time.Second; afterTerm-released > limit {
		t.Errorf("replica-c took the released Lease %v after the release: a standby takes it at its next try, every %v to %v (want %v at most)",
			afterTerm-released, retry, time.Duration(float64(retry)*(1+jitter)), limit)
	}
	for _, p := range []*process{a, b, c} {
		for _, line := range p.lines() {
			if l := strings.ToLower(line); strings.Contains(l, "forbidden") {
				t.Errorf("with the manifest's RBAC, a replica logged: %s", line)
			}
		}
	}
}

// waitForLinesOf is waitForLines, but fails at once, saying so, if the
// process has exited without the lines.
func waitForLinesOf(t *testing.T, p *process, from int, wants ...string) int {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, lineTimeout, true, func(context.Context) (bool, error) {
		return p.exited() || hasLines(p, from, wants), nil
	})
	if err == nil && !hasLines(p, from, wants) {
		t.Fatalf("%s exited (exit code %d) before it logged, in order after line %d:\n  %s\nlast lines:\n%s",
			p.name, p.cmd.ProcessState.ExitCode(), from, strings.Join(wants, "\n  "), p.tail(20))
	}
	return waitForLines(t, p, from, wants...)
}

func hasLines(p *process, from int, wants []string) bool {
	lines, i := p.lines(), from
	for _, want := range wants {
		for i < len(lines) && !strings.Contains(lines[i], want) {
			i++
		}
		if i == len(lines) {
			return false
		}
		i++
	}
	return true
}

// holders is the history of a Lease's holder, watched on the API server.
type holders struct {
	mu      sync.Mutex
	changes []holderChange
}

type holderChange struct {
	at     time.Time
	holder string
}

// watchHolders watches the Lease ns/name until the test ends, and notes
// each change of its holder and when the watch heard it.
func watchHolders(t *testing.T, ns, name string) *holders {
	h := &holders{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	opts := metav1.ListOptions{FieldSelector: "metadata.name=" + name}
	w, err := admin.CoordinationV1().Leases(ns).Watch(ctx, opts)
	if err != nil {
		t.Fatalf("watching the Lease %s/%s: %v", ns, name, err)
	}
	go func() {
		defer close(done)
		for {
			for e := range w.ResultChan() {
				l, ok := e.Object.(*coordinationv1.Lease)
				if !ok || e.Type == watch.Bookmark {
					continue
				}
				opts.ResourceVersion = l.ResourceVersion
				holder := ""
				if l.Spec.HolderIdentity != nil {
					holder = *l.Spec.HolderIdentity
				}
				h.mu.Lock()
				if n := len(h.changes); n == 0 || h.changes[n-1].holder != holder {
					h.changes = append(h.changes, holderChange{time.Now(), holder})
				}
				h.mu.Unlock()
			}
			if ctx.Err() != nil {
				return
			}
			if w, err = admin.CoordinationV1().Leases(ns).Watch(ctx, opts); err != nil { // the watch ended: go on from where it was
				return
			}
		}
	}()
	return h
}

// now returns the holder the watch heard last, waiting a little for it to
// catch up with the server.
func (h *holders) now() string {
	var holder string
	_ = wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		if n := len(h.changes); n > 0 {
			holder = h.changes[n-1].holder
		}
		return holder != "", nil
	})
	return holder
}

// since returns how long after t the Lease first had holder ("": released),
// waiting for the watch to hear it; -1 if it never did.
func (h *holders) since(t time.Time, holder string) time.Duration {
	d := time.Duration(-1)
	_ = wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, c := range h.changes {
			if c.holder == holder && !c.at.Before(t) {
				d = c.at.Sub(t)
				return true, nil
			}
		}
		return false, nil
	})
	return d
}

func (h *holders) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, c := range h.changes {
		out = append(out, fmt.Sprintf("%s %q", c.at.Format("15:04:05.000"), c.holder))
	}
	return strings.Join(out, ", ")
}
