//go:build tools

// Package tools records the commands the end-to-end suite builds (etcd, kube-apiserver,
// kube-controller-manager for its garbage collector, and kubectl), so that
// go.mod and go.sum pin them. Build them with hack/build-servers.sh (make e2e does).
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
