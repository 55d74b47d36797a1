package main

import (
	"flag"
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

// Every Go identifier, file and make target the README names in backquotes
// exists. Identifiers may be declared in the code or in its tests (the
// README names the tests that prove a claim), the end-to-end ones included.
func TestReadmeNamesExist(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
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
	makefile, err := os.ReadFile("Makefile")
	if err != nil {
		t.Fatal(err)
	}
	// Queue methods, the API server's word for a 401, and words such as
	// `make test` are named in passing too.
	clientGo := map[string]bool{"Get": true, "Done": true, "Forget": true, "AddRateLimited": true, "Unauthorized": true}
	for _, m := range regexp.MustCompile("`([^`\n]+)`").FindAllStringSubmatch(string(readme), -1) {
		name := m[1]
		switch {
		case regexp.MustCompile(`^[\w./-]+\.(go|yaml|mod|sh)$|^Dockerfile$|^\.ci/run$|^e2e/$`).MatchString(name):
			if _, err := os.Stat(name); err != nil {
				t.Errorf("README names file %s: %v", name, err)
			}
		case strings.HasPrefix(name, "--") || strings.HasPrefix(name, "-v"):
			flagName, _, _ := strings.Cut(strings.TrimLeft(name, "-"), "=")
			if newFlagSet(&options{}).Lookup(flagName) == nil {
				t.Errorf("README names flag %s, which demo-controller does not have", name)
			}
		case strings.HasPrefix(name, "make "):
			for _, target := range strings.Fields(name)[1:] {
				if strings.Contains(target, "=") {
					break
				}
				if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(target) + `:`).Match(makefile) {
					t.Errorf("README names make target %s, which the Makefile does not have", target)
				}
			}
		case regexp.MustCompile(`^[a-zA-Z]\w*$`).MatchString(name) && strings.ToUpper(name) != name &&
			strings.ToLower(name) != name: // a Go identifier (not a word, not an environment variable)
			if !declared[name] && !clientGo[name] {
				t.Errorf("README names %s, which the code does not declare", name)
			}
		}
	}
}

// Each message the README's troubleshooting table quotes (its first
// column, cut at "…") is still in the code, or in a test that checks that
// the program prints it: a reworded message fails here until the table
// follows.
func TestReadmeTroubleshootingMessages(t *testing.T) {
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(readme), "\n## Troubleshooting\n")
	section, _, _ = strings.Cut(section, "\n## ")
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
	rows := regexp.MustCompile("(?m)^\\| (`.*?) \\| .* \\|$").FindAllStringSubmatch(section, -1)
	if len(rows) < 10 {
		t.Fatalf("found %d rows in the README's troubleshooting table; is it still there?", len(rows))
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

// parseGoFiles parses the package's files and the end-to-end suite's, by
// path.
func parseGoFiles(t *testing.T) map[string]*ast.File {
	t.Helper()
	files, _ := filepath.Glob("*.go")
	e2e, _ := filepath.Glob("e2e/*.go")
	parsed := map[string]*ast.File{}
	for _, name := range append(files, e2e...) {
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		parsed[name] = f
	}
	return parsed
}
