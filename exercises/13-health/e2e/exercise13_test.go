//go:build e2e && exercise

// The end-to-end test of exercise 13 (exercises/13-health/README.md):
// hack/check-exercises.sh copies it into e2e/ of a copy of the project with
// the solution applied, and runs it against a real kube-apiserver, on the
// binary built with the solution, as the manifest's ServiceAccount. It reads
// the binary's /metrics while it runs, asks its probes while its first LIST
// of pods is held (by a proxy in front of the API server) and while the API
// server is down, and builds a second binary whose handler fails, to count
// retries, and a third whose clock runs 100 times as fast, to ask its probes
// after minutes of a quiet namespace and of an outage.

package e2e

import (
	"bytes"
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

const ex13MaxRetries = 5 // maxRetries in controller.go

// The manifest's Deployment, with its port and probes, is accepted by the
// API server, and passes the restricted Pod Security level; the
// ServiceAccount's rights are what they were.
func TestExercise13Manifest(t *testing.T) {
	if out, err := manifestOnce(); err != nil {
		t.Fatalf("kubectl create -f demo-controller.yaml: %v\n%s", err, out)
	}
	d, err := admin.AppsV1().Deployments("demo-controller").Get(context.Background(), "demo-controller", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := d.Spec.Template.Spec.Containers[0]
	if c.LivenessProbe == nil || c.LivenessProbe.HTTPGet == nil || c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil {
		t.Fatalf("the Deployment on the server has no httpGet liveness and readiness probes: %+v, %+v", c.LivenessProbe, c.ReadinessProbe)
	}
	t.Logf("as the API server holds them (defaults filled in): ports %v; liveness %s %s every %d s, timeout %d s, "+
		"restart after %d failures; readiness %s every %d s", c.Ports, c.LivenessProbe.HTTPGet.Path, c.LivenessProbe.HTTPGet.Port.String(),
		c.LivenessProbe.PeriodSeconds, c.LivenessProbe.TimeoutSeconds, c.LivenessProbe.FailureThreshold,
		c.ReadinessProbe.HTTPGet.Path, c.ReadinessProbe.PeriodSeconds)
	pod := podFromTemplate(t)
	pod.Name = "ex13-template"
	if _, err := admin.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
		t.Fatalf("the Deployment's pod, with its port and probes, is not admitted: %v", err)
	}
	for _, check := range []struct{ verb, resource, want string }{
		{"list", "pods", "yes"}, {"watch", "pods", "yes"}, {"get", "pods", "no"}, {"get", "nodes", "no"},
	} {
		out, _ := kubectl(adminKube, "auth", "can-i", check.verb, check.resource, "--all-namespaces",
			"--as=system:serviceaccount:demo-controller:demo-controller")
		if got := strings.TrimSpace(out); got != check.want {
			t.Errorf("kubectl auth can-i %s %s as the manifest's ServiceAccount: %q, want %q: metrics and probes "+
				"need nothing from the API server", check.verb, check.resource, got, check.want)
		}
	}
}

// The binary's /metrics while it runs, as the manifest's ServiceAccount:
// adds count the pods, depth comes back to 0, and nothing is retried.
func TestExercise13Metrics(t *testing.T) {
	if out, err := manifestOnce(); err != nil {
		t.Fatalf("kubectl create -f demo-controller.yaml: %v\n%s", err, out)
	}
	const ns = "ex13-metrics"
	for i := range 4 {
		createPod(t, ns, fmt.Sprintf("before-%d", i))
	}
	p, address := ex13Start(t, "", serviceAccountKubeconfig(t, "demo-controller", "demo-controller"), "--namespace="+ns)
	at := waitForLines(t, p, 0, "Cache synced")
	for i := range 4 {
		waitForLines(t, p, at, fmt.Sprintf(`"Pod found" pod="%s/before-%d"`, ns, i))
	}
	m := ex13Settled(t, address)
	ex13Expect(t, m, "workqueue_adds_total", 4, "4 pods came in the first list: one add each")
	ex13Expect(t, m, "workqueue_queue_duration_seconds_count", 4, "the worker took 4 keys")
	ex13Expect(t, m, "workqueue_work_duration_seconds_count", 4, "the worker finished 4 keys")
	ex13Expect(t, m, "workqueue_retries_total", 0, "nothing failed")

	for i := range 3 {
		createPod(t, ns, fmt.Sprintf("after-%d", i))
	}
	for i := range 3 {
		waitForLines(t, p, at, fmt.Sprintf(`"Pod created" pod="%s/after-%d"`, ns, i))
	}
	m = ex13Settled(t, address)
	for series := range m { // the log names pods; the metrics never do
		if strings.Contains(series, `="before-`) || strings.Contains(series, `="after-`) || strings.Contains(series, "/before-") || strings.Contains(series, "/after-") {
			t.Fatalf("/metrics has %s, labelled with a pod's name: each value of a label is a series, kept by the "+
				"controller and by Prometheus for good, and pods come and go by the thousand", series)
		}
	}
	ex13Expect(t, m, "workqueue_adds_total", 7, "3 more pods were created: one add each")
	ex13Expect(t, m, "workqueue_unfinished_work_seconds", 0, "the worker has nothing in hand")
	t.Logf("after 4 pods found and 3 created: %s", m.summary())
	if rss, ok := m.get("process_resident_memory_bytes", false); ok {
		t.Logf("process_resident_memory_bytes: %.1f MiB", rss/(1<<20))
	}
}

// A handler that fails: a second binary, built from the project with its
// handler wrapped, fails every call for a pod whose name starts with
// "fail-". Each change is tried 1 + maxRetries times, then dropped; each
// retry is an AddAfter, counted in workqueue_retries_total, and an add when
// its delay ends.
func TestExercise13Retries(t *testing.T) {
	if out, err := manifestOnce(); err != nil {
		t.Fatalf("kubectl create -f demo-controller.yaml: %v\n%s", err, out)
	}
	const ns = "ex13-retries"
	binary := ex13FailingBinary(t)
	p, address := ex13Start(t, binary, serviceAccountKubeconfig(t, "demo-controller", "demo-controller"), "--namespace="+ns)
	at := waitForLines(t, p, 0, "Cache synced")
	createPod(t, ns, "fail-1")
	at = waitForLines(t, p, at, `"Dropping pod after retries" err="the test's handler fails every call for fail-1"`)
	createPod(t, ns, "works") // created last: once it is reported, fail-1's retries are over
	waitForLines(t, p, at, `"Pod created" pod="ex13-retries/works"`)
	calls := countLines(p, 0, `"Failing on purpose" pod="ex13-retries/fail-1"`)
	if calls != 1+ex13MaxRetries {
		t.Fatalf("the failing handler was called %d times for fail-1, want 1 + maxRetries = %d", calls, 1+ex13MaxRetries)
	}
	m := ex13Settled(t, address)
	ex13Expect(t, m, "workqueue_retries_total", ex13MaxRetries, fmt.Sprintf("the handler failed %d times for fail-1: "+
		"its first call and %d retries, each an AddAfter (AddRateLimited)", calls, ex13MaxRetries))
	ex13Expect(t, m, "workqueue_adds_total", 1+ex13MaxRetries+1, "fail-1 was added once, then once at the end of "+
		"each retry's delay; works once")
	var lines []string
	for _, line := range strings.Split(ex13Probe(address, "/metrics").body, "\n") {
		if strings.HasPrefix(line, "workqueue_") && !strings.Contains(line, "_bucket{") {
			lines = append(lines, line)
		}
	}
	t.Logf("after fail-1 failed %d times and was dropped, and works was created, /metrics has:\n%s", calls, strings.Join(lines, "\n"))
}

// A slow first list: a proxy in front of the API server holds the
// informer's LIST of pods (not run's start-up check, a LIST with limit=1,
// which comes first). Meanwhile /healthz answers 200 and /readyz fails; once
// the list is let go and the cache has synced, /readyz answers 200.
func TestExercise13Readiness(t *testing.T) {
	if out, err := manifestOnce(); err != nil {
		t.Fatalf("kubectl create -f demo-controller.yaml: %v\n%s", err, out)
	}
	const ns = "ex13-ready"
	createPod(t, ns, "there")
	proxy := ex13StartProxy(t)
	kube := writeKubeconfig("ex13-proxy", proxy.port, ex13Token(t))
	p, address := ex13Start(t, "", kube, "--namespace="+ns)
	proxy.waitForHeld(t)
	heldAt := time.Now()
	health, ready := ex13Probe(address, "/healthz"), ex13Probe(address, "/readyz")
	if health.code != http.StatusOK {
		t.Errorf("while the informer's first LIST was held, /healthz answered %s, want 200", health)
	}
	if ready.code < 400 {
		t.Errorf("while the informer's first LIST was held, the cache empty, /readyz answered %s, want a failure (503)", ready)
	}
	if strings.Contains(p.out.String(), "Cache synced") {
		t.Fatalf("the controller logged \"Cache synced\" while the test held its LIST of pods: does the proxy hold the right request? %s", proxy.seen())
	}
	t.Logf("while the LIST was held: /healthz %s, /readyz %s", health, ready)

	proxy.release()
	released := time.Now()
	waitForLines(t, p, 0, "Cache synced", `"Pod found" pod="ex13-ready/there"`)
	var last ex13Answer
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		last = ex13Probe(address, "/readyz")
		return last.code == http.StatusOK, nil
	})
	if err != nil {
		t.Fatalf("/readyz still answered %s 10 s after the cache synced", last)
	}
	t.Logf("the LIST held %v; /readyz answered 200 %v after it was let go; the requests the proxy saw: %s",
		released.Sub(heldAt).Round(time.Millisecond), time.Since(released).Round(time.Millisecond), proxy.seen())
}

