//go:build exercise

// The test of exercise 6 (exercises/06-replicas/README.md). It is not part of
// the project's tests: copy it into the project's root and run it with the
// exercise tag, as the exercise's README says.

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
)

const (
	leaseNamespace = "team-a" // the kubeconfig context's namespace: where the Lease goes
	watched        = "shop"   // the namespace whose pods the replicas watch (--namespace)
	leaseFor       = 3 * time.Second
	renewFor       = leaseFor * 2 / 3  // how long a leader tries to renew before it gives up: 2 s
	retryEvery     = leaseFor * 2 / 15 // how often everyone tries: 400 ms
)

// Replicas of run, in one process, against one small API server (leaseAPI,
// below) that holds the pods and the Lease and notes who asks for what. Each
// replica has its own POD_NAME, credentials and log; the logs and the
// Lease's changes of holder go, in order, into one journal. One replica at a
// time works; one that loses its Lease stops its controller at once and
// returns an error; one stopped as by SIGTERM stops its controller, then
// releases the Lease, and the next takes over at once.
//
// Both times the Lease changes hands, the replica that has it is in the
// middle of a handler call (the test holds its log line), so that "stops
// its controller, then returns" and "stops its controller, then releases"
// are seen in that order or not at all, whatever the machine's speed.
func TestExercise06Replicas(t *testing.T) {
	if apart(t) {
		return
	}
	t.Setenv("LEASE_DURATION", leaseFor.String()) // renewed every 0.4 s, given up after 2 s without a renewal
	api := newLeaseAPI(t, "web-1", "web-2")

	// replica-a starts alone: it takes the Lease, and works.
	a := api.start(t, "replica-a")
	api.waitFor(t, "replica-a to take the Lease, or to report a pod", func() bool { return api.holder() != "" || a.logged(`"Pod found"`) })
	_ = wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 2*time.Second, true,
		func(context.Context) (bool, error) { return api.holder() != "", nil })
	api.checkLease(t, a)
	api.waitFor(t, `replica-a to report "Pod found" pod="shop/web-1"`, func() bool { return a.logged(`"Pod found" pod="shop/web-1"`) })
	// (OnNewLeader is called on a goroutine of its own, at once.)
	api.waitForWithin(t, 3*time.Second, func() string { return "waited 3 s for " + newLeaderLine(a, a) },
		func() bool { return a.logged(`"New leader" leader="replica-a"`) })
	api.checkSample(t, a)

	// replica-b starts: it waits for the Lease, and does nothing else.
	b := api.start(t, "replica-b")
	api.waitForTries(t, b, 3)
	api.checkIdle(t, b, a)
	api.waitFor(t, newLeaderLine(b, a), func() bool { return b.logged(`"New leader" leader="replica-a"`) })
	api.addPod("during-a")
	api.waitFor(t, `replica-a to report "Pod created" pod="shop/during-a"`, func() bool { return a.logged(`"Pod created" pod="shop/during-a"`) })
	api.checkIdle(t, b, a)

	// replica-a is in a handler call, reporting slow-a, when it is cut off
	// from the Lease (not from the pods). It cannot renew: its elector gives
	// up after 2 s, and it must stop its controller (once that call returns),
	// then return an error.
	busy := api.journal.hold(t, "replica-a", `"Pod created" pod="shop/slow-a"`)
	api.addPod("slow-a")
	api.waitFor(t, `replica-a to report "Pod created" pod="shop/slow-a"`, busy.reached)
	api.cutOff("replica-a", "while its handler reports shop/slow-a")
	lost := time.Now()
	a.mayEnd.Store(true)
	api.waitFor(t, fmt.Sprintf(`replica-a's elector to give up the Lease it cannot renew (client-go logs "Failed to renew lease" %v or so after the last renewal)`, renewFor),
		func() bool { return a.logged(`"Failed to renew lease"`) || a.returned() })
	if !a.returned() {
		// Proving a non-event: a run that does not wait for its controller
		// returns within a few milliseconds of that line; 1 s is ample.
		a.waitReturn(time.Second)
	}
	if a.returned() {
		api.fatalf(t, "replica-a lost the Lease and its run returned %s at once, while its controller was still at work (its handler had not returned "+
			"from reporting shop/slow-a): run must return only once the controller has stopped, and with an error. The elector's Run (and RunOrDie) "+
			"returns as soon as the Lease is lost, without waiting for the function OnStartedLeading started: wait for runController to return (Hints 3 and 4)",
			describe(a.err))
	}
	busy.release()
	api.waitForWithin(t, 3*time.Second, func() string {
		return `replica-a lost the Lease (its elector logged "Failed to renew lease") and its controller went on working: its worker did not ` +
			`log "Worker stopped" within 3 s of its handler call returning. When the Lease is lost, the controller must stop at once, ` +
			`before another replica may take over: run it on the context OnStartedLeading is given, which ends then, not on run's (Hint 2)`
	}, func() bool { return a.logged(`"Worker stopped"`) })
	if !a.waitReturn(3 * time.Second) {
		api.fatalf(t, "replica-a lost the Lease, its controller stopped, and its run did not return within 3 s: on a lost Lease, run must return an error "+
			"(main then exits 1, and the kubelet restarts the container, which waits as a new replica), not wait or try again")
	}
	if a.err == nil {
		api.fatalf(t, "replica-a lost the Lease and its run returned nil: it must return an error, such as \"lost the Lease team-a/demo-controller: "+
			"could not renew it in time, so another replica may lead now\", so that main exits 1 and the kubelet restarts the container as a new standby")
	}
	if stoppedAt := a.index(`"Worker stopped"`); stoppedAt > a.returnedAt {
		api.fatalf(t, "replica-a's run returned (%s) before its controller stopped: return only once runController has returned", describe(a.err))
	}

	// replica-b takes over once the Lease has expired: 3 s after it last
	// saw replica-a renew it.
	api.waitFor(t, fmt.Sprintf(`replica-b to take over, and report "Pod found" pod="shop/during-a" (with LEASE_DURATION=%v, `+
		`a Lease not renewed for that long may be taken)`, leaseFor), func() bool { return b.logged(`"Pod found" pod="shop/during-a"`) })
	t.Logf("replica-b took over %v after replica-a was cut off from the Lease (lease duration %v)%s", time.Since(lost).Round(10*time.Millisecond), leaseFor, api.heldNote())
	api.addPod("during-b")
	api.waitFor(t, `replica-b to report "Pod created" pod="shop/during-b"`, func() bool { return b.logged(`"Pod created" pod="shop/during-b"`) })
	if a.logged(`"Pod created" pod="shop/during-b"`) {
		api.fatalf(t, "replica-a reported a pod created after it had lost the Lease: a replica that loses its Lease must stop working at once")
	}

	// replica-c waits. replica-b, in a handler call, is stopped as SIGTERM
	// stops it: until that call returns, it must hold the Lease (its elector
	// renews it) and its run must not return; then it releases the Lease,
	// and run returns nil.
	c := api.start(t, "replica-c")
	api.waitForTries(t, c, 2)
	api.checkIdle(t, c, b)
	api.waitFor(t, newLeaderLine(c, b), func() bool { return c.logged(`"New leader" leader="replica-b"`) })
	busy = api.journal.hold(t, "replica-b", `"Pod created" pod="shop/slow-b"`)
	api.addPod("slow-b")
	api.waitFor(t, `replica-b to report "Pod created" pod="shop/slow-b"`, busy.reached)
	renewals := api.renewals("replica-b")
	b.mayEnd.Store(true)
	api.journal.add("test", "replica-b stopped as by SIGTERM, while its handler reports shop/slow-b")
	b.cancel()
	api.waitFor(t, "replica-b, stopped while its handler reports shop/slow-b, to renew the Lease twice more, release it, or return",
		func() bool {
			return api.renewals("replica-b") >= renewals+2 || api.releasedBy("replica-b") != nil || b.returned()
		})
	switch {
	case api.releasedBy("replica-b") != nil:
		api.fatalf(t, "replica-b released the Lease as soon as it was stopped (as by SIGTERM), while its controller was still at work (its handler "+
			"had not returned from reporting shop/slow-b): the next leader may then start while this one still works. Stop the controller, "+
			"then release: with ReleaseOnCancel, the elector releases the moment its own context ends, so that context must not be run's, "+
			"and must end only once runController has returned (Hint 4)")
	case b.returned():
		api.fatalf(t, "replica-b's run returned %s as soon as it was stopped (as by SIGTERM), while its controller was still at work (its handler "+
			"had not returned from reporting shop/slow-b): run must return only once the controller has stopped, and the Lease has been released",
			describe(b.err))
	}
	busy.release()
	if !b.waitReturn(5 * time.Second) {
		api.fatalf(t, "replica-b's run did not return within 5 s of its context ending (as on SIGTERM) and its handler returning: the leader "+
			"election must end with it (a context that is never cancelled keeps it running, and the Lease held)")
	}
	if b.err != nil {
		api.fatalf(t, "replica-b's run returned %q when its context ended (as on SIGTERM): want nil, a clean stop", b.err)
	}
	release := api.releasedBy("replica-b")
	if release == nil {
		api.fatalf(t, "replica-b stopped (as on SIGTERM) and left the Lease held in its name: it must release it (ReleaseOnCancel), "+
			"or the next replica waits out the whole lease duration")
	}
	if stoppedAt := b.index(`"Worker stopped"`); stoppedAt < 0 || stoppedAt > release.index {
		api.fatalf(t, "replica-b released the Lease before its controller stopped: release it only once runController has returned (Hint 4)")
	}
	api.waitFor(t, `replica-c to take over, and report "Pod found" pod="shop/slow-b"`, func() bool { return c.logged(`"Pod found" pod="shop/slow-b"`) })
	took := api.takenAfter("replica-c", release)
	t.Logf("replica-c took over %v after replica-b released the Lease (retry period %v)", took.Round(10*time.Millisecond), retryEvery)
	if took > renewFor {
		api.fatalf(t, "replica-c took %v to take over a Lease that replica-b had released: it should at its next try, every %v or so", took, retryEvery)
	}
	api.checkOneAtATime(t)
}

