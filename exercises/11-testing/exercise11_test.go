//go:build exercise

// The check of exercise 11 (exercises/11-testing/README.md): it decides
// whether your tests would catch real mistakes. Copy it into the project's
// root beside restarts.go and your restarts_test.go, and run
//
//	go test -tags exercise -run TestExercise11 -v .
//
// It runs your tests (the Test functions of restarts_test.go), with the race
// detector and client-go's mutation detector, on:
//
//   - today's code, where they must pass, twice in a row;
//   - a correct alarm made slower (each report comes a second later, in the
//     same order), where they must pass too;
//   - each mutant below: a copy of the code with one mistake in it, where
//     at least one of them must fail.
//
// It says which mutants survived, and what a test needs to catch each.
// The mutants are at the end of this file: try without reading them first.

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// exercise11Budget is how long one run of your tests may take on today's
// code. A wait returns as soon as what it waits for has happened; a sleep
// always costs its whole time, on every run of every mutant.
const exercise11Budget = 20 * time.Second

// exercise11Only, if set, picks the variants to run by name:
// go test -tags exercise -run TestExercise11 -v . -args -exercise11.only=Forget
var exercise11Only = flag.String("exercise11.only", "", "run only the variants (the slow one, the mutants) whose names match this regular expression")

// exercise11Project, if set, makes the check run the project's own unit
// tests (make test's: no exercise tag) instead of yours, on today's code and
// on the mutants of the core (all but restarts.go's). A maintainer's check:
// the project's own suite must kill every mutant of the core the exercise
// keeps.
var exercise11Project = flag.Bool("exercise11.project", false, "run the project's own unit tests on the mutants of the core, instead of restarts_test.go's")

// TestExercise11 runs the mutant check on restarts_test.go.
func TestExercise11(t *testing.T) {
	var run []string // go test's flags that pick the tests
	mutants := exercise11Mutants
	if *exercise11Project {
		t.Logf("the project's own unit tests (make test's)")
		mutants = slices.DeleteFunc(slices.Clone(mutants), func(v exercise11Variant) bool { return v.edits[0].file == "restarts.go" })
	} else {
		tests := exercise11LearnerTests(t)
		run = []string{"-tags", "exercise", "-run", "^(" + strings.Join(tests, "|") + ")$"}
		t.Logf("your tests: %s", strings.Join(tests, ", "))
	}

	// Today's code, twice: the tests must pass, and not by luck.
	today := exercise11Run(t, exercise11Variant{name: "today's code"}, run, 2)
	switch {
	case today.err != nil:
		t.Fatalf("your tests do not run on today's code: %v\n%s", today.err, today.tail())
	case len(today.failed) > 0 || today.how != "":
		why := ""
		if today.how == "the race detector" && strings.Contains(today.output, "demo-controller.keep(") {
			why = " The race is in keep: a test writes to the fake clientset before the informer's watch is open (the task says why, under what the fake clientset does not do)."
		}
		t.Fatalf("your tests fail on today's code, which is correct (%s): a test that fails on correct code decides nothing.%s\n%s", today.killedBy(), why, today.tail())
	case today.elapsed/2 > exercise11Budget && !*exercise11Project:
		t.Fatalf("your tests took %v per run on today's code; keep them under %v: they run once per mutant. Does one sleep a fixed time? "+
			"Wait for what you check, with a deadline: the wait returns as soon as it has happened", (today.elapsed / 2).Round(100*time.Millisecond), exercise11Budget)
	}
	t.Logf("today's code: your tests pass, twice (%v per run)", (today.elapsed / 2).Round(100*time.Millisecond))
	if today.elapsed/2 > exercise11Budget/4 && !*exercise11Project {
		t.Logf("note: tests that wait for each event take a second or two a run; yours take %v. Does one sleep a fixed time? "+
			"Then it passes only while the code is at most as slow as you guessed.", (today.elapsed / 2).Round(100*time.Millisecond))
	}

	// The slow variant and the mutants, two at a time.
	variants := mutants
	if !*exercise11Project {
		variants = append([]exercise11Variant{exercise11Slow}, mutants...)
	}
	if *exercise11Only != "" {
		only := regexp.MustCompile(*exercise11Only)
		variants = slices.DeleteFunc(variants, func(v exercise11Variant) bool { return !only.MatchString(v.name) })
	}
	// Two runs at a time, in order; each result is said as it comes (with
	// -v), and the verdict at the end.
	survived, broken := make([]string, len(variants)), make([]string, len(variants))
	next := make(chan int, len(variants))
	for i := range variants {
		next <- i
	}
	close(next)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for i := range next {
				exercise11Report(t, variants[i], exercise11Run(t, variants[i], run, 1), &survived[i], &broken[i])
			}
		})
	}
	wg.Wait()
	tried := len(variants)
	if slices.ContainsFunc(variants, func(v exercise11Variant) bool { return v.name == exercise11Slow.name }) {
		tried--
	}
	survived = slices.DeleteFunc(survived, func(s string) bool { return s == "" })
	broken = slices.DeleteFunc(broken, func(s string) bool { return s == "" })
	if len(broken) > 0 {
		t.Errorf("the check itself is out of date (its mutants no longer fit the code; a maintainer's job, not yours):\n  %s", strings.Join(broken, "\n  "))
	}
	if len(survived) > 0 {
		t.Errorf("%d of %d mutants survived your tests: with each of these mistakes in the code, every test of yours still passes.\n  %s",
			len(survived), tried, strings.Join(survived, "\n  "))
	}
}

