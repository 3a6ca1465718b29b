# Strata — operator and broker.
#   make dev    run a Strata cluster on an embedded default (no setup needed)
#   make test   run every test (builds the envtest control plane and the S3
#               test server from the Go module proxy on first use, cached in bin/)

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

BIN            ?= $(CURDIR)/bin
# Expensive, version-stamped artefacts (kube-apiserver, etcd, versitygw, tools)
# are cached here; CI points it at a directory that survives fresh clones.
TOOLS_DIR      ?= $(BIN)
ENVTEST_DIR    ?= $(TOOLS_DIR)/k8s
KUBE_VERSION   ?= v1.37.2
ETCD_VERSION   ?= v3.7.3

CONTROLLER_GEN_VERSION ?= v0.23.0
# v5.8.3 needs Go >= 1.27; v5.8.2 is the newest release that builds with Go 1.26.
KUSTOMIZE_VERSION      ?= v5.8.2
VERSITYGW_VERSION      ?= v1.8.0
# promtool checks and unit-tests the alert rules (test/monitoring); Prometheus
# v3.x is module version v0.3xx. v0.316.0 needs Go >= 1.26.7. Built with
# remove_all_sd: without the cloud service discoveries (AWS, Azure, GCE,
# OpenStack, ...), which `promtool check rules` and `test rules` never use
# and which are most of its build time.
PROMTOOL_VERSION       ?= v0.316.0
# gotestsum runs make test's go test -json: a line per package, the failures
# summarised at the end, the slowest tests (hack/test.sh).
GOTESTSUM_VERSION      ?= v1.13.0
# KafkaJS, the Node.js client test/compat drives (kafkajs.js), from the npm
# registry with the machine's node and npm.
KAFKAJS_VERSION        ?= 2.2.4
CONTROLLER_GEN ?= $(TOOLS_DIR)/controller-gen-$(CONTROLLER_GEN_VERSION)
KUSTOMIZE      ?= $(TOOLS_DIR)/kustomize-$(KUSTOMIZE_VERSION)
VERSITYGW      ?= $(TOOLS_DIR)/versitygw-$(VERSITYGW_VERSION)
PROMTOOL       ?= $(TOOLS_DIR)/promtool-$(PROMTOOL_VERSION)
GOTESTSUM      ?= $(TOOLS_DIR)/gotestsum-$(GOTESTSUM_VERSION)
KAFKAJS        ?= $(TOOLS_DIR)/kafkajs-$(KAFKAJS_VERSION)

IMG     ?= ghcr.io/strata-dev/strata:latest
VERSION ?= 0.1.0

# -p 3: three test packages at a time on two cores. The packages wait more
# than they compute (envtest reconciles, broker processes, timers): at
# go test's default of one per core the CPU was a third idle and make test
# took 910 s on the quiet machine, 743 s with -p 3 (docs/testing.md).
GO_TEST_FLAGS ?= -count=1 -timeout 30m -p 3
# Packages make test runs; test/olm (its own module) only with ./...
# e.g. make test TEST_PKGS=./broker/log
TEST_PKGS     ?= ./...
# Where make test writes its go test -json files and the Ginkgo report.
TEST_OUT      ?= $(BIN)/test
# How many of the slowest tests and Ginkgo specs make test lists.
SLOWEST       ?= 15
TEST_ENV = GOTESTSUM=$(GOTESTSUM) GO_TEST_FLAGS="$(GO_TEST_FLAGS)" TEST_PKGS="$(TEST_PKGS)" TEST_OUT=$(TEST_OUT) SLOWEST=$(SLOWEST)

export KUBEBUILDER_ASSETS  := $(ENVTEST_DIR)
export STRATA_VERSITYGW    := $(VERSITYGW)
export STRATA_KUSTOMIZE    := $(KUSTOMIZE)
export STRATA_PROMTOOL     := $(PROMTOOL)
export STRATA_KAFKAJS      := $(KAFKAJS)

.PHONY: all
all: build

##@ Development

.PHONY: dev
dev: s3-server build ## Run a local 3-zone cluster (WAL replication through a local S3 server) and print the bootstrap address.
	STRATA_VERSITYGW=$(VERSITYGW) $(BIN)/strata dev $(DEV_FLAGS)

.PHONY: run
run: manifests generate ## Run the operator against the cluster in the current kubeconfig.
	go run . operator

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy code.
	$(CONTROLLER_GEN) object:headerFile="hack/boilerplate.go.txt" paths="./api/..."

