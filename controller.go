// controller.go is the file to read first: the informer's event handlers,
// the workqueue, the wait for the cache, and the one worker, in the order a
// pod's key travels through them. Then read handler.go (what happens to a
// pod once the worker knows what changed), then main.go (the wiring).
package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	coreinformers "k8s.io/client-go/informers/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// maxRetries is how many times a key whose sync failed is retried before the
// controller gives up on it. So a handler that keeps failing for a pod is
// called 1 + maxRetries times in a row (between two successes), then dropped.
//   - The retries come 5, 10, 20, 40 and 80 ms after each failure: enough for
//     a conflict or a passing error, not to wait out an outage.
//   - Those delays are the key's own, doubled at each failure, from client-go's
//     default limiter (workqueue.DefaultTypedControllerRateLimiter, see
//     NewController).
//   - That default waits the longer of this delay and one from a token bucket
//     that every key shares: 10 tokens a second, 100 at most.
//   - Each retry takes a token, so the bucket slows retries once it is empty.
//   - It empties after a burst of over 100 retries, or under any sustained
//     rate of over 10 retries a second.
//   - For slower retries, use another limiter, with no bucket:
//     workqueue.NewTypedItemExponentialFailureRateLimiter[cache.ObjectName](
//     2*time.Second, time.Minute) retries 2, 4, 8, 16 and 32 s after each
//     failure, so the 6 calls span about a minute: enough for an outage of
//     an outside service that short.
//   - An event for the pod meanwhile puts the key back at once. Its sync
//     counts as a retry if it fails too: only Forget resets the count, after
//     a success or at the drop.
//   - So the calls come that far apart only when the handler fails immediately
//     and nothing else brings the key back (TestRetryDelays).
//
// A change given up on is heard again only when an event brings the key back:
// the pod's next change, or a relist, which hands every pod to the handlers
// (with resync 0, as runController sets it).
//   - A pod that never changes again, with no relist, never brings it back.
//   - One exception. Say an event brought the key back before a retry was
//     due, and that sync failed until the key was dropped. The retry that
//     was due still comes: the drop does not cancel it (TestRetryDelays).
//     The drop reset the count, so if that call fails, a new series of
//     retries begins.
//   - reported still holds what the handler last heard, and the pod's next
//     change is compared with that.
//   - A failed Created then becomes a Created of the pod as it is.
//   - A failed Updated becomes one Updated with both changes.
//   - A pod whose Deleted was given up on has no next change: it stays in
//     reported until a pod of the same name appears.
const maxRetries = 5

// Controller turns pod events into calls of a Handler. Its queue holds only
// keys (a cache.ObjectName: a namespace and a name in a struct, with no
// string to build or split): several events for one pod collapse into one key,
// and the worker then decides what happened by comparing the pod in the
// cache with the pod it last reported. That is what "level-based" means.
type Controller struct {
	pods    corelisters.PodLister
	synced  cache.DoneChecker
	queue   workqueue.TypedRateLimitingInterface[cache.ObjectName]
	handler Handler

	// found holds, by key, the UID of each pod in the informer's first list,
	// so that the worker says "found" rather than "created" for them.
	//   - A pod created after that list is reported as created, even if it
	//     is in the cache before the worker starts.
	//   - One created before that list, during run's start-up check, is
	//     reported as found.
	// Only the informer knows which pods its first list held: a pod's
	// creationTimestamp is the server's clock, not this process's start.
	// The add handler writes it and the worker reads it, so it is a
	// sync.Map. The worker deletes each key once it has reported the pod, or
	// found it gone: a found pod deleted before the worker reached it is
	// never reported, and leaves nothing here. A key whose Created was given
	// up on stays until its next sync. (found is read only while a pod has
	// not been reported: after that, reported's UID tells pods apart, and
	// deleting the entry keeps the map small.)
	found sync.Map

	// reported is the pod as the handler last saw it, for each key: the
	// worker compares the cache with it, never with the old object the
	// informer hands UpdateFunc. Events fold into one key, so that old
	// object describes only the last event, not what the handler last saw;
	// and a failed call must be compared again with the last success.
	//   - After a relist it may hold the copy the relist brought: a new
	//     object with the same resourceVersion. So Go's garbage collector can
	//     free the old copy.
	//   - Only the worker touches it.
	//   - It points at objects the cache holds, or held, and never modifies
	//     them: most entries cost no memory of their own.
	//   - An entry outlives its pod while the pod's Deleted is failing, and
	//     after it is given up on, until a pod of that name comes back.
	//   - An entry whose Updated was given up on holds an older copy of a
	//     pod still there.
	//   - Such entries pin a pod the cache has let go: with a handler that
	//     keeps failing, reported costs memory of its own.
	//
	// It lives only in memory. A stop drops it, and the keys still queued
	// with it (nothing persists): the next start reports every pod as found,
	// not as the change it went through meanwhile. That is on purpose: the
	// cluster holds the state. A controller that must act on what happened
	// while it was stopped reads it from the objects (their status), not
	// from a memory of its own, which could be stale or lost too.
	reported map[cache.ObjectName]*corev1.Pod
}

