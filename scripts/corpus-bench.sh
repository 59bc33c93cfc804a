#!/usr/bin/env bash
# The corpus campaign's own costs (issue 15's goals), measured and printed:
#   (a) wall time of a whole run against the time of its exclusive steps alone (from the
#       records: profile steps summed, each timing session counted once), goal <= 1.15x;
#   (b) a no-op re-run (everything up to date), goal < 1 s;
#   (c) `run --dry-run`, goal < 1 s;
#   (d) the engine's peak memory, goal < 200 MB: its own VmHWM (procfs, sampled every 0.1 s
#       while it runs, the last sample before it exits) and GNU time's maximum resident set
#       size, which is the largest of the engine and every process it started (an upper bound).
# Usage: scripts/corpus-bench.sh [PIPELINE] [OUTPUTS]
#   PIPELINE defaults to pipelines/pqclean.kdl; OUTPUTS to a fresh temporary folder (so the
#   first run measures everything). SKIP_RUN=1 skips (a) and measures (b)-(d) on OUTPUTS as
#   it is (give the folder of a finished run). Needs jq and GNU time (Debian: jq, time).
# Run it on a quiet machine: (a) takes as long as the campaign.
set -euo pipefail
cd "$(dirname "$0")/.."
pipeline=${1:-pipelines/pqclean.kdl}
out=${2:-$(mktemp -d)}
for tool in jq /usr/bin/time; do
    command -v "$tool" >/dev/null || { echo "corpus-bench: needs $tool (apt-get install -y jq time)" >&2; exit 2; }
done
cargo build --release --workspace -q
bin=./target/release/ngcc-pipe

# Runs the engine with the given arguments under GNU time while sampling its VmHWM; prints
# "<wall s> <engine VmHWM kB> <max RSS of the tree kB> <exit code>".
measure() {
    local tv hwm=0 pid rc
    tv=$(mktemp)
    /usr/bin/time -v -o "$tv" "$bin" "$@" >/dev/null 2>&1 &
    pid=$!
    # GNU time's child is the engine.
    local engine=""
    while kill -0 "$pid" 2>/dev/null; do
        [ -z "$engine" ] && engine=$(pgrep -P "$pid" -x ngcc-pipe || true)
        if [ -n "$engine" ] && [ -r "/proc/$engine/status" ]; then
            local h
            h=$(awk '/^VmHWM:/ {print $2}' "/proc/$engine/status" 2>/dev/null || true)
            [ -n "$h" ] && [ "$h" -gt "$hwm" ] && hwm=$h
        fi
        sleep 0.1
    done
    set +e
    wait "$pid"
    rc=$?
    set -e
    local wall maxrss
    wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {
        n = split($2, p, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + p[i]; print s }' "$tv")
    maxrss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$tv")
    rm -f "$tv"
    echo "$wall $hwm $maxrss $rc"
}

echo "pipeline $pipeline, outputs $out"
if [ "${SKIP_RUN:-0}" != 1 ]; then
    read -r wall hwm maxrss rc < <(measure run "$pipeline" --outputs "$out" -q)
    # Exclusive steps that ran in this run: profile records summed; a timing session's
    # records all span the session, so each session counts once (its longest record).
    started=$(jq -r .started "$out/campaign.json")
    # Time records live under records/, profile records under profile/.
    exclusive=$(find "$out/records" "$out/profile" -name '*.json' -print0 | xargs -0 jq -s --arg t "$started" '
        map(select(.started != null and .started >= $t and (.kind == "time" or .kind == "profile")))
        | (map(select(.kind == "profile")) | map(.duration_s) | add // 0)
          + (map(select(.kind == "time"))
             | group_by(.data.rounds.session // .id) | map(map(.duration_s) | max) | add // 0)')
    echo
    echo "(a) whole run:          $(printf '%.1f' "$wall") s wall (exit $rc)"
    echo "    exclusive steps:    $(printf '%.1f' "$exclusive") s (profile steps + timing sessions, from the records)"
    awk -v w="$wall" -v e="$exclusive" 'BEGIN {
        if (e > 0) printf "    ratio:              %.3f (goal <= 1.15)\n", w / e
        else print "    ratio:              no exclusive step ran" }'
    echo "    engine peak memory: $((hwm / 1024)) MB VmHWM; $((maxrss / 1024)) MB max RSS with its children"
fi

read -r wall hwm maxrss rc < <(measure run "$pipeline" --outputs "$out" -q)
echo "(b) no-op re-run:       $(printf '%.3f' "$wall") s (exit $rc; goal < 1 s), engine VmHWM $((hwm / 1024)) MB"
read -r wall hwm maxrss rc < <(measure run --dry-run "$pipeline" --outputs "$out")
echo "(c) run --dry-run:      $(printf '%.3f' "$wall") s (exit $rc; goal < 1 s), engine VmHWM $((hwm / 1024)) MB"
echo "(d) engine peak memory: see (a) for a whole run (goal < 200 MB)"
