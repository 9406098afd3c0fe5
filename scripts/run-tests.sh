#!/usr/bin/env bash
# Builds every test target once, then runs the test binaries concurrently (TEST_JOBS at a time,
# default 3), longest first. Most end-to-end tests wait on a control plane rather than compute, so
# running binaries side by side roughly halves the wall time on two cores; tests inside one binary
# still share that binary's control plane, as under `cargo test`.
#
# Each binary's output goes to target/test-logs/NAME.log; a failing binary's log is printed whole.
# TEST_ARGS is passed to every binary (e.g. a test-name filter, or --nocapture).
set -euo pipefail
cd "$(dirname "$0")/.."
CARGO="${CARGO:-cargo}"
JOBS="${TEST_JOBS:-3}"
LOGS=target/test-logs
rm -rf "$LOGS" && mkdir -p "$LOGS"

# One build of every test target; the JSON lines name each executable and its target.
"$CARGO" test --no-run --message-format=json-render-diagnostics >"$LOGS/build.json"
python3 - "$LOGS/build.json" >"$LOGS/binaries" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if m.get("reason") == "compiler-artifact" and m.get("profile", {}).get("test") and m.get("executable"):
        t = m["target"]
        name = t["name"] if t["kind"] != ["lib"] else "lib"
        if "bin" in t["kind"]:
            name = "bin-" + t["name"]
        print(name, m["executable"])
PY

# Slowest first (measured), so the last ones to finish are short; unknown binaries come after.
SLOW="cert_rotation reconciler_leader reconciler_cdi_alone reconciler_ownership chart_install reconciler_restart proptest_admission api_use rbac_least_privilege chart_lifecycle chart_scan disk_safety reconciler_e2e control_plane"
{
  for s in $SLOW; do grep -E "^$s " "$LOGS/binaries" || true; done
  grep -vE "^($(echo "$SLOW" | tr ' ' '|')) " "$LOGS/binaries" || true
} >"$LOGS/order"

export CARGO_MANIFEST_DIR="$PWD"
run_one() {
  local name=$1 exe=$2
  local start=$SECONDS status=0
  # shellcheck disable=SC2086 # TEST_ARGS is a word list on purpose
  "$exe" ${TEST_ARGS:-} >"$LOGS/$name.log" 2>&1 || status=$?
  local summary
  summary=$(grep -E '^test result:' "$LOGS/$name.log" | tail -n1 || true)
  printf '%-28s %4ss  %s\n' "$name" $((SECONDS - start)) "${summary:-exit $status}"
  if [ "$status" -ne 0 ]; then
    echo "$name" >>"$LOGS/failed"
    { echo "----- $name (exit $status) -----"; cat "$LOGS/$name.log"; echo "----- end of $name -----"; } >&2
  fi
}
export -f run_one
export LOGS

started=$SECONDS
# xargs runs up to JOBS binaries at once; each line of "order" is "name executable".
xargs -P "$JOBS" -L 1 bash -c 'run_one "$0" "$1"' <"$LOGS/order"
"$CARGO" test --doc --quiet >"$LOGS/doc.log" 2>&1 || { cat "$LOGS/doc.log" >&2; echo doc >>"$LOGS/failed"; }

passed=$(grep -hE '^test result:' "$LOGS"/*.log | awk '{p += $4} END {print p + 0}')
failed=$(grep -hE '^test result:' "$LOGS"/*.log | awk '{f += $6} END {print f + 0}')
ignored=$(grep -hE '^test result:' "$LOGS"/*.log | awk '{i += $8} END {print i + 0}')
echo "tests: $passed passed, $failed failed, $ignored ignored, in $((SECONDS - started))s"
if [ -s "$LOGS/failed" ]; then
  echo "failed binaries: $(tr '\n' ' ' <"$LOGS/failed")" >&2
  exit 1
fi
