//go:build e2e

package e2e

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// The scale benchmark (make bench) runs demo-controller and two peers
// against the suite's kube-apiserver, one cluster size per go test run:
//
//	DEMO_BENCH_N        pods that exist when each controller starts
//	DEMO_BENCH_BURST    pods created while it runs, to measure lag (1000)
//	DEMO_BENCH_REPS     runs of each controller, for medians (3)
//	DEMO_BENCH_PEERS    a directory with the peers' binaries, crpods and
//	                    workqueue (make bench builds them from e2e/peers)
//	DEMO_BENCH_PEERS_UP_TO  the largest size the peers run at (all)
//	DEMO_BENCH_RESULTS  a JSON file that collects the sizes of one make bench
//	DEMO_BENCH_SIZES    every size of that make bench: the run of the last
//	                    one prints the whole table, the goals and the sizing
//	                    table, and draws the chart
//	DEMO_BENCH_CHART    where the chart goes (an SVG file)
//	DEMO_BENCH_VARIANTS other builds or settings of demo-controller, measured
//	                    at the size DEMO_BENCH_VARIANTS_AT (the largest):
//	                    "name=[ENV=value ...] [binary]" separated by ";"
//	DEMO_BENCH_RESERVE_GIB  memory the machine keeps free while pods are
//	                    created (4); below it the size is given up
//	DEMO_BENCH_PODS     running (the default): the pods that exist at the
//	                    start are bound to a node and have the status a
//	                    kubelet writes for a running pod; pending: they
//	                    are left as created, unscheduled, with no status
//	                    but their phase (as in the runs of docs/scale.txt)
//
// All pods are in the namespace "default": client-go's example watches only
// that one, and every controller sees the same pods.
//
// Each go test run has the suite's 10 minutes (suiteTimeout), cluster start
// and pod creation included: when the next run of the contenders would not
// fit, the benchmark keeps the runs it has and says so.
const benchNamespace = "default"

// benchStart is about when the suite's clock started.
var benchStart = time.Now()

// contender is a controller the benchmark runs: a binary started with
// --kubeconfig, and how to tell from one line of its output which pod it
// reports.
type contender struct {
	Name   string
	binary string
	env    []string
	report func(line string) (key string, ok bool) // key is "namespace/name"
}

// The three controllers, in the table's order. Each is run as built, with
// its defaults.
func contenders(t *testing.T, n int) []contender {
	all := []contender{demoContender()}
	peers := os.Getenv("DEMO_BENCH_PEERS")
	if peers == "" {
		t.Log("DEMO_BENCH_PEERS is not set: measuring demo-controller alone")
		return all
	}
	if upTo := envInt("DEMO_BENCH_PEERS_UP_TO"); upTo > 0 && n > upTo {
		t.Logf("%d pods is above DEMO_BENCH_PEERS_UP_TO=%d: measuring demo-controller alone", n, upTo)
		return all
	}
	return append(all,
		contender{Name: "client-go workqueue", binary: filepath.Join(peers, "workqueue"), report: workqueueReport},
		contender{Name: "controller-runtime", binary: filepath.Join(peers, "crpods"), report: quotedPod(`"Pod reconciled"`)},
	)
}

// workqueueReport reads the pod from examples/workqueue's syncToStdout:
// fmt.Printf("Sync/Add/Update for Pod %s\n", name). It watches one namespace.
func workqueueReport(line string) (string, bool) {
	_, name, ok := strings.Cut(line, "Sync/Add/Update for Pod ")
	return benchNamespace + "/" + name, ok
}

// demoContender is ./demo-controller, or the build DEMO_CONTROLLER_BIN names.
func demoContender() contender {
	return contender{Name: "demo-controller", binary: cmp.Or(os.Getenv("DEMO_CONTROLLER_BIN"), filepath.Join(repoRoot, "demo-controller")),
		report: quotedPod(`"Pod found"`, `"Pod created"`)}
}

// quotedPod reads pod="namespace/name" from klog lines with one of messages.
func quotedPod(messages ...string) func(string) (string, bool) {
	return func(line string) (string, bool) {
		for _, m := range messages {
			if strings.Contains(line, m) {
				_, rest, ok := strings.Cut(line, ` pod="`)
				key, _, _ := strings.Cut(rest, `"`)
				return key, ok
			}
		}
		return "", false
	}
}

// stat is the median of a measure over the runs, and its spread.
type stat struct{ Median, Min, Max float64 }

func statOf(values []float64) stat {
	if len(values) == 0 {
		return stat{}
	}
	return stat{median(values), slices.Min(values), slices.Max(values)}
}

// result is one contender at one size. Times in seconds, memory in MiB.
type result struct {
	Name      string
	Synced    stat // process start → every existing pod reported
	Ratio     stat // Synced ÷ the protobuf LIST of the same run
	RSS       stat // peak RSS (VmHWM) over start, sync and burst
	LiveHeap  stat // the largest live heap after a GC (GODEBUG=gctrace=1)
	CPU       stat // CPU seconds (user+system) from start to synced
	P50, P99  stat // burst: create sent → pod reported
	MaxLag    stat
	Tail      stat // last create sent → last pod of the burst reported
	Variation string
	Runs      int
}

// sizeResult is one size: the floor and every contender.
type sizeResult struct {
	Pods, Burst, Reps    int
	ListProto, ListJSON  stat
	CreateP50, CreateP99 stat    // one create request during the bursts
	APIServerMiB         float64 // kube-apiserver's peak RSS
	EtcdMiB              float64
	Results              []result
	Variants             []result
	Stopped              string // why this size was given up, if it was
	Server               string // kube-apiserver's version
}

