//go:build e2e && exercise

// The end-to-end tests of exercise 14 (exercises/14-many/README.md): a
// Greeting's copies on a real kube-apiserver, with the controller's
// ConfigMap watch delayed by a proxy, its creates and deletes counted in
// the API server's audit log, and kube-controller-manager's garbage
// collector. Run them with `make exercise-e2e EX=14-many`;
// hack/check-exercises.sh runs them on the binary built with solution.patch.

package e2e

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
)

const (
	ex14User   = "system:serviceaccount:demo-controller:demo-controller"
	ex14GCUser = "system:serviceaccount:kube-system:generic-garbage-collector"
	ex14Label  = "app.kubernetes.io/managed-by"
	// ex14Lag is how long the proxy holds each piece of a ConfigMap watch.
	ex14Lag = time.Second
)

// ex14Setup applies the Greeting CRD and the manifest, and waits until the
// API server admits a ConfigMap owned by a Greeting with blockOwnerDeletion
// from the manifest's ServiceAccount (the admission plugin learns the
// Greeting's kind from discovery, which it refreshes about every 30 s).
func ex14Setup(t *testing.T, ns string) dynamic.NamespaceableResourceInterface {
	t.Helper()
	establishGreetingCRD(t, greetingCRD, "the Greeting CRD is not established")
	if out, err := manifestOnce(); err != nil {
		t.Fatalf("kubectl create -f demo-controller.yaml: %v\n%s", err, out)
	}
	namespace(t, ns)
	sa := kubeClient(t, serviceAccountKubeconfig(t, "demo-controller", "demo-controller"))
	var last error
	if err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		last = dryRunGreetingChild(ctx, sa, ns)
		return last == nil, nil
	}); err != nil {
		t.Fatalf("the API server does not admit a copy created by demo-controller's ServiceAccount: %v. The ClusterRole "+
			"in demo-controller.yaml must grant create on configmaps, and update on greetings/finalizers (task, step 6)", last)
	}
	return adminGreetings(t)
}

// ex14Kubeconfig returns a kubeconfig for the proxy on port, with a token of
// demo-controller's ServiceAccount.
func ex14Kubeconfig(t *testing.T, name string, port int) string {
	t.Helper()
	token, err := kubectl(adminKube, "create", "token", "demo-controller", "-n", "demo-controller")
	if err != nil {
		t.Fatalf("kubectl create token: %v: %s", err, token)
	}
	return writeKubeconfig(name, port, strings.TrimSpace(token))
}

// ex14Greeting creates or changes a Greeting (spec.to and spec.copies).
func ex14Greeting(t *testing.T, greetings dynamic.NamespaceableResourceInterface, ns, name, to string, copies int) types.UID {
	t.Helper()
	ctx := context.Background()
	g, err := greetings.Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		g = &unstructured.Unstructured{Object: map[string]any{"apiVersion": "demo.example.com/v1alpha1", "kind": "Greeting",
			"metadata": map[string]any{"name": name, "namespace": ns}, "spec": map[string]any{"to": to, "copies": int64(copies)}}}
		g, err = greetings.Namespace(ns).Create(ctx, g, metav1.CreateOptions{})
	} else if err == nil {
		_ = unstructured.SetNestedField(g.Object, to, "spec", "to")
		_ = unstructured.SetNestedField(g.Object, int64(copies), "spec", "copies")
		g, err = greetings.Namespace(ns).Update(ctx, g, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
	return g.GetUID()
}

// ex14Copies returns the ConfigMaps the Greeting with uid controls, oldest
// first (creationTimestamp, then name), read from the API server.
func ex14Copies(t *testing.T, ns string, uid types.UID) []corev1.ConfigMap {
	t.Helper()
	list, err := admin.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	copies := slices.DeleteFunc(list.Items, func(cm corev1.ConfigMap) bool {
		ref := metav1.GetControllerOf(&cm)
		return ref == nil || ref.UID != uid
	})
	slices.SortFunc(copies, func(a, b corev1.ConfigMap) int {
		return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Name, b.Name))
	})
	return copies
}

func ex14Names(copies []corev1.ConfigMap) []string {
	var names []string
	for _, cm := range copies {
		names = append(names, cm.Name)
	}
	return names
}

// ex14Writes returns user's creates or deletes of ConfigMaps in ns, as the
// audit log has them (less ex14Setup's dry-run probe).
func ex14Writes(t *testing.T, user, ns, verb string) []auditEvent {
	t.Helper()
	return auditEvents(t, user, ns, func(e auditEvent) bool {
		return e.Verb == verb && e.ObjectRef.Resource == "configmaps" && e.ObjectRef.Subresource == "" &&
			e.ObjectRef.Name != "mapping-probe"
	})
}

