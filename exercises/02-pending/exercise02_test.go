//go:build exercise

// The test of exercise 2 (exercises/02-pending/README.md). It is not part of
// the project's tests: copy it into the project's root and run it with the
// exercise tag, as the exercise's README says. Each of its checks stands for
// a mistake a solution can make, and names it when it fails.

package main

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"

	"demo-controller/internal/fakeapi"
)

// TestExercise02PendingTooLong runs demo-controller as its main does (run,
// then runController) against a test API server (internal/fakeapi) that
// serves pods, with --pending-timeout=3s. At the start, stuck has been
// Pending for a minute (the kubelet took it 20 s ago: its status.startTime),
// running Running and done Succeeded. Then young, created
// 2 s before the controller hears of it, stays Pending; quick is created
// Pending and soon Running; slow is created Pending, changes while still
// Pending (the scheduler says why no node fits it), and stays so. stuck must
// be logged at once, young and slow when their 3 s are up, each once, with
// how long ago it was created; no other pod; the
// worker must handle quick meanwhile; and the queue must hand the worker a
// pod's key once for each event and once when its time is up, not again and
// again (the test counts the keys put on the queue, with client-go's
// workqueue metrics). With --pending-timeout=0, nothing is logged.
func TestExercise02PendingTooLong(t *testing.T) {
	const timeout = 3 * time.Second
	if f := newFlagSet(&options{}).Lookup("pending-timeout"); f == nil {
		t.Fatal("demo-controller has no flag --pending-timeout: the task adds it")
	} else if f.DefValue != "5m0s" {
		t.Errorf("--pending-timeout's default is %q; want 5m0s", f.DefValue)
	}
	// The controller's queue (named "pods") counts the keys put on it here.
	workqueue.SetProvider(exercise02Metrics{})
	// An API server keeps creation timestamps in whole seconds.
	now := time.Now().Truncate(time.Second)
	pod := func(name string, phase corev1.PodPhase, created time.Time) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name), ResourceVersion: "1",
				CreationTimestamp: metav1.NewTime(created)},
			Status: corev1.PodStatus{Phase: phase},
		}
	}
	// unschedulable says, as the scheduler does, that no node fits the pod.
	unschedulable := func(p *corev1.Pod) *corev1.Pod {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
			Message: "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."}}
		return p
	}
	near := func(a, b time.Time) bool { return a.Sub(b).Abs() < 700*time.Millisecond }

	t.Run("--pending-timeout="+timeout.String(), func(t *testing.T) {
		// stuck was unschedulable for 40 s; then a node came, and the
		// kubelet took it, and has been pulling its image for 20 s.
		stuck := pod("stuck", corev1.PodPending, now.Add(-time.Minute))
		stuck.Spec.NodeName = "node-1"
		stuck.Status.StartTime = &metav1.Time{Time: now.Add(-20 * time.Second)}
		stuck.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "app", Image: "example/app:v1",
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull"}}}}
		c := exercise02Run(t, []*corev1.Pod{stuck, pod("running", corev1.PodRunning, now.Add(-time.Hour)), pod("done", corev1.PodSucceeded, now.Add(-time.Hour))},
			"--pending-timeout="+timeout.String())
		// The Pending pods, and when each was created.
		created := map[string]time.Time{"stuck": stuck.CreationTimestamp.Time}
		// When a pod left Pending; whether it changed while Pending, before
		// its time was up.
		left, changedPending := map[string]time.Time{}, map[string]bool{}
		// Each event puts a pod's key on the queue: the pods found, then each
		// pod the test creates or changes.
		events := 3
		// lines returns the "Pod pending too long" lines about name.
		lines := func(name string) (lines []fakeapi.Line) {
			for _, line := range c.log.Timed() {
				if got, _, ok := exercise02Pending(line.Text); ok && got == name {
					lines = append(lines, line)
				}
			}
			return lines
		}

		// twice says why name was logged more than once.
		twice := func(name string, logged []fakeapi.Line) error {
			if gap := logged[1].At.Sub(logged[0].At); len(logged) == 2 && gap < 200*time.Millisecond && changedPending[name] {
				// Two timers log twice, and stop; a key put back after the
				// line logs on. Give a third line a moment to show.
				third := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 300*time.Millisecond, true,
					func(context.Context) (bool, error) { return len(lines(name)) > 2, nil }) == nil
				if !third {
					return fmt.Errorf("the controller logged %s as pending too long twice, at most %v apart, when its time was up:\n  %s\n  %s\n"+
						"%s changed once while Pending, before its time was up: does each sync of a Pending pod start a timer (a goroutine, "+
						"time.AfterFunc), so that a pod synced twice is logged twice? The queue holds a key once: AddAfter, however often "+
						"it is called before the time is up, brings the key back once", name, max(gap.Round(time.Millisecond), time.Millisecond), logged[0].Text, logged[1].Text, name)
				}
			}
			all := lines(name)
			return fmt.Errorf("the controller logged %s as pending too long %d times in %v, though it did not change: "+
				"once its time is up, does sync still put its key back on the queue?",
				name, len(all), all[len(all)-1].At.Sub(all[0].At).Round(time.Millisecond))
		}
		// mistake says, as soon as it shows, what the controller did wrong.
		mistake := func() error {
			global := c.global.Timed()
			if i := slices.IndexFunc(global, func(line fakeapi.Line) bool { return strings.HasPrefix(line.Text, `"Pod pending too long"`) }); i >= 0 {
				return fmt.Errorf("the controller logged\n  %s\nthrough klog's global logger (klog.InfoS, klog.Background(), or a context with no logger), "+
					"not through the logger in ctx, which the worker gives the pod's key (pod=) and which is the logger demo-controller was started with: "+
					"log with klog.FromContext(ctx)", global[i].Text)
			}
			all := c.log.Timed()
			logged := map[string][]fakeapi.Line{} // "Pod pending too long" lines, by pod
			for _, line := range all {
				if strings.Contains(line.Text, " err=") {
					return fmt.Errorf("the controller failed to handle a pod:\n  %s", line.Text)
				}
				name, pendingFor, ok := exercise02Pending(line.Text)
				if !ok {
					continue
				}
				logged[name] = append(logged[name], line)
				d, _ := time.ParseDuration(pendingFor)
				switch {
				case d > 100*365*24*time.Hour:
					return fmt.Errorf("the controller logged\n  %s\nAs the controller sees %s, it was created in year 1: its creationTimestamp is empty. "+
						"What does the cache keep of each pod? keep (handler.go) drops every field it does not list (exercise 1's trap)", line.Text, name)
				case name == "running" || name == "done":
					return fmt.Errorf("the controller logged\n  %s\nbut %s is not Pending: only a pod still Pending is logged", line.Text, name)
				case len(logged[name]) > 1:
					return twice(name, logged[name])
				case !left[name].IsZero() && line.At.After(left[name]):
					return fmt.Errorf("the controller logged\n  %s\n%v after %s had left Pending (it is Running): when the time is up, "+
						"the pod as it is then decides, not what it was when the time was set", line.Text, line.At.Sub(left[name]).Round(time.Millisecond), name)
				case line.At.Before(created[name].Add(timeout)):
					return fmt.Errorf("the controller logged\n  %s\n%v after %s was created, before its %v were up",
						line.Text, line.At.Sub(created[name]).Round(time.Millisecond), name, timeout)
				}
			}
			// Each event puts a pod's key on the queue once, and each Pending
			// pod's time once more (or not at all: stuck's was up when it was
			// found, and a time can fold with an event).
			if budget, n := int64(events+len(created)), c.adds(); c.counted() && n > budget {
				return fmt.Errorf("the queue has handed the worker pods' keys %d times in %v, for %d events (a pod found, created or changed) "+
					"and %d Pending pods' times: while a pod waits for its time, its key is put back on the queue again and again "+
					"(AddRateLimited? AddAfter with a short delay?), and the worker syncs it for nothing. It must come back once, when its time is up: "+
					"AddAfter(key, the time left)", n, time.Since(c.started).Round(time.Millisecond), events, len(created))
			}
			return nil
		}
		// waitFor waits until deadline for a line that starts with prefix,
		// and returns it; it stops at once at a mistake.
		waitFor := func(prefix string, deadline time.Time) (fakeapi.Line, bool) {
			t.Helper()
			var found fakeapi.Line
			err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, max(time.Until(deadline), 0), true, func(context.Context) (bool, error) {
				if err := mistake(); err != nil {
					return false, err
				}
				select {
				case err := <-c.result:
					return false, fmt.Errorf("run returned %v", err)
				default:
				}
				all := c.log.Timed()
				i := slices.IndexFunc(all, func(line fakeapi.Line) bool { return strings.HasPrefix(line.Text, prefix) })
				if i >= 0 {
					found = all[i]
				}
				return i >= 0, nil
			})
			if err != nil && (mistake() != nil || !wait.Interrupted(err)) {
				t.Fatal(exercise02FirstErr(mistake(), err))
			}
			return found, err == nil
		}
		// waitForLine is waitFor, for at most d, and fails the test with why
		// if no line comes.
		waitForLine := func(prefix string, d time.Duration, why string) fakeapi.Line {
			t.Helper()
			line, ok := waitFor(prefix, time.Now().Add(d))
			if !ok {
				t.Fatalf("no line %s within %v%s\n%s", prefix, d.Round(100*time.Millisecond), why, fakeapi.Logged(c.log.Last(8)))
			}
			return line
		}
		write := func(p *corev1.Pod) {
			t.Helper()
			events++
			c.store(t, p)
		}
		create := func(name string, at time.Time) {
			t.Helper()
			created[name] = at
			write(pod(name, corev1.PodPending, at))
		}
		toRunning := func(name string) {
			t.Helper()
			left[name] = time.Now()
			write(pod(name, corev1.PodRunning, created[name]))
		}

		// checkPendingFor checks that pendingFor is how long ago the pod was
		// created, to the second.
		checkPendingFor := func(name string, line fakeapi.Line) {
			t.Helper()
			_, pendingFor, _ := exercise02Pending(line.Text)
			age := line.At.Sub(created[name])
			d, err := time.ParseDuration(pendingFor)
			switch {
			case pendingFor == "":
				t.Fatalf("the line\n  %s\nhas no pendingFor", line.Text)
			case err != nil:
				t.Fatalf("the line\n  %s\nhas pendingFor=%s, which is not a duration such as 5m0s", line.Text, pendingFor)
			case d != d.Round(time.Second):
				t.Fatalf("the line\n  %s\nhas pendingFor=%q: want it rounded to the second (time.Duration.Round)", line.Text, pendingFor)
			case name == "stuck" && (d-line.At.Sub(stuck.Status.StartTime.Time)).Abs() <= time.Second && age > 2*timeout:
				t.Fatalf("the line\n  %s\nhas pendingFor=%q: how long ago the kubelet took stuck (its status.startTime). Want how long ago it was "+
					"created (its creationTimestamp), %v: the task counts from then", line.Text, pendingFor, age.Round(time.Second))
			case d == timeout && age > 2*timeout:
				t.Fatalf("the line\n  %s\nhas pendingFor=%q, the timeout: want how long ago %s was created, %v", line.Text, pendingFor, name, age.Round(time.Second))
			case d < age-time.Second || d > age+time.Second:
				t.Fatalf("the line\n  %s\nhas pendingFor=%q: want how long ago %s was created (its creationTimestamp), %v", line.Text, pendingFor, name, age.Round(time.Second))
			}
		}

		// At the start, stuck must be logged at once. Wait as long as a wrong
		// solution would take to log it, to say which it is.
		found := waitForLine(`"Pod found" pod="default/stuck"`, 5*time.Second, "")
		stuckLine, stuckLogged := waitFor(`"Pod pending too long" pod="default/stuck"`, found.At.Add(timeout+time.Second))
		if late := stuckLine.At.Sub(found.At); stuckLogged {
			switch {
			case late <= time.Second/2:
				checkPendingFor("stuck", stuckLine)
			case near(stuckLine.At, found.At.Add(timeout)):
				t.Fatalf("the controller logged\n  %s\n%v after it found stuck, which had been Pending for a minute: want it at once. "+
					"Its time was counted from when the controller first saw it; the task counts from when the pod was created, its "+
					"creationTimestamp, and a pod already Pending too long when the controller starts is logged at once", stuckLine.Text, late.Round(time.Millisecond))
			default:
				t.Fatalf("the controller logged\n  %s\n%v after it found stuck, which had been Pending for a minute: want it at once",
					stuckLine.Text, late.Round(time.Millisecond))
			}
		}

		// young is created 1.5 to 2.5 s before the controller hears of it
		// (as after a watch that was down for a while): it must be logged
		// when the rest of its time is up.
		created["young"] = time.Now().Add(time.Second / 2).Truncate(time.Second).Add(-2 * time.Second)
		write(unschedulable(pod("young", corev1.PodPending, created["young"])))
		heard := waitForLine(`"Pod created" pod="default/young"`, time.Second, "")
		youngDue := created["young"].Add(timeout)
		youngWait := youngDue.Add(timeout + time.Second) // long enough to see a key that comes back after the whole timeout
		if !stuckLogged {
			youngWait = youngDue.Add(time.Second)
		}
		youngLine, youngLogged := waitFor(`"Pod pending too long" pod="default/young"`, youngWait)
		switch late, ageWhenHeard := youngLine.At.Sub(youngDue), heard.At.Sub(created["young"]); {
		case !stuckLogged && youngLogged:
			t.Fatalf("stuck, Pending for a minute (more than its %v) when the controller started, was not logged, though young was, when its "+
				"time came: a pod whose time is already up when the controller finds it is logged at once. %s", timeout, fakeapi.Logged(c.log.Last(8)))
		case !stuckLogged:
			t.Fatalf("nothing was logged as pending too long: not stuck, Pending for a minute when the controller started, nor young when its %v "+
				"were up. With --pending-timeout=%v, stuck is logged at once; the controller behaves as if its timeout were 0 (off), or more "+
				"than a minute (the flag's default is 5m0s): does the flag's value reach the controller (run, runController, Controller)? %s",
				timeout, timeout, fakeapi.Logged(c.log.Last(8)))
		case !youngLogged:
			t.Fatalf("no line \"Pod pending too long\" pod=\"default/young\" within %v of its time: young had been Pending %v of its %v "+
				"when the controller heard of it, and stayed so. Nothing happens to it: no event brings its key back when its time is up. %s",
				timeout+time.Second, ageWhenHeard.Round(100*time.Millisecond), timeout, fakeapi.Logged(c.log.Last(8)))
		case late > time.Second && (late-ageWhenHeard).Abs() < 700*time.Millisecond:
			t.Fatalf("the controller logged\n  %s\n%v after its time was up (want within a second): young had been Pending %v of its %v when "+
				"the controller heard of it, and its key came back %v later. Put it back for the time left, "+
				"time.Until(pod.CreationTimestamp.Add(timeout)), not for the whole --pending-timeout",
				youngLine.Text, late.Round(time.Millisecond), ageWhenHeard.Round(100*time.Millisecond), timeout, timeout)
		case late > time.Second:
			t.Fatalf("the controller logged\n  %s\n%v after its time was up: want within a second. Is its key put back for the time left, "+
				"time.Until(pod.CreationTimestamp.Add(timeout))?", youngLine.Text, late.Round(time.Millisecond))
		}
		checkPendingFor("young", youngLine)
		if c.adds() == 0 {
			t.Log("the test cannot count the keys put on the queue (workqueue.SetProvider was called before it): it does not check how often the worker syncs a waiting pod")
		}

		// quick is Pending for a moment; slow stays Pending, and changes
		// meanwhile. The worker must go on with them while their time runs.
		// (slow's creationTimestamp is the next second, so that its time is
		// up a second after quick's.)
		create("quick", time.Now().Truncate(time.Second))
		waitForLine(`"Pod created" pod="default/quick"`, time.Second, "")
		create("slow", created["quick"].Add(time.Second))
		waitForLine(`"Pod created" pod="default/slow"`, time.Second,
			" of its creation: the worker is busy with quick; does it wait (a sleep) for quick's time to be up?")
		toRunning("quick")
		waitForLine(`"Pod phase changed" pod="default/quick"`, time.Second,
			": the worker is busy with slow; does it wait (a sleep) for slow's time to be up?")
		changedPending["slow"] = true
		write(unschedulable(pod("slow", corev1.PodPending, created["slow"])))
		slowDue := created["slow"].Add(timeout)
		slow, slowLogged := waitFor(`"Pod pending too long" pod="default/slow"`, slowDue.Add(time.Second))
		if !slowLogged {
			why := " Nothing happens to it: no event brings its key back when its time is up."
			if late, ok := waitFor(`"Pod pending too long" pod="default/slow"`, slowDue.Add(timeout+time.Second)); ok {
				why = fmt.Sprintf(" It was logged %v after its time was up:\n  %s\nIs its key put back for the time left, "+
					"time.Until(pod.CreationTimestamp.Add(timeout)), not for the whole --pending-timeout?", late.At.Sub(slowDue).Round(time.Millisecond), late.Text)
			}
			t.Fatalf("no line \"Pod pending too long\" pod=\"default/slow\" within a second of its time (%v after it was created), though slow has stayed Pending.%s\n%s",
				timeout, why, fakeapi.Logged(c.log.Last(8)))
		}
		checkPendingFor("slow", slow)
		toRunning("slow")
		waitForLine(`"Pod phase changed" pod="default/slow"`, time.Second, "")
		if err := mistake(); err != nil { // (quick's time was up before slow's)
			t.Fatal(err)
		}

		// A pod whose time is up once the controller has stopped: nothing may
		// be logged then. (The test waits for a time to pass here, as it
		// looks for a line that must not come.)
		create("last", time.Now().Truncate(time.Second).Add(-time.Second))
		waitForLine(`"Pod created" pod="default/last"`, time.Second, "")
		c.stop()
		stopped := time.Now()
		<-time.After(time.Until(created["last"].Add(timeout + time.Second/2)))
		all := append(c.log.Timed(), c.global.Timed()...)
		if i := slices.IndexFunc(all, func(line fakeapi.Line) bool { return line.At.After(stopped) }); i >= 0 {
			t.Errorf("the controller logged\n  %s\n%v after it had stopped (run had returned): the line comes from a timer that outlives the "+
				"worker (time.AfterFunc?), not through the queue, which stops with the controller", all[i].Text, all[i].At.Sub(stopped).Round(time.Millisecond))
		}
	})

	t.Run("--pending-timeout=0 turns the check off", func(t *testing.T) {
		c := exercise02Run(t, []*corev1.Pod{pod("stuck", corev1.PodPending, now.Add(-time.Hour))}, "--pending-timeout=0")
		// Once the worker has handled a pod created after stuck was found,
		// it has handled stuck.
		wait := func(prefix string) {
			t.Helper()
			err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
				return slices.ContainsFunc(c.log.Timed(), func(line fakeapi.Line) bool { return strings.HasPrefix(line.Text, prefix) }), nil
			})
			if err != nil {
				t.Fatalf("no line %s within 5 s. %s", prefix, fakeapi.Logged(c.log.Last(8)))
			}
		}
		wait(`"Pod found" pod="default/stuck"`)
		c.store(t, pod("later", corev1.PodRunning, now))
		wait(`"Pod created" pod="default/later"`)
		for _, line := range append(c.log.Timed(), c.global.Timed()...) {
			if strings.HasPrefix(line.Text, `"Pod pending too long"`) {
				t.Errorf("with --pending-timeout=0 the controller logged\n  %s\nwant nothing: 0 turns the check off (taken as a timeout, "+
					"0 makes every Pending pod's time up at once)", line.Text)
			}
		}
	})
}

