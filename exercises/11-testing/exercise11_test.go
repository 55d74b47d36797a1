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
//   - a correct alarm made slower (the worker starts 15 s after the cache
//     has synced, and each report the alarm makes for the controller comes
//     15 s later, in the same order), where they must pass too: a
//     test that fails there runs again alone, and fails the check only if
//     it fails again;
//   - each mutant below: a copy of the code with one mistake in it, where
//     at least one of them must fail, and fail again when run alone.
//
// It says which mutants survived, and what a test needs to catch each, and
// what the mistakes it made show your tests catch.
// The mutants are at the end of this file: try without reading them first.

package main

import (
	"bytes"
	"cmp"
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

// exercise11Delay is how late the slow variant's worker starts, and each
// report the controller asks for comes, and how late a mutant's line (or
// call) too many comes; exercise11Budget is how long one run of your tests
// may take on today's code: the same, on purpose. A test through the
// controller that sleeps a fixed time, then looks, must sleep longer than
// the delay to pass on the slow variant (for a call or line that must come)
// or to catch such a mutant (for one that must not), and then takes longer
// than the budget on every run. A wait with a deadline returns as soon as
// what it waits for has happened: it pays the delay on those variants only.
const (
	exercise11Delay  = 15 * time.Second
	exercise11Budget = exercise11Delay
)

// exercise11Only, if set, picks the variants to run by name:
// go test -tags exercise -run TestExercise11 -v . -args -exercise11.only=Forget
var exercise11Only = flag.String("exercise11.only", "", "run only the variants (the slow one, the mutants) whose names match this regular expression")

// exercise11Project, if set, makes the check run the project's own unit
// tests (make test's: no exercise tag) instead of yours, on today's code and
// on the mutants of the core (all but restarts.go's). A maintainer's check:
// the project's own suite must kill every mutant of the core the exercise
// keeps.
var exercise11Project = flag.Bool("exercise11.project", false, "run the project's own unit tests on the mutants of the core, instead of restarts_test.go's")

// exercise11Alone is held for reading by each build and run of a variant (two
// at a time), and alone by the run that confirms a failure: a kill, or a
// failure on the slow variant, counts only if the test that made it fails
// again with nothing else running.
var exercise11Alone sync.RWMutex

// TestExercise11 runs the mutant check on restarts_test.go.
func TestExercise11(t *testing.T) {
	c := exercise11Check{t: t, tags: "exercise"}
	mutants := exercise11Mutants
	if *exercise11Project {
		t.Logf("the project's own unit tests (make test's)")
		c.tags = ""
		mutants = slices.DeleteFunc(slices.Clone(mutants), func(v exercise11Variant) bool { return v.edits[0].file == "restarts.go" })
	} else {
		tests := exercise11LearnerTests(t)
		c.run = "^(" + strings.Join(tests, "|") + ")$"
		t.Logf("your tests: %s", strings.Join(tests, ", "))
	}

	// Today's code, twice: the tests must pass, and not by luck. The faster
	// run is the one held to the budget: a busy machine slows one run, a
	// sleep slows both.
	dir := t.TempDir()
	bin, today := c.build(exercise11Variant{name: "today's code"}, dir)
	if today.err == nil {
		first := c.exec(bin, false)
		if today = first; !first.killed() && first.err == nil {
			today = c.exec(bin, false)
			today.elapsed = min(today.elapsed, first.elapsed)
		}
	}
	os.RemoveAll(dir)
	perRun := today.elapsed.Round(100 * time.Millisecond)
	switch {
	case today.err != nil:
		t.Fatalf("your tests do not run on today's code: %v\n%s", today.err, today.tail())
	case today.killed():
		why := ""
		if today.how == "the race detector" && strings.Contains(today.output, "demo-controller.keep(") {
			why = " The race is in keep: a test writes to the fake clientset before the informer's watch is open (the task says why, under what the fake clientset does not do)."
		}
		t.Fatalf("your tests fail on today's code, which is correct (%s): a test that fails on correct code decides nothing.%s\n%s", today.killedBy(), why, today.tail())
	case today.elapsed > exercise11Budget && !*exercise11Project:
		t.Fatalf("your tests took %v per run on today's code; keep them under %v: they run once per mutant. Does one sleep a fixed time? "+
			"To pass on the slow variant, where each report through the controller comes %v late, a test that sleeps instead of waiting "+
			"must sleep longer than that, on every run. Wait for what you check, with a deadline: the wait returns as soon as it has happened",
			perRun, exercise11Budget, exercise11Delay)
	}
	t.Logf("today's code: your tests pass, twice (%v per run)", perRun)

	// The slow variant and the mutants, two at a time.
	variants := mutants
	if !*exercise11Project {
		variants = append([]exercise11Variant{exercise11Slow}, mutants...)
	}
	if *exercise11Only != "" {
		only := regexp.MustCompile(*exercise11Only)
		variants = slices.DeleteFunc(variants, func(v exercise11Variant) bool { return !only.MatchString(v.name) })
	}
	// Two at a time, in order; each result is said as it comes (with -v),
	// and the verdict at the end.
	verdicts := make([]exercise11Verdict, len(variants))
	next := make(chan int, len(variants))
	for i := range variants {
		next <- i
	}
	close(next)
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for i := range next {
				verdicts[i] = c.try(variants[i])
			}
		})
	}
	wg.Wait()

	var survived, broken, covered []string
	tried := 0
	for i, v := range variants {
		switch w := verdicts[i]; {
		case v.name == exercise11Slow.name:
			continue
		case w.broken != "":
			broken = append(broken, w.broken)
		case w.survived != "":
			survived = append(survived, w.survived)
		default:
			covered = append(covered, v.covers)
		}
		tried++
	}
	if len(broken) > 0 {
		t.Errorf("the check itself is out of date (its mutants no longer fit the code; a maintainer's job, not yours):\n  %s", strings.Join(broken, "\n  "))
	}
	if len(survived) > 0 {
		t.Errorf("%d of %d mutants survived your tests: with each of these mistakes in the code, every test of yours still passes.\n  %s",
			len(survived), tried, strings.Join(survived, "\n  "))
	}
	// The verdict names what the tests are proven to catch: these mistakes,
	// each made once, and nothing more.
	if len(covered) > 0 {
		t.Logf("your tests are proven to catch %d of the %d mistakes the check makes, each a test of yours failed on twice (the second time alone): a test fails when\n  %s\n"+
			"That is all the check proves: a mistake it does not make, your tests may let through.", len(covered), tried, strings.Join(covered, "\n  "))
	}
}