// A process with no POD_NAME runs alone, as today: it works at once, and
// asks for no Lease.
func TestExercise06Alone(t *testing.T) {
	if apart(t) {
		return
	}
	t.Setenv("LEASE_DURATION", leaseFor.String())
	t.Setenv("POD_NAME", "")
	os.Unsetenv("POD_NAME") // not even empty (t.Setenv puts it back)
	api := newLeaseAPI(t, "web-1")
	r := api.startAs(t, "laptop", false)
	api.waitFor(t, `run with no POD_NAME to report "Pod found" pod="shop/web-1", or to ask for a Lease`,
		func() bool { return r.logged(`"Pod found" pod="shop/web-1"`) || api.triesOf("laptop") > 0 })
	if api.triesOf("laptop") > 0 {
		api.fatalf(t, "run with no POD_NAME asked the API server for a Lease%s: a process with no POD_NAME must run alone, as today, "+
			"and take no part in an election (make run on a laptop does not change). Elect only when POD_NAME is set", api.heldAs("laptop"))
	}
}

// LEASE_DURATION is a Go duration in whole seconds, 2s or more; anything
// else stops run at once, with an error that names it, before it elects.
func TestExercise06LeaseDuration(t *testing.T) {
	if apart(t) {
		return
	}
	for _, c := range []struct{ value, why string }{
		{"3", "a bare number is not a duration (time.ParseDuration refuses it): write 3s"},
		{"2500ms", "a Lease counts in whole seconds (spec.leaseDurationSeconds)"},
		{"1s", "it must be 2s or more"},
	} {
		t.Run(c.value, func(t *testing.T) {
			t.Setenv("LEASE_DURATION", c.value)
			api := newLeaseAPI(t, "web-1")
			r := api.start(t, "replica-a")
			r.mayEnd.Store(true)
			api.waitFor(t, fmt.Sprintf("run with LEASE_DURATION=%s to return an error, to take the Lease, or to start the controller", c.value),
				func() bool { return r.returned() || api.holder() != "" || r.logged(`"Starting demo-controller"`) })
			switch {
			case !r.returned():
				api.fatalf(t, "run went on with LEASE_DURATION=%s (%s): %s. The task: LEASE_DURATION is whole seconds, 2s or more, "+
					"and any other value makes run return an error at once, naming LEASE_DURATION", c.value, api.leaseSeconds(), c.why)
			case r.err == nil:
				api.fatalf(t, "run with LEASE_DURATION=%s returned nil: want an error that names LEASE_DURATION (%s)", c.value, c.why)
			case !strings.Contains(r.err.Error(), "LEASE_DURATION"):
				api.fatalf(t, "run with LEASE_DURATION=%s returned %q: the error must name LEASE_DURATION, so that whoever set it knows what to fix (%s)",
					c.value, r.err, c.why)
			}
		})
	}
}

func newLeaderLine(r, leader *replica) string {
	return fmt.Sprintf(`%s to log "New leader" leader=%q: each replica says who leads (the task), from the elector's OnNewLeader, `+
		`with the logger of run's ctx`, r.name, leader.name)
}

