//go:build exercise

// The test of exercise 13 (exercises/13-health/README.md). It is not part of
// the project's tests: copy it into the project's root and run it with the
// exercise tag, as the exercise's README says.
//
// It runs the controller as run does (runController), with a handler of its
// own that it can hold or make fail, against fakeapi's API server, over
// HTTP, serving pods (ex13Server, below): it can hold the informer's LIST
// (a slow first list) and go away (an outage). It reads what
// runController serves, as a kubelet and Prometheus would. Each check stands
// for a mistake a solution can make, and names it when it fails.

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"

	"demo-controller/internal/fakeapi"
)

const (
	// ex13Wait bounds each wait for something the controller does at once.
	ex13Wait = 5 * time.Second
	// ex13ProbeTimeout is the kubelet's default timeoutSeconds for a probe.
	ex13ProbeTimeout = time.Second
	ex13NS           = "ex13"
)

// ex13Metrics are the workqueue's metrics the task names, with their types.
var ex13Metrics = map[string]string{
	"workqueue_depth":                             "gauge",
	"workqueue_adds_total":                        "counter",
	"workqueue_queue_duration_seconds":            "histogram",
	"workqueue_work_duration_seconds":             "histogram",
	"workqueue_unfinished_work_seconds":           "gauge",
	"workqueue_longest_running_processor_seconds": "gauge",
	"workqueue_retries_total":                     "counter",
}

// The task's runController: one more parameter, the address to serve on.
type ex13RunController = func(ctx context.Context, client kubernetes.Interface, host, namespace string,
	syncTimeout time.Duration, address string, handler Handler) error