// NewController registers event handlers on the typed pod informer. The
// handlers only put keys on the queue, and note which pods came in the
// informer's first list (only the informer knows); all decisions are made
// later by the worker.
// The event handlers never call the Handler themselves. The informer calls
// them one event at a time, on a goroutine of its own:
//   - a slow call would hold back every later event (client-go buffers them
//     meanwhile, without bound);
//   - a failed call would have no retry;
//   - and a call would follow the events, so a missed one would go
//     unreported.
//
// Even an update that changes nothing (when the informer lists again, it
// hands every pod over again, most with the resourceVersion they had) is
// only a key: sync sees that the resourceVersion is the one it reported,
// and stops.
// The informer must not have been started yet. A handler added later is
// handed every pod then in the cache as if from the first list: pods created
// since the start would be reported as found.
//
// ctx gives the event handlers their logger, for the trace (-v=5): the
// informer calls them with no context of their own, so they log with the
// logger of the ctx NewController is given (in a test, the test's).
func NewController(
	ctx context.Context, pods coreinformers.TypedPodInformer, handler Handler) *Controller {
	logger := klog.FromContext(ctx)
	queue := workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName](),
		workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{Name: "pods"})
	c := &Controller{pods: pods.Lister(), queue: queue, handler: handler,
		reported: map[cache.ObjectName]*corev1.Pod{}}
	// The typed handlers get *corev1.Pod: no type assertion, no any.
	// (AddTypedEventHandler, given no options, fails only on an informer
	// that has been stopped.)
	handlers := cache.TypedResourceEventHandlerDetailedFuncs[*corev1.Pod]{
		AddFunc: func(pod *corev1.Pod, isInInitialList bool) {
			if isInInitialList {
				c.found.Store(cache.MetaObjectToName(pod), pod.UID)
			}
			c.enqueue(logger, "add", pod, pod.ResourceVersion)
		},
		UpdateFunc: func(_, pod *corev1.Pod) {
			c.enqueue(logger, "update", pod, pod.ResourceVersion)
		},
		// Tombstones: a delete is a DeletedObject, whose key is always there.
		//   - GetObjectName (and GetName, GetNamespace) work in every case.
		//   - FinalStateUnknown is set for a tombstone: a delete the watch
		//     missed, found when the informer listed again.
		//   - OptionalObj is then the pod as last seen: possibly stale.
		//   - It may even be nil, when client-go had lost that too
		//     (the_real_fifo.go).
		//   - So read only the key: the worker reports the pod it reported
		//     last (TestTombstone).
		//   - At -v=5 a tombstone's trace line reads
		//     "Event" event="delete (tombstone)" pod="shop/web-1" resourceVersion=""
		//     (make demo has none: a fake's watch never breaks).
		DeleteFunc: func(deleted cache.DeletedObject[*corev1.Pod]) {
			if deleted.FinalStateUnknown != nil {
				c.enqueue(logger, "delete (tombstone)", deleted, "")
				return
			}
			c.enqueue(logger, "delete", deleted, deleted.OptionalObj.ResourceVersion)
		},
	}
	registration, _ := pods.TypedInformer().AddTypedEventHandler(handlers)
	// The registration is synced once the informer has listed every pod and
	// this handler has been handed all of them. (The informer's own checker
	// says only that its cache is full: found and the queue might still lack
	// some of the first list.)
	c.synced = registration.HasSyncedChecker()
	return c
}