// The API server goes down while the controller runs: /healthz and /readyz
// answer 200 all along, /metrics too, and the controller goes on when it is
// back. A build with a fast clock answers 200 to both probes too, after
// minutes (on its clock) of a quiet namespace, then of the outage.
func TestExercise13Outage(t *testing.T) {
	if out, err := manifestOnce(); err != nil {
		t.Fatalf("kubectl create -f demo-controller.yaml: %v\n%s", err, out)
	}
	const ns = "ex13-outage"
	createPod(t, ns, "stays")
	kube := serviceAccountKubeconfig(t, "demo-controller", "demo-controller")
	// -v=4: client-go logs a lost connection only at that verbosity.
	p, address := ex13Start(t, "", kube, "--namespace="+ns, "-v=4")
	at := waitForLines(t, p, 0, "Cache synced", `"Pod found" pod="ex13-outage/stays"`)
	// Beside it, the same code with a clock that runs ex13Speed times as
	// fast: a few seconds of a quiet namespace, then of the outage, are
	// minutes on its clock. Its probes must answer 200 all along.
	fast, fastAddress := ex13Start(t, ex13FastClockBinary(t), kube, "--namespace="+ns)
	waitForLines(t, fast, 0, "Cache synced", `"Pod found" pod="ex13-outage/stays"`)
	quiet := time.Now()
	for time.Since(quiet) < 3*time.Second {
		for _, path := range []string{"/healthz", "/readyz"} {
			if got := ex13Probe(fastAddress, path); got.code != http.StatusOK {
				t.Fatalf("%s answered %s in a quiet namespace, %v after the cache synced, the API server up and no "+
					"pod changing, in the build whose clock runs %d times as fast (%v on its clock). A probe that "+
					"fails after some time without something (the worker handling a pod, an answer from the API "+
					"server: a watch with nothing to tell answers nothing) fails in every quiet cluster, and the "+
					"kubelet restarts a healthy controller (liveness) or takes it out of service (readiness). "+
					"Neither probe may depend on a clock", path, got, time.Since(quiet).Round(100*time.Millisecond),
					ex13Speed, (time.Since(quiet) * ex13Speed).Round(time.Second))
			}
		}
		time.Sleep(100 * time.Millisecond) // a probe's period, not a wait for something to happen
	}

	apiServer.stop()
	down := time.Now()
	t.Cleanup(func() { // leave a working API server to the tests that follow
		if apiServer.exited() {
			apiServer, _ = startAPIServer(apiPort, argValue(etcd, "--listen-client-urls="))
		}
	})
	at = waitForLines(t, p, at, "connection refused")
	// Ask the probes, as a kubelet would, until the reflector has been
	// refused three more times.
	// And the API server's own /livez, as a liveness probe that asked it
	// would.
	answers := map[string]map[string]int{"/healthz": {}, "/readyz": {}, "/metrics": {}}
	apiLivez := map[string]int{}
	insecure := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	probes := 0
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		probes++
		for _, path := range []string{"/healthz", "/readyz"} {
			if got := ex13Probe(fastAddress, path); got.code != http.StatusOK {
				return false, fmt.Errorf("%s answered %s %v after the API server stopped, in the build whose clock "+
					"runs %d times as fast (%v on its clock; it had answered 200 all along in the quiet namespace "+
					"before): %s", path, got, time.Since(down).Round(10*time.Millisecond),
					ex13Speed, (time.Since(down) * ex13Speed).Round(time.Second), map[string]string{
						"/healthz": "liveness must never depend on the API server, however long it is away: " +
							"the kubelet would restart every replica of the controller, which fixes nothing, and each would " +
							"list every pod again the moment the server is back",
						"/readyz": "after the cache had synced, readiness reads only the process's own state, however long the " +
							"outage: the cache is still there, and the reflector retries on its own",
					}[path])
			}
		}
		for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
			got := ex13Probe(address, path)
			answers[path][got.String()]++
			if got.code != http.StatusOK {
				return false, fmt.Errorf("%s answered %s %v after the API server stopped, %s", path, got,
					time.Since(down).Round(100*time.Millisecond), map[string]string{
						"/healthz": "a liveness that fails makes the kubelet restart the container: liveness must never depend on the API server",
						"/readyz":  "after the cache had synced: readiness reads only the process's own state, and the cache is still there",
						"/metrics": "and metrics are read from the process alone",
					}[path])
			}
		}
		if resp, err := insecure.Get(fmt.Sprintf("https://127.0.0.1:%d/livez", apiPort)); err != nil {
			apiLivez["refused"]++
		} else {
			resp.Body.Close()
			apiLivez[resp.Status]++
		}
		// (3 s or more: 5 minutes on the fast clock.)
		return countLines(p, at, "connection refused") >= 3 && time.Since(down) > 3*time.Second, nil
	})
	if err != nil && !wait.Interrupted(err) {
		t.Fatal(err)
	} else if err != nil {
		t.Fatalf("the controller did not log 3 more refused connections within a minute of the API server's stop:\n%s", p.tail(10))
	}
	outage := time.Since(down)
	refused := countLines(p, 0, "connection refused")
	for path, got := range answers {
		if got["200 OK"] != probes {
			t.Errorf("while the API server was down, %s answered %v to %d probes, want 200 to each", path, got, probes)
		}
	}
	if p.exited() {
		t.Fatalf("the controller exited during the outage:\n%s", p.tail(10))
	}

	var err2 error
	if apiServer, err2 = startAPIServer(apiPort, argValue(etcd, "--listen-client-urls=")); err2 != nil {
		t.Fatal(err2)
	}
	back := time.Now()
	createPod(t, ns, "after")
	// After a minute of refused connections the reflector waits 30 s to 60 s
	// between tries (TestReflectorBackoffGrows): wait longer than that.
	waitForLinesWithin(t, p, at, 90*time.Second, `"Pod created" pod="ex13-outage/after"`)
	t.Logf("the API server was down %v (it was restarted after that, and back %v later); the controller logged %d "+
		"refused connections; %d rounds of probes, 100 ms apart: /healthz %v, /readyz %v, /metrics %v; the API "+
		"server's /livez %v; then a pod created after the restart was reported %v later", outage.Round(100*time.Millisecond),
		back.Sub(down.Add(outage)).Round(100*time.Millisecond), refused, probes, answers["/healthz"], answers["/readyz"],
		answers["/metrics"], apiLivez, time.Since(back).Round(100*time.Millisecond))
	if got := ex13Probe(address, "/readyz"); got.code != http.StatusOK {
		t.Errorf("after the outage /readyz answered %s", got)
	}
}