func TestExercise13Health(t *testing.T) {
	if f := newFlagSet(&options{}).Lookup("listen-address"); f == nil {
		t.Fatal("demo-controller has no flag --listen-address: the task adds it, to say where /metrics, /healthz and /readyz are served")
	} else if f.DefValue != ":8080" {
		t.Errorf("--listen-address's default is %q; the task's is \":8080\" (all interfaces: the kubelet probes the pod's IP)", f.DefValue)
	}
	if _, ok := any(runController).(ex13RunController); !ok {
		t.Fatalf("runController is a %T: it has no address to serve on. Make it runController(ctx, client, host, "+
			"namespace, syncTimeout, address, handler): run passes --listen-address, the tests that call it \"\" (serve nothing)", runController)
	}

	t.Run("the manifest", ex13Manifest)

	if !t.Run("before and after the cache syncs", func(t *testing.T) {
		env := ex13Start(t, true, "ex13-found-1", "ex13-found-2", "ex13-found-3")
		env.api.waitForHeldList(t)
		env.expectProbe(t, "/healthz", http.StatusOK, "while the informer's first LIST of pods was in flight (the cache "+
			"empty). Liveness says only that the process can answer: not that the cache has synced, nor that the API "+
			"server answers. A container whose liveness fails is restarted, and a big cluster's first list can take "+
			"minutes (--sync-timeout is 2m): it would be killed in the middle of it, and list again from the start")
		env.expectProbe(t, "/readyz", http.StatusServiceUnavailable, "while the informer's first LIST of pods was "+
			"still in flight, the cache empty. Ready means the pod cache has synced (the worker then runs): until then, "+
			"answer a failure (503). Read it from the informer (the handler registration's HasSynced, or the "+
			"controller's synced), not from the start of the server")
		before := env.baseline(t)

		env.api.releaseList()
		env.waitForLog(t, "Cache synced")
		env.waitFor(t, "/readyz to answer 200 once the cache had synced (\"Cache synced\" was logged)", func() (bool, string) {
			code, err := env.probe(t, "/readyz")
			return code == http.StatusOK, fmt.Sprintf("it answered %d (%v)", code, err)
		})
		env.waitForCalls(t, "created ex13-found-1", "created ex13-found-2", "created ex13-found-3")
		after := env.settled(t, before)
		env.expectDelta(t, before, after, "workqueue_adds_total", 3, "3 pods came in the first list, each one key added once")
		env.expectDelta(t, before, after, "workqueue_queue_duration_seconds_count", 3, "the worker took 3 keys off the queue")
		env.expectDelta(t, before, after, "workqueue_work_duration_seconds_count", 3, "the worker finished 3 keys")
		env.expectDelta(t, before, after, "workqueue_retries_total", 0, "no handler call failed")
		env.stop(t)
	}) {
		return // one scenario at a time: a mistake often fails them all
	}

	if !t.Run("a busy worker", func(t *testing.T) {
		env := ex13Start(t, false) // no pod at all, at first
		env.waitForLog(t, "Cache synced")
		env.waitFor(t, "/readyz to answer 200 once the cache had synced, with no pod in the cluster", func() (bool, string) {
			code, err := env.probe(t, "/readyz")
			return code == http.StatusOK, fmt.Sprintf("it answered %d (%v). Ready means the pod cache has synced, not "+
				"that a pod was handled: in an empty namespace no pod ever comes, and the controller would never be "+
				"ready (kubectl rollout status would wait for ever)", code, err)
		})
		before := env.baseline(t)
		release := env.handler.hold("ex13-slow")
		env.api.create(t, "ex13-slow")
		started := env.handler.waitForHold(t)
		env.waitFor(t, "workqueue_adds_total to count ex13-slow's key, which the worker has taken", func() (bool, string) {
			m := env.scrapeNow()
			return m.delta(before, "workqueue_adds_total") >= 1, fmt.Sprintf("it rose by %v, and workqueue_depth by %v.%s",
				m.delta(before, "workqueue_adds_total"), m.delta(before, "workqueue_depth"), ex13Stale())
		})
		env.scrape(t) // the queue has had a key: its series are there
		// While the worker is held: one pod created and changed twice, then
		// one more. The watch delivers them in order: once the last one's
		// key is in, the changes before it are too.
		env.api.create(t, "ex13-waits")
		env.api.update(t, "ex13-waits")
		env.api.update(t, "ex13-waits")
		env.api.create(t, "ex13-last")
		var queued time.Time
		env.waitFor(t, "ex13-waits and ex13-last to wait in the queue, while the worker was held on ex13-slow", func() (bool, string) {
			m := env.scrapeNow()
			adds, depth := m.delta(before, "workqueue_adds_total"), m.delta(before, "workqueue_depth")
			queued = time.Now()
			why := ""
			if depth == 0 {
				why = ex13Stale()
			}
			return depth == 2, fmt.Sprintf("workqueue_depth rose by %v, want 2 (ex13-waits and ex13-last); "+
				"workqueue_adds_total by %v.%s", depth, adds, why)
		})
		// Hold the worker until the keys behind it have waited more than
		// twice as long as it took them to arrive: then a queue latency that
		// is the worker's time (the two histograms swapped) shows.
		env.waitFor(t, "workqueue_longest_running_processor_seconds and workqueue_unfinished_work_seconds to reach 0.5 "+
			"while the handler was held on ex13-slow (the queue sets them every half second)", func() (bool, string) {
			m := env.scrapeNow()
			longest, unfinished := m.sum("workqueue_longest_running_processor_seconds"), m.sum("workqueue_unfinished_work_seconds")
			return longest >= 0.5 && unfinished >= 0.5 && time.Since(queued) > 2*queued.Sub(started),
				fmt.Sprintf("they say %v and %v, after %v", longest, unfinished, time.Since(started).Round(time.Millisecond))
		})
		released := time.Now()
		release()
		env.waitForCalls(t, "created ex13-slow", "created ex13-waits", "created ex13-last")
		after := env.settled(t, before)
		env.expectDelta(t, before, after, "workqueue_adds_total", 3, "3 keys were added: ex13-slow, ex13-waits and "+
			"ex13-last. ex13-waits changed twice more while its key waited: an add of a key already waiting is no add "+
			"(the queue holds each key once). Count adds in the queue's metrics provider, not in the event handlers")
		env.expectDelta(t, before, after, "workqueue_work_duration_seconds_count", 3, "the worker finished 3 keys")
		held := released.Sub(queued).Seconds()
		if got := after.delta(before, "workqueue_queue_duration_seconds_sum"); got < 2*held {
			t.Fatalf("ex13-waits and ex13-last waited in the queue at least %.2f s each, while the worker was held, and "+
				"workqueue_queue_duration_seconds_sum rose by %.3f s, want %.2f s or more. The queue's latency is the "+
				"time from a key's add to the worker's Get (the provider's NewLatencyMetric), not the time the worker "+
				"takes over it (NewWorkDurationMetric)", held, got, 2*held)
		}
		if got, want := after.delta(before, "workqueue_work_duration_seconds_sum"), released.Sub(started).Seconds(); got < want {
			t.Fatalf("the handler was held on ex13-slow for at least %.2f s, and workqueue_work_duration_seconds_sum "+
				"rose by %.3f s. Work duration is the time from the worker's Get to its Done (NewWorkDurationMetric)", want, got)
		}
		// The buckets tell a wait of none from one of held seconds.
		after.expectResolves(t, before, "workqueue_queue_duration_seconds", held/2,
			"ex13-slow's wait in the queue (none: the worker was idle)", fmt.Sprintf("ex13-waits' and ex13-last's (%.2f s or more)", held))
		after.expectResolves(t, before, "workqueue_work_duration_seconds", released.Sub(started).Seconds()/2,
			"the worker's time over ex13-waits and ex13-last (none: the handler returned at once)",
			fmt.Sprintf("its time over ex13-slow (%.2f s or more)", released.Sub(started).Seconds()))
		env.waitFor(t, "workqueue_unfinished_work_seconds to fall back to 0 once the worker was done", func() (bool, string) {
			got := env.scrapeNow().sum("workqueue_unfinished_work_seconds")
			return got == 0, fmt.Sprintf("it says %v: the queue Sets it, every half second, to the time spent on the keys in hand", got)
		})
		// Whatever the handler does for a change and a deletion (newHandler's
		// first), /metrics names no pod.
		env.api.update(t, "ex13-slow")
		env.waitForCalls(t, "updated ex13-slow")
		env.api.delete(t, "ex13-slow")
		env.waitForCalls(t, "deleted ex13-slow")
		env.scrape(t)
		env.stop(t)
	}) {
		return
	}

	if !t.Run("a failing handler", func(t *testing.T) {
		env := ex13Start(t, false)
		env.waitForLog(t, "Cache synced")
		before := env.baseline(t)
		env.handler.failFor("ex13-fails")
		env.api.create(t, "ex13-fails")
		env.waitForLog(t, `"Dropping pod after retries"`)
		after := env.settled(t, before)
		calls := env.handler.count("created ex13-fails")
		env.expectDelta(t, before, after, "workqueue_retries_total", float64(calls-1), fmt.Sprintf("the handler failed %d "+
			"times for ex13-fails: its first call, then maxRetries = %d retries, each put back with AddRateLimited "+
			"(an AddAfter, which the queue counts as a retry). NewRetriesMetric's counter must be the one /metrics "+
			"serves as workqueue_retries_total", calls, maxRetries))
		env.expectDelta(t, before, after, "workqueue_adds_total", float64(calls), fmt.Sprintf("the key of ex13-fails "+
			"was added once, then once more at the end of each of its %d retries' delays", calls-1))
		env.stop(t)
	}) {
		return
	}

	if !t.Run("the API server goes away", func(t *testing.T) {
		env := ex13Start(t, false, "ex13-before")
		env.waitForLog(t, "Cache synced")
		env.waitForCalls(t, "created ex13-before")
		env.api.goAway()
		// The reflector sees its watch end, and its new one refused.
		env.waitForLog(t, "connection refused")
		for _, path := range []string{"/healthz", "/readyz"} {
			why := "while the API server was down, after the cache had synced. "
			if path == "/healthz" {
				why += "Liveness must never depend on the API server: during an outage every replica would be " +
					"restarted, which fixes nothing, and each restarted one must list every pod again, from a server just back"
			} else {
				why += "Readiness reads only the process's own state: the cache is still there, the worker works " +
					"on, and the reflector retries by itself. A readiness that asks the API server makes every replica " +
					"unready at once in an outage (a PodDisruptionBudget then blocks node drains) and costs the server a " +
					"request per probe"
			}
			env.expectProbe(t, path, http.StatusOK, why)
		}
		if _, err := env.scrape(t).value("workqueue_depth"); err != nil {
			t.Fatalf("/metrics, while the API server was down: %v", err)
		}
		env.stop(t)
	}) {
		return
	}

	t.Run("an address already in use", func(t *testing.T) {
		taken, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer taken.Close()
		api := newEx13Server(t)
		ex13Runs++
		run, client := ex13Runs, api.client(t)
		r := fakeapi.Start(t, 10*time.Second, 8, func(ctx context.Context) error {
			return ex13Call(ctx, run, client, taken.Addr().String(), &ex13Handler{})
		})
		select {
		case <-r.Ended:
			if err := r.Err; err == nil {
				t.Fatalf("runController returned no error, given the address %s, where something else listens", taken.Addr())
			}
			t.Logf("runController, given an address in use: %v", err)
		case <-time.After(ex13Wait):
			t.Fatalf("runController, given the address %s, where something else listens, was still running %v later. "+
				"Nothing answers the probes there: the kubelet would restart it again and again, and its log would "+
				"not say why. Listen first (net.Listen), and return its error; then serve (http.Server.Serve). "+
				"(http.ListenAndServe in a goroutine loses that error.) The log's last lines:\n%s", taken.Addr(), ex13Wait, ex13Tail(r, 8))
		}
	})
}

