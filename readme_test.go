package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"k8s.io/klog/v2"
)

// The README's flags table lists exactly demo-controller's own flags (not
// klog's), with their real defaults and help texts.
func TestReadmeFlagsTable(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string][2]string{}
	for _, m := range regexp.MustCompile("(?m)^\\| `--([a-z-]+)` \\|\\s*`?([^|`]*?)`?\\s*\\| (.*) \\|$").FindAllStringSubmatch(string(readme), -1) {
		rows[m[1]] = [2]string{m[2], m[3]}
	}
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	var o options
	newFlagSet(&o).VisitAll(func(f *flag.Flag) {
		if klogFlags.Lookup(f.Name) != nil {
			return
		}
		row, ok := rows[f.Name]
		delete(rows, f.Name)
		if !ok {
			t.Errorf("README's flags table has no row for --%s", f.Name)
			return
		}
		def := f.DefValue
		if def == "false" || def == "" {
			def = ""
		}
		if row[0] != def || row[1] != f.Usage {
			t.Errorf("README row for --%s says default %q, %q; the flag says %q, %q", f.Name, row[0], row[1], def, f.Usage)
		}
	})
	for name := range rows {
		t.Errorf("README's flags table has --%s, which is not a flag", name)
	}
}

// docs are the documents whose names a test checks against the code: the
// README, for the learner, and docs/, for the maintainer.
var docs = []string{"README.md", "docs/performance.md", "docs/testing.md", "docs/troubleshooting.md"}

// Every Go identifier, file, flag and make target that a document names in
// backquotes exists, and every relative link leads to a file. Identifiers
// may be declared in the code or in its tests (the documents name the tests
// that prove a claim), the end-to-end ones and the tests' helpers included.
func TestReadmeAndDocsNamesExist(t *testing.T) {
	declared := declaredNames(t)
	makefile, err := os.ReadFile("Makefile")
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range docs {
		t.Run(doc, func(t *testing.T) {
			text, err := os.ReadFile(doc)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range regexp.MustCompile("`([^`\n]+)`").FindAllStringSubmatch(string(text), -1) {
				if problem := checkName(m[1], declared, makefile); problem != "" {
					t.Errorf("%s names %s", doc, problem)
				}
			}
			for _, m := range regexp.MustCompile(`\]\(([^)\s]+)\)`).FindAllStringSubmatch(string(text), -1) {
				target, _, _ := strings.Cut(m[1], "#")
				if target == "" || strings.Contains(target, "://") {
					continue
				}
				if _, err := os.Stat(filepath.Join(filepath.Dir(doc), target)); err != nil {
					t.Errorf("%s links to %s: %v", doc, m[1], err)
				}
			}
		})
	}
}

// Names the documents use in passing that are not declared here: the
// queue's methods, and the API server's word for a 401.
var namedInPassing = map[string]bool{"Get": true, "Done": true, "Forget": true, "AddRateLimited": true, "Unauthorized": true}

var (
	filePath   = regexp.MustCompile(`^[\w./-]+\.(go|yaml|mod|sh|md|txt|svg)$|^Dockerfile$|^\.ci/run$|^[\w.-]+(/[\w.-]+)*/$`)
	identifier = regexp.MustCompile(`^[a-zA-Z]\w*$`)
)

// checkName says what is wrong with one backquoted name, or "" if nothing
// is (or if it is none of the kinds checked: a command, a log line, a word).
func checkName(name string, declared map[string]bool, makefile []byte) string {
	switch {
	case filePath.MatchString(name): // a path from the repository's root
		if _, err := os.Stat(name); err != nil {
			return fmt.Sprintf("file %s: %v", name, err)
		}
	case strings.HasPrefix(name, "--") || strings.HasPrefix(name, "-v"):
		flagName, _, _ := strings.Cut(strings.TrimLeft(name, "-"), "=")
		if newFlagSet(&options{}).Lookup(flagName) == nil {
			return fmt.Sprintf("flag %s, which demo-controller does not have", name)
		}
	case strings.HasPrefix(name, "make "):
		for _, target := range strings.Fields(name)[1:] {
			if strings.Contains(target, "=") {
				break // the variables, such as N="1000 10000"
			}
			if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(target) + `:`).Match(makefile) {
				return fmt.Sprintf("make target %s, which the Makefile does not have", target)
			}
		}
	case identifier.MatchString(name) && strings.ToUpper(name) != name && strings.ToLower(name) != name:
		// a Go identifier (not a word, not an environment variable)
		if !declared[name] && !namedInPassing[name] {
			return fmt.Sprintf("%s, which the code does not declare", name)
		}
	}
	return ""
}

// declaredNames returns the names of every function, method, type,
// variable and constant declared in the package's files and the end-to-end
// suite's, tests included.
func declaredNames(t *testing.T) map[string]bool {
	t.Helper()
	declared := map[string]bool{}
	for _, f := range parseGoFiles(t) {
		ast.Inspect(f, func(n ast.Node) bool {
			switch d := n.(type) {
			case *ast.FuncDecl:
				declared[d.Name.Name] = true
			case *ast.TypeSpec:
				declared[d.Name.Name] = true
			case *ast.ValueSpec:
				for _, name := range d.Names {
					declared[name.Name] = true
				}
			}
			return true
		})
	}
	return declared
}

// Each message the troubleshooting table (docs/troubleshooting.md) quotes
// (its first column, cut at "…") is still in the code, or in a test that checks that
// the program prints it: a reworded message fails here until the table
// follows.
func TestReadmeTroubleshootingMessages(t *testing.T) {
	section, err := os.ReadFile("docs/troubleshooting.md")
	if err != nil {
		t.Fatal(err)
	}
	var literals []string
	for name, f := range parseGoFiles(t) {
		if name == "readme_test.go" {
			continue // this file's own strings prove nothing
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil {
					literals = append(literals, s)
				}
			}
			return true
		})
	}
	rows := regexp.MustCompile("(?m)^\\| (`.*?) \\| .* \\|$").FindAllStringSubmatch(string(section), -1)
	if len(rows) < 10 {
		t.Fatalf("found %d rows in docs/troubleshooting.md's table; is it still there?", len(rows))
	}
	for _, row := range rows {
		for _, quoted := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(row[1], -1) {
			for _, part := range strings.Split(quoted[1], "…") {
				if part = strings.TrimSpace(part); part != "" && !slices.ContainsFunc(literals, func(s string) bool { return strings.Contains(s, part) }) {
					t.Errorf("the troubleshooting table quotes %q, which no message in the code or its tests says", part)
				}
			}
		}
	}
}

// parseGoFiles parses the package's files, the end-to-end suite's and those
// of the helpers the tests share (internal/), by path.
func parseGoFiles(t *testing.T) map[string]*ast.File {
	t.Helper()
	files, _ := filepath.Glob("*.go")
	e2e, _ := filepath.Glob("e2e/*.go")
	helpers, _ := filepath.Glob("internal/*/*.go")
	parsed := map[string]*ast.File{}
	for _, name := range slices.Concat(files, e2e, helpers) {
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		parsed[name] = f
	}
	return parsed
}
