package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
)

// recorder is a Handler that records each call as a short line, such as
// "created ns/name uid-1 Pending" or "updated ns/name 2->3".
type recorder struct {
	mu     sync.Mutex
	events []string
	// fail, if set, is asked before each call is recorded; an error from it
	// is returned to the controller and the call is not recorded.
	fail func(event string) error
}

func (r *recorder) record(event string) error {
	r.mu.Lock()
	fail := r.fail
	r.mu.Unlock()
	if fail != nil {
		if err := fail(event); err != nil {
			return err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, event)
	return nil
}

func (r *recorder) Created(_ context.Context, pod *corev1.Pod, found bool) error {
	verb := "created"
	if found {
		verb = "found"
	}
	return r.record(fmt.Sprintf("%s %s/%s %s %s", verb, pod.Namespace, pod.Name, pod.UID, pod.Status.Phase))
}

func (r *recorder) Updated(_ context.Context, old, pod *corev1.Pod) error {
	return r.record(fmt.Sprintf("updated %s/%s %s->%s", pod.Namespace, pod.Name, old.ResourceVersion, pod.ResourceVersion))
}

func (r *recorder) Deleted(_ context.Context, pod *corev1.Pod) error {
	return r.record(fmt.Sprintf("deleted %s/%s %s %s", pod.Namespace, pod.Name, pod.UID, pod.Status.Phase))
}

func (r *recorder) Events() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// waitForEvents polls until the recorder holds exactly want, and fails the
// test with what it holds if that does not happen within a deadline.
func waitForEvents(t *testing.T, r *recorder, want ...string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, wait.ForeverTestTimeout, true,
		func(context.Context) (bool, error) { return slices.Equal(r.Events(), want), nil })
	if err != nil {
		t.Fatalf("handler calls:\n got  %q\n want %q", r.Events(), want)
	}
}

// waitClosed waits for ch to be closed, and fails the test with why if it
// is not within wait.ForeverTestTimeout (no test waits for ever).
func waitClosed(t *testing.T, ch <-chan struct{}, why string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(wait.ForeverTestTimeout):
		t.Fatal(why)
	}
}

// testPod is how every test builds a pod: one with the given namespace,
// name, UID, resourceVersion and phase, and one container, "app", whose
// status says it has not restarted. Tests change other fields on the result.
func testPod(namespace, name, uid, resourceVersion string, phase corev1.PodPhase) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID(uid), ResourceVersion: resourceVersion},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "example/app"}}},
		Status:     corev1.PodStatus{Phase: phase, ContainerStatuses: []corev1.ContainerStatus{{Name: "app"}}},
	}
}

// testEnv is a controller running on a fake clientset.
type testEnv struct {
	ctx        context.Context
	client     *fake.Clientset
	controller *Controller
	factory    informers.SharedInformerFactory
	handler    *recorder
	cancel     context.CancelFunc
	done       chan error // receives Run's result
}

// start runs a controller over a fake clientset holding objects, watching
// namespace ("" for all), and waits until its cache has synced. The test's
// cleanup stops it and checks that Run returned.
func start(t *testing.T, namespace string, handler *recorder, objects ...*corev1.Pod) *testEnv {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	var objs []runtime.Object
	for _, pod := range objects {
		objs = append(objs, pod)
	}
	env := &testEnv{ctx: ctx, client: fake.NewClientset(objs...), handler: handler, cancel: cancel, done: make(chan error, 1)}
	env.factory = informers.NewSharedInformerFactoryWithOptions(env.client, 0, informers.WithNamespace(namespace))
	controller := NewController(ctx, env.factory.Core().V1().Pods(), handler)
	env.controller = controller
	env.factory.Start(ctx.Done())
	go func() { env.done <- controller.Run(ctx, wait.ForeverTestTimeout) }()
	t.Cleanup(func() { env.stop(t) })
	if !cache.WaitFor(ctx, "", controller.synced) {
		t.Fatal("the cache did not sync")
	}
	return env
}

// stop cancels the controller's context and waits for Run and the informer
// to return. It may be called more than once.
func (e *testEnv) stop(t *testing.T) {
	t.Helper()
	e.cancel()
	select {
	case err, ok := <-e.done:
		if ok && err != nil {
			t.Errorf("Run returned %v", err)
		}
		if ok {
			close(e.done)
		}
	case <-time.After(wait.ForeverTestTimeout):
		t.Fatal("Run did not return after the context was cancelled")
	}
	e.factory.Shutdown()
}