// exercise02FirstErr returns the first error that is not nil.
func exercise02FirstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// exercise02Pending returns the pod and the pendingFor of a "Pod pending too
// long" line, and whether it is one.
func exercise02Pending(line string) (name, pendingFor string, ok bool) {
	m := exercise02PendingLine.FindStringSubmatch(line)
	if m == nil {
		return "", "", false
	}
	return m[1], strings.Trim(m[2], `"`), true
}

var exercise02PendingLine = regexp.MustCompile(`^"Pod pending too long" pod="default/([^"]+)"(?:.* pendingFor=("[^"]*"|\S+))?`)

// exercise02Controller is demo-controller run by exercise02Run.
type exercise02Controller struct {
	api     *fakeapi.Server // the API server it runs against
	log     *fakeapi.Log    // what it logs through the logger it was started with
	global  *fakeapi.Log    // what goes to klog's global logger meanwhile
	result  <-chan error    // what run returns
	stop    func()          // cancels run's context, and returns once run has
	started time.Time
	adds0   int64 // exercise02Adds when it started
}

// adds returns how many times a key has been put on the controller's queue
// (a key already on it not counted) since it started.
func (c *exercise02Controller) adds() int64 { return exercise02Adds.Load() - c.adds0 }

// counted reports whether the queue's metrics are the test's, that is,
// whether adds counts anything.
func (c *exercise02Controller) counted() bool { return exercise02Counted.Load() }