// checkLease fails unless the only Lease is demo-controller, in the
// kubeconfig context's namespace, held by r under the name POD_NAME gave it,
// for LEASE_DURATION.
func (s *leaseAPI) checkLease(t *testing.T, r *replica) {
	t.Helper()
	s.mu.Lock()
	var where []string
	for key := range s.leases {
		where = append(where, key)
	}
	want := leaseNamespace + "/demo-controller"
	var lease *coordinationv1.Lease
	if len(where) == 1 && where[0] == want {
		lease = s.leases[want].DeepCopy()
	}
	s.mu.Unlock()
	switch {
	case len(where) == 0:
		s.fatalf(t, "%s runs the controller and took no Lease: with POD_NAME set, run must first win a leader election "+
			"(client-go's leaderelection, with a resourcelock.LeaseLock), and run the controller only while it leads", r.name)
	case lease == nil:
		s.fatalf(t, "the replicas use the Lease %s; want %s: the Lease demo-controller, in the namespace kubectl would use "+
			"(here the kubeconfig context's, %s; in a pod, the pod's own), not the namespace of the pods watched (%s)",
			strings.Join(where, ", "), want, leaseNamespace, watched)
	}
	for _, e := range s.journal.all() {
		if e.who == "api" {
			break // the Lease was taken
		}
		if e.who == r.name && (strings.HasPrefix(e.line, `"Pod `) || strings.HasPrefix(e.line, `"Starting demo-controller"`)) {
			s.fatalf(t, "%s ran the controller before it held the Lease: a replica must run it only once it leads (in OnStartedLeading)", r.name)
		}
	}
	if holder := ptrValue(lease.Spec.HolderIdentity); holder != r.name {
		s.fatalf(t, "the Lease's holder is %q; want %q, the name POD_NAME gives the replica (in a pod, its own name): "+
			"the replicas' identities must differ, and say which pod leads", holder, r.name)
	}
	if got := ptrValue(lease.Spec.LeaseDurationSeconds); got != int32(leaseFor/time.Second) {
		s.fatalf(t, "%s wrote the Lease with leaseDurationSeconds: %d; the test sets LEASE_DURATION=%v, so want %d: read LEASE_DURATION "+
			"(a Go duration, such as 15s) and give it to the elector as LeaseDuration, with RenewDeadline 2/3 and RetryPeriod 2/15 of it",
			r.name, got, leaseFor, leaseFor/time.Second)
	}
}

// checkSample fails unless r's log has the messages of the task's sample
// of a leader's log (README.md), in that order; "New leader" may come
// anywhere (client-go calls OnNewLeader on a goroutine of its own).
func (s *leaseAPI) checkSample(t *testing.T, r *replica) {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join("exercises", "06-replicas", "README.md"))
	if err != nil {
		t.Logf("the task's sample log is not checked: %v", err)
		return
	}
	_, after, _ := strings.Cut(string(readme), "<!-- a leader's log -->")
	_, block, _ := strings.Cut(after, "```\n")
	block, _, _ = strings.Cut(block, "```")
	message := regexp.MustCompile(`^"[^"]*"`)
	var lines []string
	for _, e := range s.journal.all() {
		if e.who == r.name {
			lines = append(lines, e.line)
		}
	}
	i := 0
	for _, want := range strings.Split(strings.TrimSpace(block), "\n") {
		m := message.FindString(want)
		found := false
		if m == `"New leader"` {
			found = slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(l, m) })
		} else {
			for ; i < len(lines) && !found; i++ {
				found = strings.HasPrefix(lines[i], m)
			}
		}
		if m == "" || !found {
			s.fatalf(t, "%s's log does not follow the task's sample of a leader's log (README.md): no line %s where the sample has it. The sample:\n%s\n%s's log:\n%s",
				r.name, m, strings.TrimSpace(block), r.name, r.tail(12))
		}
	}
}

// checkIdle fails if r, which waits for the Lease that leader holds, works
// or watches pods; or if it writes the Lease under leader's name.
func (s *leaseAPI) checkIdle(t *testing.T, r, leader *replica) {
	t.Helper()
	s.mu.Lock()
	same := s.wrote[r.name] != "" && s.wrote[r.name] == s.wrote[leader.name]
	informer := s.informers[r.name]
	s.mu.Unlock()
	switch {
	case same:
		s.fatalf(t, "%s and %s both hold the Lease as %q: each replica must take part under its own name, its POD_NAME", r.name, leader.name, s.wrote[r.name])
	case r.logged(`"Pod `), r.logged(`"Starting demo-controller"`):
		s.fatalf(t, "%s runs the controller while %s holds the Lease: a replica must run it only once it leads (in OnStartedLeading)", r.name, leader.name)
	case informer:
		s.fatalf(t, "%s lists and watches pods as an informer does while %s holds the Lease: the task is that only the leader runs "+
			"the controller, its informer included (in OnStartedLeading): a standby holds no cache and no watch", r.name, leader.name)
	}
}

// checkOneAtATime fails unless the replicas' times at work, each from its
// "Cache synced" to its "Worker stopped", never overlap.
func (s *leaseAPI) checkOneAtATime(t *testing.T) {
	t.Helper()
	working := ""
	for _, e := range s.journal.all() {
		switch {
		case strings.HasPrefix(e.line, `"Cache synced`) && working != "":
			s.fatalf(t, "%s started working while %s still worked", e.who, working)
		case strings.HasPrefix(e.line, `"Cache synced`):
			working = e.who
		case strings.HasPrefix(e.line, `"Worker stopped"`) && e.who == working:
			working = ""
		case (strings.HasPrefix(e.line, `"Pod `) || strings.HasPrefix(e.line, `"Container `)) && e.who != working:
			s.fatalf(t, "%s reported a pod while %s was the one at work", e.who, working)
		}
	}
}