// ex14Settle waits until the Greeting has want copies, then for a quiet
// spell of three lags (and the controller's 1 s recheck) in which user's
// creates and deletes in ns do not change: a duplicate, if any, has had
// time to come.
func ex14Settle(t *testing.T, ns, user string, uid types.UID, want int, what string) {
	t.Helper()
	count := func() int { return len(ex14Writes(t, user, ns, "create")) + len(ex14Writes(t, user, ns, "delete")) }
	last, since := -1, time.Now()
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		n := count()
		if n != last || len(ex14Copies(t, ns, uid)) != want {
			last, since = n, time.Now()
			return false, nil
		}
		return time.Since(since) >= 3*ex14Lag, nil
	}); err != nil {
		t.Fatalf("%s: within 60 s, the Greeting did not settle at %d copies; it has %q; the creates and deletes:\n%s", what,
			want, ex14Names(ex14Copies(t, ns, uid)), strings.Join(eventLines(slices.Concat(ex14Writes(t, user, ns, "create"),
				ex14Writes(t, user, ns, "delete"))), "\n"))
	}
}

// ex14Count checks that user sent exactly want requests of verb for
// ConfigMaps in ns since the first from.
func ex14Count(t *testing.T, user, ns, verb string, from, want int, what string) int {
	t.Helper()
	got := ex14Writes(t, user, ns, verb)
	if len(got)-from != want {
		why := ""
		if len(got)-from > want {
			why = "\nMore than the copies asked for: the controller counted from a cache that had not yet seen its " +
				"own creates or deletes (task, step 3)."
		}
		t.Fatalf("%s: the audit log has %d %ss of ConfigMaps by %s, want %d:\n%s%s", what, len(got)-from, verb, user, want,
			strings.Join(eventLines(got[min(from, len(got)):]), "\n"), why)
	}
	return len(got)
}

// The controller, its ConfigMap watch a second behind, keeps the count
// with exactly one create per copy and one delete per copy over, while the
// Greeting changes again and again before the cache has seen its writes;
// it deletes the newest first, replaces a copy deleted by hand, and, killed
// in the middle of a scale-up, is finished by the next process.
func TestExercise14CopiesUnderLag(t *testing.T) {
	ns := "many-lag"
	greetings := ex14Setup(t, ns)
	proxy := ex14NewDelayingProxy(t, apiPort)
	kubeconfig := ex14Kubeconfig(t, "many-lag", proxy.port)
	args := []string{"--namespace=" + ns, "--greeting-workers=3"}
	p := startController(t, kubeconfig, args...)
	waitForLines(t, p, 0, "Greetings synced")

	// Up: 3 copies, and three more events for the Greeting while its
	// copies' events are still on their way.
	uid := ex14Greeting(t, greetings, ns, "hello", "Ada", 3)
	for _, to := range []string{"Grace", "Alan", "Ada"} {
		time.Sleep(ex14Lag / 5) // events 0.2 s apart: within the lag, on purpose
		ex14Greeting(t, greetings, ns, "hello", to, 3)
	}
	ex14Settle(t, ns, ex14User, uid, 3, "copies: 3")
	creates := ex14Count(t, ex14User, ns, "create", 0, 3, "copies: 3, the Greeting changed three times within the lag")

	// Up again, then down, each with changes within the lag.
	ex14Greeting(t, greetings, ns, "hello", "Grace", 5)
	time.Sleep(ex14Lag / 5)
	ex14Greeting(t, greetings, ns, "hello", "Ada", 5)
	ex14Settle(t, ns, ex14User, uid, 5, "copies: 5")
	creates = ex14Count(t, ex14User, ns, "create", creates, 2, "copies: 3 to 5, the Greeting changed within the lag")
	keep := ex14Names(ex14Copies(t, ns, uid))[:2]
	ex14Greeting(t, greetings, ns, "hello", "Grace", 2)
	time.Sleep(ex14Lag / 5)
	ex14Greeting(t, greetings, ns, "hello", "Ada", 2)
	ex14Settle(t, ns, ex14User, uid, 2, "copies: 2")
	deletes := ex14Count(t, ex14User, ns, "delete", 0, 3, "copies: 5 to 2, the Greeting changed within the lag")
	if got := ex14Names(ex14Copies(t, ns, uid)); !slices.Equal(got, keep) {
		t.Fatalf("copies: 5 to 2: the copies left are %q, want the two oldest, %q (the newest go first: the latest "+
			"creationTimestamp, then the greatest name)", got, keep)
	}

	// Someone deletes a copy.
	if err := admin.CoreV1().ConfigMaps(ns).Delete(context.Background(), keep[0], metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ex14Settle(t, ns, ex14User, uid, 2, "a copy deleted by hand")
	creates = ex14Count(t, ex14User, ns, "create", creates, 1, "a copy deleted by hand: replaced once")
	deletes = ex14Count(t, ex14User, ns, "delete", deletes, 0, "a copy deleted by hand")

	// Killed in the middle of a scale-up: each create's answer comes 0.3 s
	// late, and the process dies right after the API server made the first.
	proxy.setCreateDelay(300 * time.Millisecond)
	ex14Greeting(t, greetings, ns, "hello", "Grace", 6)
	if err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return len(ex14Writes(t, ex14User, ns, "create")) > creates, nil
	}); err != nil {
		t.Fatal("copies: 2 to 6: no create within 30 s")
	}
	p.signal(syscall.SIGKILL)
	p.waitExit(10 * time.Second)
	before := len(ex14Writes(t, ex14User, ns, "create")) - creates
	proxy.setCreateDelay(0)
	p = startController(t, kubeconfig, args...)
	ex14Settle(t, ns, ex14User, uid, 6, "copies: 2 to 6, the controller killed in the middle and started again")
	ex14Count(t, ex14User, ns, "create", creates, 4, "copies: 2 to 6, killed after the API server made "+
		fmt.Sprint(before)+" of the 4, and started again: the new process lists what exists, and makes only the rest")
	ex14Count(t, ex14User, ns, "delete", deletes, 0, "copies: 2 to 6, killed and started again")
	t.Logf("killed after %d of the 4 creates had reached the API server; the next process made the other %d", before, 4-before)
}