func (e *testEnv) create(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	if _, err := e.client.CoreV1().Pods(pod.Namespace).Create(e.ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (e *testEnv) update(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	if _, err := e.client.CoreV1().Pods(pod.Namespace).Update(e.ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (e *testEnv) delete(t *testing.T, namespace, name string) {
	t.Helper()
	if err := e.client.CoreV1().Pods(namespace).Delete(e.ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitForCache polls until the informer's cache holds the pod with this UID
// (or, with uid "", holds no such pod).
func (e *testEnv) waitForCache(t *testing.T, namespace, name, uid string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(e.ctx, time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
		pod, err := e.controller.pods.Pods(namespace).Get(name)
		if uid == "" {
			return err != nil, nil
		}
		return err == nil && string(pod.UID) == uid, nil
	})
	if err != nil {
		t.Fatalf("the cache never showed %s/%s with UID %q", namespace, name, uid)
	}
}

func TestLifecycle(t *testing.T) {
	tests := []struct {
		name      string
		namespace string
		existing  []*corev1.Pod
		steps     func(t *testing.T, e *testEnv)
		want      []string
	}{
		{
			name:     "pods that exist at start are found, not created",
			existing: []*corev1.Pod{testPod("default", "a", "uid-a", "1", corev1.PodRunning)},
			want:     []string{"found default/a uid-a Running"},
		},
		{
			name: "a pod that appears later is created",
			steps: func(t *testing.T, e *testEnv) {
				e.create(t, testPod("default", "b", "uid-b", "1", corev1.PodPending))
			},
			want: []string{"created default/b uid-b Pending"},
		},
		{
			name:     "each new resourceVersion is an update",
			existing: []*corev1.Pod{testPod("default", "a", "uid-a", "1", corev1.PodPending)},
			steps: func(t *testing.T, e *testEnv) {
				waitForEvents(t, e.handler, "found default/a uid-a Pending")
				e.update(t, testPod("default", "a", "uid-a", "2", corev1.PodRunning))
				waitForEvents(t, e.handler, "found default/a uid-a Pending", "updated default/a 1->2")
				e.update(t, testPod("default", "a", "uid-a", "3", corev1.PodSucceeded))
			},
			want: []string{"found default/a uid-a Pending", "updated default/a 1->2", "updated default/a 2->3"},
		},
		{
			name:     "a deleted pod is reported with its last phase",
			existing: []*corev1.Pod{testPod("default", "a", "uid-a", "1", corev1.PodPending)},
			steps: func(t *testing.T, e *testEnv) {
				waitForEvents(t, e.handler, "found default/a uid-a Pending")
				e.update(t, testPod("default", "a", "uid-a", "2", corev1.PodFailed))
				waitForEvents(t, e.handler, "found default/a uid-a Pending", "updated default/a 1->2")
				e.delete(t, "default", "a")
			},
			want: []string{"found default/a uid-a Pending", "updated default/a 1->2", "deleted default/a uid-a Failed"},
		},
		{
			name:      "--namespace scopes the watch",
			namespace: "mine",
			existing:  []*corev1.Pod{testPod("mine", "a", "uid-a", "1", ""), testPod("other", "b", "uid-b", "1", "")},
			steps: func(t *testing.T, e *testEnv) {
				e.create(t, testPod("other", "c", "uid-c", "1", ""))
				e.create(t, testPod("mine", "d", "uid-d", "1", ""))
			},
			want: []string{"found mine/a uid-a ", "created mine/d uid-d "},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := start(t, tc.namespace, &recorder{}, tc.existing...)
			if tc.steps != nil {
				tc.steps(t, e)
			}
			waitForEvents(t, e.handler, tc.want...)
		})
	}
}

// A resync, or a relist after a lost watch, delivers updates whose
// resourceVersion has not changed: the handler must not hear of them.
func TestUpdateWithSameResourceVersionIsIgnored(t *testing.T) {
	pod := testPod("default", "a", "uid-a", "7", corev1.PodPending)
	e := start(t, "", &recorder{}, pod)
	waitForEvents(t, e.handler, "found default/a uid-a Pending")
	// what the update handler does for an unchanged pod:
	e.controller.enqueue(klog.FromContext(e.ctx), "update", pod, pod.ResourceVersion)
	e.create(t, testPod("default", "marker", "uid-m", "1", "")) // handled after it
	waitForEvents(t, e.handler, "found default/a uid-a Pending", "created default/marker uid-m ")
}

// When the informer misses a delete (its watch was down), it removes the pod
// from the cache and hands the delete handler a tombstone: a DeletedObject
// whose FinalStateUnknown is set, and whose OptionalObj is the pod as last
// seen, or nil when client-go had lost that too (the_real_fifo.go). The
// trace (-v=5, ktesting's default) must not read the pod then, and the worker
// reports the pod it reported last. enqueue is called as the delete handler
// calls it.
func TestTombstone(t *testing.T) {
	for _, tc := range []struct {
		name    string
		withPod bool // the tombstone's OptionalObj: the pod, or nil
	}{
		{"holding the pod", true},
		{"holding nothing", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := testPod("default", "a", "uid-a", "1", corev1.PodRunning)
			e := start(t, "", &recorder{}, pod)
			waitForEvents(t, e.handler, "found default/a uid-a Running")

			store := e.factory.Core().V1().Pods().TypedInformer().GetStore()
			if err := store.Delete(pod); err != nil {
				t.Fatal(err)
			}
			tombstone := cache.DeletedFinalStateUnknown{Key: "default/a"}
			deleted := cache.DeletedObject[*corev1.Pod]{FinalStateUnknown: &tombstone}
			if tc.withPod {
				tombstone.Obj, deleted.OptionalObj = pod, pod
			}
			e.controller.enqueue(klog.FromContext(e.ctx), "delete (tombstone)", deleted, "")
			waitForEvents(t, e.handler, "found default/a uid-a Running", "deleted default/a uid-a Running")
		})
	}
}

// A pod created after the cache has synced but before the worker starts is
// created, not found: only the informer's first list can say which pods were
// there before the controller, not a look at the cache when the worker
// starts. (TestLifecycle and TestShutdown met this now and then; here the
// pod is put in that moment on purpose.)
func TestCreatedBeforeTheWorkerStarts(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	client := fake.NewClientset(testPod("default", "a", "uid-a", "1", corev1.PodRunning))
	factory := informers.NewSharedInformerFactory(client, 0)
	defer factory.Shutdown()
	defer cancel()
	handler := &recorder{}
	controller := NewController(ctx, factory.Core().V1().Pods(), handler)
	factory.Start(ctx.Done())
	if !cache.WaitFor(ctx, "", controller.synced) {
		t.Fatal("the cache did not sync")
	}
	if _, err := client.CoreV1().Pods("default").Create(ctx, testPod("default", "b", "uid-b", "1", corev1.PodPending), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
		_, err := controller.pods.Pods("default").Get("b")
		return err == nil, nil
	})
	if err != nil {
		t.Fatal("the cache never showed default/b")
	}
	done := make(chan error, 1)
	go func() { done <- controller.Run(ctx, wait.ForeverTestTimeout) }()
	waitForEvents(t, handler, "found default/a uid-a Running", "created default/b uid-b Pending")
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run returned %v", err)
		}
	case <-time.After(wait.ForeverTestTimeout):
		t.Fatal("Run did not return after the context was cancelled")
	}
}