// The manifest runs two replicas, names each after its pod, updates them
// one at a time with a standby always there, and lets them use the Lease
// demo-controller in their namespace, and nothing more.
func TestExercise06Manifest(t *testing.T) {
	data, err := os.ReadFile("demo-controller.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var m manifest
	for _, doc := range strings.Split(string(data), "\n---\n") {
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
		if err != nil {
			t.Fatalf("demo-controller.yaml: %v", err)
		}
		switch o := obj.(type) {
		case *appsv1.Deployment:
			m.deployment = o
		case *rbacv1.Role:
			m.roles = append(m.roles, o)
		case *rbacv1.RoleBinding:
			m.roleBindings = append(m.roleBindings, o)
		case *rbacv1.ClusterRole:
			m.clusterRoles = append(m.clusterRoles, o)
		case *rbacv1.ClusterRoleBinding:
			m.clusterRoleBindings = append(m.clusterRoleBindings, o)
		}
	}
	if m.deployment == nil {
		t.Fatal("demo-controller.yaml has no Deployment")
	}
	ns, sa := m.deployment.Namespace, m.deployment.Spec.Template.Spec.ServiceAccountName
	if r := m.deployment.Spec.Replicas; r == nil || *r != 2 {
		t.Errorf("the Deployment has replicas: %d; want 2: one leads, one waits to take over", ptrValue(r))
	}
	if s := m.deployment.Spec.Strategy; s.Type != appsv1.RollingUpdateDeploymentStrategyType || s.RollingUpdate == nil ||
		s.RollingUpdate.MaxUnavailable == nil || s.RollingUpdate.MaxUnavailable.IntValue() != 0 {
		t.Errorf("the Deployment's update strategy is %s: want a RollingUpdate with maxUnavailable: 0, so that a new pod "+
			"is started (and waits for the Lease) before an old one is stopped (and releases it)", s.Type)
	}
	named := false
	for _, e := range m.deployment.Spec.Template.Spec.Containers[0].Env {
		named = named || e.Name == "POD_NAME" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name"
	}
	if !named {
		t.Errorf("the container has no env POD_NAME from the pod's name (valueFrom.fieldRef.fieldPath: metadata.name, the downward API)")
	}

	// What leaderelection does with a Lease: get, create the first time,
	// update to renew, take over and release. On demo-controller, in the
	// replicas' namespace only: a Role, bound there by a RoleBinding.
	cluster := false // a ClusterRole grants leases
	for _, g := range m.grants(ns, sa) {
		if g.cluster && covers(g.rule, "leases") {
			cluster = true
			limit := ""
			if len(g.rule.ResourceNames) > 0 {
				limit = fmt.Sprintf(" (its resourceNames %v limit which Leases, not in which namespaces)", g.rule.ResourceNames)
			}
			t.Errorf("the ClusterRole %s, bound by the ClusterRoleBinding %s, grants %v on leases in every namespace%s: leader election "+
				"needs them in %s only, so not a ClusterRole: grant them with a Role in %s and a RoleBinding to the ServiceAccount %s",
				g.role, g.binding, g.rule.Verbs, limit, ns, ns, sa)
		}
	}
	if cluster {
		return
	}
	for _, want := range []struct{ verb, name string }{{"get", "demo-controller"}, {"create", ""}, {"update", "demo-controller"}} {
		if m.allowed(ns, sa, want.verb, want.name) != nil {
			continue
		}
		what := "the Lease demo-controller"
		if want.name == "" {
			what = "a Lease"
		}
		why := fmt.Sprintf("no Role in %s, bound to the ServiceAccount %s by a RoleBinding there, grants %s on leases (API group coordination.k8s.io)", ns, sa, want.verb)
		for _, r := range m.roles {
			for _, rule := range r.Rules {
				switch {
				case want.verb == "create" && covers(rule, "leases") && slices.Contains(rule.Verbs, "create") && len(rule.ResourceNames) > 0:
					why = fmt.Sprintf("the Role %s grants create on leases with resourceNames %v, and RBAC checks a create before the object "+
						"has a name, so that rule never allows one: put create in a rule of its own, without resourceNames (Hint 5)", r.Name, rule.ResourceNames)
				case !grants(rule, want.verb, want.name):
				case r.Namespace != ns:
					why += fmt.Sprintf(" (the Role %s that grants it is in the namespace %q: a Role grants only in its own)", r.Name, r.Namespace)
				default:
					why += fmt.Sprintf(" (the Role %s grants it, but no RoleBinding in %s binds it to the ServiceAccount %s)", r.Name, ns, sa)
				}
			}
		}
		t.Errorf("the ServiceAccount %s may not %s %s in %s, which leader election does: %s", sa, want.verb, what, ns, why)
	}
	for _, verb := range []string{"get", "update"} {
		if g := m.allowed(ns, sa, verb, "another-lease"); g != nil {
			t.Errorf("the %s %s grants %s on every Lease in %s: limit get and update to the one the replicas use, "+
				"with resourceNames: [demo-controller]", g.kind(), g.role, verb, ns)
		}
	}
	for _, verb := range []string{"delete", "list", "watch", "patch", "deletecollection"} {
		if g := m.allowed(ns, sa, verb, "demo-controller"); g != nil {
			t.Errorf("the %s %s grants %s on leases, which leader election never does: grant get, create and update only", g.kind(), g.role, verb)
		}
	}
}

// manifest is what demo-controller.yaml holds, for the RBAC it grants.
type manifest struct {
	deployment          *appsv1.Deployment
	roles               []*rbacv1.Role
	roleBindings        []*rbacv1.RoleBinding
	clusterRoles        []*rbacv1.ClusterRole
	clusterRoleBindings []*rbacv1.ClusterRoleBinding
}

// grant is one rule the ServiceAccount has, and how it has it.
type grant struct {
	binding, role string
	cluster       bool // from a ClusterRoleBinding: in every namespace
	rule          rbacv1.PolicyRule
}

func (g *grant) kind() string {
	if g.cluster {
		return "ClusterRole"
	}
	return "Role"
}

// grants returns the rules bound to the ServiceAccount sa of ns in every
// namespace (cluster) and in ns (by RoleBindings there).
func (m *manifest) grants(ns, sa string) []grant {
	bound := func(subjects []rbacv1.Subject) bool {
		return slices.ContainsFunc(subjects, func(s rbacv1.Subject) bool { return s.Kind == "ServiceAccount" && s.Name == sa && s.Namespace == ns })
	}
	clusterRules := func(name string) []rbacv1.PolicyRule {
		for _, cr := range m.clusterRoles {
			if cr.Name == name {
				return cr.Rules
			}
		}
		return nil
	}
	var out []grant
	for _, b := range m.clusterRoleBindings {
		if bound(b.Subjects) && b.RoleRef.Kind == "ClusterRole" {
			for _, rule := range clusterRules(b.RoleRef.Name) {
				out = append(out, grant{b.Name, b.RoleRef.Name, true, rule})
			}
		}
	}
	for _, b := range m.roleBindings {
		if !bound(b.Subjects) || b.Namespace != ns {
			continue
		}
		var rules []rbacv1.PolicyRule
		switch b.RoleRef.Kind {
		case "ClusterRole": // bound by a RoleBinding: in its namespace only
			rules = clusterRules(b.RoleRef.Name)
		case "Role":
			for _, r := range m.roles {
				if r.Name == b.RoleRef.Name && r.Namespace == ns {
					rules = r.Rules
				}
			}
		}
		for _, rule := range rules {
			out = append(out, grant{b.Name, b.RoleRef.Name, false, rule})
		}
	}
	return out
}

// allowed returns a grant that lets sa do verb on the Lease name in ns (a
// create has no name yet), or nil.
func (m *manifest) allowed(ns, sa, verb, name string) *grant {
	for _, g := range m.grants(ns, sa) {
		if grants(g.rule, verb, name) {
			return &g
		}
	}
	return nil
}

// covers reports whether rule is about resource in coordination.k8s.io.
func covers(rule rbacv1.PolicyRule, resource string) bool {
	has := func(list []string, want string) bool {
		return slices.Contains(list, want) || slices.Contains(list, "*")
	}
	return has(rule.APIGroups, "coordination.k8s.io") && has(rule.Resources, resource)
}

// grants reports whether rule allows verb on the Lease name ("" for a
// create, which RBAC checks before the object has a name).
func grants(rule rbacv1.PolicyRule, verb, name string) bool {
	return covers(rule, "leases") && (slices.Contains(rule.Verbs, verb) || slices.Contains(rule.Verbs, "*")) &&
		(len(rule.ResourceNames) == 0 || name != "" && slices.Contains(rule.ResourceNames, name))
}

func ptrValue[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func describe(err error) string {
	if err == nil {
		return "nil"
	}
	return fmt.Sprintf("%q", err)
}

// apart runs the calling test again in a process of its own, and reports
// its failures here, unless this is that process (then it returns false,
// and the test goes on). A replica that ends the process (os.Exit,
// klog.Fatal) would otherwise end the whole test binary with nothing but
// "exit status 1"; from here, the test can say what happened, and when.
func apart(t *testing.T) bool {
	t.Helper()
	if os.Getenv("EXERCISE06_CHILD") == t.Name() {
		return false
	}
	journal := filepath.Join(t.TempDir(), "journal")
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1", "-test.timeout=3m", "-test.paniconexit0")
	cmd.Env = append(os.Environ(), "EXERCISE06_CHILD="+t.Name(), "EXERCISE06_JOURNAL="+journal)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	output := out.String()
	var exit *exec.ExitError
	switch {
	case err == nil && strings.Contains(output, "--- PASS: "+t.Name()+" "):
		if testing.Verbose() {
			fmt.Print(testOutput(output, t.Name()))
		}
		return true
	case strings.Contains(output, "--- FAIL: "+t.Name()+" "):
		fmt.Print(testOutput(output, t.Name())) // the test's own failure, as it said it
		t.Fail()
		return true
	case !errors.As(err, &exit):
		t.Fatalf("running the test in a process of its own: %v\n%s", err, output)
	}
	tail := "(empty)"
	if data, err := os.ReadFile(journal); err == nil && len(data) > 0 {
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		tail = strings.Join(lines[max(0, len(lines)-25):], "\n")
	}
	panicked := ""
	if i := strings.Index(output, "panic: "); i >= 0 {
		lines := strings.Split(output[i:], "\n")
		panicked = strings.Join(lines[:min(len(lines), 12)], "\n")
	}
	switch {
	case strings.Contains(panicked, "test timed out"):
		t.Fatalf("the test did not end within 3 minutes: something waited without a deadline. The journal, to the end:\n%s\n\n%s", tail, panicked)
	case strings.Contains(panicked, "unexpected call to os.Exit(0)"), panicked == "":
		t.Fatalf("the test's process ended (%v) in the middle of the test, not by a failure of the test: a replica ended it itself, with "+
			"os.Exit or klog.Fatal (klog.Fatal exits 255), in OnStoppedLeading or after the elector returned? Do not: the test runs the "+
			"replicas in one process. On a lost Lease, run returns an error, and main prints it and exits 1. The journal, to the end:\n%s",
			exit.ProcessState, tail)
	}
	why := ""
	switch {
	case strings.Contains(panicked, "leaseDuration must be") || strings.Contains(panicked, "renewDeadline must be"):
		why = fmt.Sprintf(": client-go's NewLeaderElector refused the timings, and RunOrDie panics then. With LEASE_DURATION=%v: "+
			"LeaseDuration %v, RenewDeadline 2/3 of it (%v), RetryPeriod 2/15 of it (%v)", leaseFor, leaseFor, renewFor, retryEvery)
	case strings.Contains(panicked, "callback must not be nil"):
		why = ": RunOrDie panics on an elector configuration NewLeaderElector refuses: set OnStartedLeading and OnStoppedLeading (which may do nothing)"
	}
	t.Fatalf("a replica panicked%s. The journal, to the end:\n%s\n\n%s", why, tail, panicked)
	return true
}

// testOutput returns what the child's test said, less go test's framing.
func testOutput(output, name string) string {
	var out []string
	for _, line := range strings.Split(output, "\n") {
		switch {
		case line == "=== RUN   "+name, strings.HasPrefix(line, "--- FAIL: "+name+" "), strings.HasPrefix(line, "--- PASS: "+name+" "),
			line == "PASS", line == "FAIL", strings.HasPrefix(line, "exit status "), strings.Contains(line, "Mutation detector is enabled"):
		default:
			out = append(out, line)
		}
	}
	return strings.TrimLeft(strings.Join(out, "\n"), "\n")
}

// leaseAPI is an API server for this test, enough for run: the pods of one
// namespace (list, and watch with or without their initial events) and
// Leases (get, create, update, with resourceVersion checks as a real one
// does). Each replica has an address of its own, so it knows who asks.
type leaseAPI struct {
	journal *journal

	mu        sync.Mutex
	rv        int
	pods      []*corev1.Pod
	watches   map[chan []byte]bool
	leases    map[string]*coordinationv1.Lease // by namespace/name
	tries     map[string]int                   // Lease requests, by replica
	wrote     map[string]string                // the last holder each replica wrote
	renewed   map[string]int                   // renewals, by replica
	released  map[string]*entry                // the journal's line for each replica's release of the Lease
	informers map[string]bool                  // replicas that listed or watched pods as an informer does
	cut       map[string]bool                  // replicas whose Lease requests fail
	held      int                              // takeovers refused while the cut-off leader still worked
	replicas  []*replica
}

func newLeaseAPI(t *testing.T, pods ...string) *leaseAPI {
	s := &leaseAPI{journal: newJournal(t), watches: map[chan []byte]bool{}, leases: map[string]*coordinationv1.Lease{},
		tries: map[string]int{}, wrote: map[string]string{}, renewed: map[string]int{}, released: map[string]*entry{},
		informers: map[string]bool{}, cut: map[string]bool{}}
	for _, name := range pods {
		s.addPod(name)
	}
	// What is logged through klog's global logger (klog.Background(), and
	// klog.FromContext of a context with no logger) goes to the journal too,
	// as "klog": the replicas' lines must not. (The logger is set once: klog
	// allows no change while anything logs.)
	globalJournal.Store(s.journal)
	setGlobalLogger.Do(func() {
		klog.SetLogger(textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(globalWriter{}))))
	})
	return s
}

