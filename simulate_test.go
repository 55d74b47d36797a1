package main

import (
	"bytes"
	"context"
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

// runSimulation plays the story at full speed and returns the lines logged,
// without klog's headers.
func runSimulation(t *testing.T) []string {
	t.Helper()
	var buf syncBuffer
	logger := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(&buf)))
	ctx, cancel := context.WithTimeout(klog.NewContext(context.Background(), logger), time.Minute)
	defer cancel()
	if err := simulate(ctx, options{syncTimeout: time.Minute}); err != nil {
		t.Fatalf("simulate: %v", err)
	}
	if ctx.Err() != nil {
		t.Fatal("the simulation did not end by itself")
	}
	var lines []string
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		lines = append(lines, klogHeader.ReplaceAllString(line, ""))
	}
	return lines
}

// wantStory is the whole story as the logging handler tells it.
var wantStory = []string{
	`"Pod found" pod="batch/report" phase="Running" node="node-b"`,
	`"Pod found" pod="shop/db-0" phase="Running" node="node-a"`,
	`"Pod found" pod="shop/web-1" phase="Running" node="node-a"`,
	`"Pod created" pod="shop/web-2" phase="Pending"`,
	`"Pod scheduled" pod="shop/web-2" node="node-b"`,
	`"Pod phase changed" pod="shop/web-2" oldPhase="Pending" phase="Running"`,
	`"Pod ready" pod="shop/web-2"`,
	`"Pod not ready" pod="shop/web-1"`,
	`"Container restarted" pod="shop/web-1" container="app" restartCount=1`,
	`"Pod phase changed" pod="batch/report" oldPhase="Running" phase="Succeeded"`,
	`"Pod not ready" pod="batch/report"`,
	`"Pod terminating" pod="shop/web-1"`,
	`"Pod deleted" pod="shop/web-1" phase="Running"`,
	// One key, one sync: the same name with a new UID.
	`"Pod deleted" pod="shop/db-0" phase="Running"`,
	`"Pod created" pod="shop/db-0" phase="Pending"`,
}

func TestSimulateTellsTheWholeStory(t *testing.T) {
	lines := runSimulation(t)
	var story []string
	for _, line := range lines {
		if strings.HasPrefix(line, `"Pod `) || strings.HasPrefix(line, `"Container `) {
			story = append(story, line)
		}
	}
	if !slices.Equal(story, wantStory) {
		t.Errorf("the handler told:\n%s\nwant:\n%s", strings.Join(story, "\n"), strings.Join(wantStory, "\n"))
	}
	if last := lines[len(lines)-1]; last != `"Worker stopped"` {
		t.Errorf("the simulation did not stop cleanly; its last line is %s", last)
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
	runSimulation(t)
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
	lines, at := runSimulation(t), 0
	for _, want := range strings.Split(strings.TrimSpace(string(block[1])), "\n") {
		want = klogHeader.ReplaceAllString(want, "")
		for at < len(lines) && !strings.HasSuffix(lines[at], want) && lines[at] != want {
			at++
		}
		if at == len(lines) {
			t.Fatalf("README sample line %s is not in the simulation's output (in order)", want)
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
		func(context.Context) (bool, error) { return strings.Contains(buf.String(), `"Pod found"`), nil })
	if err != nil {
		t.Fatalf("the simulation did not start:\n%s", buf.String())
	}
	cancel() // the story now waits an hour before its first step
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
	story[1].change = func(p *corev1.Pod) { p.Namespace = "elsewhere" }
	ctx, cancel := context.WithTimeout(context.Background(), wait.ForeverTestTimeout)
	defer cancel()
	err := simulate(ctx, options{syncTimeout: time.Minute})
	if err == nil || !strings.Contains(err.Error(), "failed at step 2 of its story") {
		t.Fatalf("simulate with a failing step returned %v", err)
	}
}
