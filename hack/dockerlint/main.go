// Command dockerlint checks the Dockerfile with BuildKit's own parser and
// linter (no Docker engine needed), then checks what this project promises
// about its image. It prints one line per problem and exits 1 if there are any.
//
//	cd hack/dockerlint && go run . ../../Dockerfile   (its own module; make lint runs it)
package main

import (
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/linter"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: dockerlint DOCKERFILE   (cd hack/dockerlint && go run . ../../Dockerfile)")
		os.Exit(2)
	}
	problems, err := check(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "dockerlint:", err)
		os.Exit(1)
	}
	for _, p := range problems {
		fmt.Println("dockerlint:", p)
	}
	if len(problems) > 0 {
		os.Exit(1)
	}
}

func check(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	result, err := parser.Parse(f)
	if err != nil {
		return nil, err
	}
	var problems []string
	for _, w := range result.Warnings {
		problems = append(problems, fmt.Sprintf("%s:%d: %s", path, w.Location.Start.Line, w.Short))
	}
	lint := linter.New(&linter.Config{ExperimentalAll: true, Warn: func(rule, _, _, msg string, loc []parser.Range) {
		problems = append(problems, fmt.Sprintf("%s:%d: %s: %s", path, loc[0].Start.Line, rule, msg))
	}})
	stages, _, err := instructions.Parse(result.AST, lint)
	if err != nil {
		return nil, err
	}
	if len(stages) != 2 {
		return append(problems, fmt.Sprintf("want 2 stages (builder and final), found %d", len(stages))), nil
	}
	build, final := stages[0], stages[1]
	if !regexp.MustCompile(`^golang:1\.26\.\d+(-\w+)?$`).MatchString(build.BaseName) {
		problems = append(problems, "the builder must be a pinned golang:1.26.N image, not "+build.BaseName)
	}
	if final.BaseName != "gcr.io/distroless/static-debian12:nonroot" {
		problems = append(problems, "the final image must be gcr.io/distroless/static-debian12:nonroot, not "+final.BaseName)
	}
	// Modules are downloaded before the sources are copied, so that a code
	// change does not download them again; the binary is built by make build.
	var order []string
	for _, cmd := range build.Commands {
		order = append(order, strings.ToLower(fmt.Sprint(cmd)))
	}
	steps := strings.Join(order, "\n")
	download, sources, makeBuild := strings.Index(steps, "go mod download"), strings.Index(steps, "*.go"), strings.Index(steps, "make build")
	if download < 0 || sources < 0 || makeBuild < 0 || !(download < sources && sources < makeBuild) {
		problems = append(problems, "the builder must run go mod download, then copy *.go, then run make build")
	}
	var user, entrypoint string
	for _, cmd := range final.Commands {
		switch c := cmd.(type) {
		case *instructions.UserCommand:
			user = c.User
		case *instructions.EntrypointCommand:
			if c.PrependShell {
				problems = append(problems, "ENTRYPOINT must use the exec form: the final image has no shell")
			}
			entrypoint = strings.Join(c.CmdLine, " ")
		case *instructions.RunCommand:
			problems = append(problems, "the final image has no shell to RUN anything in")
		}
	}
	if !regexp.MustCompile(`^[1-9]\d*(:\d+)?$`).MatchString(user) {
		problems = append(problems, fmt.Sprintf("the final image must set a numeric, non-root USER, not %q", user))
	}
	if entrypoint != "/demo-controller" {
		problems = append(problems, fmt.Sprintf("ENTRYPOINT must be [\"/demo-controller\"], not %q", entrypoint))
	}
	return problems, nil
}
