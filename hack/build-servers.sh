#!/usr/bin/env bash
# Builds the servers the end-to-end suite runs (etcd, kube-apiserver, and
# kube-controller-manager for its garbage collector) and a
# matching kubectl from the Go module proxy, into .cache/servers. Their
# versions are pinned in hack/tools/go.mod; they are rebuilt only when that
# file, its go.sum or this script changes. A cold build takes 19 to 32 minutes
# on two cores; with a warm Go build cache, a minute or two.
set -euo pipefail
cd "$(dirname "$0")/tools"
out=../../.cache/servers
stamp=$(cat go.mod go.sum ../build-servers.sh | sha256sum | cut -c1-16)  # the versions and this script
if [ -f "$out/stamp" ] && [ "$(cat "$out/stamp")" = "$stamp" ]; then
  exit 0
fi
rm -rf "$out" && mkdir -p "$out"

kube=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)  # e.g. v1.36.4
minor=$(echo "$kube" | cut -d. -f2)
# Clients read the server's version; a module build has none, so stamp it.
stampflags="-X k8s.io/component-base/version.gitVersion=$kube -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/client-go/pkg/version.gitVersion=$kube"
echo "building etcd $(go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3), kube-apiserver, kube-controller-manager and kubectl $kube into .cache/servers"
# One go build for all four, so that their packages compile and link in
# parallel; etcd ignores the Kubernetes version stamps.
# No DWARF: the binaries are stripped anyway, and skipping it compiles faster.
go build -trimpath -gcflags=all=-dwarf=false -ldflags "-s -w $stampflags" -o "$out/" \
  go.etcd.io/etcd/server/v3 k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kubectl
mv "$out/server" "$out/etcd"  # go names the binary of go.etcd.io/etcd/server/v3 "server"
echo "$stamp" > "$out/stamp"