// The control run: a naive controller, written here, that counts a
// Greeting's copies from its cache and creates the difference, syncing as
// often as the Greeting changes, through the same proxy. It makes more
// copies than asked: the lag the tests above run under is real, and only
// the task's records keep the count.
func TestExercise14NaiveMakesTooMany(t *testing.T) {
	ns := "many-naive"
	greetings := ex14Setup(t, ns)
	proxy := ex14NewDelayingProxy(t, apiPort)
	client := kubeClient(t, writeKubeconfig("many-naive", proxy.port, adminToken))
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = ex14Label + "=demo-controller" }))
	configMaps := factory.Core().V1().ConfigMaps().TypedInformer()
	lister := factory.Core().V1().ConfigMaps().Lister()
	ctx, cancel := context.WithCancel(context.Background())
	defer factory.Shutdown()
	defer cancel()
	factory.StartWithContext(ctx)
	cache.WaitForCacheSync(ctx.Done(), configMaps.HasSynced)

	uid := ex14Greeting(t, greetings, ns, "naive", "Ada", 3)
	g, err := greetings.Namespace(ns).Get(ctx, "naive", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for range 4 { // four syncs, 0.2 s apart: the Greeting's events
		n := 0
		cached, _ := lister.ConfigMaps(ns).List(labels.Everything())
		for _, cm := range cached {
			if ref := metav1.GetControllerOf(cm); ref != nil && ref.UID == uid {
				n++
			}
		}
		for range 3 - n {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "greeting-naive-", Namespace: ns,
				Labels:          map[string]string{ex14Label: "demo-controller"},
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(g, greetingsGVR.GroupVersion().WithKind("Greeting"))}}}
			if _, err := client.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(ex14Lag / 5)
	}
	made := len(ex14Copies(t, ns, uid)) // its creates have all been answered
	if made <= 3 {
		t.Fatalf("the naive controller, counting from a cache %v behind, made %d copies for 3: the proxy does not "+
			"delay the ConfigMap watch, and the tests above prove nothing", ex14Lag, made)
	}
	t.Logf("the naive controller, counting from a cache %v behind, made %d copies for 3 (the audit log: %d creates)",
		ex14Lag, made, len(ex14Writes(t, "admin", ns, "create")))
}