// exercise11Report says what one variant's run showed, as it comes, and
// notes a survivor or a mutant that no longer fits the code.
func exercise11Report(t *testing.T, v exercise11Variant, r exercise11Result, survived, broken *string) {
	killed := len(r.failed) > 0 || r.how != ""
	switch {
	case r.err != nil:
		*broken = fmt.Sprintf("%s: %v", v.name, r.err)
	case v.name == exercise11Slow.name && killed:
		t.Errorf("your tests fail on a correct alarm that is slower: %s. They wait a fixed time (a sleep), "+
			"or read the log before the call that writes it has returned, or time something a call spans (each call of this alarm "+
			"that reports takes a second longer: time a retry from the failed call's return). Wait for the event itself, with a deadline.\n%s",
			r.killedBy(), r.tail())
	case v.name == exercise11Slow.name:
		t.Logf("%s: your tests pass", v.name)
	case !killed:
		*survived = fmt.Sprintf("%s (%s). %s", v.name, v.edits[0].file, v.hint)
		t.Logf("mutant %q (%s): SURVIVED", v.name, v.edits[0].file)
	default:
		t.Logf("mutant %q (%s): killed by %s", v.name, v.edits[0].file, r.killedBy())
	}
}

// exercise11LearnerTests returns the Test functions of restarts_test.go.
func exercise11LearnerTests(t *testing.T) []string {
	t.Helper()
	if _, err := os.Stat("restarts.go"); err != nil {
		t.Fatalf("no restarts.go in the project's root: copy exercises/11-testing/restarts.go there, unchanged")
	}
	if want, err := os.ReadFile("exercises/11-testing/restarts.go"); err == nil {
		if got, _ := os.ReadFile("restarts.go"); !bytes.Equal(got, want) {
			t.Fatalf("restarts.go differs from exercises/11-testing/restarts.go: copy it again, unchanged (the mutants change it, not you)")
		}
	}
	src, err := os.ReadFile("restarts_test.go")
	if err != nil {
		t.Fatalf("no restarts_test.go in the project's root: write your tests there, with the build tag exercise (exercises/11-testing/README.md)")
	}
	if !regexp.MustCompile(`(?m)^//go:build exercise$`).Match(src) {
		t.Fatalf("restarts_test.go has no line //go:build exercise at its top: without it, make test builds it without restarts.go, and fails")
	}
	f, err := parser.ParseFile(token.NewFileSet(), "restarts_test.go", src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatalf("restarts_test.go: %v", err)
	}
	var tests []string
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && strings.HasPrefix(fn.Name.Name, "Test") && fn.Name.Name != "TestExercise11" {
			tests = append(tests, fn.Name.Name)
		}
	}
	if len(tests) == 0 {
		t.Fatalf("restarts_test.go has no Test function: write your tests there (exercises/11-testing/README.md)")
	}
	return tests
}

