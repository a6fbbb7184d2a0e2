# Karmada-Operator: an operator-sdk ansible-type operator for Karmada.
# `make help` lists the targets. The two a new machine needs: `make up` and `make test`.

include hack/versions.env

# Operator image and bundle (operator-sdk conventions).
VERSION ?= 0.1.0
IMAGE_TAG_BASE ?= docker.io/karmada/karmada-ansible-operator
IMG ?= $(IMAGE_TAG_BASE):$(VERSION)
BUNDLE_IMG ?= $(IMAGE_TAG_BASE)-bundle:v$(VERSION)
CATALOG_IMG ?= $(IMAGE_TAG_BASE)-catalog:v$(VERSION)
# OLM's channel naming convention (candidate, fast, stable; the bundle validator warns on
# others): pre-release builds go to candidate. The CSV's maturity says alpha.
CHANNELS ?= candidate
DEFAULT_CHANNEL ?= candidate
BUNDLE_CHANNELS := --channels=$(CHANNELS)
BUNDLE_DEFAULT_CHANNEL := --default-channel=$(DEFAULT_CHANNEL)
BUNDLE_METADATA_OPTS ?= $(BUNDLE_CHANNELS) $(BUNDLE_DEFAULT_CHANNEL)
# docker or podman; building images needs an engine (none runs on the CI machines).
CONTAINER_TOOL ?= docker

SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

# Caches live outside the work tree and survive between runs.
KO_CACHE ?= $(HOME)/.cache/karmada-operator
export KO_CACHE
# Tools this project builds or installs (pinned); LOCALBIN is the scaffold's name for it.
LOCALBIN ?= $(KO_CACHE)/links
VENV ?= $(KO_CACHE)/venv
PY := $(VENV)/bin/python
# The pinned kubectl when the test bed's binaries are built, else the machine's own (`make install
# deploy` on a machine with only kubectl: README "Use it on your own cluster").
KUBECTL ?= $(or $(wildcard $(LOCALBIN)/kubectl),kubectl)
KUSTOMIZE ?= $(KUBECTL) kustomize
OPERATOR_SDK ?= $(LOCALBIN)/operator-sdk
ANSIBLE_OPERATOR ?= $(LOCALBIN)/ansible-operator
export PATH := $(VENV)/bin:$(LOCALBIN):$(PATH)
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
# Our Python package, karmada_operator (plugins/module_utils/karmada_operator; docs/architecture.md).
export PYTHONPATH := $(CURDIR)/plugins/module_utils

PYTEST_ARGS ?=

.PHONY: all
all: help

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "\nUsage:\n  make \033[36m<target>\033[0m\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-20s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) } ' $(MAKEFILE_LIST)

.PHONY: setup
setup: ## Install what a fresh machine lacks (Debian packages, pinned Python venv). Quick when done.
	@hack/setup.sh >/dev/null

.PHONY: generate
generate: setup ## Regenerate config/crd/bases from hack/crdgen/schema.py.
	$(PY) hack/crdgen/generate.py

##@ Test

.PHONY: lint
lint: setup ## Static checks: ansible-lint, yamllint, shellcheck, ruff, syntax-check, CRD and sample schemas, bundle in sync.
	hack/lint.sh

.PHONY: test
test: setup testenv-bin testenv-bin-previous testenv-bin-olm lint ## The test command: lint, then every pytest tier (end-to-end and Karmada's own e2e suite on the bed; unit and integration beside it, hack/test.sh).
	PY=$(PY) hack/test.sh $(PYTEST_ARGS)

.PHONY: unit
unit: setup ## Unit tests only (no processes started).
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

.PHONY: e2e
e2e: setup testenv-bin testenv-bin-previous testenv-bin-olm ## Tier-3 tests on the local host cluster built by hack/testenv.
	$(PY) -m pytest tests/e2e $(PYTEST_ARGS)

.PHONY: bench
bench: setup testenv-bin testenv-bin-previous ## Benchmarks; print figures and append them to benchmarks/results.md.
	hack/bench.sh

##@ Test environment (real host cluster + kwok members, built from pinned sources)

.PHONY: testenv-bin
testenv-bin: ## Build the pinned binaries into $(KO_CACHE)/bin, Karmada's e2e suite too (skips what is there; KO_PREBUILT_BIN to reuse).
	@hack/testenv/build-bins.sh $(COMPONENTS)
	@hack/testenv/fetch-manifests.sh
	@hack/karmada-e2e/build.sh

.PHONY: testenv-bin-previous
testenv-bin-previous: ## Build Karmada's default components and karmada-agent at KARMADA_PREVIOUS_VERSION (the upgrade tests start there; skips what is there).
	@KO_KARMADA_VERSION=previous hack/testenv/build-bins.sh karmada-aggregated-apiserver karmada-controller-manager karmada-scheduler karmada-webhook karmada-agent

.PHONY: testenv-bin-olm
testenv-bin-olm: ## Build OLM's programs, opm and grpc-health-probe from their pinned modules (test_olm.py and make olm-up; skips what is there).
	@hack/testenv/build-bins.sh olm olm-catalog olm-package-server olm-copy-content olm-cpb opm grpc-health-probe