var (
	globalJournal   atomic.Pointer[journal] // the journal of the test that runs
	setGlobalLogger sync.Once
)

// globalWriter writes klog's global logger's lines into the journal of the
// test that runs, as "klog".
type globalWriter struct{}

func (globalWriter) Write(data []byte) (int, error) {
	if j := globalJournal.Load(); j != nil {
		return journalWriter{j, "klog"}.Write(data)
	}
	return len(data), nil
}

// replica is one run of the program, with its own name and log.
type replica struct {
	name       string
	elects     bool // POD_NAME is set
	journal    *journal
	cancel     context.CancelFunc
	mayEnd     atomic.Bool   // the test expects its run to return from now on
	done       chan struct{} // closed when run has returned
	err        error         // what it returned
	returnedAt int           // the journal's length when it returned
}

// start runs run as the replica name, with POD_NAME=name.
func (s *leaseAPI) start(t *testing.T, name string) *replica {
	t.Helper()
	s.journal.add("test", name+" starts")
	return s.startAs(t, name, true)
}

// startAs runs run as name: with POD_NAME=name if elects, an address of its
// own on the API server, the pods of "shop". The caller waits until it has
// used POD_NAME before starting another.
func (s *leaseAPI) startAs(t *testing.T, name string, elects bool) *replica {
	if elects {
		t.Setenv("POD_NAME", name)
	}
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { s.serve(w, r, name) }))
	t.Cleanup(server.Close)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	config := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: test, cluster: {server: %q}}]