// exercise11Result is what a run of the learner's tests on one variant said.
type exercise11Result struct {
	failed  []string // the tests that failed
	how     string   // what failed the run beyond a test's own check, if anything
	output  string
	elapsed time.Duration // of the tests, without the build
	err     error         // the variant could not be made, built or run
}

// killedBy says which tests failed, and how.
func (r exercise11Result) killedBy() string {
	s := strings.Join(r.failed, ", ")
	switch {
	case s == "":
		return r.how
	case r.how != "":
		return s + " (" + r.how + ")"
	}
	return s
}

// tail returns the output from the first failure on, or its last lines, at
// most 40 lines, less client-go's warning that the mutation detector is on.
func (r exercise11Result) tail() string {
	var lines []string
	for _, line := range strings.Split(r.output, "\n") {
		if !strings.Contains(line, "Mutation detector is enabled") {
			lines = append(lines, line)
		}
	}
	if i := slices.IndexFunc(lines, func(l string) bool {
		return strings.HasPrefix(l, "--- FAIL") || strings.HasPrefix(l, "panic:") || strings.HasPrefix(l, "WARNING: DATA RACE") || strings.HasPrefix(l, "CACHE ")
	}); i >= 0 {
		lines = lines[i:]
	}
	if len(lines) > 40 {
		lines = append(lines[:40], "...")
	}
	return "    " + strings.Join(lines, "\n    ")
}

// exercise11Run builds the package with the variant's edits (through go's
// -overlay, which leaves the files as they are) and runs the tests that run
// matches, count times.
func exercise11Run(t *testing.T, v exercise11Variant, run []string, count int) exercise11Result {
	dir := t.TempDir()
	overlay := map[string]string{}
	// The other exercises' tests stay out: they may need their solutions.
	others, _ := filepath.Glob("exercise[0-9]*_test.go")
	for _, f := range others {
		abs, _ := filepath.Abs(f)
		overlay[abs] = ""
	}
	edited := map[string]string{}
	for _, e := range v.edits {
		text, ok := edited[e.file]
		if !ok {
			b, err := os.ReadFile(e.file)
			if err != nil {
				return exercise11Result{err: err}
			}
			text = string(b)
		}
		if n := strings.Count(text, e.old); n != 1 {
			return exercise11Result{err: fmt.Errorf("it no longer applies: %s has its text %d times, want exactly once:\n%s", e.file, n, e.old)}
		}
		edited[e.file] = strings.Replace(text, e.old, e.new, 1)
	}
	for file, text := range edited {
		backing := filepath.Join(dir, file)
		if err := os.WriteFile(backing, []byte(text), 0o644); err != nil {
			return exercise11Result{err: err}
		}
		abs, _ := filepath.Abs(file)
		overlay[abs] = backing
	}
	config, _ := json.Marshal(map[string]any{"Replace": overlay})
	if err := os.WriteFile(filepath.Join(dir, "overlay.json"), config, 0o644); err != nil {
		return exercise11Result{err: err}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	timeout := "2m"
	if *exercise11Project {
		timeout = "8m" // the whole unit suite
	}
	args := []string{"test", "-race", "-overlay", filepath.Join(dir, "overlay.json"), "-count", fmt.Sprint(count), "-timeout", timeout}
	if len(v.edits) > 0 && v.name != exercise11Slow.name {
		args = append(args, "-failfast") // a mutant needs one failure; today's code and the slow variant show them all
	}
	args = append(args, run...)
	cmd := exec.CommandContext(ctx, "go", append(args, ".")...)
	cmd.Env = append(os.Environ(), "KUBE_CACHE_MUTATION_DETECTOR=true")
	out, err := cmd.CombinedOutput()
	r := exercise11Result{output: string(out)}
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		r.err = err
		return r
	}
	if m := regexp.MustCompile(`(?m)^(?:ok|FAIL)\s+\S+\s+([0-9.]+)s`).FindStringSubmatch(r.output); m != nil {
		if d, err := time.ParseDuration(m[1] + "s"); err == nil {
			r.elapsed = d
		}
	}
	if strings.Contains(r.output, "[build failed]") || strings.Contains(r.output, "[setup failed]") {
		r.err = fmt.Errorf("it does not build:\n%s", r.tail())
		return r
	}
	for _, m := range regexp.MustCompile(`(?m)^--- FAIL: (\S+)`).FindAllStringSubmatch(r.output, -1) {
		if !slices.Contains(r.failed, m[1]) {
			r.failed = append(r.failed, m[1])
		}
	}
	switch {
	case strings.Contains(r.output, "panic: test timed out"):
		r.how = "go test's timeout: a wait with no deadline"
	case strings.Contains(r.output, "WARNING: DATA RACE"):
		r.how = "the race detector"
	case strings.Contains(r.output, " ALTERED!"):
		r.how = "client-go's mutation detector"
	case strings.Contains(r.output, "\npanic: "):
		r.how = "a panic"
	case err != nil && len(r.failed) == 0:
		r.how = "go test failed: " + err.Error()
	}
	return r
}

