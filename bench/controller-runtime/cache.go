package main

import (
	"fmt"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// runCache keeps a controller-runtime informer of kind ("configmaps" or "pods") in namespace,
// as a manager's cache builds it, and prints `cached N` on standard output whenever the number
// of cached objects changes (checked every 200 ms), until SIGTERM or SIGINT.
func runCache(kubeconfig, namespace, kind string, strip bool) error {
	var object client.Object
	switch kind {
	case "configmaps":
		object = &corev1.ConfigMap{}
	case "pods":
		object = &corev1.Pod{}
	default:
		return fmt.Errorf("-cache %q: want configmaps or pods", kind)
	}
	config, scheme, err := connect(kubeconfig)
	if err != nil {
		return err
	}
	options := cache.Options{
		Scheme:            scheme,
		DefaultNamespaces: map[string]cache.Config{namespace: {}},
	}
	if strip {
		options.DefaultTransform = cache.TransformStripManagedFields()
	}
	objects, err := cache.New(config, options)
	if err != nil {
		return err
	}
	ctx := ctrl.SetupSignalHandler()
	informer, err := objects.GetInformer(ctx, object)
	if err != nil {
		return err
	}
	var count atomic.Int64
	_, err = informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { count.Add(1) },
		DeleteFunc: func(any) { count.Add(-1) },
	})
	if err != nil {
		return err
	}
	failed := make(chan error, 1)
	go func() { failed <- objects.Start(ctx) }()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	printed := int64(-1)
	for {
		select {
		case err := <-failed:
			return err
		case <-tick.C:
			if n := count.Load(); informer.HasSynced() && n != printed {
				printed = n
				fmt.Printf("cached %d\n", n)
			}
		}
	}
}
