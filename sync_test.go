package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2/ktesting"
)

// syncPod is a pod named default/web, by UID and resourceVersion.
type syncPod struct{ uid, rv string }

// syncRule is one row of sync's rule (TestSyncTruthTable says how to read
// it): what sync compares, the Handler calls it makes, and what reported and
// found hold after.
type syncRule struct {
	name     string
	inCache  *syncPod // the informer's cache; nil: no pod
	reported *syncPod // reported[key] before the sync; nil: nothing
	found    string   // found[key] before the sync: the UID of the first list's pod, or ""
	fail     string   // the call (created, updated, deleted) the handler fails, or ""

	calls        []string // the handler calls sync makes
	wantReported *syncPod // reported[key] after
	wantFound    string   // found[key] after
	wantErr      bool
}

// syncRules is sync's rule, one row per case; README.md's table "The rule
// of sync" shows the rows where no call fails (TestReadmeSyncRule).
var syncRules = []syncRule{
	{name: "in the first list, not reported yet: found",
		inCache: &syncPod{"a", "1"}, found: "a",
		calls: []string{"found default/web a"}, wantReported: &syncPod{"a", "1"}},
	{name: "new since the first list: created",
		inCache: &syncPod{"a", "1"},
		calls:   []string{"created default/web a"}, wantReported: &syncPod{"a", "1"}},
	{name: "in the first list, but replaced by a new pod of the same name before its report: created",
		inCache: &syncPod{"b", "2"}, found: "a",
		calls: []string{"created default/web b"}, wantReported: &syncPod{"b", "2"}},
	{name: "in the first list, gone before its report: nothing, and found forgets it",
		found: "a"},
	{name: "reported, same resourceVersion (a relist or resync): nothing",
		inCache: &syncPod{"a", "1"}, reported: &syncPod{"a", "1"},
		wantReported: &syncPod{"a", "1"}},
	{name: "reported, new resourceVersion: updated",
		inCache: &syncPod{"a", "2"}, reported: &syncPod{"a", "1"},
		calls: []string{"updated default/web 1->2"}, wantReported: &syncPod{"a", "2"}},
	{name: "reported, gone from the cache: deleted",
		reported: &syncPod{"a", "1"},
		calls:    []string{"deleted default/web a"}},
	{name: "reported, the same name with a new UID: deleted, then created",
		inCache: &syncPod{"b", "2"}, reported: &syncPod{"a", "1"},
		calls: []string{"deleted default/web a", "created default/web b"}, wantReported: &syncPod{"b", "2"}},
	{name: "never reported and not in the cache: nothing",
		inCache: nil},

	// A failed call changes nothing: the retry sees the same difference.
	{name: "created fails: reported stays empty, found is kept for the retry",
		inCache: &syncPod{"a", "1"}, found: "a", fail: "found",
		calls: []string{"found default/web a (failed)"}, wantFound: "a", wantErr: true},
	{name: "updated fails: reported keeps the old pod",
		inCache: &syncPod{"a", "2"}, reported: &syncPod{"a", "1"}, fail: "updated",
		calls: []string{"updated default/web 1->2 (failed)"}, wantReported: &syncPod{"a", "1"}, wantErr: true},
	{name: "deleted fails: reported keeps the gone pod",
		reported: &syncPod{"a", "1"}, fail: "deleted",
		calls: []string{"deleted default/web a (failed)"}, wantReported: &syncPod{"a", "1"}, wantErr: true},
	{name: "new UID, deleted fails: created is not called",
		inCache: &syncPod{"b", "2"}, reported: &syncPod{"a", "1"}, fail: "deleted",
		calls: []string{"deleted default/web a (failed)"}, wantReported: &syncPod{"a", "1"}, wantErr: true},
	{name: "new UID, created fails: the old pod is reported deleted, and not again",
		inCache: &syncPod{"b", "2"}, reported: &syncPod{"a", "1"}, fail: "created",
		calls: []string{"deleted default/web a", "created default/web b (failed)"}, wantErr: true},
}

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
	key := cache.ObjectName{Namespace: "default", Name: "web"}
	for _, tc := range syncRules {
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

// The README's table "The rule of sync" is sync's rule: each of its rows is
// a row of syncRules (which TestSyncTruthTable checks against sync), every
// row of syncRules where no call fails is in it, and each make demo step a
// row names shows that row's decision in the trace (-v=5). Its cells use a
// few fixed phrases, which this test reads.
func TestReadmeSyncRule(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(readme), "\n## The rule of `sync`")
	section, _, _ = strings.Cut(section, "\n## ")
	var rows [][]string
	for _, line := range regexp.MustCompile(`(?m)^\|.*\|$`).FindAllString(section, -1) {
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if len(cells) == 5 && !strings.HasPrefix(cells[0], "---") && cells[0] != "the cache holds" {
			rows = append(rows, cells)
		}
	}
	if len(rows) < 5 {
		t.Fatalf("found %d rows in the README's table of sync's rule; is it still there, with 5 columns?", len(rows))
	}
	pods := map[string]*syncPod{"nothing": nil, "pod A": {"a", "1"}, "pod A, the same resourceVersion": {"a", "1"},
		"pod A, a new resourceVersion": {"a", "2"}, "pod B": {"b", "2"}}
	founds := map[string]string{"": "", "nothing": "", "A's UID": "a"}
	calls := map[string]string{"`Created(A, found=true)`": "found default/web a", "`Created(A, found=false)`": "created default/web a",
		"`Created(B, found=false)`": "created default/web b", "`Updated(A then, A now)`": "updated default/web 1->2", "`Deleted(A)`": "deleted default/web a"}
	steps := splitStory(t, runSimulation(t, 5, 0))

	shown := map[string]int{} // the rows of syncRules the README shows, by name: at which of its rows
	for n, cells := range rows {
		where := fmt.Sprintf("README's rule table, row %d (%s)", n+1, strings.Join(cells, " | "))
		inCache, okCache := pods[cells[0]]
		reported, okReported := pods[cells[1]]
		found, okFound := founds[cells[2]]
		if !okCache || !okReported || !okFound {
			t.Errorf("%s: a cell is none of the phrases this test reads: for a pod %q, for found %q", where, slices.Sorted(maps.Keys(pods)), slices.Sorted(maps.Keys(founds)))
			continue
		}
		var want []string // the calls the row says sync makes
		if cells[3] != "nothing" {
			for _, call := range regexp.MustCompile("`[^`]+`").FindAllString(cells[3], -1) {
				if calls[call] == "" {
					t.Errorf("%s: the call %s is none of %q", where, call, slices.Sorted(maps.Keys(calls)))
				}
				want = append(want, calls[call])
			}
		}
		i := slices.IndexFunc(syncRules, func(r syncRule) bool {
			return r.fail == "" && samePod(r.inCache, inCache) && samePod(r.reported, reported) && r.found == found
		})
		if i < 0 {
			t.Errorf("%s: no row of syncRules (sync_test.go) has that cache, reported and found", where)
			continue
		}
		rule := syncRules[i]
		if prev, ok := shown[rule.name]; ok {
			t.Errorf("%s: the same case as row %d (%s)", where, prev, rule.name)
		}
		shown[rule.name] = n + 1
		if !slices.Equal(want, rule.calls) {
			t.Errorf("%s: says sync calls %q; sync calls %q (%s)", where, want, rule.calls, rule.name)
		}
		// The trace of that decision, in order, for one pod.
		var trace []string
		switch {
		case len(rule.calls) == 0 && rule.reported != nil:
			trace = []string{`"Sync: same resourceVersion as reported: nothing to do"`}
		case len(rule.calls) == 0 && cells[4] != "":
			t.Errorf("%s: names make demo's %s, but sync logs nothing for it: no trace can show it", where, cells[4])
		}
		for _, call := range rule.calls {
			verb, _, _ := strings.Cut(call, " ")
			trace = append(trace, map[string][]string{
				"found":   {`"Sync: a pod not reported before: Created"`, `"Pod found"`},
				"created": {`"Sync: a pod not reported before: Created"`, `"Pod created"`},
				"updated": {`"Sync: resourceVersion changed: Updated"`},
				"deleted": {`"Sync: the pod reported is gone or replaced: Deleted"`, `"Pod deleted"`},
			}[verb]...)
		}
		for _, step := range demoSteps(t, where, cells[4]) {
			if step >= len(steps) {
				t.Errorf("%s: names step %d; the story has %d", where, step, len(steps)-1)
			} else if !showsForOnePod(steps[step], trace) {
				t.Errorf("%s: make demo's step %d does not show it: want, for one pod, %q; the step logged:\n  %s",
					where, step, trace, strings.Join(steps[step], "\n  "))
			}
		}
	}
	for _, rule := range syncRules {
		if _, ok := shown[rule.name]; !ok && rule.fail == "" {
			t.Errorf("README's rule table has no row for %q (syncRules, sync_test.go)", rule.name)
		}
	}
}

