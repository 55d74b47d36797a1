package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
)

// TestSyncTruthTable states sync's level-based rule, one row per case. Each
// row sets up what sync compares, calls it once for the key default/web, and
// checks which Handler calls it made, and what reported and found hold
// after. Read it as the rule:
//
//   - in the cache: the pod the informer holds now (its UID, resourceVersion);
//   - reported: the pod as the handler last saw it ("" when never reported);
//   - found: the UID the add handler recorded for a pod of the first list;
//   - fail: the Handler returns an error from that call.
//
// A UID is "a" or "b" (the same name, another pod), a resourceVersion "1"
// or "2". The calls are the recorder's lines (controller_test.go).
func TestSyncTruthTable(t *testing.T) {
	type pod struct{ uid, rv string } // a pod named default/web; nil: none
	tests := []struct {
		name     string
		inCache  *pod   // the informer's cache
		reported *pod   // reported[key] before the sync
		found    string // found[key] before the sync: the UID of the first list's pod, or ""
		fail     string // the call (created, updated, deleted) the handler fails, or ""

		calls        []string // the handler calls sync makes
		wantReported *pod     // reported[key] after
		wantFound    string   // found[key] after
		wantErr      bool
	}{
		{name: "in the first list, not reported yet: found",
			inCache: &pod{"a", "1"}, found: "a",
			calls: []string{"found default/web a"}, wantReported: &pod{"a", "1"}},
		{name: "new since the first list: created",
			inCache: &pod{"a", "1"},
			calls:   []string{"created default/web a"}, wantReported: &pod{"a", "1"}},
		{name: "in the first list, but replaced by a new pod of the same name before its report: created",
			inCache: &pod{"b", "2"}, found: "a",
			calls: []string{"created default/web b"}, wantReported: &pod{"b", "2"}},
		{name: "in the first list, gone before its report: nothing, and found forgets it",
			found: "a"},
		{name: "reported, same resourceVersion (a relist or resync): nothing",
			inCache: &pod{"a", "1"}, reported: &pod{"a", "1"},
			wantReported: &pod{"a", "1"}},
		{name: "reported, new resourceVersion: updated",
			inCache: &pod{"a", "2"}, reported: &pod{"a", "1"},
			calls: []string{"updated default/web 1->2"}, wantReported: &pod{"a", "2"}},
		{name: "reported, gone from the cache: deleted",
			reported: &pod{"a", "1"},
			calls:    []string{"deleted default/web a"}},
		{name: "reported, the same name with a new UID: deleted, then created",
			inCache: &pod{"b", "2"}, reported: &pod{"a", "1"},
			calls: []string{"deleted default/web a", "created default/web b"}, wantReported: &pod{"b", "2"}},
		{name: "never reported and not in the cache: nothing",
			inCache: nil},

		// A failed call changes nothing: the retry sees the same difference.
		{name: "created fails: reported stays empty, found is kept for the retry",
			inCache: &pod{"a", "1"}, found: "a", fail: "found",
			calls: []string{"found default/web a (failed)"}, wantFound: "a", wantErr: true},
		{name: "updated fails: reported keeps the old pod",
			inCache: &pod{"a", "2"}, reported: &pod{"a", "1"}, fail: "updated",
			calls: []string{"updated default/web 1->2 (failed)"}, wantReported: &pod{"a", "1"}, wantErr: true},
		{name: "deleted fails: reported keeps the gone pod",
			reported: &pod{"a", "1"}, fail: "deleted",
			calls: []string{"deleted default/web a (failed)"}, wantReported: &pod{"a", "1"}, wantErr: true},
		{name: "new UID, deleted fails: created is not called",
			inCache: &pod{"b", "2"}, reported: &pod{"a", "1"}, fail: "deleted",
			calls: []string{"deleted default/web a (failed)"}, wantReported: &pod{"a", "1"}, wantErr: true},
		{name: "new UID, created fails: the old pod is reported deleted, and not again",
			inCache: &pod{"b", "2"}, reported: &pod{"a", "1"}, fail: "created",
			calls: []string{"deleted default/web a", "created default/web b (failed)"}, wantErr: true},
	}
	key := cache.ObjectName{Namespace: "default", Name: "web"}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
			if tc.inCache != nil {
				if err := indexer.Add(testPod("default", "web", tc.inCache.uid, tc.inCache.rv, "")); err != nil {
					t.Fatal(err)
				}
			}
			handler := &callLog{fail: tc.fail}
			c := &Controller{pods: corelisters.NewPodLister(indexer), handler: handler, reported: map[cache.ObjectName]*corev1.Pod{}}
			if tc.reported != nil {
				c.reported[key] = testPod("default", "web", tc.reported.uid, tc.reported.rv, "")
			}
			if tc.found != "" {
				c.found.Store(key, types.UID(tc.found))
			}
			_, ctx := ktesting.NewTestContext(t)

			err := c.sync(ctx, key)

			if (err != nil) != tc.wantErr {
				t.Errorf("sync returned %v, want an error: %v", err, tc.wantErr)
			}
			if !slices.Equal(handler.calls, tc.calls) {
				t.Errorf("handler calls %q, want %q", handler.calls, tc.calls)
			}
			switch last, ok := c.reported[key]; {
			case tc.wantReported == nil && ok:
				t.Errorf("reported holds %s@%s, want nothing", last.UID, last.ResourceVersion)
			case tc.wantReported != nil && !ok:
				t.Errorf("reported holds nothing, want %s@%s", tc.wantReported.uid, tc.wantReported.rv)
			case tc.wantReported != nil && (string(last.UID) != tc.wantReported.uid || last.ResourceVersion != tc.wantReported.rv):
				t.Errorf("reported holds %s@%s, want %s@%s", last.UID, last.ResourceVersion, tc.wantReported.uid, tc.wantReported.rv)
			}
			// After a success, reported holds the cache's own pod, even when
			// nothing was called: a relist's copy replaces the one reported
			// (the same pod, from an API server), so the old copy can go.
			if cached, _, _ := indexer.GetByKey("default/web"); err == nil && cached != nil && c.reported[key] != cached {
				t.Errorf("reported holds another object than the pod in the cache")
			}
			uid, _ := c.found.Load(key)
			if got, _ := uid.(types.UID); string(got) != tc.wantFound {
				t.Errorf("found holds %q, want %q", got, tc.wantFound)
			}
		})
	}
}

// callLog is a Handler that writes each call as "verb namespace/name uid"
// (updated: "updated namespace/name oldRV->newRV"), and fails the call
// whose verb is fail.
type callLog struct {
	fail  string
	calls []string
}

func (h *callLog) call(verb, line string) error {
	if verb == h.fail {
		h.calls = append(h.calls, line+" (failed)")
		return errors.New("the handler failed")
	}
	h.calls = append(h.calls, line)
	return nil
}

func (h *callLog) Created(_ context.Context, pod *corev1.Pod, found bool) error {
	verb := map[bool]string{true: "found", false: "created"}[found]
	return h.call(verb, fmt.Sprintf("%s %s/%s %s", verb, pod.Namespace, pod.Name, pod.UID))
}

func (h *callLog) Updated(_ context.Context, old, pod *corev1.Pod) error {
	return h.call("updated", fmt.Sprintf("updated %s/%s %s->%s", pod.Namespace, pod.Name, old.ResourceVersion, pod.ResourceVersion))
}

func (h *callLog) Deleted(_ context.Context, pod *corev1.Pod) error {
	return h.call("deleted", fmt.Sprintf("deleted %s/%s %s", pod.Namespace, pod.Name, pod.UID))
}