users: [{name: test, user: {}}]
contexts: [{name: test, context: {cluster: test, user: test, namespace: %q}}]
current-context: test
`, server.URL, leaseNamespace)
	if err := os.WriteFile(kubeconfig, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	r := &replica{name: name, elects: elects, journal: s.journal, done: make(chan struct{})}
	s.mu.Lock()
	s.replicas = append(s.replicas, r)
	s.mu.Unlock()
	logger := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(journalWriter{s.journal, name})))
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	r.cancel = cancel
	go func() {
		defer close(r.done)
		r.err = run(ctx, options{kubeconfig: kubeconfig, namespace: watched, startupTimeout: 10 * time.Second, syncTimeout: time.Minute})
		r.returnedAt = s.journal.add("test", fmt.Sprintf("%s's run returned %s", name, describe(r.err)))
	}()
	t.Cleanup(func() {
		cancel()
		wait := 10 * time.Second
		if t.Failed() {
			wait = time.Second // the failure is reported; do not add to it
		}
		select {
		case <-r.done:
		case <-time.After(wait):
			if !t.Failed() {
				t.Errorf("%s: run did not return within 10 s of its context ending", name)
			}
		}
	})
	return r
}

// logged reports whether the replica logged a line that starts with prefix.
func (r *replica) logged(prefix string) bool { return r.index(prefix) >= 0 }

// index returns the journal's index of the replica's first line that starts
// with prefix, or -1.
func (r *replica) index(prefix string) int {
	return slices.IndexFunc(r.journal.all(), func(e entry) bool { return e.who == r.name && strings.HasPrefix(e.line, prefix) })
}

// returned reports whether the replica's run has returned.
func (r *replica) returned() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// waitReturn waits, at most timeout, for the replica's run to return.
func (r *replica) waitReturn(timeout time.Duration) bool {
	select {
	case <-r.done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// tail returns the replica's last n lines.
func (r *replica) tail(n int) string {
	var lines []string
	for _, e := range r.journal.all() {
		if e.who == r.name {
			lines = append(lines, e.line)
		}
	}
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// fatalf fails the test with the message and the journal's last lines.
func (s *leaseAPI) fatalf(t *testing.T, format string, args ...any) {
	t.Helper()
	t.Fatalf(format+". The journal:\n%s", append(args, s.journal.tail(25))...)
}

// waitFor waits, at most 10 s, until done. It fails at once if a replica's
// run returns before the test expects it to, or a replica logs its
// controller's lines through klog's global logger.
func (s *leaseAPI) waitFor(t *testing.T, what string, done func() bool) {
	t.Helper()
	s.waitForWithin(t, 10*time.Second, func() string { return "waited 10 s for " + what }, done)
}

// waitForWithin waits, at most timeout, until done, as waitFor does; then
// it fails with what failure says.
func (s *leaseAPI) waitForWithin(t *testing.T, timeout time.Duration, failure func() string, done func() bool) {
	t.Helper()
	var why string
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		if why = s.check(); why != "" {
			return false, errors.New(why)
		}
		return done(), nil
	})
	switch {
	case why != "":
		s.fatalf(t, "%s", why)
	case err != nil:
		s.fatalf(t, "%s", failure())
	}
}

// check says what went wrong, if a replica's run returned though the test
// did not expect it to, or a controller logs through klog's global logger.
func (s *leaseAPI) check() string {
	s.mu.Lock()
	replicas := slices.Clone(s.replicas)
	s.mu.Unlock()
	for _, r := range replicas {
		if r.mayEnd.Load() || !r.returned() {
			continue
		}
		err := r.err
		why := ""
		switch {
		case !r.elects:
			why = ": with no POD_NAME, run must run the controller alone, as today, until its context ends"
		case err == nil:
			why = ": with POD_NAME set, run waits for the Lease, then works until its context ends (as on SIGTERM) or it loses the Lease"
		case strings.Contains(err.Error(), "leaseDuration must be") || strings.Contains(err.Error(), "renewDeadline must be"):
			why = fmt.Sprintf(": client-go's NewLeaderElector refused the timings. With LEASE_DURATION=%v: LeaseDuration %v, RenewDeadline "+
				"2/3 of it (%v), RetryPeriod 2/15 of it (%v): the lease duration longest, then the renew deadline", leaseFor, leaseFor, renewFor, retryEvery)
		case strings.Contains(err.Error(), "callback must not be nil"):
			why = ": set both OnStartedLeading and OnStoppedLeading (which may do nothing, Hint 2)"
		case strings.Contains(err.Error(), "LEASE_DURATION"), strings.Contains(err.Error(), "invalid syntax"), strings.Contains(err.Error(), "time: "):
			why = fmt.Sprintf(": the test sets LEASE_DURATION=%v, a Go duration, as the task says (time.ParseDuration reads it), not a bare number of seconds", leaseFor)
		}
		return fmt.Sprintf("%s's run returned %s while the test expected it to go on%s", r.name, describe(err), why)
	}
	for _, e := range s.journal.all() {
		if e.who != "klog" {
			continue
		}
		switch {
		case strings.HasPrefix(e.line, `"New leader"`):
			return fmt.Sprintf("a replica logged %s through klog's global logger: log it with run's ctx's logger (klog.FromContext(ctx)), "+
				"as every other line", e.line)
		case slices.ContainsFunc([]string{`"Pod `, `"Starting demo-controller"`, `"Cache synced`, `"Attempting to acquire`, `"Successfully acquired`, `"Failed to renew`},
			func(p string) bool { return strings.HasPrefix(e.line, p) }):
			return fmt.Sprintf("a replica logged %s through klog's global logger, not through the logger of run's ctx: the context the "+
				"elector and the controller run on must come from run's ctx, which carries its logger. OnStartedLeading's context comes from "+
				"the one given to the elector's Run (or RunOrDie): a context.Background() there loses the logger, and never ends, so a "+
				"replica stopped as by SIGTERM would go on holding the Lease (start from context.WithoutCancel(ctx), Hint 4)", e.line)
		}
	}
	return ""
}

