//go:build e2e

package e2e

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
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

// TestScaleBenchmark is `make bench`. It runs only when DEMO_BENCH_N is set:
// it creates that many realistic pods, measures a raw LIST of them (the
// floor), the controller's start-up, memory and CPU, and its lag over a
// burst of DEMO_BENCH_BURST creates, three times each, and prints medians.
func TestScaleBenchmark(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("DEMO_BENCH_N"))
	if n <= 0 {
		t.Skip("set DEMO_BENCH_N to run the scale benchmark (make bench does)")
	}
	burst, _ := strconv.Atoi(os.Getenv("DEMO_BENCH_BURST"))
	burst = cmp.Or(burst, 1000)
	const reps = 3

	start := time.Now()
	_, _ = createPods(t, "bench", n)
	t.Logf("created %d pods in %v", n, time.Since(start).Round(time.Millisecond))

	var listJSON, listProto, synced, lastFound, rss, cpu, p50, p99, maxLag, tail, req50, req99 []float64
	for rep := range reps {
		listJSON = append(listJSON, timeList(t, "application/json"))
		listProto = append(listProto, timeList(t, "application/vnd.kubernetes.protobuf"))

		// Start-up: from process start to the synced line and to the last "Pod found".
		p, started := startController(t, adminKube), time.Now()
		waitForLines(t, p, 0, "Cache synced")
		waitForCount(t, p, `"Pod found"`, n)
		synced = append(synced, lineTime(t, p, "Cache synced").Sub(started).Seconds())
		lastFound = append(lastFound, lastLineTime(t, p, `"Pod found"`).Sub(started).Seconds())
		peak, cpuSeconds := procStats(t, p)
		rss, cpu = append(rss, peak), append(cpu, cpuSeconds)

		// Lag: a burst of creates while it runs.
		at := len(p.lines())
		sent, requests := createPods(t, fmt.Sprintf("burst%d", rep), burst)
		slices.Sort(requests)
		req50, req99 = append(req50, percentile(requests, 0.50)), append(req99, percentile(requests, 0.99))
		waitForCountFrom(t, p, at, `"Pod created"`, burst)
		created := map[string]time.Time{} // "namespace/name" → when it was reported
		for _, line := range p.lines()[at:] {
			if _, rest, ok := strings.Cut(line, `"Pod created" pod="`); ok {
				name, _, _ := strings.Cut(rest, `"`)
				created[name] = klogTime(t, line)
			}
		}
		var lags []float64
		lastSent := time.Time{}
		for name, when := range sent {
			lags = append(lags, created[name].Sub(when).Seconds())
			if when.After(lastSent) {
				lastSent = when
			}
		}
		slices.Sort(lags)
		p50, p99 = append(p50, percentile(lags, 0.50)), append(p99, percentile(lags, 0.99))
		maxLag = append(maxLag, lags[len(lags)-1])
		tail = append(tail, lastLineTime(t, p, `"Pod created"`).Sub(lastSent).Seconds())
		p.stop()
		deleteNamespacePods(t, fmt.Sprintf("burst%d", rep))
	}

	floor := median(listProto)
	fmt.Printf("\nScale benchmark: %d pods, bursts of %d, %d runs each, medians; %d cores (runtime.NumCPU)\n", n, burst, reps, runtime.NumCPU())
	fmt.Printf("%-44s %12s %10s\n", "measure", "median", "÷ floor")
	row := func(name string, values []float64, unit string, scale float64, ratio bool) {
		r := ""
		if ratio {
			r = fmt.Sprintf("%.2f×", median(values)/floor)
		}
		fmt.Printf("%-44s %9.2f %-2s %10s\n", name, median(values)*scale, unit, r)
	}
	row("floor: raw LIST, protobuf", listProto, "ms", 1000, true)
	row("raw LIST, JSON", listJSON, "ms", 1000, true)
	row("start → cache synced", synced, "ms", 1000, true)
	row("start → last \"Pod found\"", lastFound, "ms", 1000, true)
	row("peak RSS after sync (VmHWM)", rss, "MB", 1e-6, false)
	row("CPU to sync (user+system)", cpu, "s", 1, false)
	row(fmt.Sprintf("lag, create → \"Pod created\", p50 (%d pods)", burst), p50, "ms", 1000, false)
	row("  for comparison: one create request, p50", req50, "ms", 1000, false)
	row("lag, p99", p99, "ms", 1000, false)
	row("  for comparison: one create request, p99", req99, "ms", 1000, false)
	row("lag, max", maxLag, "ms", 1000, false)
	row("last create sent → last \"Pod created\"", tail, "ms", 1000, false)
}

