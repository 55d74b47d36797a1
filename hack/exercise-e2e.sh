#!/usr/bin/env bash
# Runs an exercise's end-to-end tests (exercises/NN-name/e2e/) against a real
# kube-apiserver and etcd (and kube-controller-manager, for the tests that
# need its garbage collector), on your code as it is in your working tree:
#   hack/exercise-e2e.sh 07-crd        (or: make exercise-e2e EX=07-crd)
# It builds the servers on first use (hack/build-servers.sh, into
# .cache/servers: 19 to 32 minutes on two cores, once), then copies your working
# tree (tracked files and new ones git does not ignore, committed or not) to
# a temporary folder, adds the exercise's e2e tests to its e2e/, builds the
# binary there and runs them. Nothing in your tree is changed.
# With TREE=dir, it runs in that folder instead of a copy (hack/check-exercises.sh
# does this, on its copy with the solution applied).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
name=${1:-}
name=${name%/} name=${name#exercises/}
if [[ -z $name ]]; then
  echo "usage: hack/exercise-e2e.sh NN-name (one of: $(cd "$root/exercises" && ls -d [0-9]*/e2e | cut -d/ -f1 | paste -sd' '))" >&2
  exit 2
fi
dir=$root/exercises/$name
if [[ ! -d $dir ]]; then
  echo "hack/exercise-e2e.sh: no exercise $name under exercises/ (ls exercises/ lists them)" >&2
  exit 2
elif ! compgen -G "$dir/e2e/*_test.go" >/dev/null; then
  echo "hack/exercise-e2e.sh: exercise $name has no end-to-end test; its unit test is all: see its README" >&2
  exit 2
fi
tests=$(sed -n 's/^func \(Test[A-Za-z0-9_]*\)(t \*testing\.T).*/\1/p' "$dir"/e2e/*_test.go | paste -sd'|')

"$root/hack/build-servers.sh"
tree=${TREE:-}
if [[ -z $tree ]]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  tree=$tmp/project
  mkdir -p "$tree"
  (cd "$root" && git ls-files -z --cached --others --exclude-standard) |
    while IFS= read -r -d '' f; do if [[ -e $root/$f ]]; then printf '%s\0' "$f"; fi; done |
    (cd "$root" && xargs -0 cp --parents -t "$tree")
fi
mkdir -p "$tree/.cache"
[[ -e $tree/.cache/servers ]] || ln -s "$root/.cache/servers" "$tree/.cache/servers"
cp "$dir"/e2e/*_test.go "$tree/e2e/"
cd "$tree"
make -s build VERSION=exercise
CGO_ENABLED=0 go test -trimpath -gcflags=all=-dwarf=false -tags 'e2e exercise' -count=1 -timeout 12m -v -run "^($tests)\$" ./e2e/
