//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// These tests show what the README's pitfalls say about a lost connection
// and lost rights, against the real API server. The controller runs at
// -v=4, where client-go's reflector logs "Listing and watching" each time
// it lists (at start, and on every relist; a streaming list, or a LIST if
// the server refuses that) and "Watch failed - backing off"
// while it cannot reconnect.

// A lost connection to an API server that keeps running: the reflector
// resumes its WATCH from the last resourceVersion it saw, and the server
// replays the events since then. There is no relist. A pod created and
// deleted meanwhile reaches the informer as an add and a delete: it is
// reported both created and deleted, or not at all, depending on whether
// the worker reached its key between the two.
func TestLostConnectionResumesTheWatch(t *testing.T) {
	const ns = "resume"
	createPod(t, ns, "stays")
	link := newCuttableLink(t, apiPort)
	p := startController(t, writeKubeconfig("resume", link.port, adminToken), "--namespace="+ns, "-v=4")
	at := waitForLines(t, p, 0, "Listing and watching", "Cache synced", `"Pod found" pod="resume/stays"`)
	// An event on the WATCH first: one that ends within a second with no
	// event is a "very short watch", after which client-go lists again.
	createPod(t, ns, "warm")
	at = waitForLines(t, p, at, `"Pod created" pod="resume/warm"`)

	link.cut()
	at = waitForLines(t, p, at, `"Watch failed - backing off"`)
	createPod(t, ns, "brief")
	deletePod(t, ns, "brief", nil)
	createPod(t, ns, "arrives")
	if err := link.restore(); err != nil {
		t.Fatal(err)
	}

	waitForLines(t, p, at, `"Pod created" pod="resume/arrives"`)
	if n := countLines(p, at, "Listing and watching"); n != 0 {
		t.Errorf("the reflector listed again %d times after a lost connection; want a resumed watch", n)
	}
	got := lifecycleLines(p, at)
	briefCreated := slices.Contains(got, `"Pod created" pod="resume/brief"`)
	briefDeleted := slices.Contains(got, `"Pod deleted" pod="resume/brief"`)
	if briefCreated != briefDeleted {
		t.Errorf("a pod created and deleted during the gap was reported half: %q", got)
	}
	t.Logf("the pod created and deleted during the gap was reported: %v", briefCreated)
}

// A restarted API server has a fresh watch cache, without the events the
// controller missed: the resumed watch is refused ("too old resource
// version") and the reflector lists again. The worker then compares, and a
// pod created and deleted during the outage is never reported.
// (TestOutage shows the rest of the outage: exactly the changes are reported.)
func TestRestartedServerMakesItListAgain(t *testing.T) {
	const ns = "relist"
	createPod(t, ns, "stays")
	p := startController(t, adminKube, "--namespace="+ns, "-v=4")
	at := waitForLines(t, p, 0, "Listing and watching", "Cache synced", `"Pod found" pod="relist/stays"`)

	apiServer.stop()
	t.Cleanup(func() { // leave a working API server to the tests that follow
		if apiServer.exited() {
			apiServer, _ = startAPIServer(apiPort, argValue(etcd, "--listen-client-urls="))
		}
	})
	at = waitForLines(t, p, at, `"Watch failed - backing off"`)
	etcdURL := argValue(etcd, "--listen-client-urls=")
	other, err := startAPIServer(freePort(), etcdURL)
	if err != nil {
		t.Fatal(err)
	}
	otherKube := writeKubeconfig("relist-other", apiPortOf(other), adminToken)
	for _, args := range [][]string{
		{"run", "-n", ns, "brief", "--image=registry.k8s.io/pause:3.10"},
		{"delete", "pod", "-n", ns, "brief", "--grace-period=0", "--force"},
		{"run", "-n", ns, "arrives", "--image=registry.k8s.io/pause:3.10"},
	} {
		if out, err := kubectl(otherKube, args...); err != nil {
			t.Fatalf("kubectl %s through the second API server: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	other.stop()
	if apiServer, err = startAPIServer(apiPort, etcdURL); err != nil {
		t.Fatal(err)
	}

	waitForLines(t, p, at, "Listing and watching", `"Pod created" pod="relist/arrives"`)
	createPod(t, ns, "last") // reported after anything the relist caused
	waitForLines(t, p, at, `"Pod created" pod="relist/last"`)
	if got := lifecycleLines(p, at); slices.ContainsFunc(got, func(l string) bool { return strings.Contains(l, "relist/brief") }) {
		t.Errorf("a pod created and deleted while the server was down was reported after the relist: %q", got)
	}
}

// list without watch: `run` refuses to start (TestStartupErrors and
// TestServiceAccountIdentity show that). Taken away while the controller
// runs, nothing happens at first: the open WATCH was authorized when it was
// opened. Once it must be opened again, the server refuses it; the
// reflector logs the 403 and goes back to LISTing, with a growing backoff,
// so the cache still changes, late, with each list.
func TestWatchTakenAwayWhileRunning(t *testing.T) {
	const ns = "nowatch"
	ctx := context.Background()
	namespace(t, ns)
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "nowatch-pods"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "watch"}}}}
	if _, err := admin.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "nowatch-pods"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: "default"}}}
	if _, err := admin.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	token, err := kubectl(adminKube, "create", "token", "default", "-n", ns)
	if err != nil {
		t.Fatalf("kubectl create token: %v: %s", err, token)
	}
	createPod(t, ns, "before")
	link := newCuttableLink(t, apiPort)
	p := startController(t, writeKubeconfig("nowatch", link.port, strings.TrimSpace(token)), "--namespace="+ns, "-v=4")
	at := waitForLines(t, p, 0, "Cache synced", `"Pod found" pod="nowatch/before"`)

	role.Rules[0].Verbs = []string{"list"}
	if _, err := admin.RbacV1().ClusterRoles().Update(ctx, role, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	createPod(t, ns, "still-watched") // the open WATCH still delivers it
	at = waitForLines(t, p, at, `"Pod created" pod="nowatch/still-watched"`)

	link.cut() // the WATCH must be opened again
	if err := link.restore(); err != nil {
		t.Fatal(err)
	}
	at = waitForLines(t, p, at, `cannot watch resource \"pods\"`)
	createPod(t, ns, "listed-late")
	// Seen by a later LIST; the reflector's backoff between tries grows to 30 s.
	waitForLinesWithin(t, p, at, time.Minute, `"Pod created" pod="nowatch/listed-late"`)
	if p.exited() {
		t.Error("the controller exited when watch was taken away")
	}
}

