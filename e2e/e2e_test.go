//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
)

// lineTimeout bounds each wait for a line of the controller's log.
const lineTimeout = 30 * time.Second

// startController runs ./demo-controller with a kubeconfig and more flags.
// When the test fails, the controller's log is printed.
func startController(t *testing.T, kubeconfig string, args ...string) *process {
	t.Helper()
	binary := filepath.Join(repoRoot, "demo-controller")
	if other := os.Getenv("DEMO_CONTROLLER_BIN"); other != "" {
		binary = other // to compare another build in the benchmark
	}
	p := startProcess("demo-controller", binary,
		append([]string{"--kubeconfig", kubeconfig}, args...)...)
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("demo-controller %s log:\n%s", strings.Join(args, " "), p.out.String())
		}
	})
	return p
}

// waitForLines waits until the process has written lines containing each
// of wants, in that order, after line number from. It returns the number of
// the line after the last one found.
func waitForLines(t *testing.T, p *process, from int, wants ...string) int {
	t.Helper()
	return waitForLinesWithin(t, p, from, lineTimeout, wants...)
}

// lifecycleLines returns the lifecycle lines the process wrote from line
// from on, each cut down to its message and pod, e.g. `"Pod created" pod="a/b"`.
func lifecycleLines(p *process, from int) []string {
	var out []string
	for _, line := range p.lines()[from:] {
		if i := strings.Index(line, `] "Pod `); i >= 0 {
			line = line[i+2:]
		} else if i := strings.Index(line, `] "Container `); i >= 0 {
			line = line[i+2:]
		} else {
			continue
		}
		if j := strings.Index(line, `" `); j >= 0 {
			if k := strings.Index(line[j+2:], " "); k >= 0 {
				line = line[:j+2+k]
			}
		}
		out = append(out, line)
	}
	return out
}

var namespaces sync.Map

// namespace creates a namespace with its default ServiceAccount (there is no
// controller-manager to create it, and pods need it) once per name.
func namespace(t *testing.T, name string) string {
	t.Helper()
	if _, done := namespaces.LoadOrStore(name, true); done {
		return name
	}
	ctx := context.Background()
	_, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	_, err = admin.CoreV1().ServiceAccounts(name).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	return name
}

func createPod(t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace(t, ns)},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
	}
	created, err := admin.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return created
}

// bind does the scheduler's part: it assigns the pod to a node.
func bind(t *testing.T, ns, name, node string) {
	t.Helper()
	err := admin.CoreV1().Pods(ns).Bind(context.Background(), &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Target:     corev1.ObjectReference{Kind: "Node", Name: node},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// setStatus does the kubelet's part: it changes the pod's status.
func setStatus(t *testing.T, ns, name string, phase corev1.PodPhase, ready bool, restarts int32) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pod, err := admin.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		readyStatus := corev1.ConditionFalse
		if ready {
			readyStatus = corev1.ConditionTrue
		}
		pod.Status.Phase = phase
		pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: readyStatus}}
		pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Ready: ready, RestartCount: restarts, Image: "registry.k8s.io/pause:3.10"}}
		_, err = admin.CoreV1().Pods(ns).UpdateStatus(context.Background(), pod, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// deletePod deletes a pod; grace nil means the default grace period.
func deletePod(t *testing.T, ns, name string, grace *int64) {
	t.Helper()
	if err := admin.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: grace}); err != nil {
		t.Fatal(err)
	}
}

var now = new(int64) // a grace period of 0: delete at once

// manifestOnce creates demo-controller.yaml on the server, for the tests
// that need its ServiceAccount.
var manifestOnce = sync.OnceValues(func() (string, error) {
	return kubectl(adminKube, "create", "-f", filepath.Join(repoRoot, "demo-controller.yaml"))
})

