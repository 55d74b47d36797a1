package main

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/klog/v2/textlogger"
	"sigs.k8s.io/randfill"
)

// TestHandlerSeesWhatWholePodsShow is the test of keep (handler.go): what
// the handler that run uses (newHandler's; LogHandler unless you changed it)
// logs and returns through the cache must be what it would log and return if
// it were handed whole pods. It runs the same wiring as `run` (runController, with
// its informer and transform) on a fake clientset, starting from a pod with
// every field filled in. Every field (each string, number, bool, time and
// map, down to every container's image) is changed, emptied, and, for a
// pointer, set to nil, a few fields at a time, in pods that go from that
// base to the change and back; then each is deleted, and created again. So
// the handler is called on every path: found, updated, deleted, created.
// A handler that reads a field keep drops logs a line (or returns an error)
// for the whole pods and not through the cache, and the test names the
// field. It sees only what the handler logs through the logger in ctx (up
// to -v=4) and what it returns: not what it prints elsewhere, nor what it
// does in any other way (a write to the API server, a metric), nor a read
// whose result these random values do not change.
func TestHandlerSeesWhatWholePodsShow(t *testing.T) {
	for _, problem := range keepProblems(t, newHandler()) {
		t.Error(problem)
	}
}

// The guard works for a handler of your own type too, not only LogHandler:
// a handler that logs a label (keep drops labels) makes it fail, naming the
// field. (labelHandler stands for yours.)
func TestKeepGuardCatchesAnOwnHandler(t *testing.T) {
	problems := keepProblems(t, labelHandler{})
	if len(problems) == 0 {
		t.Fatal("a handler that reads a label keep drops passed the guard")
	}
	for _, problem := range problems {
		if !strings.Contains(problem, "pod.ObjectMeta.Labels") || !strings.Contains(problem, "main.labelHandler") {
			t.Errorf("the guard's message names neither the handler nor the field it reads:\n%s", problem)
		}
	}
}

// labelHandler logs the pod's labels on each update: a field keep drops.
type labelHandler struct{ LogHandler }

func (labelHandler) Updated(ctx context.Context, old, pod *corev1.Pod) error {
	klog.FromContext(ctx).Info("Pod updated", "labels", pod.Labels)
	return nil
}