// TestScaleBenchmark is `make bench`: see the comment on benchNamespace.
func TestScaleBenchmark(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("DEMO_BENCH_N"))
	if n <= 0 {
		t.Skip("set DEMO_BENCH_N to run the scale benchmark (make bench does)")
	}
	burst := cmp.Or(envInt("DEMO_BENCH_BURST"), 1000)
	reps := cmp.Or(envInt("DEMO_BENCH_REPS"), 3)
	sizes := strings.Fields(os.Getenv("DEMO_BENCH_SIZES"))
	last := len(sizes) == 0 || sizes[len(sizes)-1] == strconv.Itoa(n)
	resultsFile := os.Getenv("DEMO_BENCH_RESULTS")
	all := readResults(t, resultsFile)
	for _, s := range all {
		if s.Stopped != "" && s.Pods < n {
			t.Skipf("a smaller size was given up already: %s", s.Stopped)
		}
	}
	size := sizeResult{Pods: n, Burst: burst, Reps: reps}
	if v, err := admin.Discovery().ServerVersion(); err == nil {
		size.Server = v.GitVersion
	}
	defer func() { // keep what was measured, and print it
		if t.Failed() {
			return // a size with no complete run: nothing to keep
		}
		all = append(all, size)
		writeResults(t, resultsFile, all)
		if last {
			printTable(all)
			writeChart(t, os.Getenv("DEMO_BENCH_CHART"), all)
		} else {
			printTable([]sizeResult{size})
		}
	}()

	namespace(t, benchNamespace)
	start := time.Now()
	created, stopped := createBulk(t, n)
	t.Logf("created %d pods in %v; kube-apiserver RSS %.0f MiB", created, time.Since(start).Round(time.Millisecond), vmKiB(apiServer, "VmRSS")/1024)
	if stopped != "" {
		size.Stopped = stopped
		t.Skip(stopped)
	}

	all3 := contenders(t, n)
	var listProto, listJSON, createReq []float64
	runs := make([][]run, len(all3))
	for rep := range reps {
		repStart := time.Now()
		listJSON = append(listJSON, timeList(t, "application/json"))
		floor := timeList(t, "application/vnd.kubernetes.protobuf")
		listProto = append(listProto, floor)
		// Each run starts with another contender, so that none is always first.
		for j := range all3 {
			i := (j + rep) % len(all3)
			r, requests := measure(t, all3[i], nil, n, burst, fmt.Sprintf("b%d%d", rep, i))
			r.ratio = r.synced / floor
			runs[i] = append(runs[i], r)
			createReq = append(createReq, requests...)
		}
		size.Reps = rep + 1
		if left := suiteTimeout - time.Since(benchStart); rep+1 < reps && time.Since(repStart)*6/5 > left-30*time.Second {
			t.Logf("stopping after %d runs: another would not fit the suite's %v (%v left)", rep+1, suiteTimeout, left.Round(time.Second))
			break
		}
	}
	size.ListProto, size.ListJSON = statOf(listProto), statOf(listJSON)
	slices.Sort(createReq)
	size.CreateP50, size.CreateP99 = stat{Median: percentile(createReq, 0.5)}, stat{Median: percentile(createReq, 0.99)}
	for i, c := range all3 {
		size.Results = append(size.Results, summarize(c.Name, runs[i]))
	}

	// The variants, at one size: the same measurements, start-up against
	// the floor's median (a LIST before each run would not leave them time
	// to run at the largest sizes).
	at := envInt("DEMO_BENCH_VARIANTS_AT")
	if spec := os.Getenv("DEMO_BENCH_VARIANTS"); spec != "" && (at == n || at == 0 && last) {
		for _, v := range strings.Split(spec, ";") {
			c, env := variant(t, all3[0], v)
			var vr []run
			took := time.Minute // a guess until the first run
			for range size.Reps {
				if left := suiteTimeout - time.Since(benchStart); took*6/5 > left-30*time.Second {
					t.Logf("%s: stopping after %d runs: another would not fit the suite's %v", c.Name, len(vr), suiteTimeout)
					break
				}
				start := time.Now()
				r, _ := measure(t, c, env, n, burst, fmt.Sprintf("v%d%d", len(size.Variants), len(vr)))
				r.ratio = r.synced / size.ListProto.Median
				vr = append(vr, r)
				took = time.Since(start)
			}
			if len(vr) == 0 {
				continue
			}
			res := summarize(c.Name, vr)
			_, res.Variation, _ = strings.Cut(v, "=")
			size.Variants = append(size.Variants, res)
		}
	}
	size.APIServerMiB, size.EtcdMiB = vmKiB(apiServer, "VmHWM")/1024, vmKiB(etcd, "VmHWM")/1024
}

// variant reads "name=[ENV=value ...] [binary]" into a contender like demo.
func variant(t *testing.T, demo contender, spec string) (contender, []string) {
	t.Helper()
	name, rest, ok := strings.Cut(spec, "=")
	if !ok {
		t.Fatalf("DEMO_BENCH_VARIANTS: %q is not name=[ENV=value ...] [binary]", spec)
	}
	c := demo
	c.Name = strings.TrimSpace(name)
	var env []string
	for _, f := range strings.Fields(rest) {
		if strings.Contains(f, "=") {
			env = append(env, f)
		} else {
			c.binary = f
		}
	}
	return c, env
}

// run is what one run of a contender measured.
type run struct {
	synced, ratio, rss, liveHeap, cpu float64
	p50, p99, maxLag, tail            float64
}

func summarize(name string, runs []run) result {
	pick := func(f func(run) float64) stat {
		var v []float64
		for _, r := range runs {
			v = append(v, f(r))
		}
		return statOf(v)
	}
	return result{Name: name, Runs: len(runs),
		Synced: pick(func(r run) float64 { return r.synced }), Ratio: pick(func(r run) float64 { return r.ratio }),
		RSS: pick(func(r run) float64 { return r.rss }), LiveHeap: pick(func(r run) float64 { return r.liveHeap }),
		CPU: pick(func(r run) float64 { return r.cpu }),
		P50: pick(func(r run) float64 { return r.p50 }), P99: pick(func(r run) float64 { return r.p99 }),
		MaxLag: pick(func(r run) float64 { return r.maxLag }), Tail: pick(func(r run) float64 { return r.tail }),
	}
}

