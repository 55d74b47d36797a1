package fakeapi

import (
	"context"
	"testing"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
)

// StartV is Start with a logger at verbosity v, as klog's -v=v: at 4, say,
// the informer's reflector logs each list and watch, and why one failed.
func StartV(t testing.TB, wait time.Duration, n, v int, run func(ctx context.Context) error) *Run {
	t.Helper()
	ready := make(chan *Run, 1)
	r := Start(t, wait, n, func(ctx context.Context) error {
		config := textlogger.NewConfig(textlogger.Output(<-ready), textlogger.Verbosity(v))
		return run(klog.NewContext(ctx, textlogger.NewLogger(config)))
	})
	ready <- r
	return r
}