// enqueue puts the key of obj (a pod, or a DeletedObject) on the queue;
// event names the handler that called it, and resourceVersion is the pod's,
// or "" for a tombstone, whose pod is not to be trusted.
//
// Adding a key that is already waiting in the queue changes nothing.
//   - However many events arrive for a pod while its key waits, the worker
//     syncs it once.
//   - An event that arrives while the worker has the key in hand queues it
//     again, for once the worker is done with it.
//
// The queue hands keys out first in, first out: a key waiting keeps its
// place, and one queued again, or retried, joins the back. So a busy pod
// cannot crowd out the others, and a slow worker leaves at most one key
// per pod waiting, however many events come.
func (c *Controller) enqueue(logger klog.Logger, event string, obj klog.KMetadata, rv string) {
	// The trace: what the informer heard. When -v is below 5, it costs one
	// check: its line's arguments are never built.
	if trace := logger.V(5); trace.Enabled() {
		trace.Info("Event", "event", event, "pod", klog.KObj(obj), "resourceVersion", rv)
	}
	c.queue.Add(cache.ObjectName{Namespace: obj.GetNamespace(), Name: obj.GetName()})
}

// Run waits for the pod cache to sync (until NewController's handlers have
// had its whole first list), then runs the worker until ctx is cancelled.
// The caller starts the informer, once every handler and every informer of
// its factory has been added (NewController's handlers must see the first
// list).
//   - It waits at most syncTimeout for the sync, then returns an error.
//   - The deadline fails only a sync not done: a cache still listing, or
//     one whose first list has not all reached the handlers yet.
//   - One synced by the time Run looks counts as synced, even past the
//     deadline (cache.WaitFor reports a checker that is done as done,
//     whatever its ctx).
//   - After that error ctx is still live: the caller must cancel it, to shut
//     the queue down (runController does).
//   - Cancelling ctx is what stops the worker (in a real run, a signal
//     does), and it shuts the queue down too.
//   - The keys still queued at the stop are dropped: nothing persists, and
//     the next start reports every pod as found.
func (c *Controller) Run(ctx context.Context, syncTimeout time.Duration) error {
	// The queue shuts down when ctx ends, on a goroutine of its own. That
	// wakes a worker waiting in Get on an empty queue, which would otherwise
	// wait for ever. The keys still queued are dropped by the worker's loop
	// below, which checks ctx before each Get (Get alone would go on handing
	// them out: it reports the shutdown only once the queue is empty).
	context.AfterFunc(ctx, c.queue.ShutDown)

	// Wait for the first list before starting the worker. Here that gives
	// one place to give up, with an error, when the list cannot finish (no
	// permission, no server, too slow), instead of running on an empty
	// cache. In a controller that reads other objects than the one in hand
	// (a ReplicaSet controller reads its pods), it matters more: a partial
	// cache makes objects that exist look missing.
	syncCtx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	if synced := cache.WaitFor(syncCtx, "", c.synced); ctx.Err() != nil {
		return nil // stopped while waiting (or as it ended): no worker to start
	} else if !synced {
		return fmt.Errorf("the pod cache did not sync within %v: see the errors above "+
			"(more at -v=2), or raise --sync-timeout if the cluster is large", syncTimeout)
	}
	klog.FromContext(ctx).Info("Cache synced; starting the worker")

	// One worker: the handler sees one pod at a time, and reported needs no
	// lock.
	//
	// On cancel, the worker stops at the ctx check, before its next Get.
	//   - A worker waiting in Get is woken by the queue's shutdown.
	//   - A worker past the check when ctx ends can still take one more key,
	//     and syncs it with ctx already cancelled, as below.
	//   - A worker busy in the handler stays in that call until it returns.
	//   - The handler's ctx is then cancelled: a request made with it fails
	//     at once (context canceled), and one in flight is cut short.
	//   - Handler says what a handler that must finish does.
	//   - The error is then logged, not retried (processNextItem).
	for ctx.Err() == nil && c.processNextItem(ctx) {
	}
	klog.FromContext(ctx).Info("Worker stopped")
	return nil
}

