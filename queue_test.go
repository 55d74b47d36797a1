package main

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
