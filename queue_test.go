package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2/ktesting"
)

// A pod whose sync failed, then succeeded, starts its next change afresh:
// processNextItem's Forget resets the key's backoff and its retry count.
// Without it, the pod's next failing change is retried later (the backoff
// goes on doubling from where it stopped) and fewer times, and once a pod
// has failed maxRetries times in its life, any failure drops its change at
// once. The test runs in a testing/synctest bubble: the retries' delays
// (5 ms, then 10, 20, ...) take no real time there, and show exactly.
func TestForgetAfterSuccess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		fails := 0         // how many more updated calls fail
		var at []time.Time // when each updated call of the change came
		handler := &recorder{fail: func(event string) error {
			mu.Lock()
			defer mu.Unlock()
			if !strings.HasPrefix(event, "updated ") {
				return nil
			}
			at = append(at, time.Now())
			if fails > 0 {
				fails--
				return errors.New("try again")
			}
			return nil
		}}
		_, ctx := ktesting.NewTestContext(t)
		ctx, cancel := context.WithCancel(ctx)
		client := fake.NewClientset(testPod("default", "a", "uid-a", "1", corev1.PodRunning))
		factory := informers.NewSharedInformerFactory(client, 0)
		controller := NewController(ctx, factory.Core().V1().Pods(), handler)
		factory.Start(ctx.Done())
		done := make(chan error, 1)
		go func() { done <- controller.Run(ctx, time.Minute) }()
		defer func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run returned %v", err)
			}
			factory.Shutdown()
		}()
		synctest.Wait()

		// Two changes of the same pod, each failing three times before its
		// call succeeds; the bubble's clock then moves on a minute (no real
		// time), by when every retry due has been made.
		for _, rv := range []string{"2", "3"} {
			mu.Lock()
			fails, at = 3, nil
			mu.Unlock()
			if _, err := client.CoreV1().Pods("default").Update(ctx, testPod("default", "a", "uid-a", rv, corev1.PodRunning), metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Minute)
			synctest.Wait()
			mu.Lock()
			var gaps []time.Duration
			for i := 1; i < len(at); i++ {
				gaps = append(gaps, at[i].Sub(at[i-1]))
			}
			mu.Unlock()
			if want := []time.Duration{5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond}; !slices.Equal(gaps, want) {
				t.Errorf("the change to resourceVersion %s failed 3 times: its retries came %v apart; want %v, the backoff of a key "+
					"with no failures before (does processNextItem Forget the key after a success?)", rv, gaps, want)
			}
		}
		waitForEvents(t, handler, "found default/a uid-a Running", "updated default/a 1->2", "updated default/a 2->3")
	})
}