// exercise11Edit is one change to a file: old must occur in it exactly
// once (an exact snippet, so that it still applies when the code around it
// moves), and becomes new.
type exercise11Edit struct{ file, old, new string }

// exercise11Variant is the code with some edits, applied in order.
type exercise11Variant struct {
	name  string
	hint  string // for a mutant: what a test needs to catch it
	edits []exercise11Edit
}

// exercise11Slowly are the edits that make the alarm slow: each call that
// reports waits a second first (a slow pager, a busy machine).
var exercise11Slowly = []exercise11Edit{
	{"restarts.go", "\t\"context\"\n", "\t\"context\"\n\t\"time\"\n"},
	{"restarts.go", "\tfor _, s := range due {\n\t\tif a.Notify != nil {",
		"\tif len(due) > 0 {\n\t\ttime.Sleep(time.Second)\n\t}\n\tfor _, s := range due {\n\t\tif a.Notify != nil {"},
}

// exercise11Slow is a correct alarm, slower. Tests must pass on it.
var exercise11Slow = exercise11Variant{
	name:  "slow but correct (each report comes a second later, in the same order)",
	edits: exercise11Slowly,
}

// exercise11Late is said of the mutants whose mistake is a line too many:
// the alarm in them is slow too, so that a test that reads the log before
// the call that logs has returned never sees that line by luck.
const exercise11Late = " (In this mutant, as in the slow variant, each report comes a second late: a test that looks without waiting for the call that logs never sees the extra line.)"