// measure runs c once over n existing pods: start → every pod reported, the
// CPU that took, then (if burst > 0) a burst of creates and the lag of each,
// and the peak RSS over all of it. The burst's pods are deleted after. It
// also returns how long each create request took.
func measure(t *testing.T, c contender, env []string, n, burst int, prefix string) (run, []float64) {
	t.Helper()
	p, rec := startContender(t, c, env)
	defer p.stop()
	var r run
	rec.waitFor(t, n)
	r.synced = rec.lastFirst().Sub(rec.start).Seconds()
	_, r.cpu = procStats(t, p)

	var requests []float64
	if burst > 0 {
		var sent map[string]time.Time
		sent, requests = createPods(t, prefix, burst)
		rec.waitFor(t, n+burst)
		var lags []float64
		var lastSent, lastSeen time.Time
		for key, when := range sent {
			seen := rec.first(key)
			lags = append(lags, seen.Sub(when).Seconds())
			lastSent, lastSeen = later(lastSent, when), later(lastSeen, seen)
		}
		slices.Sort(lags)
		r.p50, r.p99, r.maxLag = percentile(lags, 0.5), percentile(lags, 0.99), lags[len(lags)-1]
		r.tail = lastSeen.Sub(lastSent).Seconds()
	}
	peak, _ := procStats(t, p)
	r.rss, r.liveHeap = peak/(1<<20), rec.maxLiveHeap()
	p.stop()
	if burst > 0 {
		err := admin.CoreV1().Pods(benchNamespace).DeleteCollection(context.Background(),
			metav1.DeleteOptions{GracePeriodSeconds: now}, metav1.ListOptions{LabelSelector: "burst=" + prefix})
		if err != nil {
			t.Fatal(err)
		}
	}
	return r, requests
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// startContender starts c with the admin kubeconfig and GODEBUG=gctrace=1
// (the live heap is read from the GC's trace). Its output goes to a
// recorder, which notes when each line arrived.
func startContender(t *testing.T, c contender, env []string) (*process, *recorder) {
	t.Helper()
	rec := &recorder{report: c.report, firsts: map[string]time.Time{}}
	p := &process{name: c.Name, cmd: exec.Command(c.binary, "--kubeconfig", adminKube), out: &syncBuffer{}, done: make(chan struct{})}
	p.cmd.Env = append(append(os.Environ(), "GODEBUG=gctrace=1"), append(c.env, env...)...)
	p.cmd.Stdout, p.cmd.Stderr = rec.pipes()
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	rec.start = time.Now()
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", c.Name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	processesMu.Lock()
	processes = append(processes, p)
	processesMu.Unlock()
	rec.p = p
	return p, rec
}

// recorder reads a contender's output as it comes: the first time each pod
// was reported, the live heap of each GC, and the last lines (for errors).
type recorder struct {
	p      *process
	report func(string) (string, bool)
	start  time.Time

	mu       sync.Mutex
	firsts   map[string]time.Time
	latest   time.Time // when the newest pod was first reported
	liveHeap float64   // MiB
	tail     []string
}

// gcLine matches gctrace's "4->5->2 MB": the heap at GC start, at its end,
// and the live heap it marked (the runtime's "MB" are MiB).
var gcLine = regexp.MustCompile(`(\d+)->(\d+)->(\d+) MB`)

// pipes returns the writers for a contender's stdout and stderr. Two, so
// that exec gives each its own pipe: the runtime writes a gctrace line in
// several pieces, and on a shared pipe they land inside stdout's lines.
func (r *recorder) pipes() (stdout, stderr io.Writer) {
	return &lineSplitter{rec: r}, &lineSplitter{rec: r}
}

// lineSplitter cuts what one pipe carries into lines for its recorder.
type lineSplitter struct {
	rec     *recorder
	partial []byte
}

func (w *lineSplitter) Write(data []byte) (int, error) {
	now := time.Now()
	w.rec.mu.Lock()
	defer w.rec.mu.Unlock()
	w.partial = append(w.partial, data...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			return len(data), nil
		}
		w.rec.line(string(w.partial[:i]), now)
		w.partial = w.partial[i+1:]
	}
}

// line reads one line, seen at now; r.mu is held. On stderr a pod's line can
// still follow a piece of a gctrace line, and the rest of the gctrace line
// then comes as a line of its own: neither is looked for at a line's start.
func (r *recorder) line(line string, now time.Time) {
	if key, ok := r.report(line); ok {
		if _, seen := r.firsts[key]; !seen {
			r.firsts[key], r.latest = now, now
		}
	} else if m := gcLine.FindStringSubmatch(line); m != nil {
		live, _ := strconv.ParseFloat(m[3], 64)
		r.liveHeap = max(r.liveHeap, live)
	} else {
		r.tail = append(r.tail[max(0, len(r.tail)-30):], line)
	}
}

// TestRecorderReadsInterleavedOutput feeds a recorder what the bench saw
// from a contender whose GC traced while it logged: on stderr a piece of a
// gctrace line, a pod's line, then the rest of the gctrace line; on stdout,
// meanwhile, a line of examples/workqueue's. No pod and no GC may be lost.
func TestRecorderReadsInterleavedOutput(t *testing.T) {
	demo := demoContender().report
	rec := &recorder{firsts: map[string]time.Time{}, report: func(line string) (string, bool) {
		if key, ok := demo(line); ok {
			return key, ok
		}
		return workqueueReport(line)
	}}
	stdout, stderr := rec.pipes()
	for _, w := range []struct {
		to   io.Writer
		text string
	}{
		{stderr, "gc 7 @1.203s 2%: 0.011+1.3+0.040 ms clock, "},
		{stdout, "Sync/Add/Update for Pod b00-0001"},
		{stderr, `I1123 16:19:50.039228   31981 handler.go:71] "Pod created" pod="bench/b00-0002"` + "\n"},
		{stdout, "\nSync/Add/"},
		{stderr, "0.1/2.3/1.0+0.085 ms cpu, 50->51->37 MB, 53 MB goal, 0 MB stacks, 0 MB globals, 2 P\n"},
		{stdout, "Update for Pod b00-0003\n"},
	} {
		w.to.Write([]byte(w.text))
	}
	for _, key := range []string{benchNamespace + "/b00-0001", "bench/b00-0002", benchNamespace + "/b00-0003"} {
		if rec.first(key).IsZero() {
			t.Errorf("%s was not seen; the lines that matched nothing: %q", key, rec.tail)
		}
	}
	if rec.maxLiveHeap() != 37 {
		t.Errorf("live heap %v MiB, want 37; the lines that matched nothing: %q", rec.maxLiveHeap(), rec.tail)
	}
}

func (r *recorder) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.firsts)
}

func (r *recorder) first(key string) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.firsts[key]
}

func (r *recorder) lastFirst() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.latest
}

