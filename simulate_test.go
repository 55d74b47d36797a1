package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
)

// runSimulation plays the story with the given pause, logging at verbosity
// v, and returns the lines the project itself logged (controller.go,
// handler.go, simulate.go), without klog's headers: client-go's own lines
// (at -v=1 and up its feature gates, in random order) are left out.
func runSimulation(t *testing.T, v int, pause time.Duration) []string {
	t.Helper()
	var buf syncBuffer
	logger := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(&buf), textlogger.Verbosity(v)))
	ctx, cancel := context.WithTimeout(klog.NewContext(context.Background(), logger), time.Minute)
	defer cancel()
	if err := simulate(ctx, options{syncTimeout: time.Minute, simulatePause: pause}); err != nil {
		t.Fatalf("simulate: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatal("the simulation did not end by itself")
	}
	var lines []string
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if ours.MatchString(line) {
			lines = append(lines, klogHeader.ReplaceAllString(line, ""))
		}
	}
	return lines
}

// ours matches the header of a line the project logged.
var ours = regexp.MustCompile(`^[IWE]\d{4} [\d:.]+ +\d+ (controller|handler|simulate)\.go:\d+\] `)

// wantStory is the whole story as the simulation tells it at -v=5, the
// trace included: each event the informer hands over, each branch of sync,
// each retry. It is the same on every run: the storyteller waits until the
// controller has queued every event of a step before the worker goes on.
var wantStory = []string{
	`"Event" event="add" pod="batch/job" resourceVersion="3"`,
	`"Event" event="add" pod="batch/report" resourceVersion="4"`,
	`"Event" event="add" pod="shop/db-0" resourceVersion="2"`,
	`"Event" event="add" pod="shop/web-1" resourceVersion="1"`,
	`"Cache synced; starting the worker"`,
	`"Sync: a pod not reported before: Created" pod="batch/job"`,
	`"Pod found" pod="batch/job" phase="Running" node="node-b"`,
	`"Sync: a pod not reported before: Created" pod="batch/report"`,
	`"Pod found" pod="batch/report" phase="Running" node="node-b"`,
	`"Sync: a pod not reported before: Created" pod="shop/db-0"`,
	`"Pod found" pod="shop/db-0" phase="Running" node="node-a"`,
	`"Sync: a pod not reported before: Created" pod="shop/web-1"`,
	`"Pod found" pod="shop/web-1" phase="Running" node="node-a"`,
	`"Story" step=1`,
	`"Event" event="add" pod="shop/web-2" resourceVersion="5"`,
	`"Sync: a pod not reported before: Created" pod="shop/web-2"`,
	`"Pod created" pod="shop/web-2" phase="Pending"`,
	`"Story" step=2`, // a burst: three events, one key, one sync, one call
	`"Event" event="update" pod="shop/web-2" resourceVersion="6"`,
	`"Event" event="update" pod="shop/web-2" resourceVersion="7"`,
	`"Event" event="update" pod="shop/web-2" resourceVersion="8"`,
	`"Sync: resourceVersion changed: Updated" pod="shop/web-2"`,
	`"Pod scheduled" pod="shop/web-2" node="node-b"`,
	`"Pod phase changed" pod="shop/web-2" oldPhase="Pending" phase="Running"`,
	`"Pod ready" pod="shop/web-2"`,
	`"Story" step=3`, // a label: Updated is called, LogHandler says nothing
	`"Event" event="update" pod="shop/web-2" resourceVersion="9"`,
	`"Sync: resourceVersion changed: Updated" pod="shop/web-2"`,
	`"Story" step=4`, // the same resourceVersion: no call
	`"Event" event="update" pod="shop/web-1" resourceVersion="1"`,
	`"Sync: same resourceVersion as reported: nothing to do" pod="shop/web-1"`,
	`"Story" step=5`,
	`"Event" event="update" pod="shop/web-1" resourceVersion="11"`,
	`"Event" event="update" pod="shop/web-1" resourceVersion="12"`,
	`"Sync: resourceVersion changed: Updated" pod="shop/web-1"`,
	`"Container restarted" pod="shop/web-1" container="app" restartCount=1`,
	`"Pod terminating" pod="shop/web-1"`,
	`"Story" step=6`,
	`"Event" event="delete" pod="shop/web-1" resourceVersion="12"`,
	`"Sync: the pod reported is gone or replaced: Deleted" pod="shop/web-1"`,
	`"Pod deleted" pod="shop/web-1" phase="Running"`,
	`"Story" step=7`, // a Job's pod succeeds
	`"Event" event="update" pod="batch/report" resourceVersion="14"`,
	`"Sync: resourceVersion changed: Updated" pod="batch/report"`,
	`"Pod phase changed" pod="batch/report" oldPhase="Running" phase="Succeeded"`,
	`"Pod not ready" pod="batch/report"`,
	`"Story" step=8`, // a failed call, retried: its lines again
	`"Event" event="update" pod="batch/job" resourceVersion="15"`,
	`"Sync: resourceVersion changed: Updated" pod="batch/job"`,
	`"Pod phase changed" pod="batch/job" oldPhase="Running" phase="Failed"`,
	`"Pod not ready" pod="batch/job"`,
	`"Story: this call fails, like a refused write; it is retried" pod="batch/job"`,
	`"Sync failed; the key goes back on the queue after its backoff" pod="batch/job" err="simulated: the handler's write was refused" retry=1`,
	`"Sync: resourceVersion changed: Updated" pod="batch/job"`,
	`"Pod phase changed" pod="batch/job" oldPhase="Running" phase="Failed"`,
	`"Pod not ready" pod="batch/job"`,
	`"Story" step=9`, // one key for a delete and a create: Deleted, then Created
	`"Event" event="delete" pod="shop/db-0" resourceVersion="2"`,
	`"Event" event="add" pod="shop/db-0" resourceVersion="17"`,
	`"Sync: the pod reported is gone or replaced: Deleted" pod="shop/db-0"`,
	`"Pod deleted" pod="shop/db-0" phase="Running"`,
	`"Sync: a pod not reported before: Created" pod="shop/db-0"`,
	`"Pod created" pod="shop/db-0" phase="Pending"`,
	`"Worker stopped"`,
}