// ex13Start runs the binary (the project's, if binary is "") with a
// kubeconfig and more flags, serving on 127.0.0.1:0, and returns the process
// and the address it serves on, from its log.
func ex13Start(t *testing.T, binary, kubeconfig string, args ...string) (*process, string) {
	t.Helper()
	args = append(args, "--listen-address=127.0.0.1:0")
	var p *process
	if binary == "" {
		p = startController(t, kubeconfig, args...)
	} else {
		p = startProcess("demo-controller", binary, append([]string{"--kubeconfig", kubeconfig}, args...)...)
		t.Cleanup(func() {
			p.stop()
			if t.Failed() {
				t.Logf("%s %s log:\n%s", filepath.Base(binary), strings.Join(args, " "), p.out.String())
			}
		})
	}
	at := waitForLines(t, p, 0, `"Serving metrics and probes"`)
	line := p.lines()[at-1]
	m := regexp.MustCompile(` address="([^"]+)"`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("the line %q says no address=", line)
	}
	return p, m[1]
}

// ex13Answer is what a probe got.
type ex13Answer struct {
	code int
	body string
	err  error
}

func (a ex13Answer) String() string {
	if a.err != nil {
		return a.err.Error()
	}
	return fmt.Sprintf("%d %s", a.code, http.StatusText(a.code))
}