func (r *recorder) maxLiveHeap() float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.liveHeap
}

// waitFor waits until count different pods have been reported: 5 minutes,
// and a minute more for every 10,000 pods.
func (r *recorder) waitFor(t *testing.T, count int) {
	t.Helper()
	timeout := 5*time.Minute + time.Duration(count/10000)*time.Minute
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		if r.p.exited() {
			return false, fmt.Errorf("exited: %v", r.p.err)
		}
		return r.count() >= count, nil
	})
	if err != nil {
		r.mu.Lock()
		defer r.mu.Unlock()
		t.Fatalf("%s reported %d pods, want %d: %v; its last lines:\n%s", r.p.name, len(r.firsts), count, err, strings.Join(r.tail, "\n"))
	}
}

// createBulk creates the pods pod-000000 to pod-(n-1) as fast as the API
// server takes them, unless free memory falls below the reserve: then it
// stops and says why.
func createBulk(t *testing.T, n int) (created int, stopped string) {
	t.Helper()
	config, err := clientcmd.BuildConfigFromFlags("", adminKube)
	if err != nil {
		t.Fatal(err)
	}
	config.QPS, config.Burst = 5000, 10000
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	reserve := float64(cmp.Or(envInt("DEMO_BENCH_RESERVE_GIB"), 4)) * (1 << 30)
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	work := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	running := os.Getenv("DEMO_BENCH_PODS") != "pending"
	for range 32 {
		wg.Go(func() {
			for i := range work {
				pod := realisticPod(benchNamespace, fmt.Sprintf("pod-%06d", i))
				if running {
					pod.Spec.NodeName = fmt.Sprintf("node-%02d", i%50)
				}
				made, err := client.CoreV1().Pods(benchNamespace).Create(ctx, pod, metav1.CreateOptions{})
				if err == nil && running {
					setRunning(made, i)
					_, err = client.CoreV1().Pods(benchNamespace).UpdateStatus(ctx, made, metav1.UpdateOptions{})
				}
				if err != nil {
					cancel(err)
					return
				}
				mu.Lock()
				created++
				mu.Unlock()
			}
		})
	}
	watch := time.NewTicker(250 * time.Millisecond)
	defer watch.Stop()
feed:
	for i := 0; i < n; {
		select {
		case work <- i:
			i++
		case <-ctx.Done():
			break feed
		case <-watch.C:
			if free := memAvailable(t); free < reserve {
				mu.Lock()
				stopped = fmt.Sprintf("the machine stopped this size at %d pods: %.1f GiB free, below the reserve of %.0f GiB; kube-apiserver RSS %.1f GiB, etcd %.1f GiB",
					created, free/(1<<30), reserve/(1<<30), vmKiB(apiServer, "VmRSS")/(1<<20), vmKiB(etcd, "VmRSS")/(1<<20))
				mu.Unlock()
				cancel(errors.New(stopped))
			}
		}
	}
	close(work)
	wg.Wait()
	if err := context.Cause(ctx); err != nil && stopped == "" {
		t.Fatal(err)
	}
	return created, stopped
}

// createPods creates count pods named prefix-NNNN with the label
// burst=prefix, sixteen at a time through the suite's client (200 requests
// a second). It returns when each was sent, by "namespace/name", and how
// long each request took.
func createPods(t *testing.T, prefix string, count int) (map[string]time.Time, []float64) {
	t.Helper()
	var mu sync.Mutex
	sent, took := map[string]time.Time{}, []float64(nil)
	work := make(chan int)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Go(func() {
			for i := range work {
				pod := realisticPod(benchNamespace, fmt.Sprintf("%s-%04d", prefix, i))
				pod.Labels["burst"] = prefix
				when := time.Now()
				if _, err := admin.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				sent[pod.Namespace+"/"+pod.Name] = when
				took = append(took, time.Since(when).Seconds())
				mu.Unlock()
			}
		})
	}
	for i := range count {
		work <- i
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		t.Fatal(err)
	default:
	}
	return sent, took
}

// setRunning gives pod the status a kubelet writes for a running pod: its
// conditions, an IP, and a status for each container. keep keeps the
// conditions and the container statuses, so they weigh on the cache.
func setRunning(pod *corev1.Pod, i int) {
	now := metav1.Now()
	pod.Status.Phase = corev1.PodRunning
	pod.Status.HostIP, pod.Status.PodIP = "10.0.0.1", fmt.Sprintf("10.%d.%d.%d", 1+i>>16, i>>8&255, i&255)
	pod.Status.PodIPs = []corev1.PodIP{{IP: pod.Status.PodIP}}
	pod.Status.StartTime = &now
	pod.Status.QOSClass = corev1.PodQOSBurstable
	pod.Status.Conditions = nil
	for _, c := range []corev1.PodConditionType{"PodReadyToStartContainers", corev1.PodInitialized, corev1.PodReady,
		corev1.ContainersReady, corev1.PodScheduled} {
		pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: c, Status: corev1.ConditionTrue, LastTransitionTime: now})
	}
	pod.Status.ContainerStatuses = nil
	for _, c := range pod.Spec.Containers {
		started := true
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Ready: true,
			Started: &started, Image: c.Image, ImageID: c.Image[:strings.LastIndex(c.Image, ":")] + "@sha256:" + strings.Repeat("5e", 32),
			ContainerID: fmt.Sprintf("containerd://%064x", i), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}})
	}
}

// realisticPod is a pod of the kind a Deployment makes: two containers with
// environment, resources and probes, labels and annotations.
func realisticPod(ns, name string) *corev1.Pod {
	var env []corev1.EnvVar
	for i := range 12 {
		env = append(env, corev1.EnvVar{Name: fmt.Sprintf("SETTING_%d", i), Value: strings.Repeat("v", 24)})
	}
	resources := corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
	}
	container := func(name string, port int32) corev1.Container {
		return corev1.Container{Name: name, Image: "registry.example/" + name + ":1.2.3", Env: env, Resources: resources,
			Ports:          []corev1.ContainerPort{{Name: name, ContainerPort: port}},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt32(port)}}}}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
			Labels: map[string]string{"app.kubernetes.io/name": "shop", "app.kubernetes.io/component": "web",
				"app.kubernetes.io/version": "1.2.3", "pod-template-hash": "7d9f8b6c5d", "tier": "frontend"},
			Annotations: map[string]string{"example.com/owner": "team-a", "example.com/revision": "42",
				"kubectl.kubernetes.io/default-container": "app"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{container("app", 8080), container("sidecar", 9090)}},
	}
}