// store creates or changes a pod on the API server, as the kubelet or the
// scheduler would.
func (c *exercise02Controller) store(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pod)
	if err != nil {
		t.Fatal(err)
	}
	c.api.Store("pods", obj)
}

// exercise02Run runs run with the flags given, and a kubeconfig for a test
// API server (fakeapi) that serves the pods given, until stop is called or
// the test ends.
func exercise02Run(t *testing.T, pods []*corev1.Pod, flags ...string) *exercise02Controller {
	t.Helper()
	c := &exercise02Controller{api: fakeapi.New(t, "pods"), log: &fakeapi.Log{}, global: &fakeapi.Log{}, adds0: exercise02Adds.Load()}
	for _, pod := range pods {
		c.store(t, pod)
	}
	var o options
	if err := newFlagSet(&o).Parse(append([]string{"--kubeconfig=" + writeKubeconfig(t, c.api.URL, bearer, false),
		"--startup-timeout=5s", "--sync-timeout=5s"}, flags...)); err != nil {
		t.Fatalf("%v: the task adds the flag --pending-timeout", err)
	}
	c.started = time.Now()
	klog.SetLogger(textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(c.global))))
	ctx, cancel := context.WithTimeout(klog.NewContext(context.Background(), textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(c.log)))), time.Minute)
	results, ended := make(chan error, 1), make(chan struct{})
	go func() {
		defer close(ended)
		results <- run(ctx, o)
	}()
	c.result = results
	c.stop = func() {
		cancel()
		select {
		case <-ended:
		case <-time.After(10 * time.Second):
			t.Error("run did not return within 10 s of the end of its context")
		}
	}
	t.Cleanup(func() {
		c.stop()
		klog.ClearLogger()
	})
	return c
}