// ex13Manifest checks demo-controller.yaml: a port, and the two probes on it;
// the ClusterRole unchanged.
func ex13Manifest(t *testing.T) {
	var deployment *appsv1.Deployment
	var verbs []string
	for _, obj := range fakeapi.Manifest(t, "demo-controller.yaml") {
		switch obj := obj.(type) {
		case *appsv1.Deployment:
			deployment = obj
		case *rbacv1.ClusterRole:
			for _, rule := range obj.Rules {
				verbs = append(verbs, rule.Verbs...)
			}
		}
	}
	if slices.Sort(verbs); !slices.Equal(verbs, []string{"list", "watch"}) {
		t.Errorf("demo-controller.yaml's ClusterRole grants %s: metrics and probes need nothing from the API server, "+
			"and the ClusterRole stays list and watch on pods", strings.Join(verbs, ", "))
	}
	if deployment == nil || len(deployment.Spec.Template.Spec.Containers) == 0 {
		t.Fatal("demo-controller.yaml has no Deployment with a container")
	}
	c := deployment.Spec.Template.Spec.Containers[0]
	port := 8080 // --listen-address's default, unless the container's args say otherwise
	for _, arg := range append(slices.Clone(c.Command), c.Args...) {
		if v, ok := strings.CutPrefix(strings.TrimLeft(arg, "-"), "listen-address="); ok {
			host, p, err := net.SplitHostPort(v)
			if err == nil {
				port, _ = strconv.Atoi(p)
			}
			if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
				t.Errorf("the Deployment's container passes --listen-address=%s: demo-controller then answers only on %s, "+
					"inside the container. The kubelet probes the pod's IP, and Prometheus scrapes it: every probe would "+
					"fail, and the kubelet would restart the controller for ever. Listen on all interfaces (:%s, the "+
					"default, or no flag)", v, host, p)
			}
		}
	}
	i := slices.IndexFunc(c.Ports, func(p corev1.ContainerPort) bool { return int(p.ContainerPort) == port })
	if i < 0 {
		t.Fatalf("the Deployment's container declares no containerPort %d, where demo-controller serves (--listen-address): "+
			"declare it, with a name (http, say), for the probes and for Prometheus to find", port)
	}
	portName := c.Ports[i].Name
	for _, p := range []struct {
		kind, want, other string
		probe             *corev1.Probe
	}{
		{"livenessProbe", "/healthz", "/readyz", c.LivenessProbe},
		{"readinessProbe", "/readyz", "/healthz", c.ReadinessProbe},
	} {
		switch {
		case p.probe == nil || p.probe.HTTPGet == nil:
			t.Errorf("the Deployment's container has no %s with httpGet: add one that asks %s", p.kind, p.want)
		case p.probe.HTTPGet.Path == p.other && p.kind == "livenessProbe":
			t.Errorf("the livenessProbe asks /readyz: until the cache has synced it fails, and the kubelet restarts the " +
				"controller in the middle of its first list (a big cluster's takes minutes). Liveness asks /healthz")
		case p.probe.HTTPGet.Path != p.want:
			t.Errorf("the %s asks %q; the task's is %s", p.kind, p.probe.HTTPGet.Path, p.want)
		case p.probe.HTTPGet.Port != intstr.FromInt32(int32(port)) && (portName == "" || p.probe.HTTPGet.Port != intstr.FromString(portName)):
			t.Errorf("the %s asks port %s; demo-controller serves on %d (containerPort %q)", p.kind, p.probe.HTTPGet.Port.String(), port, portName)
		}
	}
}

// ex13Runs counts the runControllers this test process has started, and
// ex13Served those whose /metrics had the workqueue's metrics.
var ex13Runs, ex13Served int

// ex13Call calls the task's runController, and turns a panic into an error:
// it panics, most often, when a second queue named "pods" registers its
// metrics again.
func ex13Call(ctx context.Context, run int, client kubernetes.Interface, address string, handler Handler) (err error) {
	defer func() {
		r := recover()
		text := fmt.Sprint(r)
		switch {
		case r == nil:
		case strings.Contains(text, "duplicate metrics collector registration"):
			err = fmt.Errorf("runController panicked: %v. This was runController number %d in this test process: "+
				"each makes a queue named \"pods\", and the workqueue asks the provider for that name's metrics again. "+
				"Register each metric once (a vector with the label name), and have the provider hand out "+
				"vector.WithLabelValues(name)", r, run)
		case strings.Contains(text, "conflicts with pattern") || strings.Contains(text, "multiple registrations"):
			err = fmt.Errorf("runController panicked: %v. This was runController number %d in this test process, "+
				"and the paths were registered again on a mux the runs share: http.Handle and http.HandleFunc register "+
				"on http.DefaultServeMux, for the whole process, and a path registered twice panics. Make a mux for each "+
				"server (http.NewServeMux), and register the three paths on it", r, run)
		default:
			err = fmt.Errorf("runController panicked: %v (runController number %d in this test process)", r, run)
		}
	}()
	return any(runController).(ex13RunController)(ctx, client, "ex13 test API server", "", time.Minute, address, handler)
}

// ex13Stale explains a metric of this run's queue that does not move, once
// an earlier run's metrics were served.
func ex13Stale() string {
	if ex13Served == 0 {
		return ""
	}
	return fmt.Sprintf(" This is runController number %d in this test process, and an earlier one's metrics were "+
		"served: this queue's are not the ones /metrics serves. Does your provider make a new metric each time the "+
		"workqueue asks, and register it, ignoring Register's error (an AlreadyRegisteredError for the second queue "+
		"named \"pods\")? The first queue's metric stays registered, and the new one counts for nobody. Register "+
		"each metric once (a vector with the label name), and hand out vector.WithLabelValues(name)", ex13Runs)
}