// timeList times one LIST of every pod, in the given encoding.
func timeList(t *testing.T, contentType string) float64 {
	t.Helper()
	config, err := clientcmd.BuildConfigFromFlags("", adminKube)
	if err != nil {
		t.Fatal(err)
	}
	config.ContentType, config.AcceptContentTypes = contentType, contentType
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		t.Fatal(err)
	}
	// A first small request opens the connection, so that only the LIST is timed.
	if _, err := client.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{Limit: 1}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := client.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	return time.Since(start).Seconds()
}

// procStats reads a running process's peak resident memory (bytes) and the
// CPU seconds it has used, from /proc.
func procStats(t *testing.T, p *process) (peakBytes, cpuSeconds float64) {
	t.Helper()
	pid := p.cmd.Process.Pid
	peakBytes = vmKiB(p, "VmHWM") * 1024
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the command name (which is in parentheses): utime and
	// stime are the 12th and 13th, in clock ticks of 1/100 s on Linux.
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+2:]))
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return peakBytes, (utime + stime) / 100
}

// vmKiB reads a field such as VmHWM (peak RSS) from /proc/PID/status, in KiB.
func vmKiB(p *process, field string) float64 {
	if p == nil || p.cmd.Process == nil {
		return 0
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kib, _ := strconv.ParseFloat(strings.Fields(rest)[0], 64)
			return kib
		}
	}
	return 0
}

// memAvailable reads MemAvailable from /proc/meminfo, in bytes.
func memAvailable(t *testing.T) float64 {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemAvailable:"); ok {
			kib, _ := strconv.ParseFloat(strings.Fields(rest)[0], 64)
			return kib * 1024
		}
	}
	t.Fatal("no MemAvailable in /proc/meminfo")
	return 0
}

func envInt(name string) int {
	n, _ := strconv.Atoi(os.Getenv(name))
	return n
}

