# demo-controller: `make help` lists the targets.

# The version stamped into the binary (the start line names it).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# The one build command, also used by the Dockerfile: a static, stripped,
# reproducible binary. (No DWARF: -s -w would strip it anyway, and not making
# it saves compile time.)
GOFLAGS_BUILD = -trimpath -gcflags=all=-dwarf=false
BUILD = CGO_ENABLED=0 go build $(GOFLAGS_BUILD) -ldflags "-s -w -X main.version=$(VERSION)"

# The image that `make image push deploy` builds, pushes and runs. The default
# is the image demo-controller.yaml names, so that on a local cluster (kind,
# minikube) `make image`, loading it into the cluster, and
# `kubectl create -f demo-controller.yaml` work unchanged. The binary inside
# is stamped with $(VERSION) either way.
IMG ?= demo-controller:dev
KUBECTL ?= kubectl

.DEFAULT_GOAL := build
.PHONY: help build run demo test fuzz exercises exercise-e2e e2e bench lint image push deploy undeploy clean

# The scale benchmark (e2e/bench_test.go). N: one size or several, the pods
# that exist when each controller starts (each size is one go test run on a
# cluster of its own); BURST: pods created while each one runs. The two peers
# (e2e/peers) run at sizes up to PEERS_UP_TO (0: at every size; 1: at none):
# beyond 50,000 client-go's example
# alone would outlast the suite's 10 minutes on 2 cores. VARIANTS: other
# demo-controller builds or settings, measured at size VARIANTS_AT. CHART: the
# curve, drawn when N has two sizes or more. PODS: running (bound to a node,
# with a running pod's status) or pending (as created: no node, no status).
N ?= 1000 10000
BURST ?= 1000
PEERS_UP_TO ?= 50000
VARIANTS ?=
VARIANTS_AT ?=
CHART ?= .cache/bench/scale.svg
PODS ?= running

help: ## list the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

build: ## build ./demo-controller
	$(BUILD) -o demo-controller .

run: build ## run against your current kubeconfig context (ARGS="--namespace default" to pass flags)
	./demo-controller $(ARGS)

# demo compiles with the build's flags, so that `make demo` and `make` share
# one compiled client-go.
demo: ## run against a simulated cluster: no cluster or kubeconfig needed (ARGS="--simulate-pause=0" for full speed)
	CGO_ENABLED=0 go run $(GOFLAGS_BUILD) . --simulate $(ARGS)

test: ## unit tests, with the race detector and client-go's cache mutation detector
	KUBE_CACHE_MUTATION_DETECTOR=true go test -race ./...

fuzz: ## fuzz the lifecycle comparison for 60 seconds
	go test -run '^$$' -fuzz FuzzUpdated -fuzztime 60s .

exercises: ## check exercises/: each test fails on today's code and passes with its solution.patch
	hack/check-exercises.sh

exercise-e2e: ## an exercise's end-to-end tests on your code, against real servers (EX=07-crd); builds the servers on first use
	hack/exercise-e2e.sh $(EX)

# The e2e and bench tests build like the binary (static, -trimpath, no DWARF), so that a
# cold machine compiles client-go once for both.
e2e: build ## end-to-end tests: the binary against a real kube-apiserver and etcd
	hack/build-servers.sh
	CGO_ENABLED=0 go test -trimpath -gcflags=all=-dwarf=false -tags e2e -count=1 -timeout 15m -v ./e2e/

bench: build ## scale benchmark: demo-controller and two peers against a real kube-apiserver (N="1000 10000" pods); prints a table
	hack/build-servers.sh
	cd e2e/peers && $(BUILD) -o ../../.cache/peers/ ./crpods k8s.io/client-go/examples/workqueue
	mkdir -p .cache/bench && rm -f .cache/bench/results.json
	for n in $(N); do \
	  DEMO_BENCH_N=$$n DEMO_BENCH_SIZES="$(N)" DEMO_BENCH_BURST=$(BURST) DEMO_BENCH_RESULTS=$(CURDIR)/.cache/bench/results.json \
	  DEMO_BENCH_PEERS=$(CURDIR)/.cache/peers DEMO_BENCH_PEERS_UP_TO=$(PEERS_UP_TO) DEMO_BENCH_CHART=$(abspath $(CHART)) \
	  DEMO_BENCH_VARIANTS="$(VARIANTS)" DEMO_BENCH_VARIANTS_AT=$(VARIANTS_AT) DEMO_BENCH_PODS=$(PODS) \
	  CGO_ENABLED=0 go test -trimpath -gcflags=all=-dwarf=false -tags e2e -count=1 -timeout 30m -run TestScaleBenchmark -v ./e2e/ || exit 1; \
	done
	DEMO_BENCH_SHIPPED=1 DEMO_BENCH_BURST=$(BURST) DEMO_BENCH_PODS=$(PODS) CGO_ENABLED=0 go test -trimpath -gcflags=all=-dwarf=false -tags e2e -count=1 -timeout 30m -run TestShippedMemoryLimit -v ./e2e/
	go test -run '^$$' -bench Pipeline -benchmem .

lint: ## gofmt, go vet, and the Dockerfile checked with BuildKit's linter
	@test -z "$$(gofmt -l .)" || { gofmt -l .; echo "gofmt: the files above need formatting"; exit 1; }
	go vet ./...
	go vet -tags e2e ./e2e/
	cd hack/dockerlint && go test ./... && go run . ../../Dockerfile

image: ## build the container image $(IMG) (needs a Docker engine)
	docker build --build-arg VERSION=$(VERSION) -t $(IMG) .

push: ## push $(IMG) to its registry
	docker push $(IMG)

deploy: ## create demo-controller.yaml's objects in the current cluster, running $(IMG)
	sed 's|^\(  *image:\).*|\1 $(IMG)|' demo-controller.yaml | $(KUBECTL) apply -f -

undeploy: ## delete everything deploy created
	$(KUBECTL) delete -f demo-controller.yaml --ignore-not-found

clean: ## remove the binary and the cached test servers
	rm -rf demo-controller .cache