// keepProblems runs handler through the real wiring as the doc comment of
// TestHandlerSeesWhatWholePodsShow says, and returns one message for each
// call whose log or error differs between the cached and the whole pods.
func keepProblems(t *testing.T, handler Handler) []string {
	t.Helper()
	base := &corev1.Pod{}
	randfill.NewWithSeed(1).NilChance(0).NumElements(1, 1).Funcs(
		func(q *resource.Quantity, c randfill.Continue) {
			*q = *resource.NewQuantity(c.Int63n(1000), resource.DecimalSI)
		},
	).Fill(base)
	base.Namespace, base.ResourceVersion = "whole", "1"
	base.ManagedFields = nil // the fake clientset manages these itself
	// A few values with meaning, so that LogHandler has something to report.
	base.Status.Conditions[0].Type, base.Status.Conditions[0].Status = corev1.PodReady, corev1.ConditionTrue

	// Each variant is the base with a few of its fields changed (every
	// field is changed in some variant): a pod goes from the base to the
	// variant, and another from the variant back to the base.
	const fieldsPerVariant = 20
	type variant struct {
		fields   []string
		from, to *corev1.Pod
	}
	var variants []variant
	for _, how := range []string{"changed", "emptied", "nil"} {
		for i, more := 0, true; more; i += fieldsPerVariant {
			to, fields := base.DeepCopy(), []string(nil)
			for n := i; n < i+fieldsPerVariant; n++ {
				field := changeField(reflect.ValueOf(to).Elem(), "pod", n, how)
				if more = field != ""; !more {
					break
				}
				fields = append(fields, field+" "+how)
			}
			if len(fields) > 0 {
				variants = append(variants, variant{fields, base, to}, variant{fields, to, base})
			}
		}
	}

	// whole holds every version of every pod as written, by name and resourceVersion.
	whole := map[string]*corev1.Pod{}
	var objects []runtime.Object
	for i, v := range variants {
		from, to := v.from.DeepCopy(), v.to.DeepCopy()
		from.Name, to.Name = fmt.Sprintf("pod-%d", i), fmt.Sprintf("pod-%d", i)
		from.UID, to.UID = types.UID(from.Name), types.UID(to.Name)
		from.ResourceVersion, to.ResourceVersion = "1", "2"
		again := to.DeepCopy() // created again at the end, new to the controller
		again.UID, again.ResourceVersion = types.UID(to.Name+"-again"), "3"
		whole[from.Name+"@1"], whole[to.Name+"@2"], whole[to.Name+"@3"] = from, to, again
		objects = append(objects, from)
	}

	compare := &comparingHandler{handler: handler, whole: whole, calls: map[string]int{}}
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	client := fake.NewClientset(objects...)
	done := make(chan error, 1)
	go func() { done <- runController(ctx, client, "fake", "", time.Minute, compare) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("runController: %v", err)
			}
		case <-time.After(wait.ForeverTestTimeout):
			t.Error("runController did not return after its context was cancelled")
		}
	}()

	compare.waitFor(t, "found", len(variants))
	// In batches: the fake clientset's watch holds only 100 events.
	for i := range variants {
		to := whole[fmt.Sprintf("pod-%d@2", i)]
		if _, err := client.CoreV1().Pods(to.Namespace).Update(ctx, to, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if i%50 == 49 || i == len(variants)-1 {
			compare.waitFor(t, "updated", i+1)
		}
	}
	for i := range variants {
		if err := client.CoreV1().Pods("whole").Delete(ctx, fmt.Sprintf("pod-%d", i), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if i%50 == 49 || i == len(variants)-1 {
			compare.waitFor(t, "deleted", i+1)
		}
	}
	// And each pod's last version created again, new to the controller.
	for i := range variants {
		if err := client.Tracker().Add(whole[fmt.Sprintf("pod-%d@3", i)]); err != nil { // (Create would choke on the random managedFields)
			t.Fatal(err)
		}
		if i%50 == 49 || i == len(variants)-1 {
			compare.waitFor(t, "created", i+1)
		}
	}

	compare.mu.Lock()
	defer compare.mu.Unlock()
	// One message for each field that explains a difference (the first
	// call it explains), and one for each difference no single field does.
	var problems []string
	seen := map[string]bool{}
	for _, d := range compare.differences {
		if seen[d.field] {
			continue
		}
		if d.field != "" {
			seen[d.field] = true
			problems = append(problems, fmt.Sprintf("%T reads %s, which keep (handler.go) drops: keep it there too.\n"+
				"In %s of %s it logs\n  %q\nfor the whole pods, but through the cache\n  %q",
				compare.handler, d.field, d.call, d.pod, d.whole, d.cached))
			continue
		}
		var i int
		fmt.Sscanf(d.pod, "pod-%d", &i)
		problems = append(problems, fmt.Sprintf("%T logs\n  %q\nfor the whole pods, but through the cache\n  %q\nin %s of %s, "+
			"when one of these fields changes (no one field that keep drops explains it):\n  %s\nkeep (handler.go) drops what the handler reads",
			compare.handler, d.whole, d.cached, d.call, d.pod, strings.Join(variants[i].fields, "\n  ")))
	}
	return problems
}

// changeField walks v depth first and changes its n-th leaf: a string,
// number, bool, metav1.Time, resource.Quantity or map gets another value
// (how "changed") or its zero value ("emptied"); with how "nil", the leaves
// are the pointers that are set, and each is set to nil. It returns the
// path of what it changed, or "" if v has no n-th leaf. It never changes a
// pod's namespace, name, UID or resourceVersion.
func changeField(v reflect.Value, path string, n int, how string) string {
	var found string
	var walk func(v reflect.Value, path string)
	walk = func(v reflect.Value, path string) {
		if found != "" {
			return
		}
		if v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return
			}
			if how != "nil" {
				walk(v.Elem(), path)
				return
			}
		} else if _, special := v.Interface().(metav1.Time); !special {
			if _, special = v.Interface().(resource.Quantity); !special {
				switch v.Kind() {
				case reflect.Struct:
					for i := range v.NumField() {
						field := v.Type().Field(i)
						if field.IsExported() && !slices.Contains([]string{"Namespace", "Name", "UID", "ResourceVersion"}, field.Name) {
							walk(v.Field(i), path+"."+field.Name)
						}
					}
					return
				case reflect.Slice:
					for i := range v.Len() {
						walk(v.Index(i), fmt.Sprintf("%s[%d]", path, i))
					}
					return
				case reflect.Map, reflect.String, reflect.Bool, reflect.Int, reflect.Int32, reflect.Int64, reflect.Float64:
				default:
					return
				}
			}
		}
		if how == "nil" && v.Kind() != reflect.Pointer {
			return
		}
		if n--; n >= 0 {
			return
		}
		found = path
		if how != "changed" {
			v.SetZero()
			return
		}
		switch x := v.Interface().(type) {
		case metav1.Time:
			v.Set(reflect.ValueOf(metav1.Time{Time: x.Add(time.Hour)}))
		case resource.Quantity:
			x.Add(resource.MustParse("1"))
			v.Set(reflect.ValueOf(x))
		default:
			switch v.Kind() {
			case reflect.Map: // a copy with one more entry
				m := reflect.MakeMap(v.Type())
				for _, k := range v.MapKeys() {
					m.SetMapIndex(k, v.MapIndex(k))
				}
				key := reflect.New(v.Type().Key()).Elem()
				key.SetString("added")
				m.SetMapIndex(key, reflect.New(v.Type().Elem()).Elem())
				v.Set(m)
			case reflect.String:
				v.SetString(v.String() + "-changed")
			case reflect.Bool:
				v.SetBool(!v.Bool())
			case reflect.Float64:
				v.SetFloat(v.Float() + 1)
			default:
				v.SetInt(v.Int() + 1)
			}
		}
	}
	walk(v, path)
	return found
}

