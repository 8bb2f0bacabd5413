package main

import (
	corev1 "k8s.io/api/core/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
)

// The labels of the copy workload; the same values as the Rust crate bench-copy-logic.
const (
	roleLabel   = "bench.kubewasm.dev/role"
	sourceRole  = "source"
	copyRole    = "copy"
	sourceLabel = "bench.kubewasm.dev/source"
)

// childName is the name of the child of the source named source.
func childName(source string) string {
	return source + "-copy"
}

// child is the apply configuration of source's child: the ConfigMap `<source>-copy` in the same
// namespace, labelled as a copy of source, controlled by source, with source's data (none when
// source has none, so an apply removes keys the source dropped).
func child(source *corev1.ConfigMap) *corev1ac.ConfigMapApplyConfiguration {
	owner := metav1ac.OwnerReference().
		WithAPIVersion("v1").
		WithKind("ConfigMap").
		WithName(source.Name).
		WithUID(source.UID).
		WithController(true).
		WithBlockOwnerDeletion(true)
	cm := corev1ac.ConfigMap(childName(source.Name), source.Namespace).
		WithLabels(map[string]string{roleLabel: copyRole, sourceLabel: source.Name}).
		WithOwnerReferences(owner)
	if len(source.Data) > 0 {
		cm.WithData(source.Data)
	}
	return cm
}