// serviceAccountKubeconfig returns a kubeconfig with a token of the
// ServiceAccount ns/name, made by `kubectl create token`.
func serviceAccountKubeconfig(t *testing.T, ns, name string) string {
	t.Helper()
	token, err := kubectl(adminKube, "create", "token", name, "-n", ns)
	if err != nil {
		t.Fatalf("kubectl create token: %v: %s", err, token)
	}
	return writeKubeconfig(ns+"-"+name, apiPort, strings.TrimSpace(token))
}

func TestManifestCreates(t *testing.T) {
	out, err := manifestOnce()
	if err != nil {
		t.Fatalf("kubectl create -f demo-controller.yaml: %v\n%s", err, out)
	}
	for _, want := range []string{
		"namespace/demo-controller created",
		"serviceaccount/demo-controller created",
		"clusterrole.rbac.authorization.k8s.io/demo-controller created",
		"clusterrolebinding.rbac.authorization.k8s.io/demo-controller created",
		"deployment.apps/demo-controller created",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("kubectl create -f demo-controller.yaml did not say %q:\n%s", want, out)
		}
	}
}

func TestServiceAccountIdentity(t *testing.T) {
	if out, err := manifestOnce(); err != nil {
		t.Fatalf("kubectl create -f demo-controller.yaml: %v\n%s", err, out)
	}

	t.Run("the manifest's ServiceAccount may watch pods", func(t *testing.T) {
		createPod(t, "identity", "seen")
		p := startController(t, serviceAccountKubeconfig(t, "demo-controller", "demo-controller"))
		waitForLines(t, p, 0, "Starting demo-controller", "Cache synced", `"Pod found" pod="identity/seen"`)
		createPod(t, "identity", "new")
		waitForLines(t, p, 0, `"Pod created" pod="identity/new"`)
	})

	t.Run("an identity with no rights is refused at start", func(t *testing.T) {
		if _, err := admin.CoreV1().ServiceAccounts(namespace(t, "identity")).Create(context.Background(),
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "nobody"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		p := startController(t, serviceAccountKubeconfig(t, "identity", "nobody"), "--startup-timeout=5s")
		if code := p.waitExit(10 * time.Second); code != 1 {
			t.Fatalf("exit code %d, want 1", code)
		}
		out := p.out.String()
		for _, want := range []string{`pods is forbidden: User "system:serviceaccount:identity:nobody" cannot list resource "pods"`, "demo-controller.yaml"} {
			if !strings.Contains(out, want) {
				t.Errorf("output does not say %q:\n%s", want, out)
			}
		}
	})
}

func TestLifecycle(t *testing.T) {
	const ns = "lifecycle"
	createPod(t, ns, "before")
	p := startController(t, adminKube)
	at := waitForLines(t, p, 0, "Cache synced", `"Pod found" pod="lifecycle/before" phase="Pending" node=""`)

	// One pod's whole good life: created, scheduled, running, ready, a
	// restart, terminating, deleted.
	createPod(t, ns, "web")
	at = waitForLines(t, p, at, `"Pod created" pod="lifecycle/web" phase="Pending"`)
	bind(t, ns, "web", "node-1")
	at = waitForLines(t, p, at, `"Pod scheduled" pod="lifecycle/web" node="node-1"`)
	setStatus(t, ns, "web", corev1.PodRunning, true, 0)
	at = waitForLines(t, p, at, `"Pod phase changed" pod="lifecycle/web" oldPhase="Pending" phase="Running"`, `"Pod ready" pod="lifecycle/web"`)
	setStatus(t, ns, "web", corev1.PodRunning, false, 1)
	at = waitForLines(t, p, at, `"Pod not ready" pod="lifecycle/web"`, `"Container restarted" pod="lifecycle/web" container="app" restartCount=1`)
	setStatus(t, ns, "web", corev1.PodRunning, true, 1)
	at = waitForLines(t, p, at, `"Pod ready" pod="lifecycle/web"`)
	deletePod(t, ns, "web", nil) // no kubelet will finish it: it stays terminating
	at = waitForLines(t, p, at, `"Pod terminating" pod="lifecycle/web"`)
	deletePod(t, ns, "web", now)
	at = waitForLines(t, p, at, `"Pod deleted" pod="lifecycle/web" phase="Running"`)

	// A job that succeeds and one that fails; both are deleted.
	for _, end := range []corev1.PodPhase{corev1.PodSucceeded, corev1.PodFailed} {
		name := strings.ToLower(string(end))
		createPod(t, ns, name)
		bind(t, ns, name, "node-2")
		setStatus(t, ns, name, corev1.PodRunning, true, 0)
		setStatus(t, ns, name, end, false, 0)
		at = waitForLines(t, p, at,
			fmt.Sprintf(`"Pod phase changed" pod="lifecycle/%s" oldPhase="Running" phase="%s"`, name, end))
		deletePod(t, ns, name, nil)
		at = waitForLines(t, p, at, fmt.Sprintf(`"Pod deleted" pod="lifecycle/%s" phase="%s"`, name, end))
	}

	// Deleted and at once created again under the same name: a new UID.
	createPod(t, ns, "again")
	at = waitForLines(t, p, at, `"Pod created" pod="lifecycle/again"`)
	deletePod(t, ns, "again", now)
	createPod(t, ns, "again")
	waitForLines(t, p, at, `"Pod deleted" pod="lifecycle/again"`, `"Pod created" pod="lifecycle/again"`)
}

func TestNamespaceScope(t *testing.T) {
	createPod(t, "scope-in", "before")
	createPod(t, "scope-out", "before")
	p := startController(t, adminKube, "--namespace=scope-in")
	at := waitForLines(t, p, 0, `namespace="scope-in"`, "Cache synced")
	createPod(t, "scope-out", "after")
	createPod(t, "scope-in", "after") // created last: when it is seen, the other would have been too
	waitForLines(t, p, at, `"Pod created" pod="scope-in/after"`)
	got := lifecycleLines(p, 0)
	want := []string{`"Pod found" pod="scope-in/before"`, `"Pod created" pod="scope-in/after"`}
	if !slices.Equal(got, want) {
		t.Errorf("with --namespace=scope-in the controller reported\n %q\nwant\n %q", got, want)
	}
}

// A --namespace that does not exist yet is no error: the cache syncs empty,
// and the namespace's first pod is reported as created. The namespace's
// deletion is none either (docs/troubleshooting.md, "While it runs").
func TestNamespaceNotCreatedYet(t *testing.T) {
	p := startController(t, adminKube, "--namespace=scope-later")
	at := waitForLines(t, p, 0, `namespace="scope-later"`, "Cache synced")
	createPod(t, "scope-later", "first") // creates the namespace too
	at = waitForLines(t, p, at, `"Pod created" pod="scope-later/first"`)

	// Deleted, the namespace takes its pods along (kube-controller-manager's
	// namespace controller deletes them); the watch goes on, and sees the
	// namespace's pods once it is created again.
	startGarbageCollector(t)
	ctx := context.Background()
	if err := admin.CoreV1().Namespaces().Delete(ctx, "scope-later", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	at = waitForLines(t, p, at, `"Pod deleted" pod="scope-later/first"`)
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := admin.CoreV1().Namespaces().Get(ctx, "scope-later", metav1.GetOptions{})
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		t.Fatalf("the namespace scope-later was still there a minute after its deletion: %v", err)
	}
	namespaces.Delete("scope-later")
	createPod(t, "scope-later", "second")
	waitForLines(t, p, at, `"Pod created" pod="scope-later/second"`)
	if p.exited() {
		t.Fatal("demo-controller exited")
	}
}

// The API server goes away; meanwhile another API server on the same etcd
// changes pods. When the first is back, the controller reports exactly those
// changes.
func TestOutage(t *testing.T) {
	const ns = "outage"
	createPod(t, ns, "stays")
	createPod(t, ns, "goes")
	// -v=4: client-go logs a lost connection only at that verbosity.
	p := startController(t, adminKube, "--namespace="+ns, "-v=4")
	at := waitForLines(t, p, 0, "Cache synced")

	apiServer.stop()
	t.Cleanup(func() { // leave a working API server to the tests that follow
		if apiServer.exited() {
			apiServer, _ = startAPIServer(apiPort, argValue(etcd, "--listen-client-urls="))
		}
	})
	// client-go's reflector says so itself, and retries with backoff.
	at = waitForLines(t, p, at, `"Watch failed - backing off"`, "connection refused")

	etcdURL := argValue(etcd, "--listen-client-urls=")
	other, err := startAPIServer(freePort(), etcdURL)
	if err != nil {
		t.Fatal(err)
	}
	otherKube := writeKubeconfig("other", apiPortOf(other), adminToken)
	if out, err := kubectl(otherKube, "run", "-n", ns, "arrives", "--image=registry.k8s.io/pause:3.10"); err != nil {
		t.Fatalf("creating a pod through the second API server: %v: %s", err, out)
	}
	if out, err := kubectl(otherKube, "delete", "pod", "-n", ns, "goes", "--grace-period=0", "--force"); err != nil {
		t.Fatalf("deleting a pod through the second API server: %v: %s", err, out)
	}
	other.stop()

	if apiServer, err = startAPIServer(apiPort, etcdURL); err != nil {
		t.Fatal(err)
	}
	// The relist after the reconnect and a pod created now may come in
	// either order. Once all three are reported, the relist is behind us:
	// a pod created after that is reported after anything it caused.
	createPod(t, ns, "later")
	for _, want := range []string{`"Pod created" pod="outage/arrives"`, `"Pod deleted" pod="outage/goes"`, `"Pod created" pod="outage/later"`} {
		waitForLines(t, p, at, want)
	}
	createPod(t, ns, "last")
	waitForLines(t, p, at, `"Pod created" pod="outage/last"`)
	got := lifecycleLines(p, at)
	slices.Sort(got)
	want := []string{`"Pod created" pod="outage/arrives"`, `"Pod created" pod="outage/last"`, `"Pod created" pod="outage/later"`, `"Pod deleted" pod="outage/goes"`}
	if !slices.Equal(got, want) {
		t.Errorf("after the outage the controller reported\n %q\nwant exactly\n %q", got, want)
	}
	if p.exited() {
		t.Errorf("the controller exited during the outage")
	}
}

// argValue returns the value of a --flag=value argument of a process.
func argValue(p *process, prefix string) string {
	for _, arg := range p.cmd.Args {
		if strings.HasPrefix(arg, prefix) {
			return strings.TrimPrefix(arg, prefix)
		}
	}
	return ""
}

func apiPortOf(p *process) int {
	var port int
	fmt.Sscan(argValue(p, "--secure-port="), &port)
	return port
}

func TestSignals(t *testing.T) {
	t.Run("SIGTERM stops it cleanly within 5 s", func(t *testing.T) {
		p := startController(t, adminKube, "--namespace=signals")
		waitForLines(t, p, 0, "Cache synced")
		p.signal(syscall.SIGTERM)
		if code := p.waitExit(5 * time.Second); code != 0 {
			t.Fatalf("exit code %d after SIGTERM, want 0 (-1: still running after 5 s)", code)
		}
		waitForLines(t, p, 0, "Shutting down", "Worker stopped")
	})

	// A second signal kills the process at once rather than waiting for the
	// shutdown; here the shutdown takes a millisecond, too little to send a
	// second signal into. TestSignalContext, in the unit tests, runs the same
	// code in a child whose shutdown never ends.
	t.Run("SIGINT stops it cleanly too", func(t *testing.T) {
		p := startController(t, adminKube, "--namespace=signals")
		waitForLines(t, p, 0, "Cache synced")
		p.signal(syscall.SIGINT)
		if code := p.waitExit(5 * time.Second); code != 0 {
			t.Fatalf("exit code %d after SIGINT, want 0 (-1: still running after 5 s)", code)
		}
	})
}

// A cache that cannot sync in time ends the run with one error line and
// exit code 1, not a process that waits for ever for its informer. The
// informer's list must be one that cannot finish: a list that finished
// before Run looked would count as synced (cache.WaitFor reports a checker
// already done even when its deadline has passed), and the run would go on.
// So the controller talks to a proxy that passes the start-up check's LIST
// and WATCH and holds every later request unanswered. The deadline is 1 s, not
// 1 ns: a list that is not held (a proxy that passes everything) then
// finishes in time, and the test fails, every time.
func TestSyncDeadline(t *testing.T) {
	proxy := newHoldingProxy(t, apiPort, 2)
	kubeconfig := writeKubeconfig("sync-deadline", proxy.port, adminToken)
	p := startController(t, kubeconfig, "--namespace=signals", "--sync-timeout=1s")
	if code := p.waitExit(10 * time.Second); code != 1 {
		t.Fatalf("exit code %d, want 1 (-1: still running after 10 s)", code)
	}
	waitForLines(t, p, 0, "demo-controller: the pod cache did not sync within 1s")
}

// apiServerCert returns the API server's certificate and key, for a proxy
// in front of it to serve (so writeKubeconfig's kubeconfigs trust it), and
// a pool that trusts that certificate, for the proxy's client.
func apiServerCert(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	certs := filepath.Join(workDir, "certs")
	cert, err := tls.LoadX509KeyPair(filepath.Join(certs, "apiserver.crt"),
		filepath.Join(certs, "apiserver.key"))
	if err != nil {
		t.Fatalf("the API server's certificate: %v", err)
	}
	ca, err := os.ReadFile(filepath.Join(certs, "apiserver.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	return cert, pool
}

// holdingProxy is an HTTPS proxy to the API server on port to, with the API
// server's own certificate (so writeKubeconfig's kubeconfigs trust it). It
// passes the first pass requests, and holds each later one unanswered until
// its client goes away or the test ends.
type holdingProxy struct {
	port     int
	requests atomic.Int64
}

func newHoldingProxy(t *testing.T, to, pass int) *holdingProxy {
	t.Helper()
	cert, pool := apiServerCert(t)
	target := &url.URL{Scheme: "https", Host: fmt.Sprintf("127.0.0.1:%d", to)}
	forward := httputil.NewSingleHostReverseProxy(target)
	forward.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	forward.FlushInterval = -1 // a WATCH streams
	p := &holdingProxy{port: freePort()}
	stop := make(chan struct{})
	server := &http.Server{
		Addr:      fmt.Sprintf("127.0.0.1:%d", p.port),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if p.requests.Add(1) <= int64(pass) {
				forward.ServeHTTP(w, r)
				return
			}
			select {
			case <-r.Context().Done():
			case <-stop:
			}
		}),
	}
	listener, err := net.Listen("tcp", server.Addr)
	if err != nil {
		t.Fatal(err)
	}
	go server.ServeTLS(listener, "", "")
	t.Cleanup(func() { close(stop); server.Close() })
	return p
}

func TestBadInput(t *testing.T) {
	malformed := filepath.Join(workDir, "malformed.kubeconfig")
	if err := os.WriteFile(malformed, []byte("apiVersion: v1\nclusters: {{{"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		kubeconfig string
		args       []string
		want       string
	}{
		{"nothing listens on the port", writeKubeconfig("closed", freePort(), adminToken), nil, "connection refused; no working connection to the API server within --startup-timeout=5s"},
		{"malformed kubeconfig", malformed, nil, "kubectl config view"},
		{"kubeconfig does not exist", filepath.Join(workDir, "missing"), nil, "no such file or directory"},
		{"unknown context", adminKube, []string{"--context=nope"}, `context "nope" does not exist`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			p := startController(t, tc.kubeconfig, append(tc.args, "--startup-timeout=5s")...)
			if code := p.waitExit(10 * time.Second); code != 1 {
				t.Fatalf("exit code %d, want 1", code)
			}
			lines := p.lines()
			if len(lines) != 1 || !strings.HasPrefix(lines[0], "demo-controller: ") || !strings.Contains(lines[0], tc.want) {
				t.Errorf("want one line saying %q; got:\n%s", tc.want, strings.Join(lines, "\n"))
			}
			if elapsed := time.Since(start); elapsed > 6*time.Second {
				t.Errorf("took %v, more than the startup deadline", elapsed)
			}
		})
	}
}

// manifestObjects decodes demo-controller.yaml into typed objects.
func manifestObjects(t *testing.T) []runtime.Object {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "demo-controller.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var objects []runtime.Object
	for _, doc := range strings.Split(string(data), "\n---\n") {
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
		if err != nil {
			t.Fatalf("decoding demo-controller.yaml: %v", err)
		}
		objects = append(objects, obj)
	}
	return objects
}

// podFromTemplate returns the manifest's Deployment's pod template as a Pod.
func podFromTemplate(t *testing.T) *corev1.Pod {
	t.Helper()
	for _, obj := range manifestObjects(t) {
		if d, ok := obj.(*appsv1.Deployment); ok {
			return &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "template", Namespace: d.Namespace, Labels: d.Spec.Template.Labels},
				Spec:       d.Spec.Template.Spec,
			}
		}
	}
	t.Fatal("demo-controller.yaml has no Deployment")
	return nil
}

