// Command demo-controller watches pods and logs their lifecycle. It is a
// small, complete Kubernetes controller written to be read: see README.md.
package main

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

// version is stamped at build time: go build -ldflags "-X main.version=...".
var version = "dev"

// options holds the command-line flags.
type options struct {
	kubeconfig, context, namespace string
	startupTimeout, syncTimeout    time.Duration
	simulatePause                  time.Duration
	version, simulate              bool
}

// newFlagSet defines demo-controller's flags, and klog's (-v and friends).
func newFlagSet(o *options) *flag.FlagSet {
	fs := flag.NewFlagSet("demo-controller", flag.ContinueOnError)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "path to a kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then the in-cluster service account)")
	fs.StringVar(&o.context, "context", "", "the kubeconfig context to use (default: the current context)")
	fs.StringVar(&o.namespace, "namespace", "", "watch pods in this namespace only (default: all namespaces)")
	fs.DurationVar(&o.startupTimeout, "startup-timeout", 10*time.Second, "how long the first request to the API server may take")
	fs.DurationVar(&o.syncTimeout, "sync-timeout", 2*time.Minute, "how long to wait for the first full list of pods")
	fs.BoolVar(&o.version, "version", false, "print the version and exit")
	fs.BoolVar(&o.simulate, "simulate", false, "run against a simulated cluster, with no kubeconfig, and exit when its story ends")
	fs.DurationVar(&o.simulatePause, "simulate-pause", 300*time.Millisecond, "with --simulate, the pause between two steps of the story (0: none)")
	klog.InitFlags(fs)
	return fs
}

// main parses the flags, then runs the controller (or the simulation) until
// a signal stops it. Exit codes: 0 on a clean stop, 1 when it cannot run or
// on a second signal, 2 for bad flags.
func main() {
	var o options
	fs := newFlagSet(&o)
	fs.SetOutput(io.Discard) // a bad flag gets one line, not a page of usage
	err := fs.Parse(os.Args[1:])
	if err == nil && fs.NArg() > 0 {
		err = fmt.Errorf("unexpected argument %q: demo-controller takes only flags", fs.Arg(0))
	}
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(os.Stdout)
		fs.PrintDefaults()
	case err != nil:
		fmt.Fprintf(os.Stderr, "demo-controller: %v; see demo-controller -help\n", err)
		os.Exit(2)
	case o.version:
		fmt.Printf("demo-controller %s (client-go %s)\n", version, clientGoVersion())
	default:
		start := run
		if o.simulate {
			start = simulate // the same controller, on a fake clientset
		}
		err = start(signalContext(), o)
		klog.Flush()
		if err != nil {
			fmt.Fprintln(os.Stderr, "demo-controller:", err)
			os.Exit(1)
		}
	}
}

// signalContext returns a context cancelled by the first SIGINT or SIGTERM.
// A second signal exits at once, for when a graceful stop is not wanted.
func signalContext() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-signals
		klog.Background().Info("Shutting down; a second signal exits at once")
		cancel()
		<-signals
		os.Exit(1)
	}()
	return ctx
}

// run loads the configuration the way kubectl does, checks that it may list
// pods, then runs the controller until ctx is cancelled.
func run(ctx context.Context, o options) error {
	// kubectl's order: --kubeconfig, then $KUBECONFIG (files joined by ":",
	// merged), then ~/.kube/config; with none of them, the deferred loader
	// falls back to the service account of the pod it runs in.
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.kubeconfig
	config, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
		&clientcmd.ConfigOverrides{CurrentContext: o.context}).ClientConfig()
	if err != nil {
		return configError(err)
	}
	// client-go retries a lost connection quietly; say when it is lost and back.
	config.Wrap(func(next http.RoundTripper) http.RoundTripper {
		return &connectionLogger{next: next, logger: klog.FromContext(ctx), host: config.Host}
	})
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return configError(err)
	}

	// Fail fast: one small request shows whether the server is there and lets
	// us in. An informer would instead retry in the background, for ever.
	checkCtx, cancel := context.WithTimeout(ctx, o.startupTimeout)
	defer cancel()
	_, err = client.CoreV1().Pods(o.namespace).List(checkCtx, metav1.ListOptions{Limit: 1})
	if err != nil && ctx.Err() == nil { // (a signal during the check is no error)
		return accessError(err, config.Host, o.startupTimeout, missingVerbs(checkCtx, client, o.namespace, err))
	}
	return runController(ctx, client, config.Host, o, LogHandler{})
}

