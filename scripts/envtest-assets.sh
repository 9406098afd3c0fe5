#!/usr/bin/env bash
# Provides kube-apiserver, kube-controller-manager, etcd and kubectl for the end-to-end tests and
# `make dev` (kube-controller-manager runs Kubernetes' own garbage collector and namespace
# controller in the tests).
#
# Prints the directory that holds the three binaries (envtest's KUBEBUILDER_ASSETS layout).
# Order of preference, as setup-envtest users expect:
#   1. TEST_ASSET_KUBE_APISERVER / TEST_ASSET_KUBE_CONTROLLER_MANAGER / TEST_ASSET_ETCD /
#      TEST_ASSET_KUBECTL (single binaries)
#   2. KUBEBUILDER_ASSETS (a directory with kube-apiserver and etcd, e.g. from setup-envtest)
#   3. the project cache, built from Debian's Kubernetes v1.20.2 source when missing.
# Everything goes to stderr except the final directory, so callers can do
#   export KUBEBUILDER_ASSETS=$(scripts/envtest-assets.sh)
#
# Runs unattended on Debian bookworm (as root, or with sudo). What it changes on the machine:
# an apt source list (bookworm deb-src, bullseye pinned low for Go 1.15) and the packages
# golang-1.15-go, make and rsync. etcd is unpacked from Debian's etcd-server package into the
# cache, not installed, so no etcd service is started. Concurrent runs wait for each other.
set -euo pipefail

CACHE="${KUBEVIRT_OPERATOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubevirt-operator}"
ASSETS="$CACHE/envtest/bin"
K8S_VERSION=v1.20.2
log() { echo "envtest-assets: $*" >&2; }

have_all() {
  [ -x "$1/kube-apiserver" ] && [ -x "$1/kube-controller-manager" ] && [ -x "$1/etcd" ] && [ -x "$1/kubectl" ]
}

sudo_if_needed() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }

link_from_env() {
  mkdir -p "$ASSETS.env"
  local src
  for bin in kube-apiserver kube-controller-manager etcd kubectl; do
    case $bin in
      kube-apiserver) src="${TEST_ASSET_KUBE_APISERVER:-${KUBEBUILDER_ASSETS:+$KUBEBUILDER_ASSETS/kube-apiserver}}" ;;
      kube-controller-manager) src="${TEST_ASSET_KUBE_CONTROLLER_MANAGER:-${KUBEBUILDER_ASSETS:+$KUBEBUILDER_ASSETS/kube-controller-manager}}" ;;
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

write_sources() {
  # Debian's own archive: bookworm sources for the Kubernetes tree, bullseye for Go 1.15
  # (bookworm's Go refuses the vendored go.mod of v1.20).
  sudo_if_needed tee /etc/apt/sources.list.d/kubevirt-operator-envtest.sources >/dev/null <<SRC
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: $1
Suites: bullseye
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
}

apt_ready=
apt_prepare() {
  [ -n "$apt_ready" ] && return 0
  write_sources http://deb.debian.org/debian
  # Never let bullseye replace anything else on the machine.
  sudo_if_needed tee /etc/apt/preferences.d/kubevirt-operator-envtest >/dev/null <<'PIN'
Package: *
Pin: release n=bullseye
Pin-Priority: 100
PIN
  log "apt-get update"
  if ! sudo_if_needed apt-get update -qq >&2 || ! apt-cache show golang-1.15-go >/dev/null 2>&1; then
    # bullseye leaves deb.debian.org for archive.debian.org once its LTS ends.
    log "bullseye not on deb.debian.org; using archive.debian.org"
    write_sources http://archive.debian.org/debian
    sudo_if_needed apt-get update -qq >&2
  fi
  apt_ready=1
}

apt_install() {
  apt_prepare
  log "apt-get install $*"
  DEBIAN_FRONTEND=noninteractive sudo_if_needed apt-get install -y -qq --no-install-recommends "$@" >&2
}

