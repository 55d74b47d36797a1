//go:build exercise

// The test of exercise 3 (exercises/03-selector/README.md). It is not part of
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
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/textlogger"
)

// TestExercise03Selector runs demo-controller as its main does (run, with
// its start-up check, then runController) against a test API server that
// serves the pods of a fake clientset and applies a request's labelSelector
// as kube-apiserver does. Of its five pods, two match
// --selector=app=web,tier!=canary: the API server must be asked for those
// two only, by run's start-up check and by the informer (then it sends no
// other, and the cache holds only those); the controller must report those
// two; and a malformed selector must stop run at its start-up check.
func TestExercise03Selector(t *testing.T) {
	const selector = "app=web,tier!=canary"
	if f := newFlagSet(&options{}).Lookup("selector"); f == nil {
		t.Fatal("demo-controller has no flag --selector: the task adds it")
	} else if f.DefValue != "" {
		t.Errorf("--selector's default is %q; want none, for all pods", f.DefValue)
	}
	labelled := func(name string, labels map[string]string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, UID: types.UID("uid-" + name), ResourceVersion: "1", Labels: labels},
			Status:     corev1.PodStatus{Phase: corev1.PodRunning},
		}
	}
	pods := []runtime.Object{
		labelled("web-1", map[string]string{"app": "web"}),
		labelled("web-2", map[string]string{"app": "web", "tier": "front"}),
		labelled("web-canary", map[string]string{"app": "web", "tier": "canary"}),
		labelled("db-0", map[string]string{"app": "db"}),
		labelled("bare", nil),
	}

	t.Run("--selector="+selector, func(t *testing.T) {
		server, log, result := exercise03Run(t, fake.NewClientset(pods...), "--selector="+selector)
		// The pods the controller reports: those two, and no other.
		reported := func() []string {
			var names []string
			for _, line := range log.Lines() {
				if _, pod, ok := strings.Cut(line, ` pod="shop/`); ok {
					name, _, _ := strings.Cut(pod, `"`)
					names = append(names, name)
				}
			}
			slices.Sort(names)
			return slices.Compact(names)
		}
		// Wait for two pods to be reported, and the informer to watch (its
		// LIST and WATCH come after run's).
		var requests []exercise03Request
		var sent []string
		err := wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
			requests, sent = server.Requests()
			select {
			case err := <-result:
				return false, fmt.Errorf("run returned %v", err)
			default:
				return len(reported()) >= 2 && len(requests) >= 4, nil
			}
		})
		if err != nil {
			t.Fatalf("%v. The controller reported %q; its requests to the API server: %s. %s",
				err, reported(), exercise03Requests(requests), exercise03Logged(log.Last(10)))
		}
		if len(requests) < 2 || requests[0].verb != "LIST" || requests[1].verb != "WATCH" {
			t.Fatalf("run's start-up check made the requests %s; want a LIST, then a WATCH", exercise03Requests(requests[:min(2, len(requests))]))
		}
		if slices.ContainsFunc(requests[2:], func(r exercise03Request) bool { return r.selector != selector }) {
			t.Errorf("the informer asked the API server for pods that do not match the selector: %s. It sent them %q, "+
				"and the cache holds them all: the selector goes into the informer's LIST and WATCH, so that the API server "+
				"filters, and the cache never sees the pods that do not match", exercise03Requests(requests[2:]), sent)
		}
		if requests[0].selector != selector || requests[1].selector != selector {
			t.Errorf("the selector is not in run's first LIST/WATCH (its start-up check): they asked for %s; want labelSelector=%s, "+
				"so that a malformed selector stops demo-controller at once, in the API server's words", exercise03Requests(requests[:2]), selector)
		}
		if got := reported(); !slices.Equal(got, []string{"web-1", "web-2"}) {
			t.Errorf("with --selector=%s the controller reported the pods %q; want only those whose labels match, [\"web-1\" \"web-2\"]", selector, got)
		}
	})

	t.Run("a malformed selector", func(t *testing.T) {
		_, log, result := exercise03Run(t, fake.NewClientset(pods...), "--selector=app in (web", "--sync-timeout=2s")
		started := func() bool {
			return slices.ContainsFunc(log.Lines(), func(line string) bool { return strings.HasPrefix(line, `"Starting demo-controller"`) })
		}
		var err error
		_ = wait.PollUntilContextTimeout(context.Background(), 5*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
			select {
			case err = <-result:
				return true, nil
			default:
				return started(), nil
			}
		})
		switch {
		case started():
			t.Errorf("with --selector='app in (web', run started the controller (whose informer fails to list, and retries until " +
				"--sync-timeout): a malformed selector stops demo-controller at once, at its start-up check")
		case err == nil:
			t.Error("with --selector='app in (web', run returned no error within 5 s: a malformed selector stops demo-controller at once, at its start-up check")
		}
	})
}