// exercise02Adds counts the keys put on a workqueue named "pods", the
// controller's, with the queue's own metrics: a key put on the queue while
// it is already there is not counted, so each count is one sync to come.
var exercise02Adds atomic.Int64

// exercise02Counted is set once a queue named "pods" counts in exercise02Adds.
var exercise02Counted atomic.Bool

// exercise02Metrics is the workqueue metrics provider (workqueue.SetProvider)
// that counts in exercise02Adds, and measures nothing else.
type exercise02Metrics struct{}

type exercise02Metric struct{ adds bool }

func (m exercise02Metric) Inc() {
	if m.adds {
		exercise02Adds.Add(1)
	}
}
func (exercise02Metric) Dec()            {}
func (exercise02Metric) Set(float64)     {}
func (exercise02Metric) Observe(float64) {}

func (exercise02Metrics) NewAddsMetric(name string) workqueue.CounterMetric {
	if name == "pods" {
		exercise02Counted.Store(true)
	}
	return exercise02Metric{adds: name == "pods"}
}
func (exercise02Metrics) NewDepthMetric(string) workqueue.GaugeMetric { return exercise02Metric{} }
func (exercise02Metrics) NewLatencyMetric(string) workqueue.HistogramMetric {
	return exercise02Metric{}
}
func (exercise02Metrics) NewWorkDurationMetric(string) workqueue.HistogramMetric {
	return exercise02Metric{}
}
func (exercise02Metrics) NewRetriesMetric(string) workqueue.CounterMetric { return exercise02Metric{} }
func (exercise02Metrics) NewUnfinishedWorkSecondsMetric(string) workqueue.SettableGaugeMetric {
	return exercise02Metric{}
}
func (exercise02Metrics) NewLongestRunningProcessorSecondsMetric(string) workqueue.SettableGaugeMetric {
	return exercise02Metric{}
}