// waitForTries waits until r has asked for the Lease n times: it waits for
// it, and has read POD_NAME.
func (s *leaseAPI) waitForTries(t *testing.T, r *replica, n int) {
	t.Helper()
	s.waitForWithin(t, 10*time.Second, func() string {
		return fmt.Sprintf("%s asked for the Lease %d times in 10 s; want %d at least, one every %v or so (the retry period): "+
			"with POD_NAME set, a replica waits for the Lease, trying again and again", r.name, s.triesOf(r.name), n, retryEvery)
	}, func() bool { return s.triesOf(r.name) >= n })
}

func (s *leaseAPI) triesOf(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tries[name]
}

func (s *leaseAPI) renewals(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.renewed[name]
}

// releasedBy returns the journal's line for name's release of the Lease.
func (s *leaseAPI) releasedBy(name string) *entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.released[name]
}

// takenAfter returns how long after e name took the Lease.
func (s *leaseAPI) takenAfter(name string, e *entry) time.Duration {
	for _, taken := range s.journal.all()[e.index:] {
		if taken.who == "api" && strings.Contains(taken.line, fmt.Sprintf("holder %q", name)) {
			return taken.at.Sub(e.at)
		}
	}
	return -1
}

// holder returns the holder of the Lease demo-controller, wherever it is.
func (s *leaseAPI) holder() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.leases {
		return ptrValue(l.Spec.HolderIdentity)
	}
	return ""
}

// heldAs says under which name name wrote the Lease, if it did.
func (s *leaseAPI) heldAs(name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if holder := s.wrote[name]; holder != "" {
		return fmt.Sprintf(", and took it as %q", holder)
	}
	return ""
}

// leaseSeconds says what the Lease's leaseDurationSeconds is.
func (s *leaseAPI) leaseSeconds() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.leases {
		return fmt.Sprintf("it took the Lease, with leaseDurationSeconds: %d", ptrValue(l.Spec.LeaseDurationSeconds))
	}
	return "it started the controller"
}

// heldNote says whether the test held a takeover back.
func (s *leaseAPI) heldNote() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held == 0 {
		return ""
	}
	return fmt.Sprintf("; the test refused %d of its tries while replica-a's controller still worked (in the handler call the test held)", s.held)
}

// cutOff makes every Lease request of the replica fail from now on.
func (s *leaseAPI) cutOff(name, while string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cut[name] = true
	s.journal.add("test", fmt.Sprintf("%s cut off from the Lease, %s", name, while))
}

// working reports whether name's controller works: it logged "Cache
// synced", and "Worker stopped" not since.
func (s *leaseAPI) working(name string) bool {
	working := false
	for _, e := range s.journal.all() {
		if e.who == name && strings.HasPrefix(e.line, `"Cache synced`) {
			working = true
		} else if e.who == name && strings.HasPrefix(e.line, `"Worker stopped"`) {
			working = false
		}
	}
	return working
}

// addPod creates a pod in "shop" and sends it to every watch.
func (s *leaseAPI) addPod(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rv++
	pod := testPod(watched, name, "uid-"+name, strconv.Itoa(s.rv), corev1.PodRunning)
	pod.TypeMeta = metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}
	s.pods = append(s.pods, pod)
	for ch := range s.watches {
		ch <- watchEvent("ADDED", pod)
	}
}

func watchEvent(kind string, obj runtime.Object) []byte {
	data, _ := json.Marshal(map[string]any{"type": kind, "object": obj})
	return append(data, '\n')
}

// serve answers a request from the replica who.
func (s *leaseAPI) serve(w http.ResponseWriter, r *http.Request, who string) {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	q := r.URL.Query()
	switch {
	case r.URL.Path == "/api/v1/namespaces/"+watched+"/pods" && r.Method == http.MethodGet && q.Get("watch") == "true":
		s.mu.Lock()
		// run's own check is a WATCH from now; an informer's asks for the
		// initial events, or starts from a resourceVersion.
		if q.Get("sendInitialEvents") == "true" || q.Get("resourceVersion") != "" {
			s.informers[who] = true
		}
		var events [][]byte
		if q.Get("sendInitialEvents") == "true" {
			for _, pod := range s.pods {
				events = append(events, watchEvent("ADDED", pod))
			}
			events = append(events, watchEvent("BOOKMARK", &corev1.Pod{TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
				ObjectMeta: metav1.ObjectMeta{ResourceVersion: strconv.Itoa(s.rv), Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}))
		}
		ch := make(chan []byte, 100)
		s.watches[ch] = true
		s.mu.Unlock()
		defer func() {
			s.mu.Lock()
			delete(s.watches, ch)
			s.mu.Unlock()
		}()
		w.Header().Set("Content-Type", "application/json")
		for _, e := range events {
			w.Write(e)
		}
		w.(http.Flusher).Flush()
		for {
			select {
			case e := <-ch:
				w.Write(e)
				w.(http.Flusher).Flush()
			case <-r.Context().Done():
				return
			}
		}
	case r.URL.Path == "/api/v1/namespaces/"+watched+"/pods" && r.Method == http.MethodGet:
		s.mu.Lock()
		if q.Get("limit") != "1" { // run's own check lists one pod
			s.informers[who] = true
		}
		list := &corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}, ListMeta: metav1.ListMeta{ResourceVersion: strconv.Itoa(s.rv)}}
		for _, pod := range s.pods {
			list.Items = append(list.Items, *pod)
		}
		s.mu.Unlock()
		writeObject(w, http.StatusOK, list)
	case len(parts) >= 6 && strings.Join(parts[:4], "/") == "apis/coordination.k8s.io/v1/namespaces" && parts[5] == "leases":
		s.lease(w, r, who, parts[4], strings.Join(parts[6:], "/"))
	default:
		apiStatus(w, http.StatusNotFound, "NotFound", "this test's API server serves only the pods of "+watched+" and Leases, not "+r.URL.Path)
	}
}

