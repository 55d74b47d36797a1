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
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
)

// TestExercise02PendingTooLong runs demo-controller as its main does (run,
// then runController) against a test API server that serves the pods of a
// fake clientset, with --pending-timeout=3s. At the start, stuck has been
// Pending for an hour, running Running and done Succeeded as long. Then
// quick is created Pending and soon Running; slow is created Pending and
// stays so. stuck must be logged at once, slow when its 3 s are up, each
// once, with how long it has been Pending; no other pod; and the worker must
// handle quick meanwhile. With --pending-timeout=0, nothing is logged.
func TestExercise02PendingTooLong(t *testing.T) {
	const timeout = 3 * time.Second
	if f := newFlagSet(&options{}).Lookup("pending-timeout"); f == nil {
		t.Fatal("demo-controller has no flag --pending-timeout: the task adds it")
	} else if f.DefValue != "5m0s" {
		t.Errorf("--pending-timeout's default is %q; want 5m0s", f.DefValue)
	}
	// An API server keeps creation timestamps in whole seconds.
	now := time.Now().Truncate(time.Second)
	pod := func(name string, phase corev1.PodPhase, created time.Time) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, UID: types.UID("uid-" + name), ResourceVersion: "1",
				CreationTimestamp: metav1.NewTime(created)},
			Status: corev1.PodStatus{Phase: phase},
		}
	}

	t.Run("--pending-timeout="+timeout.String(), func(t *testing.T) {
		client := fake.NewClientset(pod("stuck", corev1.PodPending, now.Add(-time.Hour)),
			pod("running", corev1.PodRunning, now.Add(-time.Hour)), pod("done", corev1.PodSucceeded, now.Add(-time.Hour)))
		log, result, stop := exercise02Run(t, client, "--pending-timeout="+timeout.String())
		created := map[string]time.Time{"stuck": now.Add(-time.Hour)} // when each Pending pod was created
		left := map[string]time.Time{}                                // when a pod left Pending

		// mistake says, as soon as it shows, what the controller did wrong.
		mistake := func() error {
			lines := log.Lines()
			logged := map[string]int{} // "Pod pending too long" lines, by pod
			for _, line := range lines {
				if strings.Contains(line.text, " err=") {
					return fmt.Errorf("the controller failed to handle a pod:\n  %s", line.text)
				}
				name, pendingFor, ok := exercise02Pending(line.text)
				if !ok {
					continue
				}
				logged[name]++
				switch {
				case name == "running" || name == "done":
					return fmt.Errorf("the controller logged\n  %s\nbut %s is not Pending: only a pod still Pending is logged", line.text, name)
				case !left[name].IsZero() && line.at.After(left[name]):
					return fmt.Errorf("the controller logged\n  %s\n%v after %s had left Pending (it is Running): when the time is up, "+
						"the pod as it is then decides, not what it was when the time was set", line.text, line.at.Sub(left[name]).Round(time.Millisecond), name)
				case line.at.Before(created[name].Add(timeout)):
					why := ""
					if d, err := time.ParseDuration(pendingFor); err == nil && d > 24*time.Hour {
						why = fmt.Sprintf(" (pendingFor=%q: as the controller sees it, the pod was created in year 1, so its creation time is empty; what does the cache keep of each pod?)", pendingFor)
					}
					return fmt.Errorf("the controller logged\n  %s\n%v after %s was created, before its %v were up%s",
						line.text, line.at.Sub(created[name]).Round(time.Millisecond), name, timeout, why)
				case logged[name] > 1:
					first := lines[slices.IndexFunc(lines, func(l exercise02Line) bool { p, _, _ := exercise02Pending(l.text); return p == name })]
					return fmt.Errorf("the controller logged %s as pending too long %d times in %v, though it did not change: "+
						"once its time is up, does sync still put its key back on the queue?",
						name, exercise02Count(lines, name), lines[len(lines)-1].at.Sub(first.at).Round(time.Millisecond))
				}
			}
			return nil
		}
		// waitForLine waits at most d for a line that starts with prefix, and
		// returns it; it stops at once at a mistake.
		waitForLine := func(prefix string, d time.Duration, why string) exercise02Line {
			t.Helper()
			var found exercise02Line
			err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, d, true, func(context.Context) (bool, error) {
				if err := mistake(); err != nil {
					return false, err
				}
				select {
				case err := <-result:
					return false, fmt.Errorf("run returned %v", err)
				default:
				}
				i := slices.IndexFunc(log.Lines(), func(line exercise02Line) bool { return strings.HasPrefix(line.text, prefix) })
				if i >= 0 {
					found = log.Lines()[i]
				}
				return i >= 0, nil
			})
			if err != nil && mistake() != nil {
				t.Fatal(mistake())
			} else if err != nil {
				t.Fatalf("no line %s within %v%s\n%s", prefix, d.Round(100*time.Millisecond), why, exercise02Logged(log.Last(8)))
			}
			return found
		}
		create := func(name string, at time.Time) {
			t.Helper()
			created[name] = at
			if _, err := client.CoreV1().Pods("default").Create(context.Background(), pod(name, corev1.PodPending, at), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		toRunning := func(name string) {
			t.Helper()
			p := pod(name, corev1.PodRunning, created[name])
			p.ResourceVersion = "2"
			left[name] = time.Now()
			if _, err := client.CoreV1().Pods("default").Update(context.Background(), p, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
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
			case d == timeout && age > 2*timeout:
				t.Fatalf("the line\n  %s\nhas pendingFor=%q, the timeout: want how long ago %s was created, %v", line.text, pendingFor, name, age.Round(time.Second))
			case d < age-time.Second || d > age+time.Second:
				t.Fatalf("the line\n  %s\nhas pendingFor=%q: want how long ago %s was created, %v", line.text, pendingFor, name, age.Round(time.Second))
			}
		}

		found := waitForLine(`"Pod found" pod="default/stuck"`, 5*time.Second, "")
		stuck := waitForLine(`"Pod pending too long" pod="default/stuck"`, time.Second,
			": stuck has been Pending for an hour, and a pod already Pending too long when the controller starts is logged at once")
		if wait := stuck.at.Sub(found.at); wait > time.Second/2 {
			t.Errorf("stuck, Pending for an hour, was logged %v after it was found: want at once", wait.Round(time.Millisecond))
		}
		checkPendingFor("stuck", stuck)
		// quick is Pending for a moment; slow stays Pending. The worker must
		// go on with them while their time runs. (slow's creationTimestamp
		// is the next second, so that its time is up a second after quick's.)
		create("quick", time.Now().Truncate(time.Second))
		waitForLine(`"Pod created" pod="default/quick"`, time.Second, "")
		create("slow", created["quick"].Add(time.Second))
		waitForLine(`"Pod created" pod="default/slow"`, time.Second,
			" of its creation: the worker is busy with quick; does it wait (a sleep) for quick's time to be up?")
		toRunning("quick")
		waitForLine(`"Pod phase changed" pod="default/quick"`, time.Second,
			": the worker is busy with slow; does it wait (a sleep) for slow's time to be up?")
		slow := waitForLine(`"Pod pending too long" pod="default/slow"`, time.Until(created["slow"].Add(timeout+time.Second)),
			fmt.Sprintf(" (until a second after slow's %v were up), though slow has stayed Pending. Nothing happens to it: no event "+
				"brings its key back when its time is up, and when its key does come back, the pod has not changed", timeout))
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
		stop()
		stopped := time.Now()
		<-time.After(time.Until(created["last"].Add(timeout + time.Second/2)))
		if i := slices.IndexFunc(log.Lines(), func(line exercise02Line) bool { return line.at.After(stopped) }); i >= 0 {
			t.Errorf("the controller logged\n  %s\n%v after it had stopped (run had returned): the line comes from a timer that outlives the "+
				"worker (time.AfterFunc?), not through the queue, which stops with the controller", log.Lines()[i].text, log.Lines()[i].at.Sub(stopped).Round(time.Millisecond))
		}

	})

	t.Run("--pending-timeout=0 turns the check off", func(t *testing.T) {
		client := fake.NewClientset(pod("stuck", corev1.PodPending, now.Add(-time.Hour)))
		log, _, _ := exercise02Run(t, client, "--pending-timeout=0")
		// Once the worker has handled a pod created after stuck was found,
		// it has handled stuck.
		wait := func(prefix string) {
			t.Helper()
			err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
				return slices.ContainsFunc(log.Lines(), func(line exercise02Line) bool { return strings.HasPrefix(line.text, prefix) }), nil
			})
			if err != nil {
				t.Fatalf("no line %s within 5 s. %s", prefix, exercise02Logged(log.Last(8)))
			}
		}
		wait(`"Pod found" pod="default/stuck"`)
		if _, err := client.CoreV1().Pods("default").Create(context.Background(), pod("later", corev1.PodRunning, now), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		wait(`"Pod created" pod="default/later"`)
		for _, line := range log.Lines() {
			if _, _, ok := exercise02Pending(line.text); ok {
				t.Errorf("with --pending-timeout=0 the controller logged\n  %s\nwant nothing: 0 turns the check off", line.text)
			}
		}
	})
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

// exercise02Run runs run with the flags given, and a kubeconfig for a test
// API server that serves the fake clientset's pods, until stop is called or
// the test ends. It returns the log, where run's result comes, and stop,
// which returns once run has.
func exercise02Run(t *testing.T, client *fake.Clientset, flags ...string) (log *exercise02Log, result <-chan error, stop func()) {
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
	log = &exercise02Log{}
	ctx, cancel := context.WithTimeout(klog.NewContext(context.Background(), textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(log)))), time.Minute)
	results, ended := make(chan error, 1), make(chan struct{})
	go func() {
		defer close(ended)
		results <- run(ctx, o)
	}()
	stop = func() {
		cancel()
		select {
		case <-ended:
		case <-time.After(10 * time.Second):
			t.Error("run did not return within 10 s of the end of its context")
		}
	}
	t.Cleanup(func() {
		stop()
		server.CloseClientConnections()
		server.Close()
	})
	return log, results, stop
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