// processNextItem takes one key off the queue and syncs it; it returns false
// once the queue has been shut down and emptied. It keeps the queue contract:
// Done for every key taken, Forget after success, AddRateLimited on error
// while retries are left.
func (c *Controller) processNextItem(ctx context.Context) bool {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	// Done tells the queue this key is no longer in hand: until then, new
	// events for it wait, so no two syncs of one pod ever overlap.
	defer c.queue.Done(key)

	logger := klog.FromContext(ctx).WithValues("pod", klog.KRef(key.Namespace, key.Name))
	ctx = klog.NewContext(ctx, logger)
	switch err := c.sync(ctx, key); {
	case err == nil:
		c.queue.Forget(key) // success: reset this key's backoff
	case ctx.Err() != nil:
		// Stopping: no retry would come. The worker stops, and a queue shut
		// down drops AddRateLimited's key. A failure now is never a drop,
		// however many came before it.
		utilruntime.HandleErrorWithContext(ctx, err, "Sync failed while shutting down; not retried")
	case c.queue.NumRequeues(key) < maxRetries:
		c.queue.AddRateLimited(key) // retry after a delay that doubles each time
		logger.V(5).Info("Sync failed; the key goes back on the queue after its backoff",
			"err", err, "retry", c.queue.NumRequeues(key))
	default: // the first call and maxRetries retries have failed
		c.queue.Forget(key)
		utilruntime.HandleErrorWithContext(ctx, err, "Dropping pod after retries")
	}
	return true
}

// sync compares the pod now in the cache with the pod last reported for the
// same key and tells the handler what changed. The cache's objects are shared
// with the informer and every other reader: they are read here, never changed.
func (c *Controller) sync(ctx context.Context, key cache.ObjectName) error {
	// The lister reads the cache; its only error is NotFound, with pod nil.
	pod, err := c.pods.Pods(key.Namespace).Get(key.Name)
	last := c.reported[key] // nil if the pod was never reported

	// Gone, or the same name with a new UID: the pod we reported no longer
	// exists, even if the queue folded its delete and a create into one key.
	// (At -v=5 each branch says what it decided: the trace. The one silent
	// case is a pod neither in the cache nor reported: there is nothing to do.)
	if last != nil && (pod == nil || pod.UID != last.UID) {
		klog.FromContext(ctx).V(5).Info("Sync: the pod reported is gone or replaced: Deleted")
		if err := c.handler.Deleted(ctx, last); err != nil {
			return err
		}
		delete(c.reported, key)
		last = nil
	}
	switch {
	case pod == nil:
		c.found.Delete(key) // gone: reported gone, or never reported at all
		return nil
	case last == nil:
		// Found only if it is the very pod of the first list, not a new
		// one that took its name meanwhile.
		klog.FromContext(ctx).V(5).Info("Sync: a pod not reported before: Created")
		uid, _ := c.found.Load(key)
		err = c.handler.Created(ctx, pod, uid == pod.UID)
	case pod.ResourceVersion != last.ResourceVersion:
		klog.FromContext(ctx).V(5).Info("Sync: resourceVersion changed: Updated")
		err = c.handler.Updated(ctx, last, pod)
	default: // the pod as reported: a relist's copy, or a key queued again once seen: no call
		klog.FromContext(ctx).V(5).Info("Sync: same resourceVersion as reported: nothing to do")
	}
	// On error, remember nothing of this call, so the retry reports its change
	// again. A Deleted that succeeded above is remembered: when Deleted
	// succeeds and Created fails, the retry reports Created alone.
	if err == nil {
		c.found.Delete(key)
		c.reported[key] = pod
	}
	return err
}