// ex13Probe asks the path as a kubelet does, with its default 1 s timeout.
func ex13Probe(address, path string) ex13Answer {
	resp, err := (&http.Client{Timeout: time.Second}).Get("http://" + address + path)
	if err != nil {
		return ex13Answer{err: err}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return ex13Answer{code: resp.StatusCode, body: string(body)}
}

// ex13Metrics is one read of /metrics: each sample line's series and value.
type ex13Metrics map[string]float64

var ex13Sample = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})? (\S+)$`)

func ex13Scrape(t *testing.T, address string) ex13Metrics {
	t.Helper()
	a := ex13Probe(address, "/metrics")
	if a.code != http.StatusOK {
		t.Fatalf("/metrics: %s", a)
	}
	m := ex13Metrics{}
	for _, line := range strings.Split(a.body, "\n") {
		if s := ex13Sample.FindStringSubmatch(line); s != nil {
			v, err := strconv.ParseFloat(s[3], 64)
			if err != nil {
				t.Fatalf("/metrics: %q: %v", line, err)
			}
			m[s[1]+s[2]] = v
		}
	}
	return m
}

// get returns the value of a series: of the queue named "pods" if ofQueue.
func (m ex13Metrics) get(name string, ofQueue bool) (float64, bool) {
	for series, v := range m {
		if strings.HasPrefix(series, name+"{") && (!ofQueue || strings.Contains(series, `name="pods"`)) || series == name && !ofQueue {
			return v, true
		}
	}
	return 0, false
}

// summary is the workqueue's series, as /metrics has them.
func (m ex13Metrics) summary() string {
	var out []string
	for _, name := range []string{"workqueue_adds_total", "workqueue_depth", "workqueue_retries_total",
		"workqueue_queue_duration_seconds_count", "workqueue_queue_duration_seconds_sum",
		"workqueue_work_duration_seconds_count", "workqueue_work_duration_seconds_sum",
		"workqueue_unfinished_work_seconds", "workqueue_longest_running_processor_seconds"} {
		v, _ := m.get(name, true)
		out = append(out, fmt.Sprintf("%s %g", name, v))
	}
	return strings.Join(out, ", ")
}

// ex13Settled waits until the queue is empty and the worker idle, and
// returns /metrics then.
func ex13Settled(t *testing.T, address string) ex13Metrics {
	t.Helper()
	var m ex13Metrics
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		m = ex13Scrape(t, address)
		depth, ok := m.get("workqueue_depth", true)
		return ok && depth == 0, nil
	})
	if err != nil {
		t.Fatalf("workqueue_depth{name=\"pods\"} did not come back to 0 within 10 s: %s", m.summary())
	}
	return m
}

func ex13Expect(t *testing.T, m ex13Metrics, name string, want float64, why string) {
	t.Helper()
	if got, ok := m.get(name, true); !ok {
		t.Fatalf("/metrics has no %s{name=\"pods\"}", name)
	} else if got != want {
		t.Fatalf("%s{name=\"pods\"} is %v, want %v: %s. All: %s", name, got, want, why, m.summary())
	}
}

// ex13Token returns a token of the manifest's ServiceAccount.
func ex13Token(t *testing.T) string {
	t.Helper()
	token, err := kubectl(adminKube, "create", "token", "demo-controller", "-n", "demo-controller")
	if err != nil {
		t.Fatalf("kubectl create token: %v: %s", err, token)
	}
	return strings.TrimSpace(token)
}

// ex13FailingBinary builds the project as it is (the solution applied), with
// newHandler's Handler wrapped in one that logs "Failing on purpose" and
// fails every call for a pod whose name starts with "fail-": a handler.go
// whose newHandler is renamed, and one more file with the wrapper.
func ex13FailingBinary(t *testing.T) string {
	t.Helper()
	handlerGo := filepath.Join(repoRoot, "handler.go")
	src, err := os.ReadFile(handlerGo)
	if err != nil {
		t.Fatal(err)
	}
	decl := regexp.MustCompile(`(?m)^func newHandler\(\) Handler \{`)
	if !decl.Match(src) {
		t.Fatalf("handler.go has no line `func newHandler() Handler {`: this test builds a binary whose handler fails " +
			"by wrapping the one newHandler returns, and the exercise does not change newHandler")
	}
	wrapped := decl.ReplaceAll(src, []byte("func newHandler() Handler { return ex13Failing{ex13NewHandler()} }\n\nfunc ex13NewHandler() Handler {"))
	failing := `package main

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// ex13Failing fails every call for a pod whose name starts with "fail-".
type ex13Failing struct{ Handler }

func (h ex13Failing) fail(ctx context.Context, pod *corev1.Pod) error {
	if !strings.HasPrefix(pod.Name, "fail-") {
		return nil
	}
	klog.FromContext(ctx).Info("Failing on purpose")
	return fmt.Errorf("the test's handler fails every call for %s", pod.Name)
}

func (h ex13Failing) Created(ctx context.Context, pod *corev1.Pod, found bool) error {
	if err := h.fail(ctx, pod); err != nil {
		return err
	}
	return h.Handler.Created(ctx, pod, found)
}

func (h ex13Failing) Updated(ctx context.Context, old, pod *corev1.Pod) error {
	if err := h.fail(ctx, pod); err != nil {
		return err
	}
	return h.Handler.Updated(ctx, old, pod)
}

func (h ex13Failing) Deleted(ctx context.Context, pod *corev1.Pod) error {
	if err := h.fail(ctx, pod); err != nil {
		return err
	}
	return h.Handler.Deleted(ctx, pod)
}
`
	return ex13Build(t, "failing", "a failing handler", map[string][]byte{"handler.go": wrapped, "ex13_failing.go": []byte(failing)})
}

// ex13Build builds the project as it is (the solution applied), with some of
// its files replaced or added, as demo-controller-<name>. The build changes
// no file: go build's -overlay hands the compiler the files given (by their
// names in the project's root) in place of those there.
func ex13Build(t *testing.T, name, what string, files map[string][]byte) string {
	t.Helper()
	dir := t.TempDir()
	replace := map[string]string{}
	for file, content := range files {
		if err := os.WriteFile(filepath.Join(dir, file), content, 0o600); err != nil {
			t.Fatal(err)
		}
		replace[filepath.Join(repoRoot, file)] = filepath.Join(dir, file)
	}
	data, _ := json.Marshal(map[string]map[string]string{"Replace": replace})
	if err := os.WriteFile(filepath.Join(dir, "overlay.json"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	binary := filepath.Join(workDir, "demo-controller-"+name)
	// The build's flags (Makefile's BUILD), so that the packages compiled for
	// the binary under test are reused.
	cmd := exec.Command("go", "build", "-trimpath", "-gcflags=all=-dwarf=false", "-ldflags", "-s -w -X main.version=ex13-"+name,
		"-overlay", filepath.Join(dir, "overlay.json"), "-o", binary, ".")
	cmd.Dir, cmd.Env = repoRoot, append(os.Environ(), "CGO_ENABLED=0")
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the binary with %s: %v\n%s", what, err, out)
	}
	t.Logf("built the binary with %s in %v", what, time.Since(start).Round(100*time.Millisecond))
	return binary
}

// ex13Speed is how many times as fast as the real clock the clock of
// ex13FastClockBinary's build runs: 2 minutes on it are 1.2 s.
const ex13Speed = 100

// ex13FastClockBinary builds the project as it is (the solution applied),
// with a clock that runs ex13Speed times as fast, so that a test of seconds
// sees what a probe would answer after minutes: in each of the project's Go
// files, the calls of package time that read the clock or wait on it
// (time.Now, time.Since, time.Sleep, time.NewTicker...) call ex13Clock
// instead, and a call x.Reset(d) (a Timer's, a Ticker's) is given d on the
// fast clock. client-go's own code keeps the real clock.
func ex13FastClockBinary(t *testing.T) string {
	t.Helper()
	reads := map[string]bool{"Now": true, "Since": true, "Until": true, "Sleep": true, "After": true, "AfterFunc": true,
		"NewTimer": true, "NewTicker": true, "Tick": true}
	files := map[string][]byte{"ex13_clock.go": []byte(`package main

import "time"

// ex13Clock runs ` + strconv.Itoa(ex13Speed) + ` times as fast as the real clock, from the process's start.
var ex13Clock = ex13FastClock{start: time.Now()}

type ex13FastClock struct{ start time.Time }

func (c ex13FastClock) Now() time.Time                { return c.start.Add(time.Since(c.start) * ` + strconv.Itoa(ex13Speed) + `) }
func (c ex13FastClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
func (c ex13FastClock) Until(t time.Time) time.Duration { return t.Sub(c.Now()) }
func (c ex13FastClock) real(d time.Duration) time.Duration { return d / ` + strconv.Itoa(ex13Speed) + ` }
func (c ex13FastClock) Sleep(d time.Duration)            { time.Sleep(c.real(d)) }
func (c ex13FastClock) After(d time.Duration) <-chan time.Time { return time.After(c.real(d)) }
func (c ex13FastClock) AfterFunc(d time.Duration, f func()) *time.Timer { return time.AfterFunc(c.real(d), f) }
func (c ex13FastClock) NewTimer(d time.Duration) *time.Timer  { return time.NewTimer(c.real(d)) }
func (c ex13FastClock) NewTicker(d time.Duration) *time.Ticker { return time.NewTicker(c.real(d)) }
func (c ex13FastClock) Tick(d time.Duration) <-chan time.Time { return time.Tick(c.real(d)) }

// ex13Scaled is the argument of a call x.Reset(v): a duration on the fast clock, if it is one.
func ex13Scaled[T any](v T) T {
	if d, ok := any(v).(time.Duration); ok {
		return any(ex13Clock.real(d)).(T)
	}
	return v
}
`)}
	sources, err := filepath.Glob(filepath.Join(repoRoot, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var changed []string
	for _, source := range sources {
		if strings.HasSuffix(source, "_test.go") {
			continue
		}
		fset := token.NewFileSet()
		file, err := parser.ParseFile(fset, source, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		name := "" // what the file calls package time
		for _, spec := range file.Imports {
			if spec.Path.Value == strconv.Quote("time") {
				name = "time"
				if spec.Name != nil {
					name = spec.Name.Name
				}
			}
		}
		if name == "" || name == "_" || name == "." {
			continue
		}
		calls := 0
		ast.Inspect(file, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				if x, ok := n.X.(*ast.Ident); ok && x.Name == name && reads[n.Sel.Name] {
					x.Name = "ex13Clock"
					calls++
				}
			case *ast.CallExpr: // a Timer's or a Ticker's Reset(d), most likely
				if sel, ok := n.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "Reset" && len(n.Args) == 1 {
					n.Args[0] = &ast.CallExpr{Fun: ast.NewIdent("ex13Scaled"), Args: []ast.Expr{n.Args[0]}}
					calls++
				}
			}
			return true
		})
		if calls == 0 {
			continue
		}
		var out bytes.Buffer
		if err := format.Node(&out, fset, file); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&out, "\nvar _ %s.Duration // (the file may use package time for nothing else now)\n", name)
		files[filepath.Base(source)] = out.Bytes()
		changed = append(changed, fmt.Sprintf("%s (%d)", filepath.Base(source), calls))
	}
	t.Logf("the clock's calls sped up %d times: %s", ex13Speed, cmp.Or(strings.Join(changed, ", "), "none in the project's files"))
	return ex13Build(t, "fast-clock", "a clock "+strconv.Itoa(ex13Speed)+" times as fast", files)
}

// ex13Proxy is a TLS proxy in front of the API server, with the API
// server's own certificate (so the suite's kubeconfigs trust it), that holds
// the informer's first LIST of pods until released.
type ex13Proxy struct {
	port int

	mu       sync.Mutex
	held     chan struct{} // closed when the first LIST is held
	heldOnce sync.Once
	hold     chan struct{} // closed to let it go
	requests []string
}

func ex13StartProxy(t *testing.T) *ex13Proxy {
	t.Helper()
	cert, roots := apiServerCert(t)
	target, _ := url.Parse(fmt.Sprintf("https://127.0.0.1:%d", apiPort))
	px := &ex13Proxy{held: make(chan struct{}), hold: make(chan struct{})}
	forward := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(target); r.Out.Host = r.In.Host },
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, ForceAttemptHTTP2: true},
		FlushInterval: -1, // a WATCH's events as they come
	}
	listener, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	px.port = listener.Addr().(*net.TCPAddr).Port
	server := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		podList := strings.HasSuffix(r.URL.Path, "/pods") && r.Method == http.MethodGet
		holdIt := podList && (q.Get("watch") != "true" && q.Get("limit") != "1" || q.Get("sendInitialEvents") == "true")
		px.mu.Lock()
		if podList {
			px.requests = append(px.requests, fmt.Sprintf("%s?%s (held: %v)", r.URL.Path, r.URL.RawQuery, holdIt))
		}
		px.mu.Unlock()
		if holdIt {
			px.heldOnce.Do(func() { close(px.held) })
			select {
			case <-px.hold:
			case <-r.Context().Done():
				return
			}
		}
		forward.ServeHTTP(w, r)
	})}
	go func() { _ = server.Serve(listener) }()
	t.Cleanup(func() {
		px.release()
		_ = server.Close()
	})
	return px
}

func (px *ex13Proxy) waitForHeld(t *testing.T) {
	t.Helper()
	select {
	case <-px.held:
	case <-time.After(30 * time.Second):
		t.Fatalf("the controller's informer did not LIST pods through the proxy within 30 s; it saw: %s", px.seen())
	}
}

func (px *ex13Proxy) release() {
	px.mu.Lock()
	defer px.mu.Unlock()
	select {
	case <-px.hold:
	default:
		close(px.hold)
	}
}

func (px *ex13Proxy) seen() string {
	px.mu.Lock()
	defer px.mu.Unlock()
	return strings.Join(px.requests, "; ")
}