.PHONY: manifests
manifests: $(CONTROLLER_GEN) ## Generate CRDs and RBAC.
	$(CONTROLLER_GEN) rbac:roleName=operator crd paths="./api/..." paths="./controllers/..." \
		output:crd:artifacts:config=config/crd/bases output:rbac:artifacts:config=config/rbac

.PHONY: bundle
bundle: manifests $(KUSTOMIZE) ## Generate the OLM bundle under bundle/.
	KUSTOMIZE=$(KUSTOMIZE) VERSION=$(VERSION) IMG=$(IMG) hack/bundle.sh

.PHONY: verify-generated
verify-generated: ## Fail when committed generated files differ from what make generates.
	hack/verify-generated.sh

.PHONY: fmt
fmt:
	gofmt -w $$(git ls-files '*.go')

.PHONY: lint
lint: ## go vet + gofmt check.
	go vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

##@ Test

.PHONY: test
test: test-deps lint verify-generated ## Run all tests (unit, envtest, S3, broker, client integration, chaos short form, OLM bundle validation); ends with the slowest tests and the failures.
	$(TEST_ENV) hack/test.sh

# Runs of make test-stress, and busy threads per CPU of its CPU hog.
N            ?= 3
HOG_PER_CORE ?= 2

.PHONY: test-stress
test-stress: test-deps lint verify-generated ## make test's run N times (N=3) beside a CPU hog (HOG_PER_CORE=2 busy threads per CPU); fails if any run fails.
	$(TEST_ENV) N=$(N) HOG_PER_CORE=$(HOG_PER_CORE) BIN=$(BIN) hack/test-stress.sh

.PHONY: test-deps
test-deps: envtest s3-server kustomize promtool gotestsum ## Install what the tests need (builds from the Go module proxy; apt for kcat, the Python clients, Burrow and Node.js; KafkaJS from npm).
	hack/lib/gomodules_test.sh $(KUBE_VERSION)
	hack/test-deps.sh
	$(MAKE) --no-print-directory kafkajs

.PHONY: envtest
envtest: ## Build kube-apiserver and etcd for envtest into $(ENVTEST_DIR).
	ENVTEST_DIR=$(ENVTEST_DIR) KUBE_VERSION=$(KUBE_VERSION) ETCD_VERSION=$(ETCD_VERSION) hack/setup-envtest.sh

.PHONY: s3-server
s3-server: $(VERSITYGW) ## Build Versity Gateway (the S3 test server).

.PHONY: kustomize
kustomize: $(KUSTOMIZE)

.PHONY: gotestsum
gotestsum: $(GOTESTSUM) ## Build gotestsum (make test's go test runner) into $(TOOLS_DIR).

.PHONY: promtool
promtool: $(PROMTOOL) ## Build promtool (Prometheus' rule checker) into $(TOOLS_DIR).

.PHONY: check-monitoring
check-monitoring: promtool kustomize ## promtool check/test of the alerts, dashboard queries parsed, every metric they use exposed, the monitoring component rendered (docs/monitoring.md).
	go test -count=1 ./test/monitoring
	go test -count=1 ./config -run Monitoring

# FUZZ_TARGETS: package:target of every Go fuzz target of what parses bytes
# from outside (frames, requests, batches, properties, WAL objects, pointer
# files, manifests, the group offsets log, SCRAM messages). go test runs their seed corpora
# (and crashers kept in testdata/fuzz) as regression tests.
FUZZ_TARGETS ?= \
	broker/protocol:FuzzReadFrame broker/protocol:FuzzDecodeRequest broker/protocol:FuzzServeRequest \
	broker/record:FuzzValidate broker/record:FuzzValidateBudget broker/record:FuzzDecode \
	broker/server:FuzzParseProperties broker/wal:FuzzDecode broker/wal:FuzzPointerIndexOpen \
	broker/tier:FuzzDecodeManifest broker/log:FuzzRecoverTail broker/group:FuzzOffsetsLogRecovery \
	broker/auth:FuzzScramConversation

.PHONY: fuzz
fuzz: ## Fuzz every target in FUZZ_TARGETS for FUZZTIME each (default 10s; FUZZTIME=10m runs long).
	@set -e; for t in $(FUZZ_TARGETS); do \
		echo "== $$t"; \
		go test ./$${t%%:*} -run '^$$' -fuzz "^$${t##*:}\$$" -fuzztime $${FUZZTIME:-10s}; \
	done