// A pod deleted and created again under the same name while the worker is
// busy reaches the worker as one key; it must still be reported as the old
// pod deleted and the new one created.
func TestRecreatedUnderSameName(t *testing.T) {
	busy, release := make(chan struct{}), make(chan struct{})
	handler := &recorder{fail: func(event string) error {
		if event == "created default/blocker uid-blocker " {
			close(busy)
			<-release
		}
		return nil
	}}
	e := start(t, "", handler, testPod("default", "a", "uid-1", "1", corev1.PodRunning))
	waitForEvents(t, handler, "found default/a uid-1 Running")

	e.create(t, testPod("default", "blocker", "uid-blocker", "1", ""))
	waitClosed(t, busy, "the worker never reached the blocker") // it now waits inside the handler
	e.delete(t, "default", "a")
	e.create(t, testPod("default", "a", "uid-2", "1", corev1.PodPending))
	e.waitForCache(t, "default", "a", "uid-2")
	close(release)
	waitForEvents(t, handler,
		"found default/a uid-1 Running",
		"created default/blocker uid-blocker ",
		"deleted default/a uid-1 Running",
		"created default/a uid-2 Pending")
}

func TestHandlerErrors(t *testing.T) {
	t.Run("a failed call is retried and then succeeds", func(t *testing.T) {
		var mu sync.Mutex
		attempts := 0
		handler := &recorder{fail: func(event string) error {
			mu.Lock()
			defer mu.Unlock()
			if attempts++; attempts <= 2 {
				return errors.New("try again")
			}
			return nil
		}}
		e := start(t, "", handler)
		e.create(t, testPod("default", "a", "uid-a", "1", corev1.PodPending))
		waitForEvents(t, handler, "created default/a uid-a Pending")
		// The state was remembered only after success, so the next change is an update.
		e.update(t, testPod("default", "a", "uid-a", "2", corev1.PodRunning))
		waitForEvents(t, handler, "created default/a uid-a Pending", "updated default/a 1->2")
		mu.Lock()
		defer mu.Unlock()
		if attempts != 4 {
			t.Errorf("handler called %d times, want 2 failures then 2 successes", attempts)
		}
	})

	// The handler is called 1 + maxRetries times for one change: the first
	// call, then maxRetries retries.
	t.Run("a call that always fails is dropped after the last retry", func(t *testing.T) {
		var mu sync.Mutex
		var calls []string
		handler := &recorder{fail: func(event string) error {
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, event)
			if event == "created default/bad uid-bad " {
				return errors.New("always")
			}
			return nil
		}}
		// made returns the calls so far. (The checks below read them through
		// it and hold no lock: a t.Fatalf there ends the test, which must
		// not leave the mutex locked, nor unlock it twice.)
		made := func() []string {
			mu.Lock()
			defer mu.Unlock()
			return slices.Clone(calls)
		}
		e := start(t, "", handler)
		e.create(t, testPod("default", "bad", "uid-bad", "1", ""))
		// A pod created after the bad one is handled only once the bad one
		// has been retried: the worker keeps going.
		err := wait.PollUntilContextTimeout(e.ctx, time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
			return len(made()) == 1+maxRetries, nil
		})
		if err != nil {
			t.Fatalf("handler called %d times, want %d", len(made()), 1+maxRetries)
		}
		e.create(t, testPod("default", "good", "uid-good", "1", ""))
		waitForEvents(t, handler, "created default/good uid-good ")
		if got := made(); len(got) != 2+maxRetries {
			t.Errorf("calls after dropping: %q", got)
		}
		if n := e.controller.queue.NumRequeues(cache.ObjectName{Namespace: "default", Name: "bad"}); n != 0 {
			t.Errorf("the dropped key still has %d requeues recorded", n)
		}

		// The dropped change is not lost for good: nothing was remembered,
		// so the pod's next change brings the key back, and the handler
		// hears the pod as it is now, still as a pod it has not reported.
		e.update(t, testPod("default", "bad", "uid-bad", "2", corev1.PodRunning))
		waitForEvents(t, handler, "created default/good uid-good ", "created default/bad uid-bad Running")
	})
}