// exercise11Mutants are the mistakes your tests must catch: each is the code
// with one mistake in it, in the controller (what the alarm relies on), in
// keep, or in the alarm.
var exercise11Mutants = []exercise11Variant{
	{
		name: "a report on an unchanged resourceVersion",
		hint: "The controller calls Updated for a pod whose resourceVersion it has reported already, as a relist hands every pod over again. " +
			"The alarm logs nothing for it (nothing changed): only a test that records the calls sees it. Update a pod with the " +
			"resourceVersion it has, and check the calls once the controller has surely handled it (a later call, or synctest). " +
			"(In this mutant the extra call comes a second late: a test that looks without waiting never sees it.)",
		edits: []exercise11Edit{{"controller.go",
			"case pod.ResourceVersion != last.ResourceVersion:",
			"case pod.ResourceVersion != last.ResourceVersion, func() bool { time.Sleep(time.Second); return true }():"}},
	},
	{
		name: "a found pod reported as created",
		hint: "The controller does not note the pods of the informer's first list, so it says created for every pod: " +
			"a pod found at start with 3 restarts or more is reported. Start the controller with one, and look once its call has returned." + exercise11Late,
		edits: append([]exercise11Edit{{"controller.go",
			"c.found.Store(cache.MetaObjectToName(pod), pod.UID)",
			"_ = pod // (the first list's pods are not noted)"}}, exercise11Slowly...),
	},
	{
		name: "a new UID under an old name not reported as deleted",
		hint: "The controller takes a pod replaced by a new one of the same name (a new UID) for an update of the old one: no Deleted, " +
			"no Created, and the new pod, at the limit when first seen, is not reported. The fake clientset lets one update change a " +
			"pod's UID (an API server would not): that is what the informer shows after a relist.",
		edits: []exercise11Edit{{"controller.go",
			"if last != nil && (pod == nil || pod.UID != last.UID) {",
			"if last != nil && pod == nil {"}},
	},
	{
		name: "a missing Forget after a successful sync",
		hint: "The controller never forgets a key's failures: after a change whose call needed retries, the pod's next failing " +
			"change is retried later (the backoff goes on doubling) and fewer times. Make Notify fail twice at one change, then " +
			"twice at the next change of the same pod, and look at when the retries come: in a testing/synctest bubble, to the millisecond.",
		edits: []exercise11Edit{{"controller.go",
			"case err == nil:\n\t\tc.queue.Forget(key)",
			"case err == nil: // (no Forget)\n\t\t"}},
	},
	{
		name: "a failed call remembered as reported",
		hint: "When the handler fails, the controller still remembers the pod as reported: the retry finds nothing new, and the " +
			"report is lost. Make Notify fail once through the controller, and check that the line still comes, once.",
		edits: []exercise11Edit{{"controller.go",
			"if err == nil {\n\t\tc.found.Delete(key)",
			"if true {\n\t\tc.found.Delete(key)"}},
	},
	{
		name: "found decided by the name, not the UID",
		hint: "A pod of the first list replaced by a new pod of the same name before the worker reached it is still \"found\", " +
			"so the new pod's restarts are not reported. Hold the worker in its first call (a handler that waits on a channel), " +
			"replace the other pod, then let the worker go.",
		edits: []exercise11Edit{{"controller.go",
			"err = c.handler.Created(ctx, pod, uid == pod.UID)",
			"err = c.handler.Created(ctx, pod, uid != nil)"}},
	},
	{
		name: "keep drops the container statuses",
		hint: "The cache keeps no container statuses, so through the controller the alarm never sees a restart. Calling the alarm " +
			"with pods you built cannot show it: run it through runController, which trims each pod with keep, as run does.",
		edits: []exercise11Edit{{"handler.go",
			"ContainerStatuses: pod.Status.ContainerStatuses}",
			"}"}},
	},
	{
		name: "the rule off by one: reported at the 4th restart",
		hint: "The report comes one restart late. Check the line at the update that takes the count to 3, not only some time later.",
		edits: []exercise11Edit{{"restarts.go",
			"s.RestartCount >= restartLimit && before[s.Name] < restartLimit",
			"s.RestartCount > restartLimit && before[s.Name] <= restartLimit"}},
	},
	{
		name: "the rule off by one: reported at the 2nd restart",
		hint: "The report comes one restart early. Check that no line comes at 2 restarts." + exercise11Late,
		edits: append([]exercise11Edit{{"restarts.go",
			"const restartLimit = 3",
			"const restartLimit = 2"}}, exercise11Slowly...),
	},
	{
		name: "reported again at each update past the limit",
		hint: "The report comes again at every later update. Check, once the controller has handled a later change " +
			"(a 4th restart, a new phase), that there is still one line." + exercise11Late,
		edits: append([]exercise11Edit{{"restarts.go",
			"s.RestartCount >= restartLimit && before[s.Name] < restartLimit",
			"s.RestartCount >= restartLimit"}}, exercise11Slowly...),
	},
	{
		name: "found pods reported",
		hint: "The alarm reports a pod found at start for the restarts it had then. Call Created with found true, or start the controller " +
			"with such a pod and look once its call has returned." + exercise11Late,
		edits: append([]exercise11Edit{{"restarts.go",
			"return nil // restarts from before this run: not news",
			"_ = found // (found pods are reported as new ones)"}}, exercise11Slowly...),
	},
	{
		name: "a new pod at the limit not reported",
		hint: "The alarm ignores Created: a pod it sees for the first time with 3 restarts or more (created late, or a new pod " +
			"under an old name) is never reported.",
		edits: []exercise11Edit{{"restarts.go",
			"return a.report(ctx, nil, pod)",
			"return nil"}},
	},
	{
		name: "a handler that changes the cached pod",
		hint: "The alarm writes on the pod it is handed, which in a real run is the cache's own: every reader of the cache sees the " +
			"write. Compare the pods you hand it with copies taken before the call (pod.DeepCopy()), or leave client-go's " +
			"mutation detector time to look (it compares the cache with copies once a second while the informer runs).",
		edits: []exercise11Edit{{"restarts.go",
			"\t\tklog.FromContext(ctx).Info(\"Container restarting often\", \"container\", s.Name, \"restartCount\", s.RestartCount)\n",
			"\t\tklog.FromContext(ctx).Info(\"Container restarting often\", \"container\", s.Name, \"restartCount\", s.RestartCount)\n" +
				"\t\tif pod.Annotations == nil {\n\t\t\tpod.Annotations = map[string]string{}\n\t\t}\n" +
				"\t\tpod.Annotations[\"restart-alarm.example/reported\"] = s.Name\n"}},
	},
	{
		name: "Notify's error ignored",
		hint: "The alarm logs Notify's error and reports anyway: the controller never retries, and the pager never hears. " +
			"Make Notify fail, and check that the call returns the error and logs no line.",
		edits: []exercise11Edit{{"restarts.go",
			"\t\t\tif err := a.Notify(ctx, pod, s.Name, s.RestartCount); err != nil {\n\t\t\t\treturn err\n",
			"\t\t\tif err := a.Notify(ctx, pod, s.Name, s.RestartCount); err != nil {\n\t\t\t\tklog.FromContext(ctx).Error(err, \"Notify failed\")\n"}},
	},
	{
		name: "each container notified and logged in turn",
		hint: "The alarm logs a container's line as soon as its Notify succeeds: when a later container's Notify fails, the retry " +
			"logs the earlier line again. Make two containers reach the limit in one update, with Notify failing for the second, once.",
		edits: []exercise11Edit{
			{"restarts.go",
				"\tfor _, s := range due {\n\t\tklog.FromContext(ctx)",
				"\tfor _, s := range due[:0] {\n\t\tklog.FromContext(ctx)"},
			{"restarts.go",
				"\t\t\t\treturn err\n\t\t\t}\n\t\t}\n",
				"\t\t\t\treturn err\n\t\t\t}\n\t\t}\n" +
					"\t\tklog.FromContext(ctx).Info(\"Container restarting often\", \"container\", s.Name, \"restartCount\", s.RestartCount)\n"},
		},
	},
	{
		name: "one report per call",
		hint: "The alarm stops at the first container it reports: two containers that reach the limit in the same update get one line. " +
			"Make two reach it at once.",
		edits: []exercise11Edit{{"restarts.go",
			"due = append(due, s)",
			"due = append(due, s)\n\t\t\tbreak"}},
	},
}