// ex13Env is one runController of the test, serving on a port of its own,
// and what it logs (at -v=4).
type ex13Env struct {
	*fakeapi.Run
	api     *ex13Server
	handler *ex13Handler
	address string
	stopped bool
}

// ex13Start serves pods (created at the start), holding the informer's LIST if
// holdList, and runs runController against them, on 127.0.0.1:0. It returns
// once runController has logged where it serves.
func ex13Start(t *testing.T, holdList bool, pods ...string) *ex13Env {
	t.Helper()
	api := newEx13Server(t)
	for _, name := range pods {
		api.create(t, name)
	}
	if holdList {
		api.holdList()
	}
	env := &ex13Env{api: api, handler: &ex13Handler{}}
	client := api.client(t)
	ex13Runs++
	run := ex13Runs
	env.Run = fakeapi.StartV(t, 10*time.Second, 8, 4, func(ctx context.Context) error {
		return ex13Call(ctx, run, client, "127.0.0.1:0", env.handler)
	})
	t.Cleanup(func() { env.stop(t) })

	line := `"Serving metrics and probes"`
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, ex13Wait, true, func(context.Context) (bool, error) {
		if env.Returned() {
			env.stopped = true
			return false, fmt.Errorf("runController returned %v", env.Err)
		}
		for _, l := range env.Lines() {
			if strings.HasPrefix(l, line) {
				m := regexp.MustCompile(` address="?([^" ]+)"?`).FindStringSubmatch(l)
				if m == nil {
					return false, fmt.Errorf("the line\n  %s\nsays no address=: log where it serves, with the key address", l)
				}
				env.address = m[1]
				return true, nil
			}
		}
		return false, nil
	})
	switch {
	case err != nil && !wait.Interrupted(err):
		t.Fatalf("%v. The log's last lines:\n%s", err, ex13Tail(env.Run, 8))
	case err != nil:
		why := ""
		if api.isHolding() {
			why = " The informer's first LIST of pods is in flight (the test holds it): does the server start only once " +
				"the cache has synced? Serve before the informer starts, or nothing answers the probes during the first list."
		}
		t.Fatalf("runController, given the address 127.0.0.1:0, logged no line %s address=... within %v. Log it "+
			"when the server listens, with the address it got.%s The log's last lines:\n%s", line, ex13Wait, why, ex13Tail(env.Run, 8))
	}
	if _, port, _ := net.SplitHostPort(env.address); port == "0" || port == "" {
		t.Fatalf("runController logged address=%q: that is the address it was given. Log the address it listens on, "+
			"with the port the system chose for :0 (net.Listen, then the listener's Addr()): the test, and you, need it "+
			"to reach the server", env.address)
	}
	return env
}

