#!/usr/bin/env bash
# Admission throughput and latency over TLS keep-alive, on this host: the release binary's
# `webhook` server and the `oha` load generator (installed from crates.io when missing).
#   1. peak: oha, as fast as 16 keep-alive connections go, for $DURATION;
#   2. 50% of that peak rate for $DURATION, arrivals evenly spaced (examples/webhook_load.rs):
#      p50/p99 of the round trip (request written -> response read), and from each request's
#      scheduled start, which adds the time the sender's thread waited for a core;
#   3. the same rate with oha's own limiter, for comparison: it releases requests in bursts on
#      tokio's 1 ms timer ticks, so its tail is mostly the wait behind the rest of the burst.
# Usage: scripts/bench-webhook.sh   (DURATION=20s CONNECTIONS=16 to change)
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-15s}
CONNECTIONS=${CONNECTIONS:-16}
PORT=${PORT:-18443}
URL="https://127.0.0.1:$PORT/mutate-vitistack-io-v1alpha1-machine"
BODY=benches/data/mutate-request.json

cargo build --release --quiet --bin kubevirt-operator --example webhook_load
[ -n "${ATTACK_ONLY:-}" ] || command -v oha >/dev/null 2>&1 || cargo install oha --locked --quiet
command -v jq >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq jq >/dev/null; }

tmp=$(mktemp -d)
cleanup() { [ -n "${server:-}" ] && kill "$server" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
# shellcheck source=scripts/bench-certs.sh
. scripts/bench-certs.sh
bench_certs "$tmp"
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

seconds=${DURATION%s}
if [ -z "${ATTACK_ONLY:-}" ]; then
  peak_json=$(load)
  report "peak ($CONNECTIONS connections)" "$peak_json"
  peak=$(jq '.summary.requestsPerSec | floor' <<<"$peak_json")
  half=$((peak / 2))
  target/release/examples/webhook_load "$URL" "$tmp/ca.pem" "$BODY" "$half" "$seconds" "$CONNECTIONS" |
    jq -r '"50% of peak, even arrivals (\(.offered) req/s): \(.achieved) req/s, failed \(.failed) of \(.requests)
  round trip (request written -> response read): p50 \(.service_p50_us) µs, p99 \(.service_p99_us) µs
  from the scheduled start (adds the sender waking late): p50 \(.p50_us) µs, p99 \(.p99_us) µs, p99.9 \(.p999_us) µs"'
  half_json=$(load -q "$half")
  report "50% of peak, oha's 1 ms-tick limiter ($half req/s)" "$half_json"
  echo "server RSS after the runs: $(ps -o rss= -p "$server" | awk '{printf "%.1f MiB", $1/1024}')"
fi

ATTACK_RATE=${ATTACK_RATE:-2000}
ATTACKERS=${ATTACKERS:-4}
# ATTACKER_PREFIX="nice -n 19" runs the attackers' curl at the lowest priority: on this one
# machine they stand in for remote clients, whose TLS and process start-up would not share the
# server's cores.
ATTACKER_PREFIX=${ATTACKER_PREFIX:-}
python3 - "$BODY" "$tmp" <<'PY'
import json, sys
review = json.load(open(sys.argv[1]))
for name, spec in [("boot-order", {"bootOrder": ["x"] * 600_000}),
                   ("long-string", {"cloudInit": {"userData": "x" * 2_500_000}})]:
    review["request"]["object"]["spec"] = spec
    json.dump(review, open(f"{sys.argv[2]}/hostile-{name}.json", "w"))
PY
even() { # label
  target/release/examples/webhook_load "$URL" "$tmp/ca.pem" "$BODY" "$ATTACK_RATE" "$seconds" 4 |
    jq -r --arg name "$1" '"\($name) (\(.offered) req/s even arrivals): failed \(.failed) of \(.requests), round trip p50 \(.service_p50_us) µs, p99 \(.service_p99_us) µs; from the scheduled start p99 \(.p99_us) µs"'
}
even "quiet"
hostile() { # body-file: posts it back to back until $tmp/stop exists, noting each answer's status
  while [ ! -e "$tmp/stop" ]; do
    $ATTACKER_PREFIX curl -sk -o /dev/null -w '%{http_code}\n' -H 'Content-Type: application/json' \
      --data-binary "@$1" "$URL" >>"$1.$BASHPID.codes" || true
  done
}
attackers=()
for i in $(seq "$ATTACKERS"); do
  if [ $((i % 2)) -eq 0 ]; then body=boot-order; else body=long-string; fi
  hostile "$tmp/hostile-$body.json" &
  attackers+=($!)
done
sleep 1
even "under attack"
touch "$tmp/stop"
wait "${attackers[@]}"
echo "hostile bodies answered meanwhile, by status: $(cat "$tmp"/hostile-*.codes | sort | uniq -c | awk '{printf "%s%s x %s", sep, $2, $1; sep = ", "}')"
echo "server peak RSS over every run: $(awk '/VmHWM/ {printf "%.1f MiB", $2/1024}' "/proc/$server/status")"