// When the retries of a failing handler come (README.md, "Done and Forget";
// maxRetries). Each retry comes its own delay after the failure before it
// (5 ms, doubled at each failure), or later: the limiter takes the longer of
// that and a wait from a token bucket that every key shares (10 a second, 100
// at once). So "5, 10, 20, 40 and 80 ms apart" holds only when the handler
// fails at once, fewer than 100 retries come together, and no event brings
// the key back meanwhile. In a testing/synctest bubble the handler takes no
// time and the delays show to the millisecond.
func TestRetryDelays(t *testing.T) {
	// run runs the controller over pods, calls change once its cache has
	// synced, and returns when each call of the handler came, by call, as
	// offsets from the start (a bubble's clock moves only when every
	// goroutine waits, so the first calls come at 0). fails says whether a
	// call fails, from the call and how many times it was made before.
	run := func(t *testing.T, pods []*corev1.Pod, fails func(event string, before int) bool, change func(context.Context, *fake.Clientset)) map[string][]time.Duration {
		var mu sync.Mutex
		start := time.Now()
		at := map[string][]time.Duration{}
		handler := &recorder{fail: func(event string) error {
			mu.Lock()
			defer mu.Unlock()
			at[event] = append(at[event], time.Since(start))
			if fails(event, len(at[event])-1) {
				return errors.New("try again")
			}
			return nil
		}}
		_, ctx := ktesting.NewTestContext(t)
		ctx, cancel := context.WithCancel(ctx)
		var objects []runtime.Object
		for _, pod := range pods {
			objects = append(objects, pod)
		}
		client := fake.NewClientset(objects...)
		factory := informers.NewSharedInformerFactory(client, 0)
		controller := NewController(ctx, factory.Core().V1().Pods(), handler)
		factory.Start(ctx.Done())
		done := make(chan error, 1)
		go func() { done <- controller.Run(ctx, time.Minute) }()
		synctest.Wait()
		change(ctx, client)
		time.Sleep(time.Minute) // every retry due comes within it (no real time passes)
		synctest.Wait()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run returned %v", err)
		}
		factory.Shutdown()
		mu.Lock()
		defer mu.Unlock()
		return at
	}
	const ms = time.Millisecond

	t.Run("an event during a backoff syncs at once, and the count goes on", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			at := run(t, []*corev1.Pod{testPod("default", "a", "uid-a", "1", corev1.PodRunning)},
				func(event string, _ int) bool { return strings.HasPrefix(event, "updated ") },
				func(ctx context.Context, client *fake.Clientset) {
					for _, rv := range []string{"2", "3"} { // 3 comes while 2's retry waits its 5 ms
						if _, err := client.CoreV1().Pods("default").Update(ctx, testPod("default", "a", "uid-a", rv, corev1.PodRunning), metav1.UpdateOptions{}); err != nil {
							t.Error(err)
						}
						synctest.Wait()
					}
				})
			// The call for 1->2 fails; the event for 3 syncs the key at
			// once (1->3 fails: 2 failures, the next delay 10 ms), but the
			// retry already waiting comes at 5 ms still; from there the
			// delays double from the count: 20, 40, 80 ms. Six calls in all,
			// then the change is dropped.
			got := append(at["updated default/a 1->2"], at["updated default/a 1->3"]...)
			if want := []time.Duration{0, 0, 5 * ms, 25 * ms, 65 * ms, 145 * ms}; !slices.Equal(got, want) {
				t.Errorf("the calls came at %v, want %v: the call for the new event at once, the waiting retry at 5 ms, "+
					"then the retries as the count of failures says, 1 + maxRetries calls in all", got, want)
			}
		})
	})

	t.Run("a drop does not cancel the retry already waiting", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			at := run(t, []*corev1.Pod{testPod("default", "a", "uid-a", "1", corev1.PodRunning)},
				func(event string, before int) bool {
					return strings.HasSuffix(event, " 1->2") ||
						strings.HasSuffix(event, " 1->3") && before < 2
				},
				func(ctx context.Context, client *fake.Clientset) {
					// 3 comes at 100 ms, while the retry due at 155 ms waits.
					pods := client.CoreV1().Pods("default")
					for _, rv := range []string{"2", "3"} {
						pod := testPod("default", "a", "uid-a", rv, corev1.PodRunning)
						_, err := pods.Update(ctx, pod, metav1.UpdateOptions{})
						if err != nil {
							t.Error(err)
						}
						synctest.Wait()
						time.Sleep(100 * ms)
					}
				})
			// 1->2 fails at 0, 5, 15, 35 and 75 ms; the fifth failure's retry
			// is due at 155 ms. The event for 3 syncs the key at 100 ms: the
			// sixth failure in a row, so the key is dropped. The retry due at
			// 155 ms still comes, with no event: a seventh call. The drop
			// reset the count, so its failure is retried 5 ms later.
			got := append(at["updated default/a 1->2"], at["updated default/a 1->3"]...)
			want := []time.Duration{0, 5 * ms, 15 * ms, 35 * ms, 75 * ms, 100 * ms, 155 * ms,
				160 * ms}
			if !slices.Equal(got, want) {
				t.Errorf("the calls came at %v, want %v: five for 1->2, the event's at 100 ms "+
					"(dropped, its count reset), the retry that was waiting at 155 ms, and its "+
					"failure's first retry at 160 ms", got, want)
			}
		})
	})

	t.Run("over 100 retries at once: the shared bucket spaces them 100 ms apart", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			var pods []*corev1.Pod
			for i := range 105 {
				pods = append(pods, testPod("default", fmt.Sprintf("p%03d", i), fmt.Sprintf("uid-%d", i), "1", corev1.PodRunning))
			}
			// Each pod's first call fails, at once; the 105 retries succeed.
			at := run(t, pods, func(_ string, before int) bool { return before == 0 }, func(context.Context, *fake.Clientset) {})
			var retries []time.Duration
			for event, times := range at {
				if len(times) != 2 || times[0] != 0 {
					t.Errorf("%s: calls at %v, want 2, the first at 0", event, times)
					continue
				}
				retries = append(retries, times[1])
			}
			slices.Sort(retries)
			// 100 retries take a token each and come 5 ms later; the bucket,
			// empty then, gives the other five one each 100 ms.
			want := append(slices.Repeat([]time.Duration{5 * ms}, 100), 100*ms, 200*ms, 300*ms, 400*ms, 500*ms)
			if !slices.Equal(retries, want) {
				t.Errorf("the 105 retries came at %v, want 100 at 5 ms, then one every 100 ms", retries)
			}
		})
	})
}