// waitForLinesWithin waits until the process has written lines containing
// each of wants, in that order, after line number from, for at most
// timeout. It returns the number of the line after the last one found.
func waitForLinesWithin(t *testing.T, p *process, from int, timeout time.Duration, wants ...string) int {
	t.Helper()
	next := from
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		lines, i := p.lines(), from
		for _, want := range wants {
			for i < len(lines) && !strings.Contains(lines[i], want) {
				i++
			}
			if i == len(lines) {
				return false, nil
			}
			i++
		}
		next = i
		return true, nil
	})
	if err != nil {
		t.Fatalf("%s did not log, in order after line %d, within %v:\n  %s\nlast lines:\n%s", p.name, from, timeout, strings.Join(wants, "\n  "), p.tail(20))
	}
	return next
}

// countLines counts the lines after line from that contain s.
func countLines(p *process, from int, s string) int {
	n := 0
	for _, line := range p.lines()[from:] {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}

// cuttableLink is a TCP relay on loopback to the API server on port: a
// connection that can be cut while the server runs on. While it is cut,
// nothing listens on its port, so a client's new connection is refused, as
// when a server or a route is down for a moment. (client-go resumes a watch
// only after a refused connection or a 429; any other failure to open the
// watch makes it LIST again.)
type cuttableLink struct {
	port, to int

	mu       sync.Mutex
	listener net.Listener
	conns    []net.Conn
}

func newCuttableLink(t *testing.T, to int) *cuttableLink {
	t.Helper()
	l := &cuttableLink{port: freePort(), to: to}
	if err := l.restore(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.cut)
	return l
}

// restore listens on the link's port again and relays each connection.
func (l *cuttableLink) restore() error {
	listener, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", l.port))
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.listener = listener
	l.mu.Unlock()
	go func() {
		for {
			in, err := listener.Accept()
			if err != nil {
				return // cut
			}
			out, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", l.to))
			if err != nil {
				in.Close()
				continue
			}
			l.mu.Lock()
			l.conns = append(l.conns, in, out)
			l.mu.Unlock()
			go func() { io.Copy(out, in); out.Close() }()
			go func() { io.Copy(in, out); in.Close() }()
		}
	}()
	return nil
}

// cut stops listening and closes every connection.
func (l *cuttableLink) cut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.listener != nil {
		l.listener.Close()
		l.listener = nil
	}
	for _, c := range l.conns {
		c.Close()
	}
	l.conns = nil
}