SEEDS       ?= 1 2 3
DURATION    ?= 120s
REPLICATION ?= wal

.PHONY: chaos
chaos: s3-server build ## Long `strata chaos` runs: make chaos SEEDS="1 2 3" DURATION=120s REPLICATION=wal [CHAOS_FLAGS=...]; fails if any run fails.
	@fail=0; for seed in $(SEEDS); do \
		echo "== strata chaos --seed $$seed --duration $(DURATION) --replication $(REPLICATION) $(CHAOS_FLAGS)"; \
		STRATA_VERSITYGW=$(VERSITYGW) $(BIN)/strata chaos --seed $$seed --duration $(DURATION) --replication $(REPLICATION) --json $(CHAOS_FLAGS) || fail=1; \
	done; exit $$fail

SOAK_OUT     ?= $(BIN)/chaos-soak.jsonl
RUN_DURATION ?= 120s
SEED         ?= 1
SOAK_REPLICATION ?=

.PHONY: chaos-soak
chaos-soak: s3-server build ## Soak: make chaos-soak DURATION=30m [RUN_DURATION=120s SEED=1 SOAK_REPLICATION=wal|classic (default: alternate) CHAOS_FLAGS=...]: chaos runs over successive seeds until DURATION has passed, each result appended as a JSON line to $(SOAK_OUT); fails if any run failed.
	STRATA=$(BIN)/strata STRATA_VERSITYGW=$(VERSITYGW) DURATION=$(DURATION) RUN_DURATION=$(RUN_DURATION) SEED=$(SEED) \
		OUT=$(SOAK_OUT) REPLICATION=$(SOAK_REPLICATION) CHAOS_FLAGS="$(CHAOS_FLAGS)" hack/chaos-soak.sh

.PHONY: bench
bench: ## Go benchmarks of the broker.
	go test ./broker/... -run '^$$' -bench . -benchmem

.PHONY: bench-wal
bench-wal: s3-server build ## The strata bench runs behind issue #18's and #15's figures (hack/bench-wal.sh; BENCH_DURATION=20s): JSON, text and a plot in bin/bench-wal/.
	STRATA_VERSITYGW=$(VERSITYGW) BIN=$(BIN)/strata OUT=$(BIN)/bench-wal hack/bench-wal.sh

# Megabytes the replicas moved by bench-hydrate hold (#16's must-show: 1 GB).
HYDRATE_MB ?= 1024

.PHONY: bench-hydrate
bench-hydrate: s3-server ## Issue #16's move measurement: replicas holding HYDRATE_MB (1024) MB move onto a new zone-a broker, with and without tier hydration; logs the cross-zone bytes ÷ moved bytes of both.
	STRATA_VERSITYGW=$(VERSITYGW) STRATA_HYDRATE_MB=$(HYDRATE_MB) go test ./test/replication -run '^TestHydrateMoveCrossZone$$' -count=1 -timeout 90m -v

##@ End to end (a real 3-zone Kubernetes on this machine, see docs/e2e.md)

# Where the e2e cluster keeps its state, logs and the journey's report.
E2E_DIR ?= $(CURDIR)/bin/e2e
# 1: e2e-up first stops an e2e cluster another checkout left up (e2e-ci sets it).
E2E_TAKEOVER ?= 0
E2E_ENV = E2E_TAKEOVER=$(E2E_TAKEOVER) TOOLS_DIR=$(TOOLS_DIR) ENVTEST_DIR=$(ENVTEST_DIR) KUBE_VERSION=$(KUBE_VERSION) VERSITYGW=$(VERSITYGW) E2E_DIR=$(E2E_DIR)

.PHONY: e2e-tools
e2e-tools: envtest s3-server ## Build kubelet, kube-controller-manager, kube-scheduler, kube-proxy, kubectl, CoreDNS, a static etcd and pause into $(TOOLS_DIR)/e2e; apt for containerd, runc, CNI plugins, podman, iptables.
	hack/e2e/deps.sh
	hack/lib/gomodules_test.sh $(KUBE_VERSION)
	$(E2E_ENV) hack/e2e/tools.sh

.PHONY: e2e-up
e2e-up: e2e-tools ## Start the e2e cluster (control plane, 3 nodes in zones a/b/c, DNS, local PVs, S3); prints the kubeconfig path.
	$(E2E_ENV) hack/e2e/up.sh

.PHONY: e2e-down
e2e-down: ## Stop everything e2e-up started and unmount what it mounted.
	$(E2E_ENV) hack/e2e/down.sh