// The garbage collector, not the controller, deletes a Greeting's copies.
func TestExercise14CollectorDeletesTheCopies(t *testing.T) {
	ns := "many-gc"
	greetings := ex14Setup(t, ns)
	gc := startGarbageCollector(t)
	canaries := greetings.Namespace(ns)
	waitForCollection(t, gc, "demo.example.com/v1alpha1", "Greeting", func(ctx context.Context) (metav1.Object, error) {
		return canaries.Create(ctx, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "demo.example.com/v1alpha1",
			"kind": "Greeting", "metadata": map[string]any{"generateName": "canary-"}, "spec": map[string]any{"to": "Canary", "copies": int64(0)}}}, metav1.CreateOptions{})
	}, func(ctx context.Context, name string) error {
		return canaries.Delete(ctx, name, metav1.DeleteOptions{})
	})
	p := startController(t, serviceAccountKubeconfig(t, "demo-controller", "demo-controller"), "--namespace="+ns, "--greeting-workers=2")
	waitForLines(t, p, 0, "Greetings synced")
	uid := ex14Greeting(t, greetings, ns, "bye", "Ada", 4)
	ex14Settle(t, ns, ex14User, uid, 4, "copies: 4")
	started := time.Now()
	if err := greetings.Namespace(ns).Delete(context.Background(), "bye", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return len(ex14Copies(t, ns, uid)) == 0, nil
	}); err != nil {
		t.Fatalf("within 30 s of the Greeting's delete, its copies %q were not deleted", ex14Names(ex14Copies(t, ns, uid)))
	}
	t.Logf("the garbage collector deleted the 4 copies within %v of their Greeting", time.Since(started).Round(10*time.Millisecond))
	if n := len(ex14Writes(t, ex14GCUser, ns, "delete")); n < 4 {
		t.Errorf("the audit log has %d deletes of ConfigMaps by the garbage collector, want the 4 copies", n)
	}
	if deletes := ex14Writes(t, ex14User, ns, "delete"); len(deletes) > 0 {
		t.Errorf("demo-controller deleted copies itself; the garbage collector deletes them with their Greeting:\n%s",
			strings.Join(eventLines(deletes), "\n"))
	}
}

// ex14Proxy is an HTTPS proxy to the API server on port to, with the API
// server's own certificate (so writeKubeconfig's kubeconfigs trust it). It
// passes every request, and holds each piece of a ConfigMap watch's
// answer for ex14Lag before it passes it on: the ConfigMap cache of a
// client behind it lags by a second. It can delay the answers to ConfigMap
// creates too.
type ex14Proxy struct {
	port        int
	mu          sync.Mutex
	createDelay time.Duration
}

func (p *ex14Proxy) setCreateDelay(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.createDelay = d
}

func ex14NewDelayingProxy(t *testing.T, to int) *ex14Proxy {
	t.Helper()
	cert, pool := apiServerCert(t)
	target := &url.URL{Scheme: "https", Host: fmt.Sprintf("127.0.0.1:%d", to)}
	transport := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}
	forward := httputil.NewSingleHostReverseProxy(target)
	forward.Transport = transport
	forward.FlushInterval = -1 // a WATCH streams
	p := &ex14Proxy{port: freePort()}
	server := &http.Server{
		Addr:      fmt.Sprintf("127.0.0.1:%d", p.port),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			configMaps := strings.HasSuffix(r.URL.Path, "/configmaps")
			switch q := r.URL.Query(); {
			case configMaps && (q.Get("watch") == "true" || q.Get("watch") == "1"):
				ex14DelayedStream(w, r, transport, target)
			case configMaps && r.Method == http.MethodPost:
				forward.ServeHTTP(&ex14LateWriter{ResponseWriter: w, proxy: p}, r)
			default:
				forward.ServeHTTP(w, r)
			}
		}),
	}
	listener, err := net.Listen("tcp", server.Addr)
	if err != nil {
		t.Fatal(err)
	}
	go server.ServeTLS(listener, "", "")
	t.Cleanup(func() { server.Close() })
	return p
}

// ex14LateWriter holds the answer to a create for the proxy's createDelay.
type ex14LateWriter struct {
	http.ResponseWriter
	proxy *ex14Proxy
}

func (w *ex14LateWriter) WriteHeader(code int) {
	w.proxy.mu.Lock()
	d := w.proxy.createDelay
	w.proxy.mu.Unlock()
	time.Sleep(d)
	w.ResponseWriter.WriteHeader(code)
}

// ex14DelayedStream passes a watch on, each piece of it ex14Lag after it
// came from the API server, in order.
func ex14DelayedStream(w http.ResponseWriter, r *http.Request, transport http.RoundTripper, target *url.URL) {
	u := *target
	u.Path, u.RawQuery = r.URL.Path, r.URL.RawQuery
	req, err := http.NewRequestWithContext(r.Context(), r.Method, u.String(), nil)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	req.Header = r.Header.Clone()
	resp, err := transport.RoundTrip(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	w.(http.Flusher).Flush()
	type piece struct {
		at   time.Time
		data []byte
	}
	pieces := make(chan piece, 4096)
	go func() {
		defer close(pieces)
		buf := make([]byte, 64<<10)
		for {
			n, err := resp.Body.Read(buf)
			if n > 0 {
				select {
				case pieces <- piece{time.Now().Add(ex14Lag), bytes.Clone(buf[:n])}:
				case <-r.Context().Done():
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	for p := range pieces {
		select {
		case <-time.After(time.Until(p.at)):
		case <-r.Context().Done():
			return
		}
		if _, err := w.Write(p.data); err != nil {
			return
		}
		w.(http.Flusher).Flush()
	}
}