func readResults(t *testing.T, path string) []sizeResult {
	t.Helper()
	var all []sizeResult
	if path == "" {
		return nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err == nil {
		err = json.Unmarshal(data, &all)
	}
	if err != nil {
		t.Fatalf("DEMO_BENCH_RESULTS: %v", err)
	}
	return all
}

func writeResults(t *testing.T, path string, all []sizeResult) {
	t.Helper()
	if path == "" {
		return
	}
	data, err := json.MarshalIndent(all, "", " ")
	if err == nil {
		err = os.WriteFile(path, data, 0o644)
	}
	if err != nil {
		t.Errorf("DEMO_BENCH_RESULTS: %v", err)
	}
}

func median(values []float64) float64 {
	sorted := slices.Clone(values)
	slices.Sort(sorted)
	return sorted[len(sorted)/2]
}

// percentile returns the q-th quantile of sorted values.
func percentile(sorted []float64, q float64) float64 {
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

// printTable prints each size: its floor, then a row per contender with
// medians, [min–max] and ratios to demo-controller. After two sizes or more
// it prints the goals, the fitted lines and the sizing table.
func printTable(all []sizeResult) {
	var measured []sizeResult
	for _, s := range all {
		if s.Stopped == "" {
			measured = append(measured, s)
		}
	}
	fmt.Printf("\nScale benchmark: medians of the runs [min–max]; %d cores (runtime.NumCPU), %.1f GiB memory\n",
		runtime.NumCPU(), memTotalGiB())
	fmt.Println(`synced: process start → every existing pod reported; ÷ LIST: each run's synced ÷ the raw protobuf LIST of the pods just
before it (variants: ÷ the LIST's median); lag: create request sent → the pod reported; tail: last create sent → last pod
reported; MiB/1k: the slope of peak RSS from the size before; live heap: the largest after a GC (GODEBUG=gctrace=1), MiB`)
	prevRSS, prevPods := map[string]float64{}, map[string]int{}
	for _, s := range all {
		if s.Stopped != "" {
			fmt.Printf("\n%s pods: %s\n", thousands(s.Pods), s.Stopped)
			continue
		}
		fmt.Printf("\n%s pods, %d runs, kube-apiserver %s. Floor, raw LIST: protobuf %s s, JSON %s s. Create requests in the bursts: p50 %.0f ms, p99 %.0f ms. Peak RSS: kube-apiserver %.1f GiB, etcd %.1f GiB\n",
			thousands(s.Pods), s.Reps, s.Server, spread(s.ListProto, 1, 2), spread(s.ListJSON, 1, 2), s.CreateP50.Median*1000, s.CreateP99.Median*1000, s.APIServerMiB/1024, s.EtcdMiB/1024)
		fmt.Printf("  %-22s %-20s %-20s %-19s %6s %7s %-10s %-17s %-26s %s\n",
			"controller", "synced s", "÷ LIST", "peak RSS MiB", "×demo", "MiB/1k", "live heap", "CPU to sync, s", fmt.Sprintf("lag of %d: p50, p99 ms", s.Burst), "tail ms")
		demo := s.Results[0].RSS.Median
		for _, r := range append(slices.Clone(s.Results), s.Variants...) {
			slope := "—"
			if old, ok := prevRSS[r.Name]; ok {
				slope = fmt.Sprintf("%.2f", (r.RSS.Median-old)/float64(s.Pods-prevPods[r.Name])*1000)
			}
			lag, tail := fmt.Sprintf("%.0f, %s", r.P50.Median*1000, spread(r.P99, 1000, 0)), spread(r.Tail, 1000, 0)
			fmt.Printf("  %-22s %-20s %-20s %-19s %6.2f %7s %-10.0f %-17s %-26s %s\n", r.Name, spread(r.Synced, 1, 2), spread(r.Ratio, 1, 2)+"×",
				spread(r.RSS, 1, 0), r.RSS.Median/demo, slope, r.LiveHeap.Median, spread(r.CPU, 1, 2), lag, tail)
		}
		for _, r := range s.Variants {
			fmt.Printf("  (%s: %s; %d runs)\n", r.Name, strings.TrimSpace(r.Variation), r.Runs)
		}
		for _, r := range s.Results {
			prevRSS[r.Name], prevPods[r.Name] = r.RSS.Median, s.Pods
		}
	}
	if len(measured) >= 2 {
		printGoals(measured)
		printSizing(measured)
	}
}

// spread formats a stat times scale as "median [min–max]".
func spread(s stat, scale float64, prec int) string {
	return fmt.Sprintf("%.*f [%.*f–%.*f]", prec, s.Median*scale, prec, s.Min*scale, prec, s.Max*scale)
}

// thousands formats 30000 as "30,000".
func thousands(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func memTotalGiB() float64 {
	data, _ := os.ReadFile("/proc/meminfo")
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemTotal:"); ok {
			kib, _ := strconv.ParseFloat(strings.Fields(rest)[0], 64)
			return kib / (1 << 20)
		}
	}
	return 0
}

// line is y = a + b·x, fitted by least squares, with its coefficient of
// determination and the largest residual relative to the measured value.
type line struct{ a, b, r2, worst float64 }

func fit(xs, ys []float64) line {
	n := float64(len(xs))
	var sx, sy, sxx, sxy float64
	for i := range xs {
		sx, sy, sxx, sxy = sx+xs[i], sy+ys[i], sxx+xs[i]*xs[i], sxy+xs[i]*ys[i]
	}
	b := (n*sxy - sx*sy) / (n*sxx - sx*sx)
	l := line{a: (sy - b*sx) / n, b: b}
	var ssRes, ssTot float64
	for i := range xs {
		res := ys[i] - l.at(xs[i])
		ssRes, ssTot = ssRes+res*res, ssTot+(ys[i]-sy/n)*(ys[i]-sy/n)
		l.worst = max(l.worst, math.Abs(res)/ys[i])
	}
	l.r2 = 1 - ssRes/ssTot
	return l
}

func (l line) at(x float64) float64 { return l.a + l.b*x }

// fitOf fits a contender's measure against pods over the sizes it ran at.
func fitOf(sizes []sizeResult, name string, f func(result) float64) line {
	var xs, ys []float64
	for _, s := range sizes {
		if r, ok := s.find(name); ok {
			xs, ys = append(xs, float64(s.Pods)), append(ys, f(r))
		}
	}
	return fit(xs, ys)
}

// find returns the named contender's result at this size.
func (s sizeResult) find(name string) (result, bool) {
	for _, r := range s.Results {
		if r.Name == name {
			return r, true
		}
	}
	return result{}, false
}

// names lists the contenders of every size, in the table's order.
func names(sizes []sizeResult) []string {
	var all []string
	for _, s := range sizes {
		for _, r := range s.Results {
			if !slices.Contains(all, r.Name) {
				all = append(all, r.Name)
			}
		}
	}
	return all
}

func passOrMiss(ok bool) string {
	if ok {
		return "pass"
	}
	return "MISS"
}

// printGoals checks issue #14's goals against the measured sizes.
func printGoals(sizes []sizeResult) {
	fmt.Println("\nSide by side: time ÷ LIST, and demo-controller's peak RSS as a fraction of each peer's")
	all := names(sizes)
	fmt.Printf("  %-8s", "pods")
	for _, name := range all {
		fmt.Printf(" %22s", name+" ÷ LIST")
	}
	for _, name := range all[1:] {
		fmt.Printf(" %28s", "demo RSS ÷ "+name+"'s")
	}
	fmt.Println()
	for _, s := range sizes {
		fmt.Printf("  %-8s", thousands(s.Pods))
		for _, name := range all {
			if r, ok := s.find(name); ok {
				fmt.Printf(" %21.2f×", r.Ratio.Median)
			} else {
				fmt.Printf(" %22s", "—")
			}
		}
		for _, name := range all[1:] {
			if r, ok := s.find(name); ok {
				fmt.Printf(" %28.2f", s.Results[0].RSS.Median/r.RSS.Median)
			} else {
				fmt.Printf(" %28s", "—")
			}
		}
		fmt.Println()
	}

	fmt.Println("\nGoals (issue #14), demo-controller:")
	var ratios []string
	ok := true
	for _, s := range sizes {
		ratios = append(ratios, fmt.Sprintf("%.2f× at %s", s.Results[0].Ratio.Median, thousands(s.Pods)))
		ok = ok && s.Results[0].Ratio.Median <= 1.2
	}
	fmt.Printf("  start → every pod reported ≤ 1.2× the raw protobuf LIST, every size: %s: %s\n", strings.Join(ratios, ", "), passOrMiss(ok))
	a, b := sizes[len(sizes)-2], sizes[len(sizes)-1]
	slope := (b.Results[0].RSS.Median - a.Results[0].RSS.Median) / float64(b.Pods-a.Pods) * 1000
	fmt.Printf("  memory slope ≤ 3 MiB per 1,000 pods at the largest size: %.2f MiB (%s → %s pods): %s\n",
		slope, thousands(a.Pods), thousands(b.Pods), passOrMiss(slope <= 3))
	for i, limit := range []float64{0.5, 0.33} {
		if len(all) <= i+1 {
			break
		}
		var fr []string
		ok := true
		for _, s := range sizes {
			if r, found := s.find(all[i+1]); found {
				f := s.Results[0].RSS.Median / r.RSS.Median
				fr = append(fr, fmt.Sprintf("%.2f at %s", f, thousands(s.Pods)))
				ok = ok && f <= limit
			}
		}
		fmt.Printf("  peak RSS ≤ %.2f× %s's, every size it ran at: %s: %s\n", limit, all[i+1], strings.Join(fr, ", "), passOrMiss(ok))
	}
	burstAt := -1
	for i, s := range sizes {
		if s.Pods == 10000 && s.Burst == 1000 {
			burstAt = i
		}
	}
	if burstAt < 0 {
		fmt.Println("  burst of 1,000 creates at 10,000 pods: not measured in this run (it needs N=10000 and BURST=1000)")
	} else {
		r := sizes[burstAt].Results[0]
		fmt.Printf("  burst of 1,000 creates at 10,000 pods: lag p99 %.0f ms (≤ 100), last \"Pod created\" %.0f ms after the last create (≤ 1,000): %s\n",
			r.P99.Median*1000, r.Tail.Median*1000, passOrMiss(r.P99.Median <= 0.1 && r.Tail.Median <= 1))
	}
	l := fitOf(sizes, all[0], func(r result) float64 { return r.RSS.Median })
	counts := map[int]bool{}
	for _, s := range sizes {
		counts[s.Pods] = true
	}
	if len(counts) < 3 { // a line through two points always fits them
		fmt.Printf("  the curve is straight: not measured in this run (it needs three numbers of pods; it ran %d)\n", len(counts))
	} else {
		fmt.Printf("  the curve is straight: peak RSS ≈ %.1f MiB + %.2f MiB per 1,000 pods, R² %.4f, largest residual %.1f%% of the measured value (≤ 10%%): %s\n",
			l.a, l.b*1000, l.r2, l.worst*100, passOrMiss(l.worst <= 0.1))
	}
	t := fitOf(sizes, all[0], func(r result) float64 { return r.Ratio.Median })
	fmt.Printf("    and time ÷ LIST changes by %+.3f per 10,000 pods\n", t.b*10000)
}

// Sizing: the memory limit for a number of pods is the larger of
// limitHeadroom × the fitted peak RSS and liveHeapFactor × the fitted live
// heap, rounded up to 32 MiB. The manifest sets GOMEMLIMIT to the limit.
const (
	limitHeadroom  = 1.25
	liveHeapFactor = 2.0
)

func sizingLimit(rss, live line, pods float64) float64 {
	return math.Ceil(max(limitHeadroom*rss.at(pods), liveHeapFactor*live.at(pods))/32) * 32
}

// printSizing prints demo-controller's sizing table and what the fitted
// lines predict beyond the sizes measured.
func printSizing(sizes []sizeResult) {
	demo := sizes[0].Results[0].Name
	rss := fitOf(sizes, demo, func(r result) float64 { return r.RSS.Median })
	live := fitOf(sizes, demo, func(r result) float64 { return r.LiveHeap.Median })
	smallest, largest := sizes[0].Pods, sizes[len(sizes)-1].Pods
	fmt.Printf("\nPredicted at 150,000 pods by the fitted lines:")
	var xs, list, server []float64
	for _, s := range sizes {
		xs, list, server = append(xs, float64(s.Pods)), append(list, s.ListProto.Median), append(server, s.APIServerMiB)
	}
	floor := fit(xs, list).at(150000)
	fmt.Printf(" raw protobuf LIST %.1f s; kube-apiserver %.1f GiB;", floor, fit(xs, server).at(150000)/1024)
	for _, name := range names(sizes) {
		l := fitOf(sizes, name, func(r result) float64 { return r.RSS.Median })
		synced := fitOf(sizes, name, func(r result) float64 { return r.Synced.Median })
		fmt.Printf(" %s %.0f MiB, synced in %.1f s (%.1f× LIST);", name, l.at(150000), synced.at(150000), synced.at(150000)/floor)
	}
	fmt.Println()

	fmt.Printf("\nSizing demo-controller (memory limit = GOMEMLIMIT: the larger of %.2f× peak RSS and %.0f× live heap, on the fitted lines, rounded up to 32 MiB)\n",
		limitHeadroom, liveHeapFactor)
	fmt.Printf("  %-9s %-14s %-14s %-13s %s\n", "pods", "peak RSS MiB", "live heap MiB", "limit MiB", "")
	for _, pods := range []int{1000, 5000, 10000, 20000, 30000, 50000, 100000, 150000} {
		note := "measured range"
		if pods < smallest || pods > largest {
			note = "extrapolated"
		}
		fmt.Printf("  %-9s %-14.0f %-14.0f %-13.0f %s\n", thousands(pods), rss.at(float64(pods)), live.at(float64(pods)),
			sizingLimit(rss, live, float64(pods)), note)
	}
	ok := true
	for _, s := range sizes {
		ok = ok && sizingLimit(rss, live, float64(s.Pods)) > s.Results[0].LiveHeap.Max
	}
	fmt.Printf("  the table's limit (= GOMEMLIMIT) is above the largest live heap measured at every size: %s\n", passOrMiss(ok))
}

// writeChart draws the curve into an SVG file at path: time ÷ LIST and peak
// RSS against pods, a line per contender.
func writeChart(t *testing.T, path string, all []sizeResult) {
	t.Helper()
	var sizes []sizeResult
	for _, s := range all {
		if s.Stopped == "" {
			sizes = append(sizes, s)
		}
	}
	if path == "" || len(sizes) < 2 {
		return
	}
	var b strings.Builder
	const width, height = 960, 440
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="13">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="%d" y="22" text-anchor="middle" font-size="15" font-weight="bold">make bench: kube-apiserver %s, %d cores, medians of %d runs</text>`+"\n",
		width/2, sizes[0].Server, runtime.NumCPU(), sizes[0].Reps)
	colours := []string{"#1c5fb8", "#d9480f", "#2b8a3e", "#7048e8"}
	all3 := names(sizes)
	for i, name := range all3 {
		x := 120 + i*250
		fmt.Fprintf(&b, `<line x1="%d" y1="44" x2="%d" y2="44" stroke="%s" stroke-width="3"/><circle cx="%d" cy="44" r="4" fill="%s"/><text x="%d" y="48">%s</text>`+"\n",
			x, x+28, colours[i], x+14, colours[i], x+36, name)
	}
	// Each point is a median; a bar through it spans the runs' min to max.
	panel := func(left int, title, unit string, goal float64, value func(result) stat) {
		const top, w, h = 80, 380, 290
		maxX, maxY := 0.0, 0.0
		for _, s := range sizes {
			maxX = max(maxX, float64(s.Pods))
			for _, r := range s.Results {
				maxY = max(maxY, value(r).Max)
			}
		}
		stepX, stepY := niceStep(maxX, 5), niceStep(maxY, 8)
		maxX, maxY = math.Ceil(maxX/stepX)*stepX, math.Ceil(maxY/stepY)*stepY
		px := func(x float64) float64 { return float64(left) + x/maxX*w }
		py := func(y float64) float64 { return top + h - y/maxY*h }
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle" font-weight="bold">%s</text>`+"\n", left+w/2, top-12, title)
		for y := 0.0; y <= maxY+stepY/2; y += stepY {
			fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/><text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n",
				left, py(y), left+w, py(y), left-6, py(y)+4, strconv.FormatFloat(y, 'f', -1, 64)+unit)
		}
		for x := 0.0; x <= maxX+stepX/2; x += stepX {
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/><text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n",
				px(x), top, px(x), top+h, px(x), top+h+18, kilo(x))
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">pods</text>`+"\n", left+w/2, top+h+38)
		if goal > 0 {
			fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#555" stroke-dasharray="6 4"/><text x="%d" y="%.1f" text-anchor="end" fill="#555">goal %s%s</text>`+"\n",
				left, py(goal), left+w, py(goal), left+w-4, py(goal)-5, strconv.FormatFloat(goal, 'f', -1, 64), unit)
		}
		for i, name := range all3 {
			var points []string
			for _, s := range sizes {
				if r, ok := s.find(name); ok {
					x, v := px(float64(s.Pods)), value(r)
					points = append(points, fmt.Sprintf("%.1f,%.1f", x, py(v.Median)))
					fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="1.5"/>`+"\n", x, py(v.Min), x, py(v.Max), colours[i])
				}
			}
			fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2.5"/>`+"\n", strings.Join(points, " "), colours[i])
			for _, p := range points {
				x, y, _ := strings.Cut(p, ",")
				fmt.Fprintf(&b, `<circle cx="%s" cy="%s" r="4" fill="%s"/>`+"\n", x, y, colours[i])
			}
		}
	}
	panel(70, "start → every pod reported, ÷ raw protobuf LIST (bars: min–max)", "×", 1.2, func(r result) stat { return r.Ratio })
	panel(545, "peak RSS, MiB", "", 0, func(r result) stat { return r.RSS })
	b.WriteString("</svg>\n")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	fmt.Printf("\nChart: %s\n", path)
}