.PHONY: e2e-smoke
e2e-smoke: ## On the e2e cluster: one strata broker pod per zone (StatefulSets, PVCs, pod DNS) must turn Ready.
	$(E2E_ENV) hack/e2e/smoke.sh

# TestJourney's timeout: the journey takes 7-12 minutes on this machine.
E2E_TIMEOUT ?= 45m
# Extra flags for TestJourney, e.g. E2E_FLAGS='-e2e.keep' (leave the
# KafkaCluster running) or E2E_FLAGS='-e2e.steps=wal-path,scale-up-b'.
E2E_FLAGS ?=

.PHONY: e2e
e2e: ## On the e2e cluster (make e2e-up): the user's journey (test/e2e), writes bin/e2e/report.json; on failure dumps under bin/e2e/dump/.
	mkdir -p $(E2E_DIR)
	E2E_KUBECTL=$(TOOLS_DIR)/e2e/kubectl $(E2E_ENV) \
		go test -tags e2e ./test/e2e -run '^TestJourney$$' -count=1 -v -timeout $(E2E_TIMEOUT) $(if $(E2E_FLAGS),-args $(E2E_FLAGS)) \
		2>&1 | tee $(E2E_DIR)/journey.log

.PHONY: e2e-ci
e2e-ci: ## CI form: e2e-up, e2e, then e2e-down whatever happened (the journey dumps before); fails if any failed.
	rc=0; { $(MAKE) e2e-up E2E_TAKEOVER=1 && $(MAKE) e2e; } || rc=$$?; \
	if [ $$rc -ne 0 ] && [ -d $(E2E_DIR)/logs ]; then mkdir -p $(E2E_DIR)/dump && cp -r $(E2E_DIR)/logs $(E2E_DIR)/dump/cluster-logs; fi; \
	$(MAKE) e2e-down || { [ $$rc -ne 0 ] || rc=1; }; \
	exit $$rc

.PHONY: e2e-cluster
e2e-cluster: ## On the e2e cluster: the operator (kubectl apply -k), a 3-zone KafkaCluster until Ready, a strata bench Job in zone a.
	$(E2E_ENV) hack/e2e/cluster.sh

##@ Build

.PHONY: build
build: ## Build bin/strata.
	CGO_ENABLED=0 go build -trimpath -o $(BIN)/strata .

.PHONY: docker-build
docker-build: ## Build the container image (needs a Docker engine).
	docker build -t $(IMG) .

$(CONTROLLER_GEN):
	mkdir -p $(TOOLS_DIR) && GOBIN=$(TOOLS_DIR)/.gobin go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION) && mv $(TOOLS_DIR)/.gobin/controller-gen $@

$(KUSTOMIZE):
	mkdir -p $(TOOLS_DIR) && GOBIN=$(TOOLS_DIR)/.gobin go install sigs.k8s.io/kustomize/kustomize/v5@$(KUSTOMIZE_VERSION) && mv $(TOOLS_DIR)/.gobin/kustomize $@

$(PROMTOOL):
	mkdir -p $(TOOLS_DIR) && GOBIN=$(TOOLS_DIR)/.gobin go install -tags remove_all_sd github.com/prometheus/prometheus/cmd/promtool@$(PROMTOOL_VERSION) && mv $(TOOLS_DIR)/.gobin/promtool $@

$(GOTESTSUM):
	mkdir -p $(TOOLS_DIR) && GOBIN=$(TOOLS_DIR)/.gobin go install gotest.tools/gotestsum@$(GOTESTSUM_VERSION) && mv $(TOOLS_DIR)/.gobin/gotestsum $@

.PHONY: kafkajs
kafkajs: $(KAFKAJS) ## Install KafkaJS (test/compat's Node.js client) into $(TOOLS_DIR) with npm.

$(KAFKAJS):
	rm -rf $@.tmp && mkdir -p $@.tmp && npm install --prefix $@.tmp --no-audit --no-fund --no-save --loglevel=error kafkajs@$(KAFKAJS_VERSION) && mv $@.tmp $@

$(VERSITYGW):
	mkdir -p $(TOOLS_DIR) && GOBIN=$(TOOLS_DIR)/.gobin go install github.com/versity/versitygw/cmd/versitygw@$(VERSITYGW_VERSION) && mv $(TOOLS_DIR)/.gobin/versitygw $@

.PHONY: help
help:
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 }' $(MAKEFILE_LIST)