// exercise11Check runs the tests (the learner's, or with -exercise11.project
// the project's own) on variants of the code.
type exercise11Check struct {
	t       *testing.T
	tags    string // the build tags
	run     string // -test.run's pattern: the tests to run ("": all)
	timeout string // -test.timeout of a run, if not 2m
}

// exercise11Verdict is what became of one variant: for a mutant, it survived
// (why, and what a test needs to catch it), or it no longer fits the code
// (broken), or else it was killed.
type exercise11Verdict struct{ survived, broken string }

// try runs the tests on one variant, confirms a kill, and says what it
// showed, as it comes.
func (c exercise11Check) try(v exercise11Variant) (w exercise11Verdict) {
	t, slow := c.t, v.name == exercise11Slow.name
	if v.late {
		c.timeout = "5m"
	}
	dir := t.TempDir()
	defer os.RemoveAll(dir) // a test binary built with -race is large: one at a time on disk per run
	exercise11Alone.RLock()
	bin, r := c.build(v, dir)
	if r.err == nil {
		r = c.exec(bin, !slow)
	}
	exercise11Alone.RUnlock()
	unrepeated := ""
	switch {
	case r.killed() && slow:
		var first string
		if r, first = c.confirmSlow(bin, r); first != "" {
			unrepeated = fmt.Sprintf(" (%s failed on it once, then passed when run again alone: a failure that does not repeat is not counted)", first)
		}
	case r.killed():
		var flaky []string
		if r, flaky = c.confirm(bin, r); len(flaky) > 0 {
			unrepeated = fmt.Sprintf(" (%s failed on it once, then passed when run again alone: a kill that does not repeat is not counted)",
				strings.Join(flaky, ", "))
		}
	}
	switch {
	case r.err != nil && r.output != "":
		w.broken = fmt.Sprintf("%s: %v\n%s", v.name, r.err, r.tail())
	case r.err != nil:
		w.broken = fmt.Sprintf("%s: %v", v.name, r.err)
	case slow && r.killed():
		t.Errorf("your tests fail on a correct alarm that is slower: %s, again when run alone. They wait a fixed time (a sleep), or less than %v "+
			"(a deadline that short), or read the log before the call that writes it has returned, or time something a call spans "+
			"(each call of this alarm that reports for the controller takes %v longer: time a retry from the failed call's return), "+
			"or look for the controller's first calls too soon, or write before they have come (here the worker starts %v after "+
			"the cache has synced, as on a busy machine: a change written before then comes in the first call, not in an Updated). "+
			"Wait for the event itself, with a longer deadline: a wait returns as soon as its event has happened.\n%s",
			r.killedBy(), exercise11Delay, exercise11Delay, exercise11Delay, r.tail())
	case slow:
		t.Logf("%s: your tests pass%s", v.name, unrepeated)
	case !r.killed():
		w.survived = fmt.Sprintf("%s (%s). %s%s", v.name, v.edits[0].file, v.hint, unrepeated)
		t.Logf("mutant %q (%s): SURVIVED%s", v.name, v.edits[0].file, unrepeated)
	default:
		t.Logf("mutant %q (%s): killed by %s, again alone%s", v.name, v.edits[0].file, r.killedBy(), unrepeated)
	}
	return w
}

