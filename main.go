// Command demo-controller watches pods and logs their lifecycle. It is a
// small, complete Kubernetes controller written to be read: see README.md.
//
// main.go is the third file to read, after controller.go and handler.go. It
// only wires: flags, the configuration (found the way kubectl finds it), the
// client, signals, and runController, which joins an informer to the
// Controller and runs it.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
)

// version is stamped at build time: go build -ldflags "-X main.version=...".
// The start line names it; go version -m ./demo-controller shows the rest
// of the build, client-go's version included.
var version = "dev"

// options holds the command-line flags.
type options struct {
	kubeconfig, context, namespace             string
	startupTimeout, syncTimeout, simulatePause time.Duration
	simulate                                   bool
}

// newFlagSet defines demo-controller's flags, and klog's (-v and friends).
// A timeout of 0 leaves no time: the start-up check, or the wait for the
// cache, fails at once with that timeout's message.
func newFlagSet(o *options) *flag.FlagSet {
	fs := flag.NewFlagSet("demo-controller", flag.ContinueOnError)
	fs.StringVar(&o.kubeconfig, "kubeconfig", "",
		"path to a kubeconfig file (default: the files in $KUBECONFIG if set, else ~/.kube/config)")
	fs.StringVar(&o.context, "context", "", "kubeconfig context to use (default: the current one)")
	// One namespace, or all: for two, run two processes (or watch all).
	fs.StringVar(&o.namespace, "namespace", "",
		"watch pods in this namespace only, even one not created yet (default: all namespaces)")
	fs.DurationVar(&o.startupTimeout, "startup-timeout", 10*time.Second,
		"how long the start-up check of the API server (a LIST, then a WATCH) may take")
	fs.DurationVar(&o.syncTimeout, "sync-timeout", 2*time.Minute,
		"how long to wait for the first full list of pods")
	fs.BoolVar(&o.simulate, "simulate", false,
		"run against a simulated cluster (all namespaces, no kubeconfig); exit when its story ends")
	fs.DurationVar(&o.simulatePause, "simulate-pause", 300*time.Millisecond,
		"with --simulate, the pause between two steps of the story (0: none)")
	// klog writes text. For JSON, give klog.SetLogger another logr.Logger
	// (Kubernetes' own is in k8s.io/component-base/logs/json), a dependency
	// this project leaves out.
	klog.InitFlags(fs)
	return fs
}

// main parses the flags, then runs the controller until a signal stops it
// (the simulation also stops at the end of its story). Exit codes: 0 on a
// clean stop, 1 when it cannot run, 2 for bad flags (and, from Go itself,
// for a panic).
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
	default:
		err = run(signalContext(), o)
		klog.Flush()
		if err != nil { // one line, even where client-go's text has several
			fmt.Fprintln(os.Stderr, "demo-controller:",
				strings.Join(strings.Fields(err.Error()), " "))
			os.Exit(1)
		}
	}
}

// signalContext returns a context cancelled by the first SIGINT or SIGTERM
// (a kubelet sends SIGTERM to stop a pod). Before it cancels, it gives the
// signals their default action back, so a second one ends the process at
// once, and says so; it cancels last, so that whatever waits on the context
// sees the line first, even a main that returns at once.
func signalContext() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	signalled, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	context.AfterFunc(signalled, func() {
		stop() // gives the signals their default action back
		klog.Background().Info("Shutting down; a second signal ends it at once")
		cancel()
	})
	return ctx
}

