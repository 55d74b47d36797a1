#!/usr/bin/env bash
# Checks the exercises (exercises/*/, or the ones named as arguments, such as
# 01-image). For each, in a copy of the project as it is now:
#   0. if it builds on another exercise (exercises/NN-name/builds-on), that
#      one's solution.patch is applied first, as hack/start-exercise.sh does;
#   1. its test (exercises/NN-name/*_test.go, build tag "exercise", copied
#      into the root with the folder's other Go files) must fail on today's
#      code, as a test, not as a build;
#   2. its solution.patch must apply;
#   3. then its test and the whole unit suite must pass, as `make test` runs it;
#   4. and, if the exercise has an e2e/ folder (exercises that write to the API
#      server, hold a Lease or define a CRD), its tests (build tags "e2e
#      exercise", package e2e) must pass against the end-to-end suite's real
#      kube-apiserver and etcd, run on the binary built with the solution.
# Exercise 11's test is its mutant check (TestExercise11): it fails while no
# tests of the learner's exist (restarts_test.go), and its solution.patch
# adds the reference tests, which must then pass on today's code and kill
# every mutant the check keeps (step 3 runs it, with the unit suite).
# Prints one line per exercise; exits 1 if any fails.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export GIT_CEILING_DIRECTORIES=$tmp # git apply in a copy must not find a repository above it

# The project as it is now, as a clean clone has it once committed: tracked
# files and new ones git does not ignore. Not the exercises themselves (their
# READMEs stay: the README links to them), nor
# an exercise's files copied into the root while doing it (its test;
# exercise 11's restarts.go, and the learner's restarts_test.go).
mkdir -p "$tmp/project"
{ git ls-files -z --cached --others --exclude-standard -- ':!exercises/[0-9]*' ':!exercise[0-9]*_test.go' ':!restarts.go' ':!restarts_test.go'
  git ls-files -z --cached --others --exclude-standard -- 'exercises/[0-9]*/README.md'; } |
  while IFS= read -r -d '' f; do if [[ -e $f ]]; then printf '%s\0' "$f"; fi; done |
  xargs -0 cp --parents -t "$tmp/project"

if (($# > 0)); then
  dirs=("${@/#/exercises/}")
else
  dirs=(exercises/[0-9]*/)
fi

failed=0
for dir in "${dirs[@]}"; do
  dir=${dir%/}
  name=$(basename "$dir")
  work=$tmp/$name log=$tmp/$name.log
  started=$SECONDS
  # fail prints why the exercise fails, then what go test said from the
  # first failed test on, or else its last lines (less client-go's warning
  # that the mutation detector is on).
  fail() {
    echo "exercise $name: FAIL: $1"
    if grep -q -- '^panic: test timed out' "$log" 2>/dev/null; then
      # a hang: which tests were running, and where the tests' own code waits
      sed -n '/^panic: test timed out/,/^$/p' "$log" | head -n 20 | sed 's/^/    /'
      grep -B1 -- '_test\.go:[0-9]' "$log" | head -n 60 | sed 's/^/    /'
    elif grep -q -- '^--- FAIL: ' "$log" 2>/dev/null; then
      grep -v 'Mutation detector is enabled' "$log" | sed -n '/^--- FAIL: /,$p' | head -n 80 | sed 's/^/    /'
    elif [[ -s $log ]]; then
      grep -v 'Mutation detector is enabled' "$log" | tail -n 40 | sed 's/^/    /'
    fi
    failed=1
  }
  tests=$(sed -n 's/^func \(Test[A-Za-z0-9_]*\)(t \*testing\.T).*/\1/p' "$dir"/*_test.go 2>/dev/null | paste -sd'|' || true)
  if [[ -z $tests || ! -f $dir/solution.patch ]]; then
    fail "$dir needs a *_test.go with a Test function and a solution.patch"
    continue
  fi
  cp -a "$tmp/project" "$work"
  # An exercise that builds on another starts from that one's solution (and
  # what it builds on), as hack/start-exercise.sh brings a learner there.
  start_failed=""
  for at in $(hack/start-exercise.sh -n "$name"); do
    if ! git -C "$work" apply "$root/exercises/$at/solution.patch" >"$log" 2>&1; then
      start_failed=$at
      break
    fi
  done
  if [[ -n $start_failed ]]; then
    fail "it builds on exercise $start_failed, whose solution.patch does not apply"
    continue
  fi
  cp "$dir"/*.go "$work/"

  if (cd "$work" && go test -race -count=1 -tags exercise -run "^($tests)\$" .) >"$log" 2>&1; then
    fail "its test passes on today's code, before solution.patch: it decides nothing"
    continue
  elif ! grep -q -- '^--- FAIL: ' "$log"; then
    fail "its test does not run on today's code (it must compile without the solution)"
    continue
  fi

  if ! git -C "$work" apply "$root/$dir/solution.patch" >"$log" 2>&1; then
    echo "exercise $name: solution.patch no longer applies"
    sed 's/^/    /' "$log"
    failed=1
    continue
  fi

  if ! (cd "$work" && KUBE_CACHE_MUTATION_DETECTOR=true go test -race -count=1 -timeout 20m -tags exercise ./...) >"$log" 2>&1; then
    if grep -Eq -- "^--- FAIL: ($tests) " "$log"; then
      fail "its test fails with solution.patch applied"
    else
      fail "the unit suite fails with solution.patch applied"
    fi
    continue
  fi
  e2e=""
  if [[ -d $dir/e2e ]]; then
    # The learner's command, run on this copy (TREE) instead of a copy of theirs.
    if ! TREE=$work hack/exercise-e2e.sh "$name" >"$log" 2>&1; then
      fail "its end-to-end test fails with solution.patch applied (against a real kube-apiserver)"
      continue
    fi
    e2e="; its end-to-end test passes against a real API server"
  fi
  echo "exercise $name: pass (its test fails before solution.patch and passes after; the unit suite passes$e2e) [$((SECONDS - started))s]"
  rm -rf "$work"
done
exit "$failed"
