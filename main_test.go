package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/klog/v2/textlogger"
)

// writeKubeconfig writes a kubeconfig for server, with one context "test",
// and returns its path.
func writeKubeconfig(t *testing.T, server string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	config := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: test, cluster: {server: %q}}]
users: [{name: test, user: {token: not-a-real-token}}]
contexts: [{name: test, context: {cluster: test, user: test}}]
current-context: test
`, server)
	if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// apiStatus answers like the API server does when it refuses a request.
func apiStatus(w http.ResponseWriter, code int, reason string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":%q,"code":%d,"message":"refused by the test server"}`, reason, code)
}

func TestStartupErrors(t *testing.T) {
	// forbidden refuses to list pods; of get, list and watch it allows only get.
	forbidden := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/selfsubjectaccessreviews") {
			body, _ := io.ReadAll(r.Body) // client-go sends protobuf; the decoder reads any encoding
			obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, nil)
			if err != nil {
				apiStatus(w, http.StatusBadRequest, "BadRequest")
				return
			}
			review := obj.(*authorizationv1.SelfSubjectAccessReview)
			review.Status.Allowed = review.Spec.ResourceAttributes.Verb == "get"
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(review)
			return
		}
		apiStatus(w, http.StatusForbidden, "Forbidden")
	}))
	defer forbidden.Close()
	unauthorized := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		apiStatus(w, http.StatusUnauthorized, "Unauthorized")
	}))
	defer unauthorized.Close()
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		apiStatus(w, http.StatusInternalServerError, "InternalError")
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
	listener.Close() // nothing listens there now

	malformed := filepath.Join(t.TempDir(), "malformed")
	if err := os.WriteFile(malformed, []byte("clusters: [this is not"), 0o600); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name string
		o    options
		env  map[string]string
		want []string // parts of the error message
	}{
		{
			name: "forbidden",
			o:    options{kubeconfig: writeKubeconfig(t, forbidden.URL)},
			want: []string{forbidden.URL, "may not list, watch pods (403 Forbidden)", "get, list and watch", "demo-controller.yaml"},
		},
		{
			name: "unauthorized",
			o:    options{kubeconfig: writeKubeconfig(t, unauthorized.URL)},
			want: []string{unauthorized.URL, "rejected the credentials (401 Unauthorized)", "renew the token"},
		},
		{
			name: "other API error",
			o:    options{kubeconfig: writeKubeconfig(t, broken.URL)},
			want: []string{broken.URL, "refused to list pods"},
		},
		{
			name: "connection refused",
			o:    options{kubeconfig: writeKubeconfig(t, refused)},
			want: []string{"cannot reach the API server at " + refused, "connection refused", "check that the cluster is running"},
		},
		{
			name: "no answer in time",
			o:    options{kubeconfig: writeKubeconfig(t, hanging.URL), startupTimeout: 100 * time.Millisecond},
			want: []string{"cannot reach the API server at " + hanging.URL + " within 100ms"},
		},
		{
			name: "untrusted certificate",
			o:    options{kubeconfig: writeKubeconfig(t, untrusted.URL)},
			want: []string{"TLS with " + untrusted.URL + " failed", "certificate authority"},
		},
		{
			name: "kubeconfig path does not exist",
			o:    options{kubeconfig: "/no/such/kubeconfig"},
			want: []string{"kubeconfig not found", "/no/such/kubeconfig"},
		},
		{
			name: "no configuration anywhere",
			env:  map[string]string{"KUBECONFIG": "", "HOME": t.TempDir(), "KUBERNETES_SERVICE_HOST": ""},
			want: []string{"no Kubernetes configuration found", "--kubeconfig"},
		},
		{
			name: "malformed kubeconfig",
			o:    options{kubeconfig: malformed},
			want: []string{"cannot use the kubeconfig", malformed},
		},
		{
			name: "unknown context",
			o:    options{kubeconfig: writeKubeconfig(t, refused), context: "nope"},
			want: []string{"cannot use the kubeconfig", `"nope"`, "kubectl config get-contexts"},
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
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q is more than one line", err)
			}
		})
	}
}

// TestSignalContext runs the test binary again as a child that calls
// signalContext and then, once cancelled, never finishes its shutdown: the
// first signal must cancel the context, and the second must end the process
// at once with exit code 1.
func TestSignalContext(t *testing.T) {
	if os.Getenv("DEMO_CONTROLLER_SIGNAL_CHILD") == "1" {
		ctx := signalContext()
		fmt.Println("ready")
		<-ctx.Done()
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
			if line != want {
				t.Fatalf("child said %q, want %q", line, want)
			}
		case <-time.After(wait10s):
			t.Fatalf("child did not say %q", want)
		}
	}
	expect("ready")
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	expect("cancelled")
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error)
	go func() {
		for range lines { // drain, so that Wait can finish
		}
		exited <- cmd.Wait()
	}()
	select {
	case <-exited:
		if code := cmd.ProcessState.ExitCode(); code != 1 {
			t.Fatalf("exit code %d after the second signal, want 1", code)
		}
	case <-time.After(wait10s):
		t.Fatal("the second signal did not end the process")
	}
}

const wait10s = 10 * time.Second

// A 403 that the informer meets after start (say, the binding was removed)
// is logged with the same words as at start.
func TestWatchForbiddenIsExplained(t *testing.T) {
	client := fake.NewClientset()
	client.PrependWatchReactor("pods", func(clienttesting.Action) (bool, watch.Interface, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("no watch for you"))
	})
	var buf syncBuffer
	logger := textlogger.NewLogger(textlogger.NewConfig(textlogger.Output(&buf)))
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	done := make(chan error)
	go func() {
		done <- runController(ctx, client, "https://example.test", options{syncTimeout: time.Minute}, &recorder{})
	}()
	want := "https://example.test: this identity may not list and watch pods (403 Forbidden)"
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, wait.ForeverTestTimeout, true,
		func(context.Context) (bool, error) { return strings.Contains(buf.String(), want), nil })
	cancel()
	if runErr := <-done; runErr != nil {
		t.Errorf("runController: %v", runErr)
	}
	if err != nil {
		t.Fatalf("the log does not say %q:\n%s", want, buf.String())
	}
}
