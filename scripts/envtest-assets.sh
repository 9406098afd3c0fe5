#!/usr/bin/env bash
# Provides kube-apiserver, etcd and kubectl for the end-to-end tests and `make dev`.
#
# Prints the directory that holds the three binaries (envtest's KUBEBUILDER_ASSETS layout).
# Order of preference, as setup-envtest users expect:
#   1. TEST_ASSET_KUBE_APISERVER / TEST_ASSET_ETCD / TEST_ASSET_KUBECTL (single binaries)
#   2. KUBEBUILDER_ASSETS (a directory with kube-apiserver and etcd, e.g. from setup-envtest)
#   3. the project cache, built from Debian's Kubernetes v1.20.2 source when missing.
# Everything goes to stderr except the final directory, so callers can do
#   export KUBEBUILDER_ASSETS=$(scripts/envtest-assets.sh)
set -euo pipefail

CACHE="${KUBEVIRT_OPERATOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubevirt-operator}"
ASSETS="$CACHE/envtest/bin"
K8S_VERSION=v1.20.2
log() { echo "envtest-assets: $*" >&2; }

have_all() { [ -x "$1/kube-apiserver" ] && [ -x "$1/etcd" ] && [ -x "$1/kubectl" ]; }

link_from_env() {
  mkdir -p "$ASSETS.env"
  local src
  for bin in kube-apiserver etcd kubectl; do
    case $bin in
      kube-apiserver) src="${TEST_ASSET_KUBE_APISERVER:-${KUBEBUILDER_ASSETS:+$KUBEBUILDER_ASSETS/kube-apiserver}}" ;;
      etcd) src="${TEST_ASSET_ETCD:-${KUBEBUILDER_ASSETS:+$KUBEBUILDER_ASSETS/etcd}}" ;;
      kubectl) src="${TEST_ASSET_KUBECTL:-${KUBEBUILDER_ASSETS:+$KUBEBUILDER_ASSETS/kubectl}}" ;;
    esac
    if [ -n "$src" ] && [ -x "$src" ]; then
      ln -sf "$(readlink -f "$src")" "$ASSETS.env/$bin"
    elif [ -x "$ASSETS/$bin" ]; then
      ln -sf "$ASSETS/$bin" "$ASSETS.env/$bin"
    else
      return 1
    fi
  done
}

apt_ready=
apt_prepare() {
  [ -n "$apt_ready" ] && return 0
  local sudo=
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  # Debian's own archive: bookworm sources for the Kubernetes tree, bullseye for Go 1.15
  # (bookworm's Go refuses the vendored go.mod of v1.20).
  $sudo tee /etc/apt/sources.list.d/kubevirt-operator-envtest.sources >/dev/null <<'SRC'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian
Suites: bullseye
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  # Never let bullseye replace anything else on the machine.
  $sudo tee /etc/apt/preferences.d/kubevirt-operator-envtest >/dev/null <<'PIN'
Package: *
Pin: release n=bullseye
Pin-Priority: 100
PIN
  log "apt-get update"
  $sudo apt-get update -qq >&2
  apt_ready=1
}

apt_install() {
  local sudo=
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  apt_prepare
  log "apt-get install $*"
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$@" >&2
}

build_etcd() {
  command -v etcd >/dev/null 2>&1 || [ -x /usr/bin/etcd ] || apt_install etcd-server
  ln -sf "$(readlink -f "$(command -v etcd || echo /usr/bin/etcd)")" "$ASSETS/etcd"
}

build_kubernetes() {
  local go=/usr/lib/go-1.15/bin/go
  [ -x "$go" ] || apt_install golang-1.15-go
  command -v rsync >/dev/null 2>&1 || apt_install rsync
  command -v make >/dev/null 2>&1 || apt_install make
  local src="$CACHE/envtest/src"
  if [ ! -d "$src/kubernetes" ]; then
    apt_prepare
    rm -rf "$src" && mkdir -p "$src"
    log "fetching Debian's kubernetes source package (v1.20.2, 34 MB)"
    (cd "$src" && apt-get source --download-only kubernetes >&2)
    local orig
    orig=$(ls "$src"/kubernetes_*.orig.tar.* | head -n1)
    mkdir -p "$src/kubernetes"
    tar -xf "$orig" -C "$src/kubernetes" --strip-components=1
  fi
  log "building kube-apiserver and kubectl $K8S_VERSION with Go 1.15 (about 5 minutes on 2 cores)"
  local ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=20 -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=20"
  (
    cd "$src/kubernetes"
    export PATH="/usr/lib/go-1.15/bin:$PATH" GOFLAGS=-mod=vendor GO111MODULE=on GOCACHE="$CACHE/envtest/gocache" GOPATH="$CACHE/envtest/gopath"
    [ -f pkg/generated/openapi/zz_generated.openapi.go ] || make generated_files >&2
    [ -x "$ASSETS/kube-apiserver" ] || go build -ldflags "$ldflags" -o "$ASSETS/kube-apiserver" ./cmd/kube-apiserver >&2
    [ -x "$ASSETS/kubectl" ] || go build -ldflags "$ldflags" -o "$ASSETS/kubectl" ./cmd/kubectl >&2
  )
}

if [ -n "${TEST_ASSET_KUBE_APISERVER:-}${TEST_ASSET_ETCD:-}${KUBEBUILDER_ASSETS:-}" ]; then
  # Given binaries win; what they lack (often kubectl) comes from the cache, built if needed.
  if ! link_from_env; then
    mkdir -p "$ASSETS"
    [ -x "$ASSETS/etcd" ] || build_etcd
    have_all "$ASSETS" || build_kubernetes
    link_from_env
  fi
  echo "$ASSETS.env"
  exit 0
fi

mkdir -p "$ASSETS"
[ -x "$ASSETS/etcd" ] || build_etcd
have_all "$ASSETS" || build_kubernetes
have_all "$ASSETS" || { log "could not provide kube-apiserver, etcd and kubectl in $ASSETS"; exit 1; }
echo "$ASSETS"
