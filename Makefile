# Cluster API IPAM provider for NetBox and Infoblox.

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec
.DEFAULT_GOAL := help

export GOFLAGS ?= -mod=mod
export GOTOOLCHAIN ?= local

TOOLS_BIN := $(abspath hack/tools/bin)
CONTROLLER_GEN_VERSION := v0.21.0
CONTROLLER_GEN := $(TOOLS_BIN)/controller-gen-$(CONTROLLER_GEN_VERSION)

# Test settings: envtest's API server binaries are built from the Go module
# proxy and cached outside the checkout by hack/envtest-binaries.sh.
GO_TEST_FLAGS ?= -count=1 -timeout=30m

##@ General

.PHONY: help
help: ## Show the targets.
	@awk 'BEGIN {FS = ":.*##"} /^[a-zA-Z_-]+:.*##/ { printf "  %-12s %s\n", $$1, $$2 } /^##@/ { printf "\n%s\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Development

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deep-copies, CRDs and RBAC from the kubebuilder markers.
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt paths=./api/...
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd/bases
	$(CONTROLLER_GEN) rbac:roleName=manager-role paths=./controllers/... output:rbac:artifacts:config=config/rbac

.PHONY: fmt
fmt: ## Run gofmt.
	gofmt -w $$(git ls-files '*.go')

.PHONY: vet
vet: ## Run go vet.
	go vet ./...

.PHONY: envtest
envtest: ## Build (once) and print the directory of envtest's kube-apiserver, etcd and kube-controller-manager.
	@hack/envtest-binaries.sh

.PHONY: demo
demo: ## Run the demo: a local API server, the NetBox simulator and the manager bind and release a few claims.
	KUBEBUILDER_ASSETS="$$(hack/envtest-binaries.sh)" go run ./test/demo

.PHONY: test
test: test-sim test-real-netbox ## Run every test: unit and simulator suites, then the integration suite against a real NetBox.

.PHONY: test-sim
test-sim: test-alerts ## Run the alert rules' tests, the unit tests, the integration suite, the clusterctl move round trip, the operator, Metal3 and CAPV end-to-end tests against the simulators, on a real kube-apiserver and etcd, then a short chaos run.
	KUBEBUILDER_ASSETS="$$(hack/envtest-binaries.sh)" KUBE_STATE_METRICS="$$(hack/kube-state-metrics/install.sh)" go test $(GO_TEST_FLAGS) ./...
	# The WAPI simulator's fidelity cases with infoblox-go-client v2.11.0 (a nested module).
	cd test/wapifidelity && go test $(GO_TEST_FLAGS) ./...
	# The manager image, built for amd64 and arm64 and started from its own filesystem (a nested module).
	cd hack/image && go test $(GO_TEST_FLAGS) ./...
	# The cluster-api-operator's own IPAMProvider reconciler installs the release from a ConfigMap, and the manager runs with the arguments it wrote (a nested module).
	cd test/operatore2e && KUBEBUILDER_ASSETS="$$(../../hack/envtest-binaries.sh)" go test $(GO_TEST_FLAGS) ./...
	# CAPM3's own Metal3DataTemplate and Metal3Data reconcilers drive our pools (a nested module: CAPM3 is a consumer).
	cd test/metal3e2e && KUBEBUILDER_ASSETS="$$(../../hack/envtest-binaries.sh)" go test $(GO_TEST_FLAGS) ./...
	# CAPV's own VSphereMachine, VSphereVM and VSphereCluster controllers, against vcsim, and Cluster API's topology reconciler drive our pools: machine claims, the control-plane endpoint, the VM's MAC (a nested module pinned to CAPV v1.16.1 and its Cluster API v1.13).
	cd test/capve2e && KUBEBUILDER_ASSETS="$$(../../hack/envtest-binaries.sh)" go test $(GO_TEST_FLAGS) ./...
	KUBEBUILDER_ASSETS="$$(hack/envtest-binaries.sh)" go run ./test/chaos -backend netbox-sim,wapi-sim $(CHAOS_SHORT_FLAGS)
	KUBEBUILDER_ASSETS="$$(hack/envtest-binaries.sh)" go run ./test/chaos -backend netbox-sim,wapi-sim $(CHAOS_SHORT_FLAGS) -carve 28

.PHONY: test-alerts
test-alerts: ## Check the shipped Prometheus rules and run their unit tests with promtool (installed by hack/prometheus/install.sh).
	@hack/prometheus/install.sh
	hack/prometheus/test-alerts.sh

