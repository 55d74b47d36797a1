package fakeapi

import (
	"bytes"
	"context"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
)

// KlogHeader matches the header klog writes before each line.
var KlogHeader = regexp.MustCompile(`^[IWE]\d{4} [\d:.]+ +\d+ [^ ]+\] `)

// Run is a run of demo-controller's run function, and what it logs.
type Run struct {
	Start time.Time
	Ended chan struct{} // closed when run has returned
	Err   error         // what run returned, once Ended is closed
	Wait  time.Duration // how long Stop waits for run to return

	cancel context.CancelFunc
	mu     sync.Mutex
	buf    bytes.Buffer
}

// Start calls run in a goroutine, with a context that carries a logger
// writing to the Run, until the test ends (or Stop). If the test failed,
// it then logs the last n lines logged.
func Start(t testing.TB, wait time.Duration, n int, run func(ctx context.Context) error) *Run {
	t.Helper()
	r := &Run{Start: time.Now(), Ended: make(chan struct{}), Wait: wait}
	logger := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(r)))
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	r.cancel = cancel
	go func() { defer close(r.Ended); r.Err = run(ctx) }()
	t.Cleanup(func() {
		r.Stop(t)
		if t.Failed() {
			t.Logf("the last lines demo-controller logged:\n%s", strings.Join(LastLines(r.Lines(), n), "\n"))
		}
	})
	return r
}

func (r *Run) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.Write(p)
}

// Stop cancels run's context, and waits for it to return.
func (r *Run) Stop(t testing.TB) {
	t.Helper()
	r.cancel()
	select {
	case <-r.Ended:
	case <-time.After(r.Wait):
		t.Errorf("run did not return within %v of its context's end", r.Wait)
	}
}

// Returned says whether run has returned.
func (r *Run) Returned() bool {
	select {
	case <-r.Ended:
		return true
	default:
		return false
	}
}

// Lines returns what run logged, without klog's headers.
func (r *Run) Lines() []string {
	r.mu.Lock()
	text := r.buf.String()
	r.mu.Unlock()
	var lines []string
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		if line != "" {
			lines = append(lines, KlogHeader.ReplaceAllString(line, ""))
		}
	}
	return lines
}

// LinesFrom returns the lines logged from line number from on.
func (r *Run) LinesFrom(from int) []string {
	lines := r.Lines()
	return lines[min(from, len(lines)):]
}

// Matching returns the lines logged from line number from on that start
// with prefix.
func (r *Run) Matching(from int, prefix string) []string {
	return slices.DeleteFunc(r.LinesFrom(from), func(l string) bool { return !strings.HasPrefix(l, prefix) })
}

// Containing returns the lines logged from line number from on that hold s.
func (r *Run) Containing(from int, s string) []string {
	return slices.DeleteFunc(r.LinesFrom(from), func(l string) bool { return !strings.Contains(l, s) })
}

// Missing returns those of wants that no line logged from line number from
// on starts with.
func (r *Run) Missing(from int, wants ...string) []string {
	lines := r.LinesFrom(from)
	return slices.DeleteFunc(slices.Clone(wants), func(want string) bool {
		return slices.ContainsFunc(lines, func(line string) bool { return strings.HasPrefix(line, want) })
	})
}
