#!/usr/bin/env bash
# Reconciler benchmark against local control planes (etcd + kube-apiserver v1.20, no kubelet):
# convergence time of the operator for N Machines next to the API server's write floor for the
# same client settings, and the operator's peak RSS at several Machine counts.
#
#   scripts/bench-reconciler.sh                       # N = 100, 1000; RSS at 0, 1000, 10000
#   scripts/bench-reconciler.sh --machines 100 --rss 0,1000
#   scripts/bench-reconciler.sh --modes idle,apply,change,failover   # what a user feels, N = 10000
#   scripts/bench-reconciler.sh --modes apply --converged 500 --apply-qps 10
#   scripts/bench-reconciler.sh --clusters 10x1000   # one operator, 10 remote clusters x 1,000
#
# Options (passed to examples/bench_reconciler.rs): --machines LIST, --rss LIST, --qps 50,
# --burst 100 (the client limits of the timed runs), --rss-qps 500 (the memory runs only need to
# converge, so they use a faster client); --modes idle,apply,change,failover with --converged
# 10000, --applies 200, --apply-qps 50, --idle-for 180; --clusters CxM[,CxM] (docs/design/performance.md).
set -euo pipefail
cd "$(dirname "$0")/.."
assets="$(scripts/envtest-assets.sh)"
cargo build --release --bin kubevirt-operator --example bench_reconciler >&2
target="${CARGO_TARGET_DIR:-target}"
KUBEBUILDER_ASSETS="$assets" exec "$target/release/examples/bench_reconciler" \
  --operator "$target/release/kubevirt-operator" "$@"