// stop cancels runController's context; it must return, and stop serving.
func (e *ex13Env) stop(t *testing.T) {
	t.Helper()
	if e.stopped {
		return
	}
	e.stopped = true
	e.handler.releaseAll()
	e.api.releaseList() // (the informer's LIST does not end with runController's context)
	e.Cancel()
	select {
	case <-e.Ended:
		if e.Err != nil {
			t.Errorf("runController returned %v", e.Err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("runController did not return within 10 s of the end of its context")
	}
	if asked := e.api.asked(0); len(asked) > 0 {
		t.Errorf("the controller asked the API server %s: it needs a LIST and a WATCH of pods, and nothing more; "+
			"metrics and probes read only the process's own state, never the API server's", strings.Join(asked, ", "))
	}
	if conn, err := net.DialTimeout("tcp", e.address, time.Second); err == nil {
		conn.Close()
		t.Errorf("runController has returned, and %s still accepts connections: shut the server down when "+
			"runController returns (http.Server's Shutdown or Close), or a test, or a second run in the process, "+
			"finds the port taken", e.address)
	}
}

// probe asks the path as a kubelet would, with its default 1 s timeout. It
// fails if the controller asked the API server anything but pods meanwhile.
func (e *ex13Env) probe(t *testing.T, path string) (int, error) {
	t.Helper()
	n := len(e.api.asked(0))
	code, err := e.ask(path)
	if asked := e.api.asked(n); len(asked) > 0 {
		what := "Liveness never depends on the API server: during an outage, the kubelet would restart every replica, " +
			"which fixes nothing, and each restarted one lists every pod again"
		if path == "/readyz" {
			what = "Readiness reads only the process's own state (has the pod cache synced?): a readiness that asks " +
				"the API server makes every replica unready at once in an outage, and costs the server a request per " +
				"probe, per replica"
		}
		t.Fatalf("asked %s, the controller asked the API server %s (and answered %d): %s", path,
			strings.Join(asked, ", "), code, what)
	}
	return code, err
}

// ask asks the path, with the kubelet's timeout.
func (e *ex13Env) ask(path string) (int, error) {
	client := &http.Client{Timeout: ex13ProbeTimeout}
	resp, err := client.Get("http://" + e.address + path)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// expectProbe checks what the path answers: 200, or for want 503 any status
// the kubelet counts as a failure (400 or more).
func (e *ex13Env) expectProbe(t *testing.T, path string, want int, when string) {
	t.Helper()
	code, err := e.probe(t, path)
	var timeout net.Error
	switch {
	case errors.As(err, &timeout) && timeout.Timeout():
		t.Fatalf("%s did not answer within %v (the kubelet's default timeoutSeconds) %s. A probe answers at once, "+
			"from what the process knows: it must not wait (for the sync, for the API server)", path, ex13ProbeTimeout, when)
	case err != nil:
		t.Fatalf("%s could not be asked %s: %v", path, when, err)
	case want == http.StatusOK && code != http.StatusOK:
		t.Fatalf("%s answered %d %s", path, code, when)
	case want != http.StatusOK && code < 400:
		t.Fatalf("%s answered %d %s", path, code, when)
	}
}

// waitForLog waits for a line of the log that contains s.
func (e *ex13Env) waitForLog(t *testing.T, s string) {
	t.Helper()
	e.waitFor(t, "a line "+s+" in the log", func() (bool, string) {
		return len(e.Containing(0, s)) > 0, "none came"
	})
}

// waitForCalls waits until the handler has been called as each of calls
// says (such as "created ex13-slow"), and has returned.
func (e *ex13Env) waitForCalls(t *testing.T, calls ...string) {
	t.Helper()
	e.waitFor(t, "the handler to handle "+strings.Join(calls, ", "), func() (bool, string) {
		done := e.handler.done()
		return !slices.ContainsFunc(calls, func(c string) bool { return !slices.Contains(done, c) }),
			"it handled: " + strings.Join(done, ", ")
	})
}

// waitFor polls cond until it holds, for at most ex13Wait; it fails with
// what cond last said, and the log's last lines.
func (e *ex13Env) waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, ex13Wait, true, func(context.Context) (bool, error) {
		if e.Returned() {
			e.stopped = true
			return false, fmt.Errorf("runController returned %v", e.Err)
		}
		ok, why := cond()
		last = why
		return ok, nil
	})
	if err != nil && !wait.Interrupted(err) {
		t.Fatalf("waiting for %s: %v. The log's last lines:\n%s", what, err, ex13Tail(e.Run, 8))
	} else if err != nil {
		t.Fatalf("waited %v for %s: %s. The log's last lines:\n%s", ex13Wait, what, last, ex13Tail(e.Run, 8))
	}
}

// ex13Methods are the MetricsProvider's methods that make each metric.
var ex13Methods = map[string]string{
	"workqueue_depth":                             "NewDepthMetric",
	"workqueue_adds_total":                        "NewAddsMetric",
	"workqueue_queue_duration_seconds":            "NewLatencyMetric",
	"workqueue_work_duration_seconds":             "NewWorkDurationMetric",
	"workqueue_unfinished_work_seconds":           "NewUnfinishedWorkSecondsMetric",
	"workqueue_longest_running_processor_seconds": "NewLongestRunningProcessorSecondsMetric",
	"workqueue_retries_total":                     "NewRetriesMetric",
}

// scrape reads /metrics, and checks that it serves the task's metrics for
// the queue named "pods" (once the queue has had keys: a series may come
// with its first value), with their types, and no label that names a pod.
func (e *ex13Env) scrape(t *testing.T) ex13Scrape {
	t.Helper()
	return e.scrapeChecked(t, true)
}

// baseline is scrape before the queue has had a key.
func (e *ex13Env) baseline(t *testing.T) ex13Scrape {
	t.Helper()
	return e.scrapeChecked(t, false)
}

func (e *ex13Env) scrapeChecked(t *testing.T, required bool) ex13Scrape {
	t.Helper()
	m, err := e.read()
	if err != nil {
		t.Fatal(err)
	}
	if problem := m.formatProblem(); problem != "" {
		t.Fatalf("/metrics: %s", problem)
	}
	var missing, methods []string
	for _, name := range slices.Sorted(maps.Keys(ex13Metrics)) {
		series := name
		if ex13Metrics[name] == "histogram" {
			series += "_count"
		}
		if !slices.ContainsFunc(m.samples, func(s ex13Sample) bool { return s.name == series && s.labels["name"] == "pods" }) {
			missing, methods = append(missing, name), append(methods, ex13Methods[name])
		} else if got := m.types[name]; got != ex13Metrics[name] {
			t.Fatalf("/metrics says # TYPE %s %s, want %s", name, got, ex13Metrics[name])
		}
	}
	if len(missing) > 0 && required {
		why := "Either the provider was set after the queue was made (workqueue.SetProvider affects only the queues " +
			"made after it, and NewController makes the queue), or another runController in this process set one " +
			"first (only SetProvider's first call counts), or /metrics serves another registry than the one the " +
			"metrics are registered in (promhttp.Handler() serves prometheus' default registry)."
		if ex13Served > 0 {
			why = fmt.Sprintf("This is runController number %d in this test process, and an earlier one served them: "+
				"workqueue.SetProvider takes effect only the first time it is called in a process. A later call, with a "+
				"registry of its own, is ignored without a word, and this queue's metrics went to the first "+
				"registry. Set the provider once (in init, say), with metrics registered once, and serve that registry.", ex13Runs)
		}
		if len(missing) == len(ex13Metrics) && ex13Served == 0 {
			why = e.whyNoMetrics(t)
		}
		if len(missing) < len(ex13Metrics) {
			why = fmt.Sprintf("It has the others: the provider's %s hands out a metric that is not in the registry "+
				"/metrics serves (a metric made and never registered counts for nobody). Each method returns the "+
				"series of its metric for the queue's name.", strings.Join(methods, " and "))
		}
		var near []string
		for _, s := range m.samples {
			if (strings.Contains(s.name, "depth") || strings.Contains(s.name, "adds")) && ex13Metrics[s.name] == "" && !slices.Contains(near, s.name) {
				near = append(near, s.name)
			}
		}
		if len(near) > 0 {
			why += " (/metrics has " + strings.Join(near, ", ") + ": the names are the task's, and the queue's name is the value of the label name.)"
		}
		t.Fatalf("/metrics has no %s with the label name=\"pods\". %s", strings.Join(missing, ", "), why)
	}
	if required {
		ex13Served++
	}
	for _, s := range m.samples {
		for k, v := range s.labels {
			if strings.Contains(v, "ex13-") {
				t.Fatalf("/metrics has %s with the label %s=%q, a pod's name: each value of a label is a series, kept "+
					"by the controller and by Prometheus for good, and pods come and go by the thousand. Label only "+
					"with values that are few and known in advance (the queue's name, a phase, a result)", s.name, k, v)
			}
		}
	}
	return m
}

// whyNoMetrics finds out why no run so far has served the queue's metrics:
// it sets a provider of its own (which takes effect only if none was set in
// this process), and makes a queue, named ex13-probe.
func (e *ex13Env) whyNoMetrics(t *testing.T) string {
	t.Helper()
	probe := &ex13Provider{}
	workqueue.SetProvider(probe)
	queue := workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[string]{Name: "ex13-probe"})
	queue.Add("ex13-probe")
	queue.ShutDown()
	if probe.asked.Load() {
		return "workqueue.SetProvider had not been called in this process when runController made its queue, nor " +
			"since (the test's own call just took effect). This test calls runController, as the project's tests do: " +
			"a SetProvider in run, or in main, never runs here, nor in any other process that makes a queue without " +
			"them. Call it once, before any queue is made, whoever makes it: in an init function of your file, with " +
			"metrics registered once."
	}
	m, err := e.read()
	if err != nil {
		t.Fatal(err)
	}
	if slices.ContainsFunc(m.samples, func(s ex13Sample) bool { return s.labels["name"] == "ex13-probe" }) {
		return "A provider is set, and /metrics serves what it hands out: a queue the test made just now, named " +
			"ex13-probe, shows there. But not this one: the provider was set after NewController made the queue " +
			"named pods (workqueue.SetProvider changes only the queues made after it). Call it once, before any " +
			"queue is made: in an init function of your file."
	}
	return "A provider is set, but what it hands out is not in what /metrics serves: a queue the test made just " +
		"now, named ex13-probe, does not show there either. Serve the registry the metrics are registered in " +
		"(promhttp.HandlerFor(registry, ...); promhttp.Handler() serves prometheus' default registry)."
}