// confirm runs the tests that killed a mutant again, with nothing else
// running: a kill counts only if it repeats. A test that failed under the
// load of the check's other run and passes alone has proven nothing: then
// the tests that did not run (a mutant's run stops at its first failure)
// run alone, and one that fails there must fail again. It returns the
// result that decides, and the tests whose failure did not repeat.
func (c exercise11Check) confirm(bin string, r exercise11Result) (exercise11Result, []string) {
	exercise11Alone.Lock()
	defer exercise11Alone.Unlock()
	var flaky []string
	for {
		if len(r.failed) == 0 { // killed with no test named (a panic, a timeout): the same tests again
			return c.exec(bin, true, exercise11Skip(flaky)...), flaky
		}
		if again := c.exec(bin, true, "-test.run", "^("+strings.Join(r.failed, "|")+")$"); again.killed() || again.err != nil {
			return again, flaky
		}
		flaky = append(flaky, r.failed...)
		if r = c.exec(bin, true, exercise11Skip(flaky)...); !r.killed() || r.err != nil {
			return r, flaky
		}
	}
}

// confirmSlow runs the tests that failed on the slow variant again, with
// nothing else running, as confirm does for a kill: a test that failed
// under the load of the check's other run (two builds, two runs) and passes
// alone has shown nothing wrong with the tests. The first run was not
// failfast, so the tests that passed in it need no second run; these run
// all (not failfast), so that a failure names each test that fails again.
// It returns the result that decides, and what failed the first run if it
// did not fail again ("" if it did).
func (c exercise11Check) confirmSlow(bin string, r exercise11Result) (exercise11Result, string) {
	exercise11Alone.Lock()
	defer exercise11Alone.Unlock()
	var args []string
	if len(r.failed) > 0 { // else a panic or a timeout with no test named: all of them again
		args = []string{"-test.run", "^(" + strings.Join(r.failed, "|") + ")$"}
	}
	again := c.exec(bin, false, args...)
	if again.killed() || again.err != nil {
		return again, ""
	}
	return again, r.killedBy()
}

