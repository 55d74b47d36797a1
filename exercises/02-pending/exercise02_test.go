//go:build exercise

// The test of exercise 2 (exercises/02-pending/README.md). It is not part of
// the project's tests: copy it into the project's root and run it with the
// exercise tag, as the exercise's README says. Each of its checks stands for
// a mistake a solution can make, and names it when it fails.

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
)

// TestExercise02PendingTooLong runs demo-controller as its main does (run,
// then runController) against a test API server that serves the pods of a
// fake clientset, with --pending-timeout=3s. At the start, stuck has been
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
		client := fake.NewClientset(stuck, pod("running", corev1.PodRunning, now.Add(-time.Hour)), pod("done", corev1.PodSucceeded, now.Add(-time.Hour)))
		c := exercise02Run(t, client, "--pending-timeout="+timeout.String())
		// The Pending pods, and when each was created.
		created := map[string]time.Time{"stuck": stuck.CreationTimestamp.Time}
		// When a pod left Pending; whether it changed while Pending, before
		// its time was up.
		left, changedPending := map[string]time.Time{}, map[string]bool{}
		// Each event puts a pod's key on the queue: the pods found, then each
		// pod the test creates or changes.
		events := 3
		// The last resourceVersion of each pod the test wrote.
		resourceVersion := map[string]int{}
		// lines returns the "Pod pending too long" lines about name.
		lines := func(name string) (lines []exercise02Line) {
			for _, line := range c.log.Lines() {
				if got, _, ok := exercise02Pending(line.text); ok && got == name {
					lines = append(lines, line)
				}
			}
			return lines
		}

		// twice says why name was logged more than once.
		twice := func(name string, logged []exercise02Line) error {
			if gap := logged[1].at.Sub(logged[0].at); len(logged) == 2 && gap < 200*time.Millisecond && changedPending[name] {
				// Two timers log twice, and stop; a key put back after the
				// line logs on. Give a third line a moment to show.
				third := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 300*time.Millisecond, true,
					func(context.Context) (bool, error) { return len(lines(name)) > 2, nil }) == nil
				if !third {
					return fmt.Errorf("the controller logged %s as pending too long twice, at most %v apart, when its time was up:\n  %s\n  %s\n"+
						"%s changed once while Pending, before its time was up: does each sync of a Pending pod start a timer (a goroutine, "+
						"time.AfterFunc), so that a pod synced twice is logged twice? The queue holds a key once: AddAfter, however often "+
						"it is called before the time is up, brings the key back once", name, max(gap.Round(time.Millisecond), time.Millisecond), logged[0].text, logged[1].text, name)
				}
			}
			all := lines(name)
			return fmt.Errorf("the controller logged %s as pending too long %d times in %v, though it did not change: "+
				"once its time is up, does sync still put its key back on the queue?",
				name, len(all), all[len(all)-1].at.Sub(all[0].at).Round(time.Millisecond))
		}
		// mistake says, as soon as it shows, what the controller did wrong.
		mistake := func() error {
			global := c.global.Lines()
			if i := slices.IndexFunc(global, func(line exercise02Line) bool { return strings.HasPrefix(line.text, `"Pod pending too long"`) }); i >= 0 {
				return fmt.Errorf("the controller logged\n  %s\nthrough klog's global logger (klog.InfoS, klog.Background(), or a context with no logger), "+
					"not through the logger in ctx, which the worker gives the pod's key (pod=) and which is the logger demo-controller was started with: "+
					"log with klog.FromContext(ctx)", global[i].text)
			}
			all := c.log.Lines()
			logged := map[string][]exercise02Line{} // "Pod pending too long" lines, by pod
			for _, line := range all {
				if strings.Contains(line.text, " err=") {
					return fmt.Errorf("the controller failed to handle a pod:\n  %s", line.text)
				}
				name, pendingFor, ok := exercise02Pending(line.text)
				if !ok {
					continue
				}
				logged[name] = append(logged[name], line)
				d, _ := time.ParseDuration(pendingFor)
				switch {
				case d > 100*365*24*time.Hour:
					return fmt.Errorf("the controller logged\n  %s\nAs the controller sees %s, it was created in year 1: its creationTimestamp is empty. "+
						"What does the cache keep of each pod? keep (handler.go) drops every field it does not list (exercise 1's trap)", line.text, name)
				case name == "running" || name == "done":
					return fmt.Errorf("the controller logged\n  %s\nbut %s is not Pending: only a pod still Pending is logged", line.text, name)
				case len(logged[name]) > 1:
					return twice(name, logged[name])
				case !left[name].IsZero() && line.at.After(left[name]):
					return fmt.Errorf("the controller logged\n  %s\n%v after %s had left Pending (it is Running): when the time is up, "+
						"the pod as it is then decides, not what it was when the time was set", line.text, line.at.Sub(left[name]).Round(time.Millisecond), name)
				case line.at.Before(created[name].Add(timeout)):
					return fmt.Errorf("the controller logged\n  %s\n%v after %s was created, before its %v were up",
						line.text, line.at.Sub(created[name]).Round(time.Millisecond), name, timeout)
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
		waitFor := func(prefix string, deadline time.Time) (exercise02Line, bool) {
			t.Helper()
			var found exercise02Line
			err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, max(time.Until(deadline), 0), true, func(context.Context) (bool, error) {
				if err := mistake(); err != nil {
					return false, err
				}
				select {
				case err := <-c.result:
					return false, fmt.Errorf("run returned %v", err)
				default:
				}
				all := c.log.Lines()
				i := slices.IndexFunc(all, func(line exercise02Line) bool { return strings.HasPrefix(line.text, prefix) })
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
		waitForLine := func(prefix string, d time.Duration, why string) exercise02Line {
			t.Helper()
			line, ok := waitFor(prefix, time.Now().Add(d))
			if !ok {
				t.Fatalf("no line %s within %v%s\n%s", prefix, d.Round(100*time.Millisecond), why, exercise02Logged(c.log.Last(8)))
			}
			return line
		}
		write := func(p *corev1.Pod) {
			t.Helper()
			events++
			resourceVersion[p.Name]++
			p.ResourceVersion = fmt.Sprint(resourceVersion[p.Name])
			var err error
			if resourceVersion[p.Name] == 1 {
				_, err = client.CoreV1().Pods("default").Create(context.Background(), p, metav1.CreateOptions{})
			} else {
				_, err = client.CoreV1().Pods("default").Update(context.Background(), p, metav1.UpdateOptions{})
			}
			if err != nil {
				t.Fatal(err)
			}
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
		checkPendingFor := func(name string, line exercise02Line) {
			t.Helper()
			_, pendingFor, _ := exercise02Pending(line.text)
			age := line.at.Sub(created[name])
			d, err := time.ParseDuration(pendingFor)
			switch {
			case pendingFor == "":
				t.Fatalf("the line\n  %s\nhas no pendingFor", line.text)
			case err != nil:
				t.Fatalf("the line\n  %s\nhas pendingFor=%s, which is not a duration such as 5m0s", line.text, pendingFor)
			case d != d.Round(time.Second):
				t.Fatalf("the line\n  %s\nhas pendingFor=%q: want it rounded to the second (time.Duration.Round)", line.text, pendingFor)
			case name == "stuck" && (d-line.at.Sub(stuck.Status.StartTime.Time)).Abs() <= time.Second && age > 2*timeout:
				t.Fatalf("the line\n  %s\nhas pendingFor=%q: how long ago the kubelet took stuck (its status.startTime). Want how long ago it was "+
					"created (its creationTimestamp), %v: the task counts from then", line.text, pendingFor, age.Round(time.Second))
			case d == timeout && age > 2*timeout:
				t.Fatalf("the line\n  %s\nhas pendingFor=%q, the timeout: want how long ago %s was created, %v", line.text, pendingFor, name, age.Round(time.Second))
			case d < age-time.Second || d > age+time.Second:
				t.Fatalf("the line\n  %s\nhas pendingFor=%q: want how long ago %s was created (its creationTimestamp), %v", line.text, pendingFor, name, age.Round(time.Second))
			}
		}

		// At the start, stuck must be logged at once. Wait as long as a wrong
		// solution would take to log it, to say which it is.
		found := waitForLine(`"Pod found" pod="default/stuck"`, 5*time.Second, "")
		stuckLine, stuckLogged := waitFor(`"Pod pending too long" pod="default/stuck"`, found.at.Add(timeout+time.Second))
		if late := stuckLine.at.Sub(found.at); stuckLogged {
			switch {
			case late <= time.Second/2:
				checkPendingFor("stuck", stuckLine)
			case near(stuckLine.at, found.at.Add(timeout)):
				t.Fatalf("the controller logged\n  %s\n%v after it found stuck, which had been Pending for a minute: want it at once. "+
					"Its time was counted from when the controller first saw it; the task counts from when the pod was created, its "+
					"creationTimestamp, and a pod already Pending too long when the controller starts is logged at once", stuckLine.text, late.Round(time.Millisecond))
			default:
				t.Fatalf("the controller logged\n  %s\n%v after it found stuck, which had been Pending for a minute: want it at once",
					stuckLine.text, late.Round(time.Millisecond))
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
		switch late, ageWhenHeard := youngLine.at.Sub(youngDue), heard.at.Sub(created["young"]); {
		case !stuckLogged && youngLogged:
			t.Fatalf("stuck, Pending for a minute (more than its %v) when the controller started, was not logged, though young was, when its "+
				"time came: a pod whose time is already up when the controller finds it is logged at once. %s", timeout, exercise02Logged(c.log.Last(8)))
		case !stuckLogged:
			t.Fatalf("nothing was logged as pending too long: not stuck, Pending for a minute when the controller started, nor young when its %v "+
				"were up. With --pending-timeout=%v, stuck is logged at once; the controller behaves as if its timeout were 0 (off), or more "+
				"than a minute (the flag's default is 5m0s): does the flag's value reach the controller (run, runController, Controller)? %s",
				timeout, timeout, exercise02Logged(c.log.Last(8)))
		case !youngLogged:
			t.Fatalf("no line \"Pod pending too long\" pod=\"default/young\" within %v of its time: young had been Pending %v of its %v "+
				"when the controller heard of it, and stayed so. Nothing happens to it: no event brings its key back when its time is up. %s",
				timeout+time.Second, ageWhenHeard.Round(100*time.Millisecond), timeout, exercise02Logged(c.log.Last(8)))
		case late > time.Second && (late-ageWhenHeard).Abs() < 700*time.Millisecond:
			t.Fatalf("the controller logged\n  %s\n%v after its time was up (want within a second): young had been Pending %v of its %v when "+
				"the controller heard of it, and its key came back %v later. Put it back for the time left, "+
				"time.Until(pod.CreationTimestamp.Add(timeout)), not for the whole --pending-timeout",
				youngLine.text, late.Round(time.Millisecond), ageWhenHeard.Round(100*time.Millisecond), timeout, timeout)
		case late > time.Second:
			t.Fatalf("the controller logged\n  %s\n%v after its time was up: want within a second. Is its key put back for the time left, "+
				"time.Until(pod.CreationTimestamp.Add(timeout))?", youngLine.text, late.Round(time.Millisecond))
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
					"time.Until(pod.CreationTimestamp.Add(timeout)), not for the whole --pending-timeout?", late.at.Sub(slowDue).Round(time.Millisecond), late.text)
			}
			t.Fatalf("no line \"Pod pending too long\" pod=\"default/slow\" within a second of its time (%v after it was created), though slow has stayed Pending.%s\n%s",
				timeout, why, exercise02Logged(c.log.Last(8)))
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
		all := append(c.log.Lines(), c.global.Lines()...)
		if i := slices.IndexFunc(all, func(line exercise02Line) bool { return line.at.After(stopped) }); i >= 0 {
			t.Errorf("the controller logged\n  %s\n%v after it had stopped (run had returned): the line comes from a timer that outlives the "+
				"worker (time.AfterFunc?), not through the queue, which stops with the controller", all[i].text, all[i].at.Sub(stopped).Round(time.Millisecond))
		}
	})

	t.Run("--pending-timeout=0 turns the check off", func(t *testing.T) {
		client := fake.NewClientset(pod("stuck", corev1.PodPending, now.Add(-time.Hour)))
		c := exercise02Run(t, client, "--pending-timeout=0")
		// Once the worker has handled a pod created after stuck was found,
		// it has handled stuck.
		wait := func(prefix string) {
			t.Helper()
			err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
				return slices.ContainsFunc(c.log.Lines(), func(line exercise02Line) bool { return strings.HasPrefix(line.text, prefix) }), nil
			})
			if err != nil {
				t.Fatalf("no line %s within 5 s. %s", prefix, exercise02Logged(c.log.Last(8)))
			}
		}
		wait(`"Pod found" pod="default/stuck"`)
		if _, err := client.CoreV1().Pods("default").Create(context.Background(), pod("later", corev1.PodRunning, now), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		wait(`"Pod created" pod="default/later"`)
		for _, line := range append(c.log.Lines(), c.global.Lines()...) {
			if strings.HasPrefix(line.text, `"Pod pending too long"`) {
				t.Errorf("with --pending-timeout=0 the controller logged\n  %s\nwant nothing: 0 turns the check off (taken as a timeout, "+
					"0 makes every Pending pod's time up at once)", line.text)
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

// exercise02Count counts the "Pod pending too long" lines about a pod.
func exercise02Count(lines []exercise02Line, name string) int {
	n := 0
	for _, line := range lines {
		if got, _, ok := exercise02Pending(line.text); ok && got == name {
			n++
		}
	}
	return n
}

// exercise02Logged says what lines were logged, if any.
func exercise02Logged(lines []exercise02Line) string {
	if len(lines) == 0 {
		return "Nothing was logged."
	}
	var texts []string
	for _, line := range lines {
		texts = append(texts, line.text)
	}
	return "The last lines logged:\n  " + strings.Join(texts, "\n  ")
}

// exercise02Controller is demo-controller run by exercise02Run.
type exercise02Controller struct {
	log     *exercise02Log // what it logs through the logger it was started with
	global  *exercise02Log // what goes to klog's global logger meanwhile
	result  <-chan error   // what run returns
	stop    func()         // cancels run's context, and returns once run has
	started time.Time
	adds0   int64 // exercise02Adds when it started
}

// adds returns how many times a key has been put on the controller's queue
// (a key already on it not counted) since it started.
func (c *exercise02Controller) adds() int64 { return exercise02Adds.Load() - c.adds0 }

// counted reports whether the queue's metrics are the test's, that is,
// whether adds counts anything.
func (c *exercise02Controller) counted() bool { return exercise02Counted.Load() }

// exercise02Run runs run with the flags given, and a kubeconfig for a test
// API server that serves the fake clientset's pods, until stop is called or
// the test ends.
func exercise02Run(t *testing.T, client *fake.Clientset, flags ...string) *exercise02Controller {
	t.Helper()
	server := newExercise02Server(client)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: test, cluster: {server: "`+server.URL+`"}}]
users: [{name: test, user: {token: not-a-real-token}}]
contexts: [{name: test, context: {cluster: test, user: test}}]
current-context: test
`), 0o600); err != nil {
		t.Fatal(err)
	}
	var o options
	if err := newFlagSet(&o).Parse(append([]string{"--kubeconfig=" + kubeconfig, "--startup-timeout=5s", "--sync-timeout=5s"}, flags...)); err != nil {
		t.Fatalf("%v: the task adds the flag --pending-timeout", err)
	}
	c := &exercise02Controller{log: &exercise02Log{}, global: &exercise02Log{}, started: time.Now(), adds0: exercise02Adds.Load()}
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
		server.CloseClientConnections()
		server.Close()
		klog.ClearLogger()
	})
	return c
}

// newExercise02Server returns an API server for the pods of a fake
// clientset, as far as demo-controller needs one: it answers a LIST and a
// WATCH of pods in all namespaces, as kube-apiserver does.
func newExercise02Server(client *fake.Clientset) *httptest.Server {
	status := func(w http.ResponseWriter, code int, reason, message string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":%q,"code":%d,"message":%q}`, reason, code, message)
	}
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		switch {
		case r.URL.Path != "/api/v1/pods":
			status(w, http.StatusNotFound, "NotFound", "this test's API server serves only the pods of all namespaces")
			return
		case q.Get("sendInitialEvents") == "true": // client-go then falls back to a LIST and a WATCH
			status(w, http.StatusUnprocessableEntity, "Invalid", "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if q.Get("watch") != "true" {
			list, err := client.CoreV1().Pods("").List(r.Context(), metav1.ListOptions{})
			if err != nil {
				status(w, http.StatusInternalServerError, "InternalError", err.Error())
				return
			}
			list.APIVersion, list.Kind = "v1", "PodList"
			_ = json.NewEncoder(w).Encode(list)
			return
		}
		// The fake clientset's watch starts after the resourceVersion of
		// the informer's LIST, as kube-apiserver's does.
		watcher, err := client.CoreV1().Pods("").Watch(r.Context(), metav1.ListOptions{ResourceVersion: q.Get("resourceVersion")})
		if err != nil {
			status(w, http.StatusInternalServerError, "InternalError", err.Error())
			return
		}
		defer watcher.Stop()
		w.(http.Flusher).Flush()
		for {
			select {
			case <-r.Context().Done():
				return
			case event, ok := <-watcher.ResultChan():
				if !ok {
					return
				}
				pod, ok := event.Object.(*corev1.Pod)
				if !ok {
					continue
				}
				pod = pod.DeepCopy()
				pod.APIVersion, pod.Kind = "v1", "Pod"
				raw, _ := json.Marshal(pod)
				_ = json.NewEncoder(w).Encode(metav1.WatchEvent{Type: string(event.Type), Object: runtime.RawExtension{Raw: raw}})
				w.(http.Flusher).Flush()
			}
		}
	}))
}

// exercise02Log holds what the controller logs, one entry per line, without
// klog's header, and when each was logged. It prints nothing: a failing
// check shows the lines that matter.
type exercise02Log struct {
	mu    sync.Mutex
	lines []exercise02Line
}

type exercise02Line struct {
	at   time.Time
	text string
}

func (l *exercise02Log) Write(entry []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	line := strings.TrimSuffix(string(entry), "\n")
	if _, text, ok := strings.Cut(line, "] "); ok {
		line = text
	}
	l.lines = append(l.lines, exercise02Line{time.Now(), line})
	return len(entry), nil
}

func (l *exercise02Log) Lines() []exercise02Line {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.lines)
}

// Last returns the last n lines.
func (l *exercise02Log) Last(n int) []exercise02Line {
	lines := l.Lines()
	return lines[max(0, len(lines)-n):]
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