// niceStep is the smallest step of 1, 2 or 5 × 10^k that divides 0..max
// into at most steps.
func niceStep(max float64, steps int) float64 {
	if max <= 0 {
		return 1
	}
	step := math.Pow(10, math.Floor(math.Log10(max)))
	for _, f := range []float64{0.1, 0.2, 0.5, 1, 2, 5} {
		if max/(step*f) <= float64(steps) {
			return step * f
		}
	}
	return step * 10
}

// kilo formats 50000 as "50k".
func kilo(x float64) string {
	if x >= 1000 {
		return strconv.FormatFloat(x/1000, 'f', -1, 64) + "k"
	}
	return strconv.FormatFloat(x, 'f', -1, 64)
}

// TestScaleReport prints the table and draws the chart again from
// DEMO_BENCH_RESULTS, measuring nothing: DEMO_BENCH_REPORT=1.
func TestScaleReport(t *testing.T) {
	if os.Getenv("DEMO_BENCH_REPORT") == "" {
		t.Skip("set DEMO_BENCH_REPORT=1 and DEMO_BENCH_RESULTS to print a benchmark's results again")
	}
	all := readResults(t, os.Getenv("DEMO_BENCH_RESULTS"))
	printTable(all)
	writeChart(t, os.Getenv("DEMO_BENCH_CHART"), all)
}