// ex13Provider is a workqueue.MetricsProvider whose metrics count nothing: it
// notes that it was asked.
type ex13Provider struct{ asked atomic.Bool }

type ex13Metric struct{}

func (ex13Metric) Inc()            {}
func (ex13Metric) Dec()            {}
func (ex13Metric) Set(float64)     {}
func (ex13Metric) Observe(float64) {}

func (p *ex13Provider) NewDepthMetric(string) workqueue.GaugeMetric {
	p.asked.Store(true)
	return ex13Metric{}
}
func (p *ex13Provider) NewAddsMetric(string) workqueue.CounterMetric           { return ex13Metric{} }
func (p *ex13Provider) NewLatencyMetric(string) workqueue.HistogramMetric      { return ex13Metric{} }
func (p *ex13Provider) NewWorkDurationMetric(string) workqueue.HistogramMetric { return ex13Metric{} }
func (p *ex13Provider) NewRetriesMetric(string) workqueue.CounterMetric        { return ex13Metric{} }
func (p *ex13Provider) NewUnfinishedWorkSecondsMetric(string) workqueue.SettableGaugeMetric {
	return ex13Metric{}
}
func (p *ex13Provider) NewLongestRunningProcessorSecondsMetric(string) workqueue.SettableGaugeMetric {
	return ex13Metric{}
}

// scrapeNow reads /metrics, as scrape does, inside a wait.
func (e *ex13Env) scrapeNow() ex13Scrape {
	m, _ := e.read()
	return m
}

// settled waits until the queue is back to its depth at before, and the
// worker has nothing in hand, and returns what /metrics says then.
func (e *ex13Env) settled(t *testing.T, before ex13Scrape) ex13Scrape {
	t.Helper()
	e.waitFor(t, "workqueue_depth to come back to what it was", func() (bool, string) {
		m := e.scrapeNow()
		d := m.delta(before, "workqueue_depth")
		return d == 0, fmt.Sprintf("with every key handled, workqueue_depth is %v more than before: it goes up "+
			"with each add and down with each Get (a gauge: Inc and Dec)", d)
	})
	return e.scrape(t)
}

func (e *ex13Env) expectDelta(t *testing.T, before, after ex13Scrape, series string, want float64, why string) {
	t.Helper()
	if got := after.delta(before, series); got != want {
		t.Fatalf("%s rose by %v, want %v: %s", series, got, want, why)
	}
}