// samePod reports whether two pods of syncRules, or nil, are the same.
func samePod(a, b *syncPod) bool {
	return a == nil && b == nil || a != nil && b != nil && *a == *b
}

// splitStory splits the simulation's lines by step: the lines before step 1,
// then each step's.
func splitStory(t *testing.T, lines []string) [][]string {
	t.Helper()
	steps := [][]string{nil}
	for _, line := range lines {
		if strings.HasPrefix(line, `"Story" step=`) {
			steps = append(steps, nil)
			continue
		}
		steps[len(steps)-1] = append(steps[len(steps)-1], line)
	}
	return steps
}

// demoSteps reads the README's "make demo shows it" cell: "before step 1"
// (0), "step 4", "steps 2, 3, 5", or nothing.
func demoSteps(t *testing.T, where, cell string) []int {
	t.Helper()
	if cell == "" {
		return nil
	} else if cell == "before step 1" {
		return []int{0}
	}
	_, list, ok := strings.Cut(cell, "step ")
	if !ok {
		_, list, ok = strings.Cut(cell, "steps ")
	}
	var steps []int
	for _, field := range strings.Split(list, ", ") {
		n, err := strconv.Atoi(field)
		if !ok || err != nil {
			t.Errorf("%s: make demo shows it at %q: want \"before step 1\", \"step 4\" or \"steps 2, 3\"", where, cell)
			return nil
		}
		steps = append(steps, n)
	}
	return steps
}

// showsForOnePod reports whether the lines of one pod, among lines, hold the
// messages of trace in order (other lines may come between).
func showsForOnePod(lines, trace []string) bool {
	byPod := map[string][]string{}
	for _, line := range lines {
		if m := regexp.MustCompile(`pod="([^"]+)"`).FindStringSubmatch(line); m != nil {
			byPod[m[1]] = append(byPod[m[1]], line)
		}
	}
	for _, lines := range byPod {
		at := 0
		for _, line := range lines {
			if at < len(trace) && strings.HasPrefix(line, trace[at]+" ") {
				at++
			}
		}
		if at == len(trace) {
			return true
		}
	}
	return false
}
