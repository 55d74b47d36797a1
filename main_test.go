package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
)

// writeKubeconfig writes a kubeconfig for server, with one context "test"
// and the given user, and returns its path. The user is YAML, such as
// {token: abc}; the context is the current one unless noCurrent.
func writeKubeconfig(t *testing.T, server, user string, noCurrent bool) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	config := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: test, cluster: {server: %q}}]
users: [{name: test, user: %s}]
contexts: [{name: test, context: {cluster: test, user: test}}]
`, server, user)
	if !noCurrent {
		config += "current-context: test\n"
	}
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

const bearer = "{token: not-a-real-token}"

// apiStatus answers like the API server does when it refuses a request.
func apiStatus(w http.ResponseWriter, code int, reason, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":%q,"code":%d,"message":%q}`, reason, code, message)
}

// forbidding answers like an API server whose RBAC allows only the verbs in
// allowed on pods: an empty list, a watch that sends nothing, or a 403 in
// the API server's words.
func forbidding(allowed ...string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		verb := "list"
		if r.URL.Query().Get("watch") == "true" {
			verb = "watch"
		}
		if !slices.Contains(allowed, verb) {
			apiStatus(w, http.StatusForbidden, "Forbidden", fmt.Sprintf(`pods is forbidden: User "test" cannot %s resource "pods" in API group "" at the cluster scope`, verb))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if verb == "list" {
			fmt.Fprint(w, `{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[]}`)
			return
		}
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
}

func TestStartupErrors(t *testing.T) {
	forbidden := httptest.NewServer(forbidding())
	defer forbidden.Close()
	listOnly := httptest.NewServer(forbidding("list"))
	defer listOnly.Close()
	unauthorized := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		apiStatus(w, http.StatusUnauthorized, "Unauthorized", "Unauthorized")
	}))
	defer unauthorized.Close()
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		apiStatus(w, http.StatusInternalServerError, "InternalError", "the test server broke")
	}))
	defer broken.Close()
	hanging := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
	}))
	defer hanging.Close()
	untrusted := httptest.NewTLSServer(http.NotFoundHandler()) // its certificate is not in the kubeconfig
	defer untrusted.Close()

	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + listener.Addr().String()
	refusedTLS := "https://" + listener.Addr().String() // client-go runs credential plugins only for TLS
	listener.Close()                                    // nothing listens there now

	malformed := filepath.Join(t.TempDir(), "malformed")
	if err := os.WriteFile(malformed, []byte("clusters: [this is not"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A kubeconfig whose current-context names a context it does not have.
	dangling := filepath.Join(t.TempDir(), "dangling")
	if err := os.WriteFile(dangling, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: test, cluster: {server: %q}}]
users: [{name: test, user: {token: abc}}]
contexts: [{name: test, context: {cluster: test, user: test}}]
current-context: gone
`, refused)), 0o600); err != nil {
		t.Fatal(err)
	}
	// A credential plugin, as cloud CLIs install them (an exec user).
	plugin := func(command string) string {
		return fmt.Sprintf(`{exec: {apiVersion: client.authentication.k8s.io/v1, command: %q, interactiveMode: Never}}`, command)
	}
	noCluster := map[string]string{"KUBECONFIG": "", "HOME": t.TempDir(), "KUBERNETES_SERVICE_HOST": ""}

	tests := []struct {
		name string
		o    options
		env  map[string]string
		want []string // parts of the error message
	}{
		{
			name: "forbidden",
			o:    options{kubeconfig: writeKubeconfig(t, forbidden.URL, bearer, false)},
			want: []string{forbidden.URL, `cannot list resource "pods"`, "grant list and watch on pods", "demo-controller.yaml", "or pass --namespace"},
		},
		{
			name: "allowed to list but not to watch",
			o:    options{kubeconfig: writeKubeconfig(t, listOnly.URL, bearer, false)},
			want: []string{listOnly.URL, `cannot watch resource "pods"`, "grant list and watch on pods", "demo-controller.yaml"},
		},
		{
			name: "unauthorized",
			o:    options{kubeconfig: writeKubeconfig(t, unauthorized.URL, bearer, false)},
			want: []string{unauthorized.URL, "Unauthorized", "log in again", "renew the token"},
		},
		{
			name: "other API error",
			o:    options{kubeconfig: writeKubeconfig(t, broken.URL, bearer, false)},
			want: []string{broken.URL, "the test server broke", "the API server refused the request"},
		},
		{
			name: "connection refused",
			o:    options{kubeconfig: writeKubeconfig(t, refused, bearer, false)},
			want: []string{refused, "connection refused", "no working connection to the API server", "check the cluster is up"},
		},
		{
			name: "no answer in time",
			o:    options{kubeconfig: writeKubeconfig(t, hanging.URL, bearer, false), startupTimeout: 100 * time.Millisecond},
			want: []string{hanging.URL, "context deadline exceeded", "no working connection to the API server within --startup-timeout=100ms"},
		},
		{
			name: "untrusted certificate",
			o:    options{kubeconfig: writeKubeconfig(t, untrusted.URL, bearer, false)},
			want: []string{untrusted.URL, "certificate signed by unknown authority", "your kubeconfig's server and certificate authority"},
		},
		// These two run a real missing and a real failing plugin through
		// client-go. advice recognises them by client-go's own words
		// ("getting credentials"): if client-go rewords them, these rows
		// fail, instead of the advice silently turning into "no answer".
		{
			name: "credential plugin not installed",
			o:    options{kubeconfig: writeKubeconfig(t, refusedTLS, plugin("no-such-cloud-auth-plugin"), false)},
			want: []string{"getting credentials: exec: executable no-such-cloud-auth-plugin not found", "install the kubeconfig's credential plugin"},
		},
		{
			name: "credential plugin fails (not logged in)",
			o:    options{kubeconfig: writeKubeconfig(t, refusedTLS, plugin("false"), false)},
			want: []string{"executable false failed with exit code 1", "or log in with it"},
		},
		{
			name: "kubeconfig path does not exist",
			o:    options{kubeconfig: "/no/such/kubeconfig"},
			want: []string{"/no/such/kubeconfig", "no such file", "kubectl config view"},
		},
		{
			name: "no configuration anywhere",
			env:  noCluster,
			want: []string{"no Kubernetes configuration found", "--kubeconfig"},
		},
		{
			name: "contexts but no current context",
			o:    options{kubeconfig: writeKubeconfig(t, refused, bearer, true)},
			env:  noCluster,
			want: []string{"no current context", "pass --context", "kubectl config use-context"},
		},
		{
			name: "malformed kubeconfig",
			o:    options{kubeconfig: malformed},
			want: []string{malformed, "kubectl config view"},
		},
		{
			name: "current context names no context",
			o:    options{kubeconfig: dangling},
			want: []string{"context was not found for specified context: gone", "kubectl config get-contexts"},
		},
		{
			name: "unknown context",
			o:    options{kubeconfig: writeKubeconfig(t, refused, bearer, false), context: "nope"},
			want: []string{`context "nope" does not exist`, "kubectl config get-contexts"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			if tc.o.startupTimeout == 0 {
				tc.o.startupTimeout = 10 * time.Second
			}
			tc.o.syncTimeout = time.Second
			_, ctx := ktesting.NewTestContext(t)
			err := run(ctx, tc.o)
			if err == nil {
				t.Fatal("run succeeded")
			}
			for _, part := range tc.want {
				if !strings.Contains(err.Error(), part) {
					t.Errorf("error %q does not say %q", err, part)
				}
			}
		})
	}
}

// TestStartupWatchIsClosed: the WATCH that run makes to check its rights
// must be closed before the controller runs. Left open and never read, it
// made the API server wait on it at every event, and added about 50 ms to
// the p99 lag of every pod in make bench's burst at 10,000 pods.
func TestStartupWatchIsClosed(t *testing.T) {
	allowed := forbidding("list", "watch")
	var watches atomic.Int32
	checkClosed := make(chan struct{})
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("watch") == "true" && watches.Add(1) == 1 {
			defer close(checkClosed) // the first WATCH is run's check
		}
		allowed.ServeHTTP(w, r) // its watches end when the client closes them
	}))
	defer server.Close()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // before server.Close, which waits for run's connections
	ended := make(chan error, 1)
	go func() {
		ended <- run(ctx, options{kubeconfig: writeKubeconfig(t, server.URL, bearer, false), startupTimeout: wait10s, syncTimeout: time.Minute})
	}()
	select {
	case <-checkClosed:
	case err := <-ended:
		t.Fatalf("run ended before its check's WATCH was closed: %v", err)
	case <-time.After(wait10s):
		t.Fatal("the start-up check's WATCH was still open 10 s after it was made")
	}
	cancel()
	select {
	case err := <-ended:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(wait10s):
		t.Fatal("run did not end within 10 s of its context")
	}
	// Closing the WATCH's stream is not enough: the goroutine that decodes
	// it waits to hand on what it read until the watch.Interface is stopped.
	deadline := time.Now().Add(wait10s)
	for n := watchReaders(); n > 0; n = watchReaders() {
		if time.Now().After(deadline) {
			t.Fatalf("run has ended, but %d goroutine(s) still read a WATCH (watch.StreamWatcher.receive): "+
				"the start-up check's WATCH was closed, never stopped; call Stop on the watch.Interface", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// watchReaders counts the goroutines that read a WATCH's stream for a
// watch.Interface of client-go's REST client.
func watchReaders() int {
	buf := make([]byte, 1<<20)
	for runtime.Stack(buf, true) == len(buf) { // cut short: every goroutine must be counted
		buf = make([]byte, 2*len(buf))
	}
	return strings.Count(string(buf[:runtime.Stack(buf, true)]), "(*StreamWatcher).receive")
}

// A signal during the start-up check (here, while the first LIST waits for
// an answer) stops run there: no error, and no start line, which would come
// after the shutdown line.
func TestSignalDuringStartupCheck(t *testing.T) {
	asked := make(chan struct{}, 1)
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case asked <- struct{}{}:
		default:
		}
		<-r.Context().Done() // no answer
	}))
	defer server.Close()
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	defer cancel() // before server.Close, which waits for run's connections
	ended := make(chan error, 1)
	go func() {
		ended <- run(ctx, options{kubeconfig: writeKubeconfig(t, server.URL, bearer, false), startupTimeout: wait10s, syncTimeout: time.Minute})
	}()
	select {
	case <-asked:
	case err := <-ended:
		t.Fatalf("run ended before its check reached the server: %v", err)
	case <-time.After(wait10s):
		t.Fatal("run's check did not reach the server within 10 s")
	}
	cancel() // the signal
	select {
	case err := <-ended:
		if err != nil {
			t.Errorf("run returned %v after a signal during its check, want nil: a signal is no error", err)
		}
	case <-time.After(wait10s):
		t.Fatal("run did not end within 10 s of a signal during its check")
	}
	if log := logger.GetSink().(ktesting.Underlier).GetBuffer().String(); strings.Contains(log, "Starting demo-controller") {
		t.Errorf("after a signal during the start-up check, run went on to start the controller:\n%s", log)
	}
}

// TestSignalContext runs the test binary again as a child that calls
// signalContext and then, once cancelled, never finishes its shutdown. The
// first signal must write the shutdown line before anything sees the context
// cancelled, and the second must end the process at once: by then the signal
// has its default action back, so the process is killed by it.
func TestSignalContext(t *testing.T) {
	if os.Getenv("DEMO_CONTROLLER_SIGNAL_CHILD") == "1" {
		klog.LogToStderr(false)
		klog.SetOutput(os.Stdout)
		ctx := signalContext()
		fmt.Println("ready")
		<-ctx.Done()
		klog.Flush()
		fmt.Println("cancelled")
		time.Sleep(time.Minute) // a stuck shutdown; the test expects the second signal to cut it short
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSignalContext$")
	cmd.Env = append(os.Environ(), "DEMO_CONTROLLER_SIGNAL_CHILD=1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := make(chan string)
	go func() {
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			lines <- scanner.Text()
		}
		close(lines)
	}()
	expect := func(want string) {
		t.Helper()
		select {
		case line := <-lines:
			if !strings.Contains(line, want) {
				t.Fatalf("child said %q, want a line with %q", line, want)
			}
		case <-time.After(wait10s):
			t.Fatalf("child did not say %q", want)
		}
	}
	expect("ready")
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	expect("Shutting down; a second signal ends it at once")
	expect("cancelled")
	exited := make(chan error)
	go func() {
		for range lines { // drain, so that Wait can finish
		}
		exited <- cmd.Wait()
	}()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		status := cmd.ProcessState.Sys().(syscall.WaitStatus)
		if !status.Signaled() || status.Signal() != syscall.SIGTERM {
			t.Fatalf("after the second signal the process ended with %v, want killed by SIGTERM", cmd.ProcessState)
		}
	case <-time.After(wait10s):
		t.Fatal("a second signal did not end the process")
	}
}

const wait10s = 10 * time.Second
