#!/usr/bin/env bash
# Admission throughput and latency over TLS keep-alive, on this host: the release binary's
# `webhook` server and the `oha` load generator (installed from crates.io when missing).
#   1. peak: as fast as 16 keep-alive connections go, for $DURATION;
#   2. 50% of that peak rate, for $DURATION: p50/p99 latency.
# Usage: scripts/bench-webhook.sh   (DURATION=20s CONNECTIONS=16 to change)
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-15s}
CONNECTIONS=${CONNECTIONS:-16}
PORT=${PORT:-18443}
URL="https://127.0.0.1:$PORT/mutate-vitistack-io-v1alpha1-machine"
BODY=benches/data/mutate-request.json

cargo build --release --quiet
command -v oha >/dev/null 2>&1 || cargo install oha --locked --quiet
command -v jq >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq jq >/dev/null; }

tmp=$(mktemp -d)
cleanup() { [ -n "${server:-}" ] && kill "$server" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 1 \
  -keyout "$tmp/key.pem" -out "$tmp/cert.pem" -subj /CN=127.0.0.1 \
  -addext subjectAltName=IP:127.0.0.1 2>/dev/null
RUST_LOG=warn target/release/kubevirt-operator webhook --cert-file "$tmp/cert.pem" --key-file "$tmp/key.pem" \
  --listen "127.0.0.1:$PORT" --metrics-bind-address 127.0.0.1:0 --health-probe-bind-address 127.0.0.1:0 \
  2>"$tmp/server.log" &
server=$!
for _ in $(seq 100); do
  curl -sk -o /dev/null "https://127.0.0.1:$PORT/" && break
  sleep 0.1
done
kill -0 "$server" 2>/dev/null || { echo "the webhook server did not start:"; cat "$tmp/server.log"; exit 1; }

load() { # extra oha args...
  oha --no-tui --output-format json -z "$DURATION" -c "$CONNECTIONS" --insecure -m POST \
    -T application/json -D "$BODY" "$@" "$URL"
}
report() { # label json
  jq -r --arg name "$1" '"\($name): \(.summary.requestsPerSec | floor) req/s, p50 \(.latencyPercentiles.p50 * 1e6 | floor) µs, p99 \(.latencyPercentiles.p99 * 1e6 | floor) µs, success \(.summary.successRate * 100)%, status codes \(.statusCodeDistribution)"' <<<"$2"
}

peak_json=$(load)
report "peak ($CONNECTIONS connections)" "$peak_json"
peak=$(jq '.summary.requestsPerSec | floor' <<<"$peak_json")
half=$((peak / 2))
half_json=$(load -q "$half")
report "50% of peak ($half req/s)" "$half_json"
echo "server RSS after the runs: $(ps -o rss= -p "$server" | awk '{printf "%.1f MiB", $1/1024}')"
