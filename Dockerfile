# syntax=docker/dockerfile:1
# The demo-controller image: make image IMG=registry.example/demo-controller:tag

# build compiles the binary, on a Go image pinned to a patch release.
FROM golang:1.26.8-bookworm AS build
WORKDIR /src
# Modules first, in their own layer: it is rebuilt only when go.mod or go.sum change.
COPY go.mod go.sum ./
RUN go mod download
COPY Makefile *.go ./
# VERSION is stamped into the binary; make image passes git describe.
ARG VERSION=dev
# The same command as `make build` on a workstation, because it is `make build`:
# static (CGO_ENABLED=0), -trimpath, stripped, stamped with VERSION. Static,
# because the final image has no C library for the binary to load.
RUN make build VERSION="${VERSION}"

# The final image holds the binary and distroless's few files (its users, CA
# certificates, time zones): no shell, no package manager, no C library. Its
# nonroot user is 65532, which demo-controller.yaml also sets.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /src/demo-controller /demo-controller
USER 65532:65532
ENTRYPOINT ["/demo-controller"]
