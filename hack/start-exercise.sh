#!/usr/bin/env bash
# Brings your working tree to where an exercise starts:
#   hack/start-exercise.sh 08-own
# Most exercises start from the code as it is: for them it does nothing. An
# exercise that builds on another names it in its folder's file builds-on
# (exercise 8 builds on 7: the Greeting); this applies that exercise's
# solution.patch, and first whatever that one builds on, in order. It checks
# that every patch applies before it applies any, so it either changes
# nothing or does the whole step. Run it once, on the code as it is
# (git stash your own changes first, or commit them on a branch).
# With -n it only prints the exercises whose solutions it would apply.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dry=false
if [[ ${1:-} == -n ]]; then dry=true; shift; fi
name=${1:-}
name=${name%/} name=${name#exercises/}
if [[ -z $name || ! -d $root/exercises/$name ]]; then
  echo "usage: hack/start-exercise.sh [-n] NN-name (ls exercises/ lists them)" >&2
  exit 2
fi
# The chain, oldest first: what name builds on, what that builds on, ...
chain=()
at=$name
while [[ -f $root/exercises/$at/builds-on ]]; do
  at=$(tr -d '[:space:]' <"$root/exercises/$at/builds-on")
  chain=("$at" ${chain[@]+"${chain[@]}"})
done
if $dry; then
  if ((${#chain[@]})); then printf '%s\n' "${chain[@]}"; fi
  exit 0
fi
if ((${#chain[@]} == 0)); then
  echo "exercise $name starts from the code as it is: nothing to apply"
  exit 0
fi
# Each patch applies on top of the ones before it: check them in a scratch copy.
cd "$root"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/tree"
git ls-files -z --cached --others --exclude-standard |
  while IFS= read -r -d '' f; do if [[ -e $f ]]; then printf '%s\0' "$f"; fi; done |
  xargs -0 cp --parents -t "$tmp/tree"
for at in "${chain[@]}"; do
  if ! (cd "$tmp/tree" && GIT_CEILING_DIRECTORIES=$tmp git apply "$root/exercises/$at/solution.patch") 2>"$tmp/err"; then
    echo "hack/start-exercise.sh: exercise $at's solution.patch does not apply to your tree (changes of yours in the same lines?); nothing was changed:" >&2
    sed 's/^/    /' "$tmp/err" >&2
    exit 1
  fi
done
for at in "${chain[@]}"; do
  git apply "$root/exercises/$at/solution.patch"
  echo "applied exercise $at's solution.patch"
done
echo "exercise $name starts here; its task: exercises/$name/README.md"