// On shutdown the worker stays in the call in hand until it returns, takes
// no other key, and Run returns leaving no goroutine behind.
func TestShutdown(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	busy, release := make(chan struct{}), make(chan struct{})
	handler := &recorder{fail: func(event string) error {
		if event == "created default/slow uid-slow " {
			close(busy)
			<-release
		}
		return nil
	}}
	e := start(t, "", handler)
	e.create(t, testPod("default", "slow", "uid-slow", "1", ""))
	waitClosed(t, busy, "the worker never reached the slow pod")
	e.create(t, testPod("default", "next", "uid-next", "1", ""))
	e.waitForCache(t, "default", "next", "uid-next")
	e.cancel()
	select {
	case <-e.done:
		t.Fatal("Run returned while the worker was still busy with an item")
	default:
	}
	close(release)
	e.stop(t)
	if got, want := handler.Events(), []string{"created default/slow uid-slow "}; !slices.Equal(got, want) {
		t.Errorf("after shutdown the handler saw %q, want %q", got, want)
	}
}

// onCreated is a Handler whose Created calls the function; its Updated and
// Deleted do nothing.
type onCreated func(ctx context.Context, pod *corev1.Pod) error

func (f onCreated) Created(ctx context.Context, pod *corev1.Pod, _ bool) error { return f(ctx, pod) }
func (onCreated) Updated(context.Context, *corev1.Pod, *corev1.Pod) error      { return nil }
func (onCreated) Deleted(context.Context, *corev1.Pod) error                   { return nil }