# The suites that rewrite records (hand-over, grace period, restore, move,
# planned records), and plain allocation and release, run again with the
# tokens of a user holding exactly the permissions docs/netbox.md lists.
LEAST_PRIVILEGE_RUN ?= ^(TestLostIPAddressHandsItsRecordToTheClaim|TestAHandOverWhoseAnswerIsLostIsReportedByTheAudit|TestGracePeriodHoldsTheAddressAcrossARestart|TestAuditRestoresARecordDeletedInTheIPAMSystem|TestAuditReportsAnOrphanAndReleasesItUnderRelease|TestAuditDeletesALateDuplicateOfABoundClaim|TestPlannedRecordIsAdoptedAndReturnedOnRelease|TestTwoClaimsRaceForOnePlannedRecord|TestRequestedAddress|TestRangeInAVRFWithEveryStampAndAV2Token|TestDeletedClaimReleasesItsAddress|TestClusterctlMoveRoundTrip)$$
# The carving suites run again with a second user's tokens, holding what
# docs/subnets.md adds: prefixes, and view on prefix roles and sites.
LEAST_PRIVILEGE_CARVING_RUN ?= ^(TestAClaimOfAChildPrefixPoolGetsAChildPrefix|TestAChildDeletedInNetBoxIsReportedNotCarvedAgain|TestACarvingPoolGivesItsChildrenARoleAndAScope|TestAClusterSubnetIsCarvedServedAndReturnedOnNetBox|TestARetainedClusterSubnetStaysInNetBoxForTheIPAMTeam)$$

.PHONY: test-real-netbox
test-real-netbox: ## Run the integration suite, the clusterctl move round trip, the Metal3 and CAPV end-to-end tests and a short chaos run against a real NetBox 4.7.3 that hack/netbox/up.sh installs (root) and starts; then test-real-netbox-least-privilege.
	@# Every suite runs against the one NetBox; any that fails fails the target.
	@trap 'hack/netbox/down.sh' EXIT; env_file="$$(hack/netbox/up.sh)"; set -a; . "$$env_file"; set +a; failed=""; \
	KUBEBUILDER_ASSETS="$$(hack/envtest-binaries.sh)" go test $(GO_TEST_FLAGS) ./test/integration/ ./test/conformance/ ./test/gc/ ./test/move/ || failed="$$failed suites"; \
	(cd test/metal3e2e && KUBEBUILDER_ASSETS="$$(../../hack/envtest-binaries.sh)" go test $(GO_TEST_FLAGS) ./...) || failed="$$failed metal3e2e"; \
	(cd test/capve2e && KUBEBUILDER_ASSETS="$$(../../hack/envtest-binaries.sh)" go test $(GO_TEST_FLAGS) ./...) || failed="$$failed capve2e"; \
	KUBEBUILDER_ASSETS="$$(hack/envtest-binaries.sh)" go run ./test/chaos -backend netbox-real $(CHAOS_SHORT_FLAGS) || failed="$$failed chaos"; \
	KUBEBUILDER_ASSETS="$$(hack/envtest-binaries.sh)" go run ./test/chaos -backend netbox-real $(CHAOS_SHORT_FLAGS) -carve 28 || failed="$$failed chaos-carve"; \
	if [ -n "$$failed" ]; then echo "test-real-netbox failed:$$failed"; exit 1; fi
	@$(MAKE) --no-print-directory test-real-netbox-least-privilege

# A NetBox of its own: the suites seed by get-or-create, so a planned record
# left by the first run would not be the one a second run plans.
.PHONY: test-real-netbox-least-privilege
test-real-netbox-least-privilege: ## Run the suites that rewrite records (hand-over, grace period, restore, move, planned records) against a fresh real NetBox with the tokens of a user holding exactly the permissions docs/netbox.md lists, and the carving suites with those docs/subnets.md lists (hack/netbox/least-privilege.sh).
	@export NETBOX_RUN_DIR="$${NETBOX_RUN_DIR:-/tmp/netbox-run}-least-privilege"; trap 'hack/netbox/down.sh' EXIT; \
	env_file="$$(hack/netbox/up.sh)"; least_file="$$(hack/netbox/least-privilege.sh "$$env_file")"; \
	carving_file="$$(hack/netbox/least-privilege.sh "$$env_file" carving)"; \
	(set -a; . "$$least_file"; set +a; \
	KUBEBUILDER_ASSETS="$$(hack/envtest-binaries.sh)" go test $(GO_TEST_FLAGS) -run '$(LEAST_PRIVILEGE_RUN)' ./test/integration/ ./test/move/) && \
	(set -a; . "$$carving_file"; set +a; \
	KUBEBUILDER_ASSETS="$$(hack/envtest-binaries.sh)" go test $(GO_TEST_FLAGS) -run '$(LEAST_PRIVILEGE_CARVING_RUN)' ./test/integration/)