provide_etcd() {
  local system
  if system=$(command -v etcd); then
    ln -sf "$(readlink -f "$system")" "$ASSETS/etcd"
    return
  fi
  apt_prepare
  local root="$CACHE/envtest/etcd-root" debs="$CACHE/envtest/debs"
  rm -rf "$root" "$debs" && mkdir -p "$root" "$debs"
  log "unpacking Debian's etcd-server package into $root"
  (cd "$debs" && apt-get download etcd-server >&2)
  dpkg-deb -x "$debs"/etcd-server_*.deb "$root"
  rm -rf "$debs"
  ln -sf "$root/usr/bin/etcd" "$ASSETS/etcd"
}

build_kubernetes() {
  local go=/usr/lib/go-1.15/bin/go
  [ -x "$go" ] || apt_install golang-1.15-go
  command -v rsync >/dev/null 2>&1 || apt_install rsync
  command -v make >/dev/null 2>&1 || apt_install make
  local src="$CACHE/envtest/src"
  if [ ! -f "$src/kubernetes/.unpacked" ]; then
    apt_prepare
    rm -rf "$src" && mkdir -p "$src"
    log "fetching Debian's kubernetes source package (v1.20.2, 34 MB)"
    (cd "$src" && apt-get source --download-only kubernetes >&2)
    local orig
    orig=$(ls "$src"/kubernetes_*.orig.tar.* | head -n1)
    mkdir -p "$src/kubernetes"
    tar -xf "$orig" -C "$src/kubernetes" --strip-components=1
    touch "$src/kubernetes/.unpacked"
  fi
  log "building kube-apiserver, kube-controller-manager and kubectl $K8S_VERSION with Go 1.15 (about 10 minutes on 2 cores)"
  local ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=20 -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=20"
  (
    cd "$src/kubernetes"
    export PATH="/usr/lib/go-1.15/bin:$PATH" GOFLAGS=-mod=vendor GO111MODULE=on GOCACHE="$CACHE/envtest/gocache" GOPATH="$CACHE/envtest/gopath"
    [ -f pkg/generated/openapi/zz_generated.openapi.go ] || make generated_files >&2
    # Build next to the target and rename, so an interrupted build never leaves a broken binary.
    for cmd in kube-apiserver kube-controller-manager kubectl; do
      [ -x "$ASSETS/$cmd" ] && continue
      go build -ldflags "$ldflags" -o "$ASSETS/.$cmd.partial" "./cmd/$cmd" >&2
      mv "$ASSETS/.$cmd.partial" "$ASSETS/$cmd"
    done
  )
  # Only the binaries are worth keeping: the tree, Go's caches and GOPATH take gigabytes.
  log "removing build intermediates"
  chmod -R u+w "$CACHE/envtest/gopath" 2>/dev/null || true
  rm -rf "$src" "$CACHE/envtest/gocache" "$CACHE/envtest/gopath"
}

provide_cache() {
  mkdir -p "$ASSETS"
  have_all "$ASSETS" && return 0
  # One provider at a time (make test in two shells, or the IDE and a terminal).
  exec 9>"$CACHE/envtest/.lock"
  if ! flock -n 9; then
    log "another envtest-assets.sh is providing the binaries; waiting for it"
    flock 9
  fi
  [ -x "$ASSETS/etcd" ] || provide_etcd
  have_all "$ASSETS" || build_kubernetes
  exec 9>&-
  have_all "$ASSETS" || { log "could not provide kube-apiserver, etcd and kubectl in $ASSETS"; exit 1; }
}

if [ -n "${TEST_ASSET_KUBE_APISERVER:-}${TEST_ASSET_KUBE_CONTROLLER_MANAGER:-}${TEST_ASSET_ETCD:-}${KUBEBUILDER_ASSETS:-}" ]; then
  # Given binaries win; what they lack (often kubectl) comes from the cache, built if needed.
  if ! link_from_env; then
    provide_cache
    link_from_env
  fi
  echo "$ASSETS.env"
  exit 0
fi

provide_cache
echo "$ASSETS"
