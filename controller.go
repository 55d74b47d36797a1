package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	coreinformers "k8s.io/client-go/informers/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// maxRetries is how many times a key whose handler failed is put back on the
// queue (with growing delays) before the controller gives up on it.
const maxRetries = 5

// Controller turns pod events into calls of a Handler. Its queue holds only
// keys ("namespace/name"): several events for one pod collapse into one key,
// and the worker then decides what happened by comparing the pod in the
// cache with the pod it last reported. That is what "level-based" means.
type Controller struct {
	pods    corelisters.PodLister
	synced  cache.DoneChecker
	queue   workqueue.TypedRateLimitingInterface[cache.ObjectName]
	handler Handler

	// initial holds the UIDs of the pods in the informer's first list, so
	// that the worker can say "found" rather than "created" for them. It is
	// written by the informer's goroutine and read by the worker's.
	initial sync.Map // cache.ObjectName → types.UID

	// reported is the pod as the handler last saw it, for each key. Only the
	// worker touches it. It points at objects the cache already holds, so it
	// costs almost no memory, and it is never modified.
	reported map[cache.ObjectName]*corev1.Pod
}

// NewController registers event handlers on the pod informer. The handlers
// only put keys on the queue; all decisions are made later by the worker.
// The informer must not have been started yet.
func NewController(ctx context.Context, pods coreinformers.PodInformer, handler Handler, limiter workqueue.TypedRateLimiter[cache.ObjectName]) (*Controller, error) {
	c := &Controller{
		pods:    pods.Lister(),
		handler: handler,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(limiter,
			workqueue.TypedRateLimitingQueueConfig[cache.ObjectName]{Name: "pods"}),
		reported: map[cache.ObjectName]*corev1.Pod{},
	}
	logger := klog.FromContext(ctx)
	registration, err := pods.Informer().AddEventHandlerWithOptions(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc:    c.onAdd,
		UpdateFunc: c.onUpdate,
		DeleteFunc: c.enqueue,
	}, cache.HandlerOptions{Logger: &logger})
	if err != nil {
		return nil, err
	}
	// The registration is synced once the informer has listed every pod and
	// this handler has seen all of them, so every "found" pod is recorded.
	c.synced = registration.HasSyncedChecker()
	return c, nil
}

// onAdd records pods from the first list as found, then enqueues the key.
func (c *Controller) onAdd(obj any, isInInitialList bool) {
	if pod, ok := obj.(*corev1.Pod); ok && isInInitialList {
		c.initial.Store(cache.MetaObjectToName(pod), pod.UID)
	}
	c.enqueue(obj)
}

// onUpdate skips updates that carry no change. A resync, or the relist after
// a lost connection, delivers every pod again with the same resourceVersion.
func (c *Controller) onUpdate(oldObj, newObj any) {
	if oldObj.(*corev1.Pod).ResourceVersion == newObj.(*corev1.Pod).ResourceVersion {
		return
	}
	c.enqueue(newObj)
}

// enqueue puts the object's key on the queue. It is also the delete handler:
// a delete the informer missed arrives as a cache.DeletedFinalStateUnknown
// tombstone, not a pod, and DeletionHandlingObjectToName handles both.
func (c *Controller) enqueue(obj any) {
	key, err := cache.DeletionHandlingObjectToName(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	c.queue.Add(key)
}

// Run waits, at most syncTimeout, for the pod cache to sync, then runs the
// worker until ctx is cancelled. It returns an error only if the cache did
// not sync in time. The informer must be started by the caller.
func (c *Controller) Run(ctx context.Context, syncTimeout time.Duration) error {
	defer utilruntime.HandleCrashWithContext(ctx)
	// ShutDown makes the worker's queue.Get return; the item in hand is finished first.
	defer c.queue.ShutDown()
	logger := klog.FromContext(ctx)

	// Never start the worker on a partial cache: a pod not yet listed would
	// look deleted. And never wait forever: say so and stop.
	syncCtx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	if !cache.WaitFor(syncCtx, "", c.synced) {
		if ctx.Err() != nil {
			return nil // shut down while waiting
		}
		return fmt.Errorf("the pod cache did not sync within %v: the API server is too slow or the watch keeps failing (see the errors above); raise --sync-timeout if the cluster is large", syncTimeout)
	}
	all, _ := c.pods.List(labels.Everything())
	logger.Info("Cache synced; starting the worker", "pods", len(all))

	go func() {
		<-ctx.Done()
		c.queue.ShutDown()
	}()
	// One worker: the handler sees one pod at a time, and reported needs no lock.
	wait.UntilWithContext(ctx, c.runWorker, time.Second)
	logger.Info("Worker stopped")
	return nil
}

// runWorker processes keys until the queue is shut down or ctx is cancelled.
func (c *Controller) runWorker(ctx context.Context) {
	for ctx.Err() == nil && c.processNextItem(ctx) {
	}
}

// processNextItem takes one key off the queue and syncs it. It returns false
// when the queue has been shut down.
func (c *Controller) processNextItem(ctx context.Context) bool {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	// Done tells the queue this key is no longer in hand: until then, new
	// events for it wait, so no two syncs of one pod ever overlap.
	defer c.queue.Done(key)

	ctx = klog.NewContext(ctx, klog.LoggerWithValues(klog.FromContext(ctx), "pod", klog.KRef(key.Namespace, key.Name)))
	err := c.sync(ctx, key)
	switch {
	case err == nil:
		c.queue.Forget(key) // success: reset this key's backoff
	case c.queue.NumRequeues(key) < maxRetries:
		c.queue.AddRateLimited(key) // retry after a delay that doubles each time
	default:
		c.queue.Forget(key)
		utilruntime.HandleErrorWithContext(ctx, err, "Dropping pod after retries", "retries", maxRetries)
	}
	return true
}

// sync compares the pod now in the cache with the pod last reported for the
// same key and tells the handler what changed. The cache's objects are shared
// with the informer and every other reader: they are read here, never changed.
func (c *Controller) sync(ctx context.Context, key cache.ObjectName) error {
	pod, err := c.pods.Pods(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		pod = nil
	} else if err != nil {
		return err
	}
	last := c.reported[key]

	// Gone, or the same name with a new UID: the pod we reported no longer
	// exists, even if the queue folded its delete and a create into one key.
	if last != nil && (pod == nil || pod.UID != last.UID) {
		if err := c.handler.Deleted(ctx, last); err != nil {
			return err
		}
		delete(c.reported, key)
		last = nil
	}
	switch {
	case pod == nil:
		c.initial.Delete(key)
		return nil
	case last == nil:
		uid, _ := c.initial.Load(key)
		err = c.handler.Created(ctx, pod, uid == pod.UID)
	case pod.ResourceVersion != last.ResourceVersion:
		err = c.handler.Updated(ctx, last, pod)
	}
	// On error remember nothing new, so the retry reports the same change.
	if err != nil {
		return err
	}
	c.initial.Delete(key)
	c.reported[key] = pod
	return nil
}