// At -v=5 the simulation tells the whole story, trace and all, the same way
// on every run: 20 runs at full speed, 2 at the default pause.
func TestSimulateTellsTheSameStoryEveryRun(t *testing.T) {
	defaultPause := newFlagSet(&options{}).Lookup("simulate-pause").Value.(flag.Getter).Get().(time.Duration)
	for run := range 22 {
		pause := time.Duration(0)
		if run >= 20 {
			pause = defaultPause
		}
		if got := runSimulation(t, 5, pause); !slices.Equal(got, wantStory) {
			t.Fatalf("run %d (pause %v) told a different story:\n%s", run+1, pause, storyDiff(got, wantStory))
		}
	}
}

// storyDiff shows the first line where got and want part, with a few lines
// before it.
func storyDiff(got, want []string) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	from := max(0, i-3)
	return fmt.Sprintf("same up to line %d:\n  %s\ngot next:  %q\nwant next: %q", i,
		strings.Join(want[from:i], "\n  "), got[i:min(len(got), i+3)], want[i:min(len(want), i+3)])
}

// Without the trace (-v below 5), the story is the lifecycle lines alone.
func TestSimulateWithoutTheTrace(t *testing.T) {
	var want []string
	for _, line := range wantStory {
		if !strings.HasPrefix(line, `"Event"`) && !strings.HasPrefix(line, `"Sync`) {
			want = append(want, line)
		}
	}
	if got := runSimulation(t, 4, 0); !slices.Equal(got, want) {
		t.Errorf("at -v=4:\n%s", storyDiff(got, want))
	}
}

// With a kubeconfig that cannot be read, a normal run fails; the simulation
// does not care, because it reads none.
func TestSimulateReadsNoKubeconfig(t *testing.T) {
	broken := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(broken, []byte("{{{ not a kubeconfig"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KUBECONFIG", broken)
	t.Setenv("HOME", t.TempDir())
	if err := run(context.Background(), options{startupTimeout: time.Second}); err == nil || !strings.Contains(err.Error(), "kubectl config view") {
		t.Fatalf("run with a broken KUBECONFIG: %v", err)
	}
	runSimulation(t, 0, 0)
}

// The README's sample of the simulation's output is true: each line of it
// is in the output, in the same order.
func TestReadmeSimulationSample(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile("(?s)<!-- simulate sample -->\n```\n(.*?)```").FindSubmatch(readme)
	if block == nil {
		t.Fatal("README.md has no simulate sample block")
	}
	// The sample is the output of make demo ARGS=-v=5, less klog's headers,
	// in part: each of its lines is in a real run's output, in order. Lines
	// that start with "#" are the README's notes on the lines above them,
	// and are left out of the comparison.
	lines, at := runSimulation(t, 5, 0), 0
	for _, want := range strings.Split(strings.TrimSpace(string(block[1])), "\n") {
		if strings.HasPrefix(want, "#") {
			continue
		}
		for at < len(lines) && lines[at] != want {
			at++
		}
		if at == len(lines) {
			t.Fatalf("README sample line %s is not in the simulation's output at -v=5 (in order)", want)
		}
	}
}

// syncBuffer is a bytes.Buffer that the controller's goroutines may share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Ctrl-C (a cancelled context) stops the simulation early, and cleanly.
func TestSimulateStopsEarly(t *testing.T) {
	var buf syncBuffer
	logger := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(&buf)))
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	done := make(chan error)
	go func() { done <- simulate(ctx, options{syncTimeout: time.Minute, simulatePause: time.Hour}) }()
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, wait.ForeverTestTimeout, true,
		func(context.Context) (bool, error) { return strings.Contains(buf.String(), `"Story" step=1`), nil })
	if err != nil {
		t.Fatalf("the simulation did not start:\n%s", buf.String())
	}
	cancel() // the story now holds the worker for an hour, before it reports step 1
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("simulate returned %v", err)
		}
	case <-time.After(wait.ForeverTestTimeout):
		t.Fatal("simulate did not stop when its context was cancelled")
	}
	if strings.Contains(buf.String(), `"Pod created"`) {
		t.Errorf("the story went on after the stop:\n%s", buf.String())
	}
}

// A step the simulated cluster rejects ends the simulation with an error
// that names the step, rather than a hang or a clean exit with half a story.
// (The test swaps the package's story, so it must not run in parallel.)
func TestSimulateReportsAFailedStep(t *testing.T) {
	saved := story
	t.Cleanup(func() { story = saved })
	story = slices.Clone(saved[:2]) // a copy: the real story stays as it is
	// The fake clientset rejects a pod whose namespace differs from the request's.
	story[1] = []write{{"update", "shop", "web-2", func(p *corev1.Pod) { p.Namespace = "elsewhere" }}}
	ctx, cancel := context.WithTimeout(context.Background(), wait.ForeverTestTimeout)
	defer cancel()
	err := simulate(ctx, options{syncTimeout: time.Minute})
	if err == nil || !strings.Contains(err.Error(), "failed at story step 2") {
		t.Fatalf("simulate with a failing step returned %v", err)
	}
}