// runController wires a pod informer to a Controller and runs it. The
// informer comes from a factory, whose list and watch calls are built from
// the typed client: they work on real servers and on fake clientsets alike.
func runController(ctx context.Context, client kubernetes.Interface, host string, o options, handler Handler) error {
	klog.FromContext(ctx).Info("Starting demo-controller", "server", host,
		"namespace", cmp.Or(o.namespace, "(all)"), "version", version, "clientGo", clientGoVersion())
	// Resync 0: a level-based controller has no use for periodic replays.
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(o.namespace))
	pods := factory.Core().V1().Pods()
	informer := pods.Informer()
	err := errors.Join(
		// The cache holds every pod, so keep in it only what the handler reads:
		// metadata without managedFields and annotations, the node, and the
		// status fields of a pod's lifecycle. Your own Handler may need more:
		// add it here. Tombstones pass through as they are. make bench measured
		// this against caching whole pods (README.md, Performance).
		informer.SetTransform(func(obj any) (any, error) {
			pod, ok := obj.(*corev1.Pod)
			if !ok {
				return obj, nil
			}
			meta := pod.ObjectMeta
			meta.ManagedFields, meta.Annotations = nil, nil
			return &corev1.Pod{ObjectMeta: meta, Spec: corev1.PodSpec{NodeName: pod.Spec.NodeName}, Status: corev1.PodStatus{
				Phase: pod.Status.Phase, Conditions: pod.Status.Conditions, ContainerStatuses: pod.Status.ContainerStatuses}}, nil
		}),
		informer.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
			if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
				klog.FromContext(ctx).Error(nil, accessError(err, host, 0, nil).Error())
				return
			}
			cache.DefaultWatchErrorHandler(ctx, r, err) // the reflector retries
		}))
	if err != nil {
		return err
	}
	controller, err := NewController(ctx, pods, handler, workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName]())
	if err != nil {
		return err
	}
	factory.StartWithContext(ctx) // the informer logs with ctx's logger
	defer factory.Shutdown()      // waits for the informer's goroutines to end
	return controller.Run(ctx, o.syncTimeout)
}

// connectionLogger is an http.RoundTripper that logs once when requests to
// the API server start failing after it had been reached, and once when one
// succeeds again. (Failing to reach it at start is run's to explain.)
type connectionLogger struct {
	next            http.RoundTripper
	logger          klog.Logger
	host            string
	reached, failed atomic.Bool
}

// RoundTrip sends the request and notes whether the API server answered.
func (c *connectionLogger) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(req)
	switch {
	case err == nil:
		c.reached.Store(true)
		if c.failed.Swap(false) {
			c.logger.Info("Reconnected to the API server", "server", c.host)
		}
	case req.Context().Err() == nil && c.reached.Load() && !c.failed.Swap(true):
		c.logger.Error(err, "Lost the connection to the API server; retrying", "server", c.host)
	}
	return resp, err
}

// configError explains a configuration that cannot be used.
func configError(err error) error {
	switch {
	case clientcmd.IsEmptyConfig(err):
		return errors.New("no Kubernetes configuration found: pass --kubeconfig, set KUBECONFIG, create ~/.kube/config, or run inside a cluster")
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("kubeconfig not found (%v): pass --kubeconfig the path of an existing file", err)
	}
	return fmt.Errorf("cannot use the kubeconfig: %v; check it with 'kubectl config view' and 'kubectl config get-contexts'", err)
}

// accessError explains why a request for pods failed, and what to do.
func accessError(err error, host string, timeout time.Duration, missing []string) error {
	var certErr *tls.CertificateVerificationError
	var headerErr tls.RecordHeaderError
	switch {
	case apierrors.IsForbidden(err):
		return fmt.Errorf("%s: this identity may not %s pods (403 Forbidden): demo-controller needs get, list and watch on pods; grant them with the ClusterRole and ClusterRoleBinding in demo-controller.yaml",
			host, cmp.Or(strings.Join(missing, ", "), "list and watch"))
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("%s rejected the credentials (401 Unauthorized): log in again, or renew the token or client certificate in your kubeconfig", host)
	case errors.As(err, &certErr) || errors.As(err, &headerErr):
		return fmt.Errorf("TLS with %s failed (%v): check the server address and certificate authority in your kubeconfig", host, err)
	case apierrors.ReasonForError(err) != metav1.StatusReasonUnknown:
		return fmt.Errorf("the API server at %s refused to list pods: %v", host, err)
	}
	// Refused, timed out, no such host: the request never got an answer.
	return fmt.Errorf("cannot reach the API server at %s within %v (%v): check that the cluster is running and that the server address in your kubeconfig is right", host, timeout, err)
}

// missingVerbs asks the server which verbs on pods this identity lacks,
// after a 403. It returns nil for any other error, or when it cannot tell.
func missingVerbs(ctx context.Context, client kubernetes.Interface, namespace string, err error) (missing []string) {
	if !apierrors.IsForbidden(err) {
		return nil
	}
	for _, verb := range []string{"get", "list", "watch"} {
		review, reviewErr := client.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: namespace, Verb: verb, Resource: "pods"}}}, metav1.CreateOptions{})
		if reviewErr == nil && !review.Status.Allowed {
			missing = append(missing, verb)
		}
	}
	return missing
}

// clientGoVersion reads the client-go version the binary was built with.
func clientGoVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == "k8s.io/client-go" {
				return dep.Version
			}
		}
	}
	return "unknown"
}
