// Command bench-controller-runtime is the benchmark's copy controller as a controller-runtime
// controller: every source ConfigMap of one namespace (label bench.kubewasm.dev/role=source)
// gets a child `<source>-copy` with the same data, controlled by the source and written by
// server-side apply with force and field owner bench-controller-runtime.
//
// It exits 0 once SIGTERM or SIGINT stops it and the running reconciles finish. It opens no
// listener and logs only errors to stderr. With -cache KIND it runs no controller, only an
// informer of that kind (see cache.go).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// fieldOwner is the field manager of every apply.
const fieldOwner = "bench-controller-runtime"

// copier reconciles one source: it applies the source's child.
type copier struct {
	client.Client
}

func (c *copier) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var source corev1.ConfigMap
	if err := c.Get(ctx, req.NamespacedName, &source); err != nil {
		// Gone: the garbage collector removes its child.
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if source.DeletionTimestamp != nil {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, c.Apply(ctx, child(&source), client.FieldOwner(fieldOwner), client.ForceOwnership)
}

func main() {
	// controller-runtime registers its own -kubeconfig on flag.CommandLine; these flags are
	// parsed apart from it.
	flags := flag.NewFlagSet(os.Args[0], flag.ExitOnError)
	kubeconfig := flags.String("kubeconfig", "", "the kubeconfig to connect with (required)")
	namespace := flags.String("namespace", "", "the namespace whose sources are reconciled (required)")
	concurrency := flags.Int("concurrency", 4, "how many sources may be reconciled at the same time")
	resyncSeconds := flags.Int("resync-seconds", 0, "reconcile every source again after this many seconds (with controller-runtime's 10% jitter); 0 = only on changes")
	cacheKind := flags.String("cache", "", "run no controller, only an informer of this kind (configmaps or pods) in the namespace, and print `cached N` whenever the number of cached objects changes")
	strip := flags.Bool("strip-managed-fields", false, "with -cache: drop managedFields before caching (controller-runtime's TransformStripManagedFields)")
	_ = flags.Parse(os.Args[1:])
	if *kubeconfig == "" || *namespace == "" || *concurrency < 1 || *resyncSeconds < 0 {
		flags.Usage()
		os.Exit(2)
	}
	if *cacheKind != "" {
		if err := runCache(*kubeconfig, *namespace, *cacheKind, *strip); err != nil {
			fmt.Fprintf(os.Stderr, "bench-controller-runtime: %v\n", err)
			os.Exit(1)
		}
		return
	}
	if err := run(*kubeconfig, *namespace, *concurrency, time.Duration(*resyncSeconds)*time.Second); err != nil {
		fmt.Fprintf(os.Stderr, "bench-controller-runtime: %v\n", err)
		os.Exit(1)
	}
}

// connect logs only errors and returns the client configuration of kubeconfig, without a
// client-side rate limit as in kube-rs and kubewasm (the API server's priority and fairness is
// the only limit), and a scheme of the core kinds.
func connect(kubeconfig string) (*rest.Config, *runtime.Scheme, error) {
	ctrl.SetLogger(zap.New(zap.Level(zapcore.ErrorLevel)))
	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, nil, err
	}
	config.QPS = -1
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		return nil, nil, err
	}
	return config, scheme, nil
}

func run(kubeconfig, namespace string, concurrency int, resync time.Duration) error {
	config, scheme, err := connect(kubeconfig)
	if err != nil {
		return err
	}
	// One informer serves both the sources (For) and the children (Owns): it holds only the
	// ConfigMaps of the namespace that carry either role.
	roles, err := labels.NewRequirement(roleLabel, selection.In, []string{sourceRole, copyRole})
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(config, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache: cache.Options{
			DefaultNamespaces: map[string]cache.Config{namespace: {}},
			ByObject: map[client.Object]cache.ByObject{
				&corev1.ConfigMap{}: {Label: labels.NewSelector().Add(*roles)},
			},
			// Zero turns the informers' resync off.
			SyncPeriod: &resync,
		},
	})
	if err != nil {
		return err
	}
	isSource := predicate.NewPredicateFuncs(func(object client.Object) bool {
		return object.GetLabels()[roleLabel] == sourceRole
	})
	err = ctrl.NewControllerManagedBy(mgr).
		Named("copy").
		For(&corev1.ConfigMap{}, builder.WithPredicates(isSource)).
		Owns(&corev1.ConfigMap{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrency}).
		Complete(&copier{mgr.GetClient()})
	if err != nil {
		return err
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}