// exercise11Skip returns the flag that skips the tests named.
func exercise11Skip(tests []string) []string {
	if len(tests) == 0 {
		return nil
	}
	return []string{"-test.skip", "^(" + strings.Join(tests, "|") + ")$"}
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

// killed says whether the run failed: a test failed, or the run did.
func (r exercise11Result) killed() bool { return len(r.failed) > 0 || r.how != "" }

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

// build builds the test binary of the variant in dir, with the variant's
// edits (through go's -overlay, which leaves the files as they are). It is
// built once, and run as many times as the check needs.
func (c exercise11Check) build(v exercise11Variant, dir string) (string, exercise11Result) {
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
				return "", exercise11Result{err: err}
			}
			text = string(b)
		}
		if n := strings.Count(text, e.old); n != 1 {
			return "", exercise11Result{err: fmt.Errorf("it no longer applies: %s has its text %d times, want exactly once:\n%s", e.file, n, e.old)}
		}
		edited[e.file] = strings.Replace(text, e.old, e.new, 1)
	}
	for file, text := range edited {
		backing := filepath.Join(dir, file)
		if err := os.WriteFile(backing, []byte(text), 0o644); err != nil {
			return "", exercise11Result{err: err}
		}
		abs, _ := filepath.Abs(file)
		overlay[abs] = backing
	}
	config, _ := json.Marshal(map[string]any{"Replace": overlay})
	if err := os.WriteFile(filepath.Join(dir, "overlay.json"), config, 0o644); err != nil {
		return "", exercise11Result{err: err}
	}
	bin := filepath.Join(dir, "variant.test")
	args := []string{"test", "-c", "-race", "-overlay", filepath.Join(dir, "overlay.json"), "-o", bin}
	if c.tags != "" {
		args = append(args, "-tags", c.tags)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "go", append(args, ".")...).CombinedOutput(); err != nil {
		r := exercise11Result{output: string(out)}
		r.err = fmt.Errorf("it does not build (go test -c: %v)", err)
		return "", r
	}
	return bin, exercise11Result{}
}

// exec runs the tests in the binary bin, once, with the mutation detector on:
// all of c's, stopping at the first failure if failfast, or those that args
// (-test.run, -test.skip) pick.
func (c exercise11Check) exec(bin string, failfast bool, args ...string) exercise11Result {
	timeout := cmp.Or(c.timeout, "2m")
	if *exercise11Project {
		timeout = "8m" // the whole unit suite
	}
	flags := []string{"-test.count=1", "-test.timeout=" + timeout}
	if failfast {
		flags = append(flags, "-test.failfast") // a mutant needs one failure; today's code and the slow variant show them all
	}
	if c.run != "" && !slices.Contains(args, "-test.run") {
		flags = append(flags, "-test.run", c.run)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append(flags, args...)...)
	cmd.Env = append(os.Environ(), "KUBE_CACHE_MUTATION_DETECTOR=true")
	start := time.Now()
	out, err := cmd.CombinedOutput()
	r := exercise11Result{output: string(out), elapsed: time.Since(start)}
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		r.err = err
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
		r.how = "the test binary failed: " + err.Error()
	}
	return r
}

// exercise11Edit is one change to a file: old must occur in it exactly
// once (an exact snippet, so that it still applies when the code around it
// moves), and becomes new.
type exercise11Edit struct{ file, old, new string }

// exercise11Variant is the code with some edits, applied in order.
type exercise11Variant struct {
	name   string
	hint   string // for a mutant: what a test needs to catch it
	covers string // for a mutant: what tests that kill it catch, finishing "a test fails when"
	edits  []exercise11Edit
	// late: its edits make the controller exercise11Delay late, at each report
	// or at its start, so that a correct suite's run may take minutes (each
	// test through the controller in real time pays the delay): a run of it
	// may take 5m, not 2m, before go test's timeout calls it a hang.
	late bool
}