// read fetches and parses /metrics.
func (e *ex13Env) read() (ex13Scrape, error) {
	client := &http.Client{Timeout: 2 * time.Second}
	resp, err := client.Get("http://" + e.address + "/metrics")
	if err != nil {
		return ex13Scrape{}, fmt.Errorf("reading /metrics: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		return ex13Scrape{}, fmt.Errorf("reading /metrics: %d %v", resp.StatusCode, err)
	}
	return parseEx13Scrape(string(body))
}

// ex13Scrape is what one read of /metrics found.
type ex13Scrape struct {
	types   map[string]string // from the # TYPE lines
	samples []ex13Sample
}

type ex13Sample struct {
	name   string
	labels map[string]string
	value  float64
}

var ex13SampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? +(\S+)(?: +\S+)?$`)
var ex13Label = regexp.MustCompile(`^\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*,?`)

// parseEx13Scrape reads Prometheus' text format (version 0.0.4).
func parseEx13Scrape(text string) (ex13Scrape, error) {
	m := ex13Scrape{types: map[string]string{}}
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "# TYPE ") {
			if f := strings.Fields(line); len(f) == 4 {
				m.types[f[2]] = f[3]
			}
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		match := ex13SampleLine.FindStringSubmatch(line)
		if match == nil {
			return m, fmt.Errorf("/metrics has a line that is not in Prometheus' text format: %q", line)
		}
		s := ex13Sample{name: match[1], labels: map[string]string{}}
		for rest := match[2]; strings.TrimSpace(rest) != ""; {
			l := ex13Label.FindStringSubmatch(rest)
			if l == nil {
				return m, fmt.Errorf("/metrics has labels that are not in Prometheus' text format: %q", line)
			}
			s.labels[l[1]] = strings.NewReplacer(`\\`, `\`, `\"`, `"`, `\n`, "\n").Replace(l[2])
			rest = rest[len(l[0]):]
		}
		v, err := strconv.ParseFloat(match[3], 64)
		if err != nil {
			return m, fmt.Errorf("/metrics has a value that is not a number: %q", line)
		}
		s.value = v
		m.samples = append(m.samples, s)
	}
	return m, nil
}

// buckets returns, for the histogram's series whose label name is "pods",
// how much each bucket's count rose since before, by its bound.
func (m ex13Scrape) buckets(before ex13Scrape, histogram string) map[float64]float64 {
	rose := map[float64]float64{}
	for _, scrape := range []struct {
		ex13Scrape
		sign float64
	}{{m, 1}, {before, -1}} {
		for _, s := range scrape.samples {
			if s.name == histogram+"_bucket" && s.labels["name"] == "pods" {
				if le, err := strconv.ParseFloat(s.labels["le"], 64); err == nil {
					rose[le] += scrape.sign * s.value
				}
			}
		}
	}
	return rose
}

// expectResolves checks that some bucket of the histogram, bounded at or
// below bound, counted the quick observations since before, and not the
// slow ones.
func (m ex13Scrape) expectResolves(t *testing.T, before ex13Scrape, histogram string, bound float64, quick, slow string) {
	t.Helper()
	rose := m.buckets(before, histogram)
	total := m.delta(before, histogram+"_count")
	var bounds []string
	for _, le := range slices.Sorted(maps.Keys(rose)) {
		bounds = append(bounds, strconv.FormatFloat(le, 'g', -1, 64))
		if le <= bound && rose[le] >= 1 && rose[le] < total {
			return
		}
	}
	t.Fatalf("%s's buckets (le=%s) cannot tell %s from %s: no bucket bounded at or below %.2f s counts the one and "+
		"not the others. The workqueue observes seconds: bounds in milliseconds (1, 10, 100, 1000) put every duration "+
		"under a second in the first bucket. Choose bounds in seconds, from a millisecond or less to 10 s or more "+
		"(prometheus.ExponentialBuckets(0.001, 10, 5), say)", histogram, strings.Join(bounds, ", "), quick, slow, bound)
}

// formatProblem checks what Prometheus' text format requires of the
// histograms /metrics declares (# TYPE ... histogram): for each series,
// buckets whose counts never decrease as their bound grows (each counts
// every observation at or below it), one bounded "+Inf" that equals _count,
// and a _sum.
func (m ex13Scrape) formatProblem() string {
	for name, kind := range m.types {
		if kind != "histogram" {
			continue
		}
		type series struct {
			buckets    map[float64]float64
			count, sum *float64
		}
		all := map[string]*series{}
		for _, s := range m.samples {
			labels := maps.Clone(s.labels)
			le, hasLE := labels["le"]
			delete(labels, "le")
			var pairs []string
			for _, k := range slices.Sorted(maps.Keys(labels)) {
				pairs = append(pairs, fmt.Sprintf("%s=%q", k, labels[k]))
			}
			key := "{" + strings.Join(pairs, ",") + "}"
			if all[key] == nil && strings.HasPrefix(s.name, name+"_") {
				all[key] = &series{buckets: map[float64]float64{}}
			}
			switch s.name {
			case name + "_bucket":
				bound, err := strconv.ParseFloat(le, 64)
				if !hasLE || err != nil {
					return fmt.Sprintf("%s_bucket%v has no bound le=\"...\" that is a number (or +Inf)", name, s.labels)
				}
				all[key].buckets[bound] = s.value
			case name + "_count":
				all[key].count = &s.value
			case name + "_sum":
				all[key].sum = &s.value
			}
		}
		for key, h := range all {
			bounds := slices.Sorted(maps.Keys(h.buckets))
			for i := 1; i < len(bounds); i++ {
				if h.buckets[bounds[i]] < h.buckets[bounds[i-1]] {
					return fmt.Sprintf("the histogram %s%s's buckets are not cumulative: le=\"%g\" counts %v, and "+
						"le=\"%g\" %v. In Prometheus' text format each bucket counts every observation at or below "+
						"its bound, so the counts never decrease as the bound grows (an observation of 0.3 s counts in "+
						"le=\"0.5\", le=\"1\" and every bucket above). Prometheus computes quantiles from them, and "+
						"would compute nonsense", name, key, bounds[i-1], h.buckets[bounds[i-1]], bounds[i], h.buckets[bounds[i]])
				}
			}
			switch {
			case len(bounds) == 0 || !math.IsInf(bounds[len(bounds)-1], 1):
				return fmt.Sprintf("the histogram %s%s has no bucket le=\"+Inf\": Prometheus' text format requires one, "+
					"which counts every observation, as _count does", name, key)
			case h.count == nil || h.sum == nil:
				return fmt.Sprintf("the histogram %s%s lacks its _count or its _sum", name, key)
			case h.buckets[bounds[len(bounds)-1]] != *h.count:
				return fmt.Sprintf("the histogram %s%s's bucket le=\"+Inf\" counts %v, and its _count is %v: they are the "+
					"same number, every observation", name, key, h.buckets[bounds[len(bounds)-1]], *h.count)
			}
		}
	}
	return ""
}

// sum adds up the series of that name whose label name is "pods".
func (m ex13Scrape) sum(series string) float64 {
	total := 0.0
	for _, s := range m.samples {
		if s.name == series && s.labels["name"] == "pods" {
			total += s.value
		}
	}
	return total
}

// value is sum, with an error if there is no such series.
func (m ex13Scrape) value(series string) (float64, error) {
	if !slices.ContainsFunc(m.samples, func(s ex13Sample) bool { return s.name == series && s.labels["name"] == "pods" }) {
		return 0, fmt.Errorf("no %s{name=\"pods\"}", series)
	}
	return m.sum(series), nil
}

// delta is how much a series rose since before.
func (m ex13Scrape) delta(before ex13Scrape, series string) float64 {
	return m.sum(series) - before.sum(series)
}

// ex13Handler is the controller's Handler in this test: it notes each call,
// and can hold a pod's call until released, or fail every call for a pod.
type ex13Handler struct {
	mu       sync.Mutex
	calls    []string // "created NAME", "updated NAME", "deleted NAME", once returned
	holdName string
	held     chan time.Time // receives when the held call starts
	release  chan struct{}
	fails    string
}

// Each call goes to the project's own handler (newHandler's) first, which
// logs, and whatever else it does (a metric of its own, say), and is then
// noted.

func (h *ex13Handler) Created(ctx context.Context, pod *corev1.Pod, found bool) error {
	_ = newHandler().Created(ctx, pod, found)
	return h.call("created", pod.Name)
}

func (h *ex13Handler) Updated(ctx context.Context, old, pod *corev1.Pod) error {
	_ = newHandler().Updated(ctx, old, pod)
	return h.call("updated", pod.Name)
}

func (h *ex13Handler) Deleted(ctx context.Context, pod *corev1.Pod) error {
	_ = newHandler().Deleted(ctx, pod)
	return h.call("deleted", pod.Name)
}

func (h *ex13Handler) call(what, name string) error {
	h.mu.Lock()
	hold := name == h.holdName
	held, release, fail := h.held, h.release, name == h.fails
	if hold {
		h.holdName = "" // once
	}
	h.mu.Unlock()
	if hold {
		held <- time.Now()
		<-release
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, what+" "+name)
	if fail {
		return fmt.Errorf("the test's handler fails every call for %s", name)
	}
	return nil
}

// hold makes the next call for the pod wait until release is called.
func (h *ex13Handler) hold(name string) (release func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.holdName, h.held, h.release = name, make(chan time.Time, 1), make(chan struct{})
	ch := h.release
	return sync.OnceFunc(func() { close(ch) })
}

// waitForHold waits until the held call has started, and returns when.
func (h *ex13Handler) waitForHold(t *testing.T) time.Time {
	t.Helper()
	h.mu.Lock()
	held := h.held
	h.mu.Unlock()
	select {
	case at := <-held:
		return at
	case <-time.After(ex13Wait):
		t.Fatalf("the handler was not called for the pod created within %v", ex13Wait)
		return time.Time{}
	}
}

// releaseAll lets a held call go, at the end of a test.
func (h *ex13Handler) releaseAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.release != nil {
		select {
		case <-h.release:
		default:
			close(h.release)
		}
	}
}

func (h *ex13Handler) failFor(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.fails = name
}

func (h *ex13Handler) done() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.calls)
}

func (h *ex13Handler) count(call string) int {
	n := 0
	for _, c := range h.done() {
		if c == call {
			n++
		}
	}
	return n
}

// ex13Server is fakeapi's API server, serving pods (a LIST and a WATCH in
// all namespaces, as kube-apiserver answers them), behind a server of the
// test's own that can hold the informer's LIST, and go away.
type ex13Server struct {
	*fakeapi.Server
	front *httptest.Server

	gone   context.Context // done when it goes away
	goAway func()          // stops listening and closes every connection: the next ones are refused

	mu      sync.Mutex
	hold    chan struct{} // closed to let held LISTs go
	held    chan struct{} // closed when a LIST is held
	holding bool
	others  []string // the requests for anything but pods, "GET /version"
}

// asked returns the requests for anything but pods, from the n-th on.
func (s *ex13Server) asked(n int) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.others[min(n, len(s.others)):])
}

func newEx13Server(t *testing.T) *ex13Server {
	t.Helper()
	s := &ex13Server{Server: fakeapi.New(t, "pods")}
	s.JumpRV(100)
	s.front = httptest.NewServer(http.HandlerFunc(s.serve))
	gone, cancel := context.WithCancel(context.Background())
	// (Its watches end too, even one that came in as it went.)
	s.gone, s.goAway = gone, sync.OnceFunc(func() {
		cancel()
		s.releaseList()
		s.front.Listener.Close()
		s.front.CloseClientConnections()
		s.front.Close()
	})
	t.Cleanup(s.goAway)
	return s
}

func (s *ex13Server) client(t *testing.T) kubernetes.Interface {
	t.Helper()
	client, err := kubernetes.NewForConfig(&rest.Config{Host: s.front.URL, QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	return client
}

func (s *ex13Server) holdList() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hold, s.held = make(chan struct{}), make(chan struct{})
}

func (s *ex13Server) releaseList() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hold != nil {
		close(s.hold)
		s.hold = nil
	}
}

// isHolding reports whether a LIST is held now.
func (s *ex13Server) isHolding() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.holding && s.hold != nil
}

func (s *ex13Server) waitForHeldList(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	held := s.held
	s.mu.Unlock()
	select {
	case <-held:
	case <-time.After(ex13Wait):
		t.Fatalf("the informer did not LIST pods within %v of runController's start", ex13Wait)
	}
}

func (s *ex13Server) create(t *testing.T, name string) {
	t.Helper()
	pod := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodPending}}
	pod.Namespace, pod.Name, pod.UID = ex13NS, name, types.UID("uid-"+name)
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pod)
	if err != nil {
		t.Fatal(err)
	}
	s.Store("pods", obj)
}

// update changes the pod (its labels, and its phase: Pending, then Running,
// then Succeeded), with a new resourceVersion. A phase that changes makes
// LogHandler log, and any metric counted there show its labels.
func (s *ex13Server) update(t *testing.T, name string) {
	t.Helper()
	if s.Object("pods", ex13NS+"/"+name) == nil {
		t.Fatalf("pods %q not found", name)
	}
	s.Change("pods", ex13NS+"/"+name, func(pod map[string]any) {
		rv := strconv.Itoa(s.RVLocked() + 1) // the resourceVersion the change gets
		_ = unstructured.SetNestedStringMap(pod, map[string]string{"rv": rv}, "metadata", "labels")
		phase, _, _ := unstructured.NestedString(pod, "status", "phase")
		switch corev1.PodPhase(phase) {
		case corev1.PodPending:
			phase = string(corev1.PodRunning)
		case corev1.PodRunning:
			phase = string(corev1.PodSucceeded)
		}
		_ = unstructured.SetNestedField(pod, phase, "status", "phase")
	})
}

func (s *ex13Server) delete(t *testing.T, name string) {
	t.Helper()
	if s.Remove("pods", ex13NS, name) == nil {
		t.Fatalf("pods %q not found", name)
	}
}

// serve notes a request for anything but pods, and refuses it; it holds
// the informer's LIST while the test says, and hands the rest to fakeapi.
func (s *ex13Server) serve(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if r.URL.Path != "/api/v1/pods" {
		s.mu.Lock()
		s.others = append(s.others, r.Method+" "+r.URL.Path)
		s.mu.Unlock()
		fakeapi.Write(w, http.StatusNotFound, ex13Status(http.StatusNotFound, metav1.StatusReasonNotFound,
			"this test's API server serves only the pods of all namespaces"))
		return
	}
	if q.Get("sendInitialEvents") == "true" { // client-go then falls back to a LIST and a WATCH
		fakeapi.Write(w, http.StatusUnprocessableEntity, ex13Status(http.StatusUnprocessableEntity,
			metav1.StatusReasonInvalid,
			"sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled"))
		return
	}
	if q.Get("watch") != "true" {
		s.mu.Lock()
		hold, held := s.hold, s.held
		if q.Get("limit") == "1" {
			hold = nil // not the informer's LIST (run's start-up check makes one, say): not held
		}
		if hold != nil && !s.holding {
			s.holding = true
			close(held)
		}
		s.mu.Unlock()
		if hold != nil {
			select {
			case <-hold:
			case <-r.Context().Done():
				return
			}
		}
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	defer context.AfterFunc(s.gone, cancel)()
	s.Server.ServeHTTP(w, r.WithContext(ctx))
}

// ex13Status is the Status kube-apiserver answers with, for a failure.
func ex13Status(code int, reason metav1.StatusReason, message string) *metav1.Status {
	return &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status: metav1.StatusFailure, Reason: reason, Code: int32(code), Message: message}
}

// ex13Tail returns the last n lines run logged, indented; the informer's
// chatter at -v=4 left out.
func ex13Tail(r *fakeapi.Run, n int) string {
	lines := slices.DeleteFunc(r.Lines(), func(s string) bool {
		return strings.Contains(s, "reflector") && !strings.Contains(s, "err")
	})
	lines = lines[max(0, len(lines)-n):]
	if len(lines) == 0 {
		return "  (nothing was logged)"
	}
	return "  " + strings.Join(lines, "\n  ")
}