// exercise03Run runs run with the flags given, and a kubeconfig for a test
// API server that serves the fake clientset's pods, until the test ends. It
// returns the server, the log, and where run's result comes.
func exercise03Run(t *testing.T, client *fake.Clientset, flags ...string) (*exercise03Server, *exercise03Log, <-chan error) {
	t.Helper()
	server := newExercise03Server(client)
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
		t.Fatalf("%v: the task adds the flag --selector", err)
	}
	log := &exercise03Log{}
	ctx, cancel := context.WithTimeout(klog.NewContext(context.Background(), textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(log)))), time.Minute)
	result, ended := make(chan error, 1), make(chan struct{})
	go func() {
		defer close(ended)
		result <- run(ctx, o)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-ended:
		case <-time.After(10 * time.Second):
			t.Error("run did not return within 10 s of the end of its context")
		}
		server.CloseClientConnections()
		server.Close()
	})
	return server, log, result
}

// exercise03Server is an API server for the pods of a fake clientset, as
// far as demo-controller needs one. It answers a LIST and a WATCH of pods in
// all namespaces as kube-apiserver does, with their labelSelector applied
// (a malformed one is refused, 400 Bad Request, in its words), and it
// records each request and the pods it sent.
type exercise03Server struct {
	*httptest.Server
	mu       sync.Mutex
	requests []exercise03Request
	sent     map[string]bool // the pods sent to the informer, by name
}

type exercise03Request struct {
	verb                    string // LIST or WATCH
	selector, fieldSelector string
}

// exercise03Requests says what each request asked for.
func exercise03Requests(requests []exercise03Request) string {
	var what []string
	for _, r := range requests {
		switch {
		case r.fieldSelector != "":
			what = append(what, r.verb+" with fieldSelector="+r.fieldSelector+" (a selector of the pods' fields, not of their labels)")
		case r.selector != "":
			what = append(what, r.verb+" of labelSelector="+r.selector)
		default:
			what = append(what, r.verb+" of every pod")
		}
	}
	return strings.Join(what, ", ")
}

// Requests returns the requests made so far, in order, and the names of the
// pods sent in answer to any but the first two (run's start-up check).
func (s *exercise03Server) Requests() ([]exercise03Request, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var sent []string
	for name := range s.sent {
		sent = append(sent, name)
	}
	slices.Sort(sent)
	return slices.Clone(s.requests), sent
}

func newExercise03Server(client *fake.Clientset) *exercise03Server {
	s := &exercise03Server{sent: map[string]bool{}}
	status := func(w http.ResponseWriter, code int, reason, message string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":%q,"code":%d,"message":%q}`, reason, code, message)
	}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if r.URL.Path != "/api/v1/pods" {
			status(w, http.StatusNotFound, "NotFound", "this test's API server serves only the pods of all namespaces")
			return
		}
		request := exercise03Request{verb: "LIST", selector: q.Get("labelSelector"), fieldSelector: q.Get("fieldSelector")}
		if q.Get("watch") == "true" {
			request.verb = "WATCH"
		}
		if q.Get("sendInitialEvents") == "true" { // client-go then falls back to a LIST and a WATCH
			status(w, http.StatusUnprocessableEntity, "Invalid", "sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled")
			return
		}
		s.mu.Lock()
		s.requests = append(s.requests, request)
		toInformer := len(s.requests) > 2 // the first two are run's start-up check
		s.mu.Unlock()
		selector, err := labels.Parse(request.selector)
		if err != nil {
			status(w, http.StatusBadRequest, "BadRequest", err.Error())
			return
		}
		if field, _, _ := strings.Cut(request.fieldSelector, "="); request.fieldSelector != "" && field != "metadata.name" {
			status(w, http.StatusBadRequest, "BadRequest", `field label not supported: `+strings.TrimRight(field, "!"))
			return
		}
		send := func(pod *corev1.Pod) bool {
			if !selector.Matches(labels.Set(pod.Labels)) {
				return false
			}
			if toInformer {
				s.mu.Lock()
				s.sent[pod.Name] = true
				s.mu.Unlock()
			}
			return true
		}
		w.Header().Set("Content-Type", "application/json")
		if request.verb == "LIST" {
			list, err := client.CoreV1().Pods("").List(r.Context(), metav1.ListOptions{})
			if err != nil {
				status(w, http.StatusInternalServerError, "InternalError", err.Error())
				return
			}
			list.Items = slices.DeleteFunc(list.Items, func(pod corev1.Pod) bool { return !send(&pod) })
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
				if !ok || !send(pod) {
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
	return s
}

// exercise03Logged says what lines were logged, if any.
func exercise03Logged(lines []string) string {
	if len(lines) == 0 {
		return "Nothing was logged."
	}
	return "The last lines logged:\n  " + strings.Join(lines, "\n  ")
}

// exercise03Log holds what the controller logs, one entry per line, without
// klog's header. It prints nothing: a failing check shows the lines that
// matter.
type exercise03Log struct {
	mu    sync.Mutex
	lines []string
}

func (l *exercise03Log) Write(entry []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	line := strings.TrimSuffix(string(entry), "\n")
	if _, text, ok := strings.Cut(line, "] "); ok {
		line = text
	}
	l.lines = append(l.lines, line)
	return len(entry), nil
}

func (l *exercise03Log) Lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.lines)
}

// Last returns the last n lines.
func (l *exercise03Log) Last(n int) []string {
	lines := l.Lines()
	return lines[max(0, len(lines)-n):]
}