// The Deployment's pod passes the "restricted" Pod Security level that the
// manifest's namespace enforces; a weakened copy does not.
func TestManifestPodSecurity(t *testing.T) {
	if out, err := manifestOnce(); err != nil {
		t.Fatalf("kubectl create -f demo-controller.yaml: %v\n%s", err, out)
	}
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}} // admission runs; nothing is stored
	pod := podFromTemplate(t)
	if _, err := admin.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, dryRun); err != nil {
		t.Fatalf("the Deployment's pod is not admitted: %v", err)
	}
	weakened := map[string]func(*corev1.Pod){
		"privilege escalation": func(p *corev1.Pod) { p.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation = ptr.To(true) },
		"runs as root": func(p *corev1.Pod) {
			p.Spec.SecurityContext.RunAsNonRoot, p.Spec.SecurityContext.RunAsUser = nil, ptr.To[int64](0)
		},
		"keeps capabilities": func(p *corev1.Pod) { p.Spec.Containers[0].SecurityContext.Capabilities = nil },
		"no seccomp profile": func(p *corev1.Pod) { p.Spec.SecurityContext.SeccompProfile = nil },
	}
	for name, weaken := range weakened {
		t.Run(name, func(t *testing.T) {
			pod := podFromTemplate(t)
			weaken(pod)
			_, err := admin.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, dryRun)
			if err == nil || !strings.Contains(err.Error(), "violates PodSecurity") {
				t.Fatalf("a pod whose %s was admitted (error: %v)", name, err)
			}
		})
	}
}