.PHONY: testenv-up
testenv-up: setup testenv-bin ## Start the local host cluster (idempotent).
	hack/testenv/up.sh

.PHONY: testenv-down
testenv-down: ## Stop the local host cluster and remove its state (idempotent).
	hack/testenv/down.sh

.PHONY: testenv-members
testenv-members: ## Start MEMBERS kwok member clusters with NODES fake nodes each.
	hack/testenv/members.sh $(or $(MEMBERS),2) $(or $(NODES),3)

.PHONY: testenv-kubeconfig
testenv-kubeconfig: ## Print the host cluster's kubeconfig path.
	@hack/testenv/kubeconfig.sh

.PHONY: operator-image
operator-image: setup ## Assemble the operator image as an OCI archive, no Docker (IMG to name it, VERIFY=1 to check it).
	@hack/testenv/build-bins.sh ansible-operator
	hack/testenv/operator-image.sh $(if $(VERIFY),--verify) $(if $(filter environment command,$(origin IMG)),$(IMG))

##@ Local use

.PHONY: up
up: setup testenv-up ## Local cluster + 2 kwok members + CRDs + operator + sample KarmadaDeployment (hack/up.sh).
	hack/up.sh

.PHONY: down
down: ## Undo `make up`.
	hack/down.sh

.PHONY: run
run: setup ## Run the operator locally against the current kubeconfig (ansible-operator + watches.yaml).
	$(ANSIBLE_OPERATOR) run --watches-file=./watches.yaml --ansible-roles-path=$(CURDIR)/roles \
		--leader-elect=false --health-probe-bind-address=127.0.0.1:6789 --metrics-bind-address=0

##@ Build

.PHONY: docker-build
docker-build: ## Build the operator image (needs a container engine).
	$(CONTAINER_TOOL) build -t $(IMG) .

.PHONY: docker-push
docker-push: ## Push the operator image.
	$(CONTAINER_TOOL) push $(IMG)

##@ Deployment

.PHONY: install
install: ## Install the CRDs into the cluster in the current kubeconfig.
	$(KUSTOMIZE) config/crd | $(KUBECTL) apply -f -

.PHONY: uninstall
uninstall: ## Remove the CRDs (and every CR) from the cluster.
	$(KUSTOMIZE) config/crd | $(KUBECTL) delete --ignore-not-found -f -

.PHONY: deploy
deploy: ## Deploy the operator (CRDs, RBAC, Deployment) with image IMG.
	cd config/manager && $(KUSTOMIZE) . >/dev/null
	$(KUSTOMIZE) config/default | sed 's|docker.io/karmada/karmada-ansible-operator:0.1.0|$(IMG)|' | $(KUBECTL) apply -f -

.PHONY: undeploy
undeploy: ## Remove the operator.
	$(KUSTOMIZE) config/default | $(KUBECTL) delete --ignore-not-found -f -

##@ Bundle (OLM)

.PHONY: operator-sdk
operator-sdk: ## Build the pinned operator-sdk CLI.
	@hack/testenv/build-bins.sh operator-sdk

.PHONY: bundle
bundle: setup ## Regenerate bundle/ from config/ (kustomize + hack/bundle/generate.py), then validate it.
	$(KUSTOMIZE) config/manifests | $(PY) hack/bundle/generate.py --input - --version $(VERSION) --image $(IMG) $(BUNDLE_METADATA_OPTS)
	$(MAKE) --no-print-directory bundle-validate

.PHONY: bundle-validate
bundle-validate: ## Validate bundle/ as `operator-sdk bundle validate --select-optional suite=operatorframework` does.
	@hack/testenv/build-bins.sh bundle-validate
	$(LOCALBIN)/bundle-validate -k8s-version $(patsubst v%,%,$(basename $(KUBERNETES_VERSION))) ./bundle

.PHONY: bundle-build
bundle-build: ## Build the bundle image.
	$(CONTAINER_TOOL) build -f bundle.Dockerfile -t $(BUNDLE_IMG) .

.PHONY: bundle-push
bundle-push: ## Push the bundle image.
	$(CONTAINER_TOOL) push $(BUNDLE_IMG)

.PHONY: olm-up
olm-up: setup ## OLM on the test bed's host cluster (pinned sources, local images) with a catalog of bundle/ (hack/olm).
	$(PY) hack/olm/olm.py up --version $(VERSION)

.PHONY: olm-down
olm-down: ## Remove OLM, its CRDs and what it installed from the host cluster.
	$(PY) hack/olm/olm.py down

.PHONY: catalog-build
catalog-build: ## Build a catalog image holding the bundle (needs opm and a container engine).
	opm index add --container-tool $(CONTAINER_TOOL) --mode semver --tag $(CATALOG_IMG) --bundles $(BUNDLE_IMG)

.PHONY: catalog-push
catalog-push: ## Push the catalog image.
	$(CONTAINER_TOOL) push $(CATALOG_IMG)
