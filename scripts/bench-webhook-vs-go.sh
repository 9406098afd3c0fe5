#!/usr/bin/env bash
# The webhook beside a plain Go net/http webhook doing the same mutate work
# (benches/go-webhook/main.go, built with Debian's golang-go), in one run on this host:
#   0. both servers answer benches/data/mutate-request.json; their JSON Patches, decoded, must be
#      the same (else the run stops);
#   1. for each server, ROUNDS times, alternating (round 1 Rust then Go, round 2 Go then Rust, ...)
#      so that drift in the machine's load falls on both:
#      peak: oha, as fast as $CONNECTIONS keep-alive connections go, for $DURATION;
#      then 50% of that server's own peak for $DURATION, arrivals evenly spaced
#      (examples/webhook_load.rs): p50/p99 of the round trip and from the scheduled start;
#   2. the medians per server, and the throughput ratio Rust/Go.
# Both servers get the same certificate and the machine's cores: tokio's workers are one per
# core, and the Go server runs with GOMAXPROCS=$(nproc).
# Usage: scripts/bench-webhook-vs-go.sh   (ROUNDS=2 DURATION=15s CONNECTIONS=16 to change)
# VERSUS=path/to/another/kubevirt-operator: that build's `webhook` takes the Go server's place (an
# A/B of two versions; their answers may differ, so the check only shows the difference), and
# "go" in the output reads "before".
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-15s}
CONNECTIONS=${CONNECTIONS:-16}
ROUNDS=${ROUNDS:-2}
RUST_PORT=${RUST_PORT:-18443}
GO_PORT=${GO_PORT:-18444}
URL_PATH=/mutate-vitistack-io-v1alpha1-machine
BODY=benches/data/mutate-request.json
TARGET_DIR=${CARGO_TARGET_DIR:-target}

command -v go >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq golang-go >/dev/null; }
command -v jq >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq jq >/dev/null; }
command -v oha >/dev/null 2>&1 || cargo install oha --locked --quiet
cargo build --release --quiet --bin kubevirt-operator --example webhook_load

tmp=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; rm -rf "$tmp"; }
trap cleanup EXIT
[ -n "${VERSUS:-}" ] || (cd benches/go-webhook && go build -o "$tmp/go-webhook" main.go)
echo "$(go version); $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg) at the start"

# shellcheck source=scripts/bench-certs.sh
. scripts/bench-certs.sh
bench_certs "$tmp"

RUST_LOG=warn "$TARGET_DIR/release/kubevirt-operator" webhook --cert-file "$tmp/cert.pem" \
  --key-file "$tmp/key.pem" --listen "127.0.0.1:$RUST_PORT" --metrics-bind-address 127.0.0.1:0 \
  --health-probe-bind-address 127.0.0.1:0 2>"$tmp/rust.log" &
pids+=($!)
if [ -n "${VERSUS:-}" ]; then
  RUST_LOG=warn "$VERSUS" webhook --cert-file "$tmp/cert.pem" --key-file "$tmp/key.pem" \
    --listen "127.0.0.1:$GO_PORT" --metrics-bind-address 127.0.0.1:0 \
    --health-probe-bind-address 127.0.0.1:0 2>"$tmp/go.log" &
else
  GOMAXPROCS=$(nproc) "$tmp/go-webhook" -cert "$tmp/cert.pem" -key "$tmp/key.pem" \
    -listen "127.0.0.1:$GO_PORT" 2>"$tmp/go.log" &
fi
pids+=($!)
url() { echo "https://127.0.0.1:$1$URL_PATH"; }
for port in "$RUST_PORT" "$GO_PORT"; do
  for _ in $(seq 100); do
    curl -sk -o /dev/null "https://127.0.0.1:$port/" && break
    sleep 0.1
  done
  curl -sk -o /dev/null "https://127.0.0.1:$port/" || { cat "$tmp"/*.log; exit 1; }
done

# Same answer from both: allowed, the uid, and the same JSON Patch once decoded.
answer() { # port
  curl -sS --cacert "$tmp/ca.pem" -H 'Content-Type: application/json' --data-binary "@$BODY" "$(url "$1")" |
    jq -S '.response | {uid, allowed, patchType, patch: (.patch | @base64d | fromjson
      | map(if .path == "/metadata/annotations" then .value |= map_values(fromjson) else . end))}'
}
answer "$RUST_PORT" >"$tmp/rust.patch"
answer "$GO_PORT" >"$tmp/go.patch"
if ! diff -u "$tmp/rust.patch" "$tmp/go.patch" && [ -z "${VERSUS:-}" ]; then
  echo "the servers' answers differ (above): not the same work, no comparison"
  exit 1
fi
echo "same answer from both: $(jq -c '[.patch[] | .path]' "$tmp/rust.patch")"

seconds=${DURATION%s}
measure() { # name port
  local peak_json peak half
  peak_json=$(oha --no-tui --output-format json -z "$DURATION" -c "$CONNECTIONS" --insecure -m POST \
    -T application/json -D "$BODY" "$(url "$2")")
  peak=$(jq '.summary.requestsPerSec | floor' <<<"$peak_json")
  half=$((peak / 2))
  "$TARGET_DIR/release/examples/webhook_load" "$(url "$2")" "$tmp/ca.pem" "$BODY" "$half" "$seconds" \
    "$CONNECTIONS" >"$tmp/half.json"
  jq -c --arg name "$1" --argjson peak "$peak_json" '{name: $name, peak: ($peak.summary.requestsPerSec | floor),
    peak_success: $peak.summary.successRate, half: .offered, achieved, failed,
    rtt_p50: .service_p50_us, rtt_p99: .service_p99_us, p50: .p50_us, p99: .p99_us,
    load: ($ENV.LOADAVG)}' "$tmp/half.json" | tee -a "$tmp/results.jsonl" |
    jq -r '"\(.name): peak \(.peak) req/s (success \(.peak_success * 100)%); at 50% (\(.half) req/s, even arrivals):
  round trip p50 \(.rtt_p50) µs, p99 \(.rtt_p99) µs; from the scheduled start p50 \(.p50) µs, p99 \(.p99) µs; failed \(.failed); load before \(.load)"'
}
for round in $(seq "$ROUNDS"); do
  if [ $((round % 2)) -eq 1 ]; then order=(rust go); else order=(go rust); fi
  for name in "${order[@]}"; do
    port=$RUST_PORT
    [ "$name" = go ] && port=$GO_PORT
    LOADAVG=$(cut -d' ' -f1 /proc/loadavg) measure "$name (round $round)" "$port"
  done
done

jq -rs 'def median: sort | if length % 2 == 1 then .[length / 2 | floor]
          else (.[length / 2 - 1] + .[length / 2]) / 2 end;
  def of($s): map(select(.name | startswith($s)));
  (of("rust")) as $r | (of("go")) as $g
  | "medians over \($r | length) rounds:",
    "  rust: peak \($r | map(.peak) | median) req/s, at 50%: round trip p99 \($r | map(.rtt_p99) | median) µs, from the scheduled start p99 \($r | map(.p99) | median) µs",
    "  go:   peak \($g | map(.peak) | median) req/s, at 50%: round trip p99 \($g | map(.rtt_p99) | median) µs, from the scheduled start p99 \($g | map(.p99) | median) µs",
    "  throughput Rust/Go: \(($r | map(.peak) | median) / ($g | map(.peak) | median) * 100 | round / 100)x (per round: \([range($r | length)] | map(($r[.].peak / $g[.].peak * 100 | round) / 100)))"' \
  "$tmp/results.jsonl"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