// The manifest's ServiceAccount may list and watch pods, and nothing else.
func TestManifestRBAC(t *testing.T) {
	if out, err := manifestOnce(); err != nil {
		t.Fatalf("kubectl create -f demo-controller.yaml: %v\n%s", err, out)
	}
	as := "--as=system:serviceaccount:demo-controller:demo-controller"
	for _, check := range []struct {
		verb, resource string
		want           string
	}{
		{"list", "pods", "yes"}, {"watch", "pods", "yes"}, {"get", "pods", "no"},
		{"delete", "pods", "no"}, {"create", "pods", "no"}, {"update", "pods/status", "no"},
		{"list", "secrets", "no"}, {"get", "configmaps", "no"}, {"list", "deployments.apps", "no"},
		{"create", "pods/exec", "no"}, {"*", "*", "no"},
	} {
		out, _ := kubectl(adminKube, "auth", "can-i", check.verb, check.resource, "--all-namespaces", as)
		if got := strings.TrimSpace(out); got != check.want {
			t.Errorf("kubectl auth can-i %s %s: %q, want %q", check.verb, check.resource, got, check.want)
		}
	}
}

// The controller's peak memory, with a few hundred pods, stays well within
// the manifest's memory limit.
func TestMemoryWithinLimit(t *testing.T) {
	const pods = 300
	for i := range pods {
		createPod(t, "memory", fmt.Sprintf("pod-%03d", i))
	}
	p := startController(t, adminKube)
	waitForLines(t, p, 0, "Cache synced", `"Pod found" pod="memory/pod-299"`)
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	var peakKiB int64
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			fmt.Sscan(strings.TrimPrefix(line, "VmHWM:"), &peakKiB)
		}
	}
	limit := podFromTemplate(t).Spec.Containers[0].Resources.Limits.Memory().Value()
	t.Logf("peak RSS after syncing %d pods: %d MiB; the manifest's memory limit: %d MiB", pods, peakKiB/1024, limit>>20)
	if peakKiB == 0 || peakKiB*1024 > limit/2 {
		t.Errorf("peak RSS %d KiB is not within half the memory limit (%d MiB)", peakKiB, limit>>20)
	}
}