// What a handler gets at SIGTERM: the call in progress runs on, with its ctx
// already cancelled, so a write it makes with ctx fails (here the handler
// returns ctx.Err(), as such a write would). The error is logged as what it
// is, a sync that failed while shutting down and is not retried, and the
// trace does not say that the key goes back on the queue: a queue shut down
// drops it, and the worker has stopped.
func TestShutdownDuringAFailingCall(t *testing.T) {
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	busy, release := make(chan struct{}), make(chan struct{})
	var calls atomic.Int32
	seen := make(chan error, 1) // ctx.Err() in the handler, once released
	handler := onCreated(func(ctx context.Context, pod *corev1.Pod) error {
		if calls.Add(1) == 1 {
			close(busy)
			<-release
			seen <- ctx.Err()
		}
		return ctx.Err()
	})
	factory := informers.NewSharedInformerFactory(fake.NewClientset(testPod("default", "a", "uid-a", "1", corev1.PodRunning)), 0)
	defer factory.Shutdown()
	defer cancel()
	controller := NewController(ctx, factory.Core().V1().Pods(), handler)
	factory.Start(ctx.Done())
	done := make(chan error, 1)
	go func() { done <- controller.Run(ctx, wait.ForeverTestTimeout) }()
	waitClosed(t, busy, "the worker never called the handler")
	cancel() // as SIGTERM does
	close(release)
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run returned %v", err)
		}
	case <-time.After(wait.ForeverTestTimeout):
		t.Fatal("Run did not return after the context was cancelled and the handler returned")
	}
	if err := <-seen; !errors.Is(err, context.Canceled) {
		t.Errorf("the handler's ctx, after the stop: %v, want it cancelled", err)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("the handler was called %d times, want once: no retry after the stop", n)
	}
	log := logger.GetSink().(ktesting.Underlier).GetBuffer().String()
	if !strings.Contains(log, `Sync failed while shutting down; not retried err="context canceled"`) {
		t.Errorf("the log does not say that the sync failed while shutting down and is not retried:\n%s", log)
	}
	if strings.Contains(log, "goes back on the queue") {
		t.Errorf("the log says the key goes back on the queue, after the stop:\n%s", log)
	}
}

// idleController returns a controller whose informer is never started, so
// its cache never syncs and its worker never runs.
func idleController(t *testing.T) *Controller {
	factory := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
	return NewController(context.Background(), factory.Core().V1().Pods(), &recorder{})
}

// If the cache cannot sync in time, Run says so instead of waiting for ever.
func TestSyncTimeout(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	err := idleController(t).Run(ctx, 50*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "did not sync within 50ms") {
		t.Fatalf("Run returned %v, want a sync timeout", err)
	}
}

// When the cache cannot sync in time, runController (the wiring run uses)
// returns the sync error instead of waiting for ever: the informer it
// started must be stopped even though the caller's context is still live.
func TestRunControllerGivesUpOnSync(t *testing.T) {
	client := fake.NewClientset()
	client.PrependReactor("list", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("the list never works")
	})
	_, ctx := ktesting.NewTestContext(t)
	done := make(chan error, 1)
	go func() {
		done <- runController(ctx, client, "fake", "", 100*time.Millisecond, &recorder{})
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "did not sync within 100ms") {
			t.Fatalf("runController returned %v, want the sync timeout", err)
		}
	case <-time.After(wait.ForeverTestTimeout):
		t.Fatal("runController did not return after the sync timeout")
	}
}

// A pod of the first list that is deleted before the worker reports it is
// never reported, neither found nor deleted (the worker's first look at its
// key finds it gone), and found keeps nothing of it.
func TestFoundPodDeletedBeforeItsReport(t *testing.T) {
	busy, release := make(chan struct{}), make(chan struct{})
	var first string
	handler := &recorder{fail: func(event string) error {
		if strings.HasPrefix(event, "found ") && first == "" { // only the worker calls this
			first = event
			close(busy)
			<-release
		}
		return nil
	}}
	e := start(t, "", handler, testPod("default", "a", "uid-a", "1", corev1.PodRunning), testPod("default", "b", "uid-b", "1", corev1.PodRunning))
	waitClosed(t, busy, "the worker never reported a found pod") // it now waits inside the handler
	other := "b"
	if strings.Contains(first, "default/b") {
		other = "a"
	}
	// A pod created now proves the informer's watch is up (an event the fake
	// sends before it is, is lost), and is queued after the other's key:
	// once it is reported, the worker has been through that key.
	e.create(t, testPod("default", "c", "uid-c", "1", corev1.PodPending))
	e.waitForCache(t, "default", "c", "uid-c")
	e.delete(t, "default", other)
	e.waitForCache(t, "default", other, "")
	close(release)
	waitForEvents(t, handler, first, "created default/c uid-c Pending")
	e.stop(t) // the worker no longer touches found
	e.controller.found.Range(func(key, uid any) bool {
		t.Errorf("found still holds %v (UID %v)", key, uid)
		return true
	})
}