// exercise11Slowly returns the edits that make the alarm slow when the
// controller calls it (a slow pager, a busy machine): each call from the
// worker that reports waits d first. A direct call of a test is not slowed:
// it returns once it has logged, however slow it is.
func exercise11Slowly(d time.Duration) []exercise11Edit {
	return []exercise11Edit{
		{"restarts.go", "\t\"context\"\n", "\t\"context\"\n\t\"time\"\n"},
		{"restarts.go", "\tfor _, s := range due {\n\t\tif a.Notify != nil {",
			fmt.Sprintf("\tif len(due) > 0 && ctx.Value(exercise11Worker{}) != nil {\n\t\ttime.Sleep(%d * time.Millisecond)\n\t}\n", d.Milliseconds()) +
				"\tfor _, s := range due {\n\t\tif a.Notify != nil {"},
		{"restarts.go", "// Deleted reports nothing",
			"// exercise11Worker marks the context of the worker's calls (the check's).\ntype exercise11Worker struct{}\n\n// Deleted reports nothing"},
		{"controller.go", "\tctx = klog.NewContext(ctx, logger)\n",
			"\tctx = klog.NewContext(ctx, logger)\n\tctx = context.WithValue(ctx, exercise11Worker{}, true)\n"},
	}
}

// exercise11Slow is a correct alarm, slower, in a controller whose worker
// starts late (as on a busy machine): tests must pass on it. The late start
// is what a test that sleeps before the first calls instead of waiting for
// them, or writes before they have come, fails on; the late reports, what
// one that sleeps before reading a line fails on.
var exercise11Slow = exercise11Variant{
	name: fmt.Sprintf("slow but correct (its worker starts %v after the cache has synced, and each report it makes for the controller comes %v later, in the same order)",
		exercise11Delay, exercise11Delay),
	late: true,
	edits: append(exercise11Slowly(exercise11Delay), exercise11Edit{"controller.go",
		"\tklog.FromContext(ctx).Info(\"Cache synced; starting the worker\")\n",
		fmt.Sprintf("\tselect { // (the check's slow variant: the worker starts late)\n\tcase <-time.After(%d * time.Millisecond):\n\tcase <-ctx.Done():\n\t}\n", exercise11Delay.Milliseconds()) +
			"\tklog.FromContext(ctx).Info(\"Cache synced; starting the worker\")\n"}),
}

// exercise11Late is said of the mutants whose mistake is a line too many:
// the alarm in them is as slow as in the slow variant when the controller
// calls it, so that a test that reads the log before the call that logs has
// returned never sees that line by luck, nor one that sleeps instead of
// waiting for the call, unless it sleeps longer than the budget.
var exercise11Late = fmt.Sprintf(" (In this mutant each report the alarm makes for the controller comes %v late: a test that looks "+
	"without waiting for the call that logs never sees the extra line, nor one that sleeps a fixed time first, unless it sleeps "+
	"longer than that, and so takes longer than the check allows.)", exercise11Delay)

// exercise11Lately are the edits that make a mutant's alarm late.
var exercise11Lately = exercise11Slowly(exercise11Delay)