// coversPods finds the manifest's statement of how many pods its memory
// limit covers: "covers 20,000 pods".
var coversPods = regexp.MustCompile(`covers ([0-9,]+) pods`)

// TestShippedMemoryLimit proves the manifest's memory settings: its
// Deployment sets GOMEMLIMIT from its own memory limit (the downward API's
// limits.memory, in bytes), and with as many pods as the manifest says the
// limit covers, demo-controller under that GOMEMLIMIT peaks below the limit
// through start-up and a burst of creates, in each of three runs. make bench
// runs it (DEMO_BENCH_SHIPPED=1), on a cluster of its own.
func TestShippedMemoryLimit(t *testing.T) {
	if os.Getenv("DEMO_BENCH_SHIPPED") == "" {
		t.Skip("set DEMO_BENCH_SHIPPED=1 to prove the manifest's memory limit (make bench does)")
	}
	container := podFromTemplate(t).Spec.Containers[0]
	limit := container.Resources.Limits.Memory().Value()
	fromLimit := false
	for _, e := range container.Env {
		if e.Name == "GOMEMLIMIT" && e.ValueFrom != nil && e.ValueFrom.ResourceFieldRef != nil {
			ref := e.ValueFrom.ResourceFieldRef
			fromLimit = ref.Resource == "limits.memory" && (ref.Divisor.IsZero() || ref.Divisor.Value() == 1)
		}
	}
	if limit == 0 || !fromLimit {
		t.Fatalf("demo-controller.yaml: want a memory limit, and GOMEMLIMIT from resourceFieldRef limits.memory (in bytes); have limit %d, env %v", limit, container.Env)
	}
	data, err := os.ReadFile(filepath.Join(repoRoot, "demo-controller.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := coversPods.FindSubmatch(data)
	if m == nil {
		t.Fatal(`demo-controller.yaml does not say how many pods its memory limit covers ("covers N pods")`)
	}
	pods, _ := strconv.Atoi(strings.ReplaceAll(string(m[1]), ",", ""))
	burst := cmp.Or(envInt("DEMO_BENCH_BURST"), 1000)

	namespace(t, benchNamespace)
	if created, stopped := createBulk(t, pods); stopped != "" {
		t.Fatalf("created only %d pods: %s", created, stopped)
	}
	demo := demoContender()
	env := []string{fmt.Sprintf("GOMEMLIMIT=%d", limit)}
	for i := range 3 {
		r, _ := measure(t, demo, env, pods, burst, fmt.Sprintf("shipped%d", i))
		t.Logf("run %d: %s pods and a burst of %d under GOMEMLIMIT=%d: peak RSS %.0f MiB of the %d MiB limit (headroom %.0f%%), live heap %.0f MiB, synced in %.2f s",
			i+1, thousands(pods), burst, limit, r.rss, limit>>20, 100*(1-r.rss*(1<<20)/float64(limit)), r.liveHeap, r.synced)
		if r.rss*(1<<20) >= float64(limit) {
			t.Errorf("peak RSS %.0f MiB is not below the manifest's limit of %d MiB", r.rss, limit>>20)
		}
	}
}
