package main

import (
	"math"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	clocktesting "k8s.io/utils/clock/testing"
)

// After several outages in a row the controller catches up later each time
// (README.md, "After an outage"): between two tries, client-go's reflector
// waits as its defaults in tools/cache/reflector.go say (defaultBackoffInit
// 0.8 s, defaultBackoffMax 30 s, factor 2, jitter 1.0, and back to the
// shortest wait once defaultBackoffReset, 2 minutes, has passed since it
// last went back). This replays that backoff, built as the reflector builds
// it, on a fake clock: the wait doubles from 0.8 s to 30 s, each with a
// random part of up to as much again, and goes back to 0.8 s 2 minutes
// after the start however many failures came in between.
func TestReflectorBackoffGrows(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Now())
	backoff := wait.Backoff{Duration: 800 * time.Millisecond, Cap: 30 * time.Second, Factor: 2, Jitter: 1,
		Steps: int(math.Ceil(float64(30*time.Second) / float64(800*time.Millisecond)))}
	next := backoff.DelayWithReset(clock, 2*time.Minute)

	base, elapsed := 800*time.Millisecond, time.Duration(0)
	for try := 1; elapsed+2*base <= 2*time.Minute; try++ { // every wait ends within the 2 minutes
		wait := next()
		if wait < base || wait >= 2*base {
			t.Fatalf("try %d after %v of failures waited %v; want at least %v and less than %v", try, elapsed, wait, base, 2*base)
		}
		clock.Step(wait) // the next try fails too
		elapsed += wait
		base = min(2*base, 30*time.Second)
	}
	if base != 30*time.Second {
		t.Fatalf("the wait grew only to %v in 2 minutes of failures", base)
	}
	clock.Step(2*time.Minute - elapsed + time.Millisecond) // 2 minutes since the start, failing all along
	if wait := next(); wait >= 1600*time.Millisecond {
		t.Errorf("2 minutes after it began, the backoff still waited %v; want it back to 0.8 s (plus up to as much)", wait)
	}
}