// comparingHandler is handed pods by the controller, as they come out of
// the cache. For each call it calls handler twice, with those pods and with
// the whole pods of the same names and resourceVersions, and records any
// difference in what the two calls log and return.
type comparingHandler struct {
	handler Handler
	whole   map[string]*corev1.Pod // "name@resourceVersion" → the pod as written

	mu          sync.Mutex
	calls       map[string]int // "found", "created", "updated", "deleted" → calls
	differences []difference
}

// difference is a call whose log differs between the cached and the whole
// pods; field is the one field that, restored from the whole pods into the
// cached ones, makes it log the same ("" if no single field does).
type difference struct{ pod, call, whole, cached, field string }

func (h *comparingHandler) Created(ctx context.Context, pod *corev1.Pod, found bool) error {
	call := map[bool]string{true: "found", false: "created"}[found]
	h.compare(call, pod, func(ctx context.Context, p func(*corev1.Pod) *corev1.Pod) error {
		return h.handler.Created(ctx, p(pod), found)
	})
	return nil
}

func (h *comparingHandler) Updated(ctx context.Context, old, pod *corev1.Pod) error {
	h.compare("updated", pod, func(ctx context.Context, p func(*corev1.Pod) *corev1.Pod) error {
		return h.handler.Updated(ctx, p(old), p(pod))
	})
	return nil
}

func (h *comparingHandler) Deleted(ctx context.Context, pod *corev1.Pod) error {
	h.compare("deleted", pod, func(ctx context.Context, p func(*corev1.Pod) *corev1.Pod) error {
		return h.handler.Deleted(ctx, p(pod))
	})
	return nil
}

// compare runs call twice: with the pods as the cache holds them, and with
// the whole pods they were made from.
func (h *comparingHandler) compare(call string, pod *corev1.Pod, run func(context.Context, func(*corev1.Pod) *corev1.Pod) error) {
	cached := logOf(func(ctx context.Context) error { return run(ctx, func(p *corev1.Pod) *corev1.Pod { return p }) })
	whole := logOf(func(ctx context.Context) error {
		return run(ctx, func(p *corev1.Pod) *corev1.Pod { return h.whole[p.Name+"@"+p.ResourceVersion] })
	})
	field := ""
	if whole != cached {
		for _, f := range podFields() {
			restored := logOf(func(ctx context.Context) error {
				return run(ctx, func(p *corev1.Pod) *corev1.Pod { return withField(p, h.whole[p.Name+"@"+p.ResourceVersion], f) })
			})
			if restored == whole {
				field = "pod." + strings.Join(f, ".")
				break
			}
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls[call]++
	if whole != cached {
		h.differences = append(h.differences, difference{pod.Name, call, whole, cached, field})
	}
}

// podFields lists the fields of a pod's metadata, spec and status, each as
// a path such as ["ObjectMeta", "Labels"].
func podFields() [][]string {
	var fields [][]string
	for _, part := range []string{"ObjectMeta", "Spec", "Status"} {
		partType, _ := reflect.TypeFor[corev1.Pod]().FieldByName(part)
		for i := range partType.Type.NumField() {
			if f := partType.Type.Field(i); f.IsExported() {
				fields = append(fields, []string{part, f.Name})
			}
		}
	}
	return fields
}

// withField returns a copy of the cached pod with one field set as in the
// whole pod.
func withField(cached, whole *corev1.Pod, field []string) *corev1.Pod {
	pod := cached.DeepCopy()
	to := reflect.ValueOf(pod).Elem().FieldByName(field[0]).FieldByName(field[1])
	to.Set(reflect.ValueOf(whole.DeepCopy()).Elem().FieldByName(field[0]).FieldByName(field[1]))
	return pod
}

// logOf returns what f logs at -v=4, without klog's headers, and the error
// it returns.
func logOf(f func(ctx context.Context) error) string {
	var buf bytes.Buffer
	if err := f(klog.NewContext(context.Background(), textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(&buf), textlogger.Verbosity(4))))); err != nil {
		fmt.Fprintf(&buf, "returned error: %v\n", err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	for i := range lines {
		lines[i] = klogHeader.ReplaceAllString(lines[i], "")
	}
	return strings.Join(lines, "\n")
}

// waitFor polls until the handler has had n calls of one kind.
func (h *comparingHandler) waitFor(t *testing.T, call string, n int) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, wait.ForeverTestTimeout, true, func(context.Context) (bool, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		return h.calls[call] >= n, nil
	})
	if err != nil {
		h.mu.Lock()
		defer h.mu.Unlock()
		t.Fatalf("the handler had %d %q calls, want %d", h.calls[call], call, n)
	}
}