// createPods creates count pods that look like real ones, spread over four
// namespaces named prefix-0 to prefix-3, sixteen at a time. It returns when
// each was sent, by "namespace/name", and how long each request took.
func createPods(t *testing.T, prefix string, count int) (map[string]time.Time, []float64) {
	t.Helper()
	for i := range 4 {
		namespace(t, fmt.Sprintf("%s-%d", prefix, i))
	}
	var mu sync.Mutex
	sent, took := map[string]time.Time{}, []float64(nil)
	work := make(chan int)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Go(func() {
			for i := range work {
				pod := realisticPod(fmt.Sprintf("%s-%d", prefix, i%4), fmt.Sprintf("pod-%05d", i))
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

// waitForCount waits until the process has logged count lines containing s.
func waitForCount(t *testing.T, p *process, s string, count int) {
	t.Helper()
	waitForCountFrom(t, p, 0, s, count)
}

func waitForCountFrom(t *testing.T, p *process, from int, s string, count int) {
	t.Helper()
	n := 0
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 5*time.Minute, true, func(context.Context) (bool, error) {
		n = 0
		for _, line := range p.lines()[from:] {
			if strings.Contains(line, s) {
				n++
			}
		}
		return n >= count, nil
	})
	if err != nil {
		t.Fatalf("%s logged %d lines with %s, want %d", p.name, n, s, count)
	}
}

// lineTime returns the time in klog's header of the first line containing s.
func lineTime(t *testing.T, p *process, s string) time.Time {
	t.Helper()
	for _, line := range p.lines() {
		if strings.Contains(line, s) {
			return klogTime(t, line)
		}
	}
	t.Fatalf("no line with %s", s)
	return time.Time{}
}

// lastLineTime returns the time of the last line containing s.
func lastLineTime(t *testing.T, p *process, s string) time.Time {
	t.Helper()
	lines := p.lines()
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], s) {
			return klogTime(t, lines[i])
		}
	}
	t.Fatalf("no line with %s", s)
	return time.Time{}
}

// klogTime reads the time from a klog header: "I1122 08:04:15.337614 ...".
func klogTime(t *testing.T, line string) time.Time {
	t.Helper()
	if len(line) < 21 {
		t.Fatalf("not a klog line: %q", line)
	}
	when, err := time.ParseInLocation("0102 15:04:05.000000", line[1:21], time.Local)
	if err != nil {
		t.Fatalf("not a klog line: %q: %v", line, err)
	}
	return when.AddDate(time.Now().Year(), 0, 0)
}

// procStats reads a running process's peak resident memory (bytes) and the
// CPU seconds it has used, from /proc.
func procStats(t *testing.T, p *process) (peakBytes, cpuSeconds float64) {
	t.Helper()
	pid := p.cmd.Process.Pid
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			kib, _ := strconv.ParseFloat(strings.Fields(line)[1], 64)
			peakBytes = kib * 1024
		}
	}
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

// deleteNamespacePods deletes every pod of the four namespaces prefix-N.
func deleteNamespacePods(t *testing.T, prefix string) {
	t.Helper()
	for i := range 4 {
		err := admin.CoreV1().Pods(fmt.Sprintf("%s-%d", prefix, i)).DeleteCollection(context.Background(),
			metav1.DeleteOptions{GracePeriodSeconds: now}, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
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
