package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestProjectDockerfile(t *testing.T) {
	problems, err := check("../../Dockerfile")
	if err != nil || len(problems) > 0 {
		t.Fatalf("Dockerfile: %v %q", err, problems)
	}
}

// Each weakened copy of the Dockerfile must be caught.
func TestWeakenedDockerfiles(t *testing.T) {
	good, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string][2]string{
		"unpinned builder":   {"golang:1.26.8-bookworm", "golang:latest"},
		"root user":          {"USER 65532:65532", "USER root"},
		"shell entrypoint":   {`ENTRYPOINT ["/demo-controller"]`, "ENTRYPOINT /demo-controller"},
		"fat final image":    {"gcr.io/distroless/static-debian12:nonroot", "debian:12"},
		"no module layer":    {"RUN go mod download\n", ""},
		"not make build":     {`RUN make build VERSION="${VERSION}"`, "RUN go build -o demo-controller ."},
		"lint: casing of AS": {"AS build", "as build"},
	} {
		t.Run(name, func(t *testing.T) {
			if !strings.Contains(string(good), edit[0]) {
				t.Fatalf("the Dockerfile no longer contains %q", edit[0])
			}
			path := filepath.Join(t.TempDir(), "Dockerfile")
			if err := os.WriteFile(path, []byte(strings.Replace(string(good), edit[0], edit[1], 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			if problems, err := check(path); err == nil && len(problems) == 0 {
				t.Error("no problem found")
			}
		})
	}
}