// lease answers a GET, POST or PUT of a Lease. While a leader cut off from
// the Lease still works, it refuses the others' takeovers, as a conflict:
// the test checks that the leader stops on its own, at its renew deadline,
// and its takeover must not depend on how fast the machine runs the two.
func (s *leaseAPI) lease(w http.ResponseWriter, r *http.Request, who, namespace, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tries[who]++
	if s.cut[who] {
		apiStatus(w, http.StatusServiceUnavailable, "ServiceUnavailable", "the test cut "+who+" off from the Lease")
		return
	}
	var lease coordinationv1.Lease
	if r.Method != http.MethodGet {
		body, err := io.ReadAll(r.Body)
		if err == nil { // (client-go sends protobuf, which the universal deserializer also reads)
			_, _, err = scheme.Codecs.UniversalDeserializer().Decode(body, nil, &lease)
		}
		if err != nil {
			apiStatus(w, http.StatusBadRequest, "BadRequest", err.Error())
			return
		}
		name = lease.Name
	}
	key := namespace + "/" + name
	old := s.leases[key]
	conflict := fmt.Sprintf("Operation cannot be fulfilled on leases.coordination.k8s.io %q: the object has been modified", name)
	holder, was := ptrValue(lease.Spec.HolderIdentity), ""
	if old != nil {
		was = ptrValue(old.Spec.HolderIdentity)
	}
	switch {
	case r.Method == http.MethodGet && old != nil:
		writeObject(w, http.StatusOK, old)
		return
	case r.Method == http.MethodGet || r.Method == http.MethodPut && old == nil:
		apiStatus(w, http.StatusNotFound, "NotFound", fmt.Sprintf("leases.coordination.k8s.io %q not found", name))
		return
	case r.Method == http.MethodPost && old != nil:
		apiStatus(w, http.StatusConflict, "AlreadyExists", fmt.Sprintf("leases.coordination.k8s.io %q already exists", name))
		return
	case r.Method == http.MethodPut && lease.ResourceVersion != old.ResourceVersion:
		apiStatus(w, http.StatusConflict, "Conflict", conflict)
		return
	case r.Method == http.MethodPut && holder != "" && was != "" && holder != was && s.cut[was] && s.working(was):
		s.held++
		apiStatus(w, http.StatusConflict, "Conflict", conflict)
		return
	}
	s.rv++
	lease.Namespace, lease.ResourceVersion = namespace, strconv.Itoa(s.rv)
	lease.TypeMeta = metav1.TypeMeta{Kind: "Lease", APIVersion: "coordination.k8s.io/v1"}
	s.leases[key] = &lease
	if old == nil || was != holder {
		i := s.journal.add("api", fmt.Sprintf("Lease %s: holder %q, written by %s", key, holder, who))
		if holder == "" && was == who {
			e := s.journal.all()[i]
			s.released[who] = &e
		}
	} else if holder == who {
		s.renewed[who]++
	}
	if holder != "" {
		s.wrote[who] = holder
	}
	writeObject(w, map[bool]int{true: http.StatusCreated, false: http.StatusOK}[r.Method == http.MethodPost], &lease)
}

func writeObject(w http.ResponseWriter, code int, obj any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(obj)
}

// journal is what the replicas logged and what happened to the Lease, in
// the order it happened. In the test's own process (see apart), each entry
// also goes to a file at once, for the parent to show if the process ends.
type journal struct {
	mu      sync.Mutex
	entries []entry
	holds   []*hold
	file    *os.File
}

type entry struct {
	who, line string
	at        time.Time
	index     int
}

func newJournal(t *testing.T) *journal {
	j := &journal{}
	if path := os.Getenv("EXERCISE06_JOURNAL"); path != "" {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(f, "test: %s\n", t.Name())
		t.Cleanup(func() { f.Close() })
		j.file = f
	}
	return j
}

// add adds an entry, and returns its index.
func (j *journal) add(who, line string) int {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.entries = append(j.entries, entry{who, line, time.Now(), len(j.entries)})
	if j.file != nil {
		fmt.Fprintf(j.file, "%s: %s\n", who, line)
	}
	return len(j.entries) - 1
}

func (j *journal) all() []entry {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.entries)
}

// tail returns the last n entries, one a line.
func (j *journal) tail(n int) string {
	all := j.all()
	var lines []string
	for _, e := range all[max(0, len(all)-n):] {
		lines = append(lines, e.who+": "+e.line)
	}
	return strings.Join(lines, "\n")
}

// hold is a line that one replica will log: the call that logs it waits,
// in the middle of the replica's work, until the test releases it.
type hold struct {
	who, prefix string
	arrived     chan struct{}
	free        chan struct{}
	once        sync.Once
}

// hold makes who's next line that starts with prefix wait until released.
func (j *journal) hold(t *testing.T, who, prefix string) *hold {
	h := &hold{who: who, prefix: prefix, arrived: make(chan struct{}), free: make(chan struct{})}
	j.mu.Lock()
	j.holds = append(j.holds, h)
	j.mu.Unlock()
	t.Cleanup(h.release) // before the replicas are stopped (cleanups run last first)
	return h
}

// reached reports whether the line has come, and waits.
func (h *hold) reached() bool {
	select {
	case <-h.arrived:
		return true
	default:
		return false
	}
}

func (h *hold) release() { h.once.Do(func() { close(h.free) }) }

// journalWriter writes one replica's log lines, without klog's headers,
// into the journal. textlogger writes each line whole.
type journalWriter struct {
	journal *journal
	who     string
}

func (w journalWriter) Write(data []byte) (int, error) {
	for _, line := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
		line = klogHeader.ReplaceAllString(line, "")
		w.journal.mu.Lock()
		i := slices.IndexFunc(w.journal.holds, func(h *hold) bool { return h.who == w.who && strings.HasPrefix(line, h.prefix) })
		var h *hold
		if i >= 0 {
			h = w.journal.holds[i]
			w.journal.holds = slices.Delete(w.journal.holds, i, i+1)
		}
		w.journal.mu.Unlock()
		if h != nil {
			close(h.arrived)
			<-h.free
		}
		w.journal.add(w.who, line)
	}
	return len(data), nil
}