// exercise11Mutants are the mistakes your tests must catch: each is the code
// with one mistake in it, in the controller (what the alarm relies on), in
// keep, or in the alarm.
var exercise11Mutants = []exercise11Variant{
	{
		name:   "a report on an unchanged resourceVersion",
		covers: "the controller calls the handler for a resourceVersion it has reported already (a relist's copy)",
		hint: "The controller calls Updated for a pod whose resourceVersion it has reported already, as a relist hands every pod over again. " +
			"The alarm logs nothing for it (nothing changed): only a test that records the calls sees it. Update a pod with the " +
			"resourceVersion it has, and check the calls once the controller has surely handled it (a later call, or synctest). " +
			fmt.Sprintf("(In this mutant the extra call comes %v late: a test that looks without waiting never sees it, nor one "+
				"that sleeps a fixed time first, in real time, unless it sleeps longer than that, and so takes longer than the check "+
				"allows; in a synctest bubble, move the clock on further.)", exercise11Delay),
		edits: []exercise11Edit{{"controller.go",
			"case pod.ResourceVersion != last.ResourceVersion:",
			fmt.Sprintf("case pod.ResourceVersion != last.ResourceVersion, func() bool { time.Sleep(%d * time.Millisecond); return true }():", exercise11Delay.Milliseconds())}},
		late: true,
	},
	{
		name:   "a found pod reported as created",
		covers: "the controller says created for a pod of the informer's first list",
		hint: "The controller does not note the pods of the informer's first list, so it says created for every pod: " +
			"a pod found at start with 3 restarts or more is reported. Start the controller with one, and look once its call has returned." + exercise11Late,
		edits: append([]exercise11Edit{{"controller.go",
			"c.found.Store(cache.MetaObjectToName(pod), pod.UID)",
			"_ = pod // (the first list's pods are not noted)"}}, exercise11Lately...),
		late: true,
	},
	{
		name:   "a new UID under an old name not reported as deleted",
		covers: "the controller takes a new pod under an old name (a new UID) for an update of the old one",
		hint: "The controller takes a pod replaced by a new one of the same name (a new UID) for an update of the old one: no Deleted, " +
			"no Created, and the new pod, at the limit when first seen, is not reported. The fake clientset lets one update change a " +
			"pod's UID (an API server would not): that is what the informer shows after a relist.",
		edits: []exercise11Edit{{"controller.go",
			"if last != nil && (pod == nil || pod.UID != last.UID) {",
			"if last != nil && pod == nil {"}},
	},
	{
		name:   "a missing Forget after a successful sync",
		covers: "the controller keeps a key's failures after a success, and retries the pod's next change later and fewer times",
		hint: "The controller never forgets a key's failures: after a change whose call needed retries, the pod's next failing " +
			"change is retried later (the backoff goes on doubling) and fewer times. Make Notify fail twice at one change, then " +
			"twice at the next change of the same pod, and look at when the retries come: in a testing/synctest bubble, to the millisecond.",
		edits: []exercise11Edit{{"controller.go",
			"case err == nil:\n\t\tc.queue.Forget(key)",
			"case err == nil: // (no Forget)\n\t\t"}},
	},
	{
		name:   "a failed call remembered as reported",
		covers: "the controller remembers a pod whose call failed as reported, so that its retry finds nothing new",
		hint: "When the handler fails, the controller still remembers the pod as reported: the retry finds nothing new, and the " +
			"report is lost. Make Notify fail once through the controller, and check that the line still comes, once.",
		edits: []exercise11Edit{{"controller.go",
			"if err == nil {\n\t\tc.found.Delete(key)",
			"if true {\n\t\tc.found.Delete(key)"}},
	},
	{
		name:   "found decided by the name, not the UID",
		covers: "the controller says found for a new pod that took the name of a pod of the first list",
		hint: "A pod of the first list replaced by a new pod of the same name before the worker reached it is still \"found\", " +
			"so the new pod's restarts are not reported. Hold the worker in its first call (a handler that waits on a channel), " +
			"replace the other pod, then let the worker go.",
		edits: []exercise11Edit{{"controller.go",
			"err = c.handler.Created(ctx, pod, uid == pod.UID)",
			"err = c.handler.Created(ctx, pod, uid != nil)"}},
	},
	{
		name:   "no Forget when the worker gives up",
		covers: "the controller keeps a key's failures after giving up on it, so that the pod's next failing change is given up at once",
		hint: "When the controller gives up on a change (after maxRetries retries), it keeps the key's failures: the pod's next " +
			"change whose call fails, even once, is given up at once, with no retry, and its report is lost. Let a Notify that " +
			"always fails make the controller give up on a pod, then make Notify fail once at the same pod's next change: the " +
			"call must come again, 5 ms later, and the line with it.",
		edits: []exercise11Edit{{"controller.go",
			"default: // the first call and maxRetries retries have failed\n\t\tc.queue.Forget(key)\n",
			"default: // the first call and maxRetries retries have failed (no Forget)\n"}},
	},
	{
		name:   "the retries' backoff capped at 10 ms",
		covers: "the retries' backoff stops doubling (5, 10, 10, 10, 10 ms, not 5, 10, 20, 40, 80)",
		hint: "The retries come 5, 10, 10, 10 and 10 ms after each failure, not 5, 10, 20, 40 and 80: the backoff stops " +
			"doubling. Let Notify always fail, and time each retry from the failed call's return to the next call's start: " +
			"in a testing/synctest bubble, to the millisecond.",
		edits: []exercise11Edit{{"controller.go",
			"workqueue.DefaultTypedControllerRateLimiter[cache.ObjectName]()",
			"workqueue.NewTypedItemExponentialFailureRateLimiter[cache.ObjectName](5*time.Millisecond, 10*time.Millisecond)"}},
	},
	{
		name:   "a retry with the pod of the failed call",
		covers: "a retry hands the handler the pod of the failed call, not the pod as it is then",
		hint: "The controller keeps the pod of a failed call and hands it over again at the retry: a change that came " +
			"meanwhile is not in it, and is seen only at a later call. Make Notify fail once; before the retry (in a " +
			"testing/synctest bubble: synctest.Wait once the call has failed) change the pod again; the next call must be an " +
			"Updated from the pod last reported to the pod as it is now, and the line must carry its count.",
		edits: []exercise11Edit{
			{"controller.go",
				"\treported map[cache.ObjectName]*corev1.Pod\n}",
				"\treported map[cache.ObjectName]*corev1.Pod\n\tfailed   map[cache.ObjectName]*corev1.Pod // (the pod of each failed call)\n}"},
			{"controller.go",
				"reported: map[cache.ObjectName]*corev1.Pod{}}\n",
				"reported: map[cache.ObjectName]*corev1.Pod{}, failed: map[cache.ObjectName]*corev1.Pod{}}\n"},
			{"controller.go",
				"pod, err := c.pods.Pods(key.Namespace).Get(key.Name)\n",
				"pod, err := c.pods.Pods(key.Namespace).Get(key.Name)\n\tif p := c.failed[key]; p != nil {\n\t\tpod, err = p, nil // (a retry: the pod of the failed call)\n\t}\n"},
			{"controller.go",
				"\tif err == nil {\n\t\tc.found.Delete(key)",
				"\tdelete(c.failed, key)\n\tif err != nil {\n\t\tc.failed[key] = pod // (kept for the retry)\n\t}\n\tif err == nil {\n\t\tc.found.Delete(key)"},
		},
	},
	{
		name:   "keep drops the container statuses",
		covers: "keep drops the container statuses the alarm reads",
		hint: "The cache keeps no container statuses, so through the controller the alarm never sees a restart. Calling the alarm " +
			"with pods you built cannot show it: run it through runController, which trims each pod with keep, as run does.",
		edits: []exercise11Edit{{"handler.go",
			"ContainerStatuses: pod.Status.ContainerStatuses}",
			"}"}},
	},
	{
		name:   "the rule off by one: reported at the 4th restart",
		covers: "the alarm reports at the 4th restart, not the 3rd",
		hint:   "The report comes one restart late. Check the line at the update that takes the count to 3, not only some time later.",
		edits: []exercise11Edit{{"restarts.go",
			"s.RestartCount >= restartLimit && before[s.Name] < restartLimit",
			"s.RestartCount > restartLimit && before[s.Name] <= restartLimit"}},
	},
	{
		name:   "the rule off by one: reported at the 2nd restart",
		covers: "the alarm reports at the 2nd restart",
		hint:   "The report comes one restart early. Check that no line comes at 2 restarts." + exercise11Late,
		edits: append([]exercise11Edit{{"restarts.go",
			"const restartLimit = 3",
			"const restartLimit = 2"}}, exercise11Lately...),
		late: true,
	},
	{
		name:   "reported again at each update past the limit",
		covers: "the alarm reports a container again at a later update",
		hint: "The report comes again at every later update. Check, once the controller has handled a later change " +
			"(a 4th restart, a new phase), that there is still one line." + exercise11Late,
		edits: append([]exercise11Edit{{"restarts.go",
			"s.RestartCount >= restartLimit && before[s.Name] < restartLimit",
			"s.RestartCount >= restartLimit"}}, exercise11Lately...),
		late: true,
	},
	{
		name:   "found pods reported",
		covers: "the alarm logs a pod found at start for the restarts it had then",
		hint: "The alarm reports a pod found at start for the restarts it had then. Call Created with found true, or start the controller " +
			"with such a pod and look once its call has returned." + exercise11Late,
		edits: append([]exercise11Edit{{"restarts.go",
			"return nil // restarts from before this run: not news",
			"_ = found // (found pods are reported as new ones)"}}, exercise11Lately...),
		late: true,
	},
	{
		name:   "a new pod at the limit not reported",
		covers: "the alarm does not report a new pod at the limit when first seen (created, or a new UID)",
		hint: "The alarm ignores Created: a pod it sees for the first time with 3 restarts or more (created late, or a new pod " +
			"under an old name) is never reported.",
		edits: []exercise11Edit{{"restarts.go",
			"return a.report(ctx, nil, pod)",
			"return nil"}},
	},
	{
		name:   "a handler that changes the cached pod",
		covers: "the alarm writes on the pod it is handed (the cache's own)",
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
		name:   "Notify's error ignored",
		covers: "the alarm goes on when Notify fails, and returns no error",
		hint: "The alarm logs Notify's error and reports anyway: the controller never retries, and the pager never hears. " +
			"Make Notify fail, and check that the call returns the error and logs no line.",
		edits: []exercise11Edit{{"restarts.go",
			"\t\t\tif err := a.Notify(ctx, pod, s.Name, s.RestartCount); err != nil {\n\t\t\t\treturn err\n",
			"\t\t\tif err := a.Notify(ctx, pod, s.Name, s.RestartCount); err != nil {\n\t\t\t\tklog.FromContext(ctx).Error(err, \"Notify failed\")\n"}},
	},
	{
		name:   "each container notified and logged in turn",
		covers: "the alarm logs a container's line before every report of the call has gone to Notify",
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
		name:   "one report per call",
		covers: "the alarm reports one container per call when two reach the limit at once",
		hint: "The alarm stops at the first container it reports: two containers that reach the limit in the same update get one line. " +
			"Make two reach it at once.",
		edits: []exercise11Edit{{"restarts.go",
			"due = append(due, s)",
			"due = append(due, s)\n\t\t\tbreak"}},
	},
	{
		name:   "Notify told the limit, not the container's count",
		covers: "Notify is told the limit, 3, not the container's restartCount",
		hint: "Notify is told restartLimit, 3, not the container's restartCount: a container that went from 2 to 5 restarts " +
			"in one update is sent as 3 (its line says 5). Record what Notify is told, with a count over 3.",
		edits: []exercise11Edit{{"restarts.go",
			"a.Notify(ctx, pod, s.Name, s.RestartCount)",
			"a.Notify(ctx, pod, s.Name, restartLimit)"}},
	},
	{
		name:   "Notify handed the old pod",
		covers: "Notify is handed the old pod (nil for a created pod), not the pod of the call",
		hint: "Notify is handed old, the pod as it was before the update (nil for a created pod), not the pod of the call. " +
			"Record which pod Notify is handed (its resourceVersion, or nil), at an update and at a Created.",
		edits: []exercise11Edit{{"restarts.go",
			"a.Notify(ctx, pod, s.Name, s.RestartCount)",
			"a.Notify(ctx, old, s.Name, s.RestartCount)"}},
	},
	{
		name:   "found pods' restarts sent to Notify",
		covers: "a pod found at start is not logged for the restarts it had then, but they still go to Notify",
		hint: "A pod found at start is not logged for the restarts it had then, but they still go to Notify: the pager hears " +
			"of restarts that the run before this one reported. Call Created with found true and a Notify that records.",
		edits: []exercise11Edit{{"restarts.go",
			"if found {\n\t\treturn nil // restarts from before this run: not news\n\t}\n",
			"if found { // (restarts from before this run: not news to the log; Notify still hears)\n\t\tctx = klog.NewContext(ctx, klog.FromContext(ctx).V(4))\n\t}\n"}},
	},
}