# Chaos runs (docs/chaos.md): the manager process under IPAM faults, SIGKILLs
# and IPAddress deletions. make test runs a short one; make chaos the full one.
CHAOS_SHORT_FLAGS ?= -claims 60 -seeds 1 -kills 1 -liveness 2m -stall 60s
CHAOS_FLAGS ?= -kills 3 -fault-rate 0.2 -delete-rate 0.05 -liveness 5m
CHAOS_OUT ?= out/chaos

.PHONY: chaos
chaos: chaos-sim chaos-carve chaos-real-netbox ## Run the full chaos run: 1000 claims x 6 seeds on each simulator, 1000 carving /28s x 2 seeds, 300 claims and 300 carving on a real NetBox; prints tables, fails on any violation.

.PHONY: chaos-sim
CHAOS_SEEDS ?= 1,2,3,4,5,424242

chaos-sim: ## Run the full chaos run against the NetBox and WAPI simulators (1000 claims, 5 pools, seeds $(CHAOS_SEEDS)).
	mkdir -p $(CHAOS_OUT)
	KUBEBUILDER_ASSETS="$$(hack/envtest-binaries.sh)" go run ./test/chaos -backend netbox-sim,wapi-sim \
		-claims 1000 -seeds $(CHAOS_SEEDS) $(CHAOS_FLAGS) -workdir $(abspath $(CHAOS_OUT))/sim -out $(CHAOS_OUT)/chaos-sim.txt

.PHONY: chaos-carve
CHAOS_CARVE_SEEDS ?= 1,2

chaos-carve: ## Run the full chaos run of carving pools against the NetBox and WAPI simulators (1000 claims each carving a /28, 5 pools, seeds $(CHAOS_CARVE_SEEDS)).
	mkdir -p $(CHAOS_OUT)
	KUBEBUILDER_ASSETS="$$(hack/envtest-binaries.sh)" go run ./test/chaos -backend netbox-sim,wapi-sim -carve 28 \
		-claims 1000 -seeds $(CHAOS_CARVE_SEEDS) $(CHAOS_FLAGS) -workdir $(abspath $(CHAOS_OUT))/carve -out $(CHAOS_OUT)/chaos-carve.txt

.PHONY: chaos-real-netbox
chaos-real-netbox: ## Run the full chaos run against a real NetBox 4.7.3 (300 claims, then 300 carving /28s), started by hack/netbox/up.sh (root).
	mkdir -p $(CHAOS_OUT)
	@trap 'hack/netbox/down.sh' EXIT; env_file="$$(hack/netbox/up.sh)"; set -a; . "$$env_file"; set +a; \
	failed=""; KUBEBUILDER_ASSETS="$$(hack/envtest-binaries.sh)" go run ./test/chaos -backend netbox-real \
		-claims 300 -seeds 1 $(CHAOS_FLAGS) -workdir $(abspath $(CHAOS_OUT))/real-netbox -out $(CHAOS_OUT)/chaos-real-netbox.txt || failed="$$failed addresses"; \
	KUBEBUILDER_ASSETS="$$(hack/envtest-binaries.sh)" go run ./test/chaos -backend netbox-real -carve 28 \
		-claims 300 -seeds 1 $(CHAOS_FLAGS) -workdir $(abspath $(CHAOS_OUT))/real-netbox -out $(CHAOS_OUT)/chaos-real-netbox-carve.txt || failed="$$failed carving"; \
	if [ -n "$$failed" ]; then echo "chaos-real-netbox failed:$$failed"; exit 1; fi

# The end-to-end bench (test/bench), with every pool at its default
# settings (rate limit, --max-batch-size 50), as users run it: 1,000 claims
# at 10 ms per IPAM request with 1, 10 and 50 workers on each simulator,
# and with 10 and 50 workers with batching off; the same burst bound by the
# in-cluster provider (hack/incluster-provider.sh builds it once from
# test/incluster, whose go.mod pins its version; BENCH_FLAGS=
# "-incluster=false" leaves it out); then 10,000 on the NetBox simulator
# (peak memory). It prints a summary with each time as a ratio to the
# in-cluster provider's, and issue 24's targets with met or missed.
# BENCH_FLAGS="-scale-claims 0" leaves the 10,000 out; "-tuned-workers 10"
# adds a row with a tuned rate limit, labelled so; go run ./test/bench -h
# lists the rest. bench-real runs the same burst at 1 and 10 workers, and
# at 10 with batching off, against a real NetBox 4.7.3 that
# hack/netbox/up.sh installs and starts, beside the in-cluster provider and
# after NetBox's own floor: the same records POSTed to available-ips and
# deleted by a plain client. Neither is part of make test.
BENCH_FLAGS ?=
BENCH_REAL_FLAGS ?= -workers 1,10 -unbatched-workers 10 -scale-claims 0 -restart-window 0

