package fakeapi

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

const (
	childEnv     = "FAKEAPI_CHILD"
	childRunning = "fakeapi child: running "
	childStep    = "fakeapi step: "
)

// Step says, in a child process of Child, what the test does next: if
// demo-controller then crashes, the parent names the step.
func Step(step string) {
	if os.Getenv(childEnv) != "" {
		fmt.Fprintf(os.Stderr, "%s%s\n", childStep, step)
	}
}

// Child runs the test that calls it again, in a child process (the test
// binary itself, as TestSignalContext in main_test.go does), with env
// added, and fails as the child did. A panic in one of demo-controller's
// goroutines ends the process it runs in: here, the child's, which the
// parent then explains. explain is handed each line of the child's output,
// the lines from it on, and the step the test was at; it returns the
// test's failure for a line that explains it ("" for any other). Child
// returns false in the child, which goes on with the test.
func Child(t *testing.T, explain func(line string, rest []string, step string) string, env ...string) bool {
	t.Helper()
	if os.Getenv(childEnv) == t.Name() {
		fmt.Fprintln(os.Stderr, childRunning+t.Name())
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1")
	cmd.Env = append(append(os.Environ(), childEnv+"="+t.Name()), env...)
	out, err := cmd.CombinedOutput()
	if !bytes.Contains(out, []byte(childRunning+t.Name()+"\n")) {
		t.Fatalf("the child process that runs %s did not run it (%v):\n%s", t.Name(), err, out)
	}
	if err == nil {
		return true
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	step, kept := "starting", []string(nil)
	for i, line := range lines {
		if s, ok := strings.CutPrefix(line, childStep); ok {
			step = s
			continue
		}
		if why := explain(line, lines[i:], step); why != "" {
			t.Fatal(why)
		}
		switch {
		case KlogHeader.MatchString(line), strings.HasPrefix(line, childRunning), strings.HasPrefix(line, "--- FAIL: "+t.Name()+" ("),
			line == "FAIL", strings.HasPrefix(line, "exit status "), strings.Contains(line, "Mutation detector is enabled"):
		default:
			kept = append(kept, strings.TrimPrefix(line, "    "))
		}
	}
	if ctx.Err() != nil {
		kept = append(kept, fmt.Sprintf("(the test did not finish within 2 minutes: it was stopped while %s)", step))
	}
	t.Fatalf("at this step: %s\n%s", step, strings.Join(LastLines(kept, 60), "\n"))
	return true
}

// Where returns the first n places in the project's own Go files (test
// files apart) in a crash's stack: "file.go:line (function)".
func Where(stack []string, n int) []string {
	dir, _ := os.Getwd()
	var where []string
	for i, line := range stack {
		line = strings.TrimSpace(line)
		if i == 0 || !strings.HasPrefix(line, dir+"/") || strings.Contains(line, "_test.go:") || len(where) == n {
			continue
		}
		fn := stack[i-1]
		if j := strings.LastIndex(fn, "("); j > 0 {
			fn = fn[:j]
		}
		where = append(where, strings.Fields(strings.TrimPrefix(line, dir+"/"))[0]+" ("+fn[strings.LastIndex(fn, "/")+1:]+")")
	}
	return where
}