// run loads the configuration the way kubectl does, checks that the server
// answers and lets it list and watch pods, then runs the controller until
// ctx is cancelled. With --simulate it runs the simulation instead: it
// reads no kubeconfig, and watches every namespace, whatever --namespace says.
func run(ctx context.Context, o options) error {
	if o.simulate {
		return simulate(ctx, o) // the same controller, on a fake clientset
	}
	// The configuration is found as kubectl finds it, from one source;
	// --context then picks one of that configuration's contexts.
	//   - --kubeconfig, if given, is the only file read; it must exist.
	//   - Otherwise a non-empty $KUBECONFIG replaces ~/.kube/config: its files
	//     (joined by ":") are merged, missing ones skipped, and
	//     ~/.kube/config is not read even if all of them are missing.
	//   - With no configuration from those, the deferred loader falls back to
	//     the service account of the pod it runs in.
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.kubeconfig
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
		&clientcmd.ConfigOverrides{CurrentContext: o.context})
	config, err := loader.ClientConfig()
	// For an empty configuration, client-go's own text suggests setting
	// KUBERNETES_MASTER. clientcmd reads it only through
	// clientcmd.ClusterDefaults, which kubectl passes on and these overrides
	// leave out: this program ignores it, so its messages do not suggest it.
	if raw, _ := loader.RawConfig(); clientcmd.IsEmptyConfig(err) && len(raw.Contexts) > 0 {
		return errors.New("the kubeconfig has contexts but no current context: " +
			"pass --context, or pick one with kubectl config use-context")
	} else if clientcmd.IsEmptyConfig(err) {
		return errors.New("no Kubernetes configuration found: pass --kubeconfig, " +
			"set KUBECONFIG, create ~/.kube/config, or run inside a cluster")
	} else if err != nil {
		return fmt.Errorf("%w; check the kubeconfig with kubectl config view "+
			"and kubectl config get-contexts", err)
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}

	// Fail fast: an informer would retry a failing list or watch for ever,
	// in the background. One LIST and one WATCH, with a deadline, show
	// whether the server is there and lets us in. (A signal is no error,
	// and no reason to start.)
	checkCtx, cancel := context.WithTimeout(ctx, o.startupTimeout)
	defer cancel()
	pods := client.CoreV1().Pods(o.namespace)
	var w watch.Interface
	if _, err = pods.List(checkCtx, metav1.ListOptions{Limit: 1}); err == nil {
		w, err = pods.Watch(checkCtx, metav1.ListOptions{})
	}
	if ctx.Err() != nil {
		// A signal during the check: stop here, with no start line after the
		// shutdown line.
		return nil
	} else if err != nil {
		return fmt.Errorf("%s: %w; %s", config.Host, err, advice(err, o.startupTimeout))
	}
	// The WATCH was only a check. Stop closes its stream and ends the
	// goroutine that reads it (cancelling checkCtx would close the stream
	// alone: TestStartupWatchIsClosed).
	w.Stop()
	return runController(ctx, client, config.Host, o.namespace, o.syncTimeout, newHandler())
}

// advice says what to do about an error from the first requests. The error
// itself, in client-go's or the API server's words, says what is wrong: a
// 403 names the verb and the resource that are missing, a failing credential
// plugin its command, an unreachable server its address, an untrusted
// certificate that it is one (x509: …).
func advice(err error, timeout time.Duration) string {
	switch {
	case apierrors.IsForbidden(err):
		// "at the cluster scope", for an identity that may read pods in one
		// namespace only (a Role there): --namespace with that namespace.
		return "grant list and watch on pods as demo-controller.yaml does, or pass --namespace"
	case apierrors.IsUnauthorized(err):
		return "log in again, or renew the token or client certificate in your kubeconfig"
	// client-go's words when a credential plugin (the command the kubeconfig
	// runs to get a token) is missing or fails:
	case strings.Contains(err.Error(), "getting credentials"):
		return "install the kubeconfig's credential plugin, or log in with it"
	case apierrors.ReasonForError(err) != metav1.StatusReasonUnknown:
		return "the API server refused the request"
	}
	// Refused, timed out, no such host, a certificate not trusted: no
	// connection that could carry the request, and the error says why.
	return fmt.Sprintf("no working connection to the API server within --startup-timeout=%v: "+
		"check the cluster is up, and your kubeconfig's server and certificate authority", timeout)
}

// runController joins a pod informer to a Controller and runs it. The
// informer comes from a factory, whose list and watch calls are built from
// the typed client: they work on real servers and on fake clientsets alike.
func runController(ctx context.Context, client kubernetes.Interface, host, namespace string,
	syncTimeout time.Duration, handler Handler) error {
	klog.FromContext(ctx).Info("Starting demo-controller", "server", host,
		"namespace", cmp.Or(namespace, "(all)"), "version", version)
	// Resync 0: no periodic replays of the cache.
	//   - A resync hands the handlers every pod in the cache again,
	//     unchanged. sync skips each one, except a pod whose Created or
	//     Updated was dropped after maxRetries: it calls that again.
	//   - With 0, only the pod's next change, or a relist, brings a dropped
	//     call back (maxRetries). No resync or relist brings back a dropped
	//     Deleted (that pod is no longer in the cache); only a pod of that
	//     name created again does.
	//   - With 0, client-go hands a relist's unchanged pods to these
	//     handlers too. With a period, it hands them only to handlers whose
	//     resync was due when it last checked.
	//   - Here a dropped call is a log line missed, and a resync every few
	//     hours would cost a sync of every pod for a rare case. A controller
	//     that writes what must come true wants one (controller-runtime's
	//     default is about ten hours).
	// keep (handler.go) trims each pod before the cache stores it.
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithNamespace(namespace), informers.WithTransform(keep))
	controller := NewController(ctx, factory.Core().V1().Pods(), handler)
	// The informer runs until its context ends, and factory.Shutdown waits
	// for that: cancel first, or a Run that gives up on the sync would
	// leave the process waiting for ever. (Defers run last first.)
	ctx, cancel := context.WithCancel(ctx)
	defer factory.Shutdown()
	defer cancel()
	factory.StartWithContext(ctx) // the informer logs with ctx's logger
	return controller.Run(ctx, syncTimeout)
}
