// Command crpods is the scale benchmark's controller-runtime peer: the
// smallest reconciler that watches every pod and logs each one it
// reconciles, with the manager's defaults (one worker, a cache of whole
// pods). The metrics and health servers are off, as nothing scrapes them.
package main

import (
	"context"
	"flag"
	"os"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func main() {
	flag.Parse() // --kubeconfig, registered by controller-runtime
	ctrl.SetLogger(klog.NewKlogr())
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Metrics: metricsserver.Options{BindAddress: "0"},
	})
	if err != nil {
		klog.ErrorS(err, "Creating the manager")
		os.Exit(1)
	}
	err = ctrl.NewControllerManagedBy(mgr).For(&corev1.Pod{}).Complete(
		reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			var pod corev1.Pod
			if err := mgr.GetClient().Get(ctx, req.NamespacedName, &pod); err != nil {
				return reconcile.Result{}, client.IgnoreNotFound(err)
			}
			log.FromContext(ctx).Info("Pod reconciled", "pod", req.Namespace+"/"+req.Name, "phase", pod.Status.Phase)
			return reconcile.Result{}, nil
		}))
	if err != nil {
		klog.ErrorS(err, "Creating the controller")
		os.Exit(1)
	}
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		klog.ErrorS(err, "Running the manager")
		os.Exit(1)
	}
}