// make deploy substitutes the image without editing the file; deleting the
// manifest leaves nothing behind. It runs last: it removes the manifest's
// objects, which the tests above use.
func TestDeployThenDelete(t *testing.T) {
	if out, err := manifestOnce(); err != nil {
		t.Fatalf("kubectl create -f demo-controller.yaml: %v\n%s", err, out)
	}
	before, err := os.ReadFile(filepath.Join(repoRoot, "demo-controller.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	const img = "registry.example/demo-controller:e2e"
	cmd := exec.Command("make", "-C", repoRoot, "deploy", "IMG="+img,
		"KUBECTL="+filepath.Join(serversDir, "kubectl")+" --kubeconfig "+adminKube)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make deploy: %v\n%s", err, out)
	}
	d, err := admin.AppsV1().Deployments("demo-controller").Get(context.Background(), "demo-controller", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Spec.Template.Spec.Containers[0].Image; got != img {
		t.Errorf("after make deploy IMG=%s the Deployment runs %s", img, got)
	}
	if after, _ := os.ReadFile(filepath.Join(repoRoot, "demo-controller.yaml")); string(after) != string(before) {
		t.Error("make deploy changed demo-controller.yaml")
	}

	// No namespace controller runs here to finish deleting the namespace, so
	// do not wait for it: it must be terminating, and everything else gone.
	if out, err := kubectl(adminKube, "delete", "-f", filepath.Join(repoRoot, "demo-controller.yaml"), "--wait=false"); err != nil {
		t.Fatalf("kubectl delete -f demo-controller.yaml: %v\n%s", err, out)
	}
	for _, obj := range manifestObjects(t) {
		m, err := meta.Accessor(obj)
		if err != nil {
			t.Fatal(err)
		}
		kind := obj.GetObjectKind().GroupVersionKind().Kind
		out, err := kubectl(adminKube, "get", kind, m.GetName(), "-n", m.GetNamespace(), "--ignore-not-found", "-o", "jsonpath={.metadata.deletionTimestamp}")
		if err != nil {
			t.Fatalf("kubectl get %s %s: %v\n%s", kind, m.GetName(), err, out)
		}
		if out != "" && kind != "Namespace" || kind == "Namespace" && out == "" {
			t.Errorf("%s %s is still there after kubectl delete -f (deletionTimestamp %q)", kind, m.GetName(), out)
		}
	}
}