.PHONY: bench
bench: ## Run the benchmarks at the pools' default settings and print their figures against the in-cluster provider, with issue 24's targets (backend micro-benchmark, then end to end on envtest).
	go test -run '^$$' -bench . -benchmem -count 5 ./backends/...
	KUBEBUILDER_ASSETS="$$(hack/envtest-binaries.sh)" go run ./test/bench $(BENCH_FLAGS)

.PHONY: bench-real
bench-real: ## Run the end-to-end bench against a real NetBox 4.7.3 started by hack/netbox/up.sh (root): NetBox's floor, then 1,000 claims at the defaults, against the in-cluster provider.
	@trap 'hack/netbox/down.sh' EXIT; env_file="$$(hack/netbox/up.sh)"; set -a; . "$$env_file"; set +a; \
	KUBEBUILDER_ASSETS="$$(hack/envtest-binaries.sh)" go run ./test/bench -backends netbox-real $(BENCH_REAL_FLAGS)

.PHONY: verify
verify: generate ## Check that generated files are current and the code is formatted and vetted.
	@git diff --exit-code -- api config || (echo "generated files are out of date: run make generate" && exit 1)
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go') && exit 1)
	go vet ./...

##@ Build and release

# VERSION is the manager's version (main.version, printed by --version) and
# the image tag; RELEASE_VERSION is the clusterctl release `make release` writes.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
RELEASE_VERSION ?= v0.1.0
RELEASE_DIR ?= out
IMG ?= ghcr.io/ipam-bridge/cluster-api-ipam-provider-bridge:$(VERSION)
# The Dockerfile builds with the same flags (test/release checks it).
LDFLAGS ?= -s -w -X main.version=$(VERSION)

.PHONY: build
build: ## Build the manager into bin/manager: static, with the Dockerfile's flags.
	CGO_ENABLED=0 go build -trimpath -ldflags "$(LDFLAGS)" -o bin/manager ./cmd

.PHONY: release
release: ## Write the release of RELEASE_VERSION into out/: ipam-components.yaml, metadata.yaml, monitoring.yaml and the manager image (OCI layout and tarball).
	go run ./hack/release -version $(RELEASE_VERSION) -out $(RELEASE_DIR)
	$(MAKE) image VERSION=$(RELEASE_VERSION) IMG="$$(go run ./hack/release -version $(RELEASE_VERSION) -print-image)"

# The manager image for IMAGE_PLATFORMS, built without a Docker engine by
# hack/image (a nested module: go-containerregistry stays out of the
# provider's go.mod), as an OCI image layout in out/image and the same
# layout as a tarball, out/manager-image.tar (docs/install.md says how to push it).
IMAGE_PLATFORMS ?= linux/amd64,linux/arm64

.PHONY: image
image: ## Build the manager image IMG for IMAGE_PLATFORMS into out/image (OCI layout) and out/manager-image.tar, without a Docker engine.
	cd hack/image && go run . -root ../.. -version $(VERSION) -ref $(IMG) -platforms $(IMAGE_PLATFORMS) \
		-out $(abspath $(RELEASE_DIR))/image -tar $(abspath $(RELEASE_DIR))/manager-image.tar

.PHONY: release-repository
release-repository: ## Lay the assets out as a clusterctl local repository in out/repository (see docs/install.md).
	go run ./hack/release -version $(RELEASE_VERSION) -repository $(abspath $(RELEASE_DIR))/repository

.PHONY: docker-build
docker-build: ## Build the manager image IMG with a Docker engine instead (make image needs none).
	docker build --build-arg VERSION=$(VERSION) -t $(IMG) .

.PHONY: test-release
test-release: ## Run the packaging tests: release through clusterctl onto envtest, RBAC, Dockerfile, docs.
	KUBEBUILDER_ASSETS="$$(hack/envtest-binaries.sh)" go test $(GO_TEST_FLAGS) ./test/release/... ./test/docs/...

##@ Tools

$(CONTROLLER_GEN):
	mkdir -p $(TOOLS_BIN)
	GOBIN=$(TOOLS_BIN) go install sigs.k8s.io/controller-tools/cmd/controller-gen@$(CONTROLLER_GEN_VERSION)
	mv $(TOOLS_BIN)/controller-gen $@
