#!/usr/bin/env bash
# How this host's speed changes from one 20 ms batch to the next, and what a yardstick can
# explain of it (issue 28: why the ±1% precision target is out of reach here). A benchmark
# to run on a quiet machine, not a test; about a minute for 400 rounds.
#
#   scripts/host-states.sh OUTPUTS [ROUNDS]
#
# OUTPUTS is a built output folder of pipelines/x86_1.kdl (its build/ and yardstick/). The
# probe (scripts/host-states.c, compiled here) pins itself to BENCH_CPU (default 1), loads
# the yardstick and the keygen of INSTANCES (default below) and times ROUNDS rounds
# (default 400) of one 20 ms batch per KEM in a shuffled order, with the yardstick timed
# in short blocks inside every batch and in a batch of its own at the start of each round.
# Then per KEM the robust spread (1.4826 x MAD / median) of its batches, raw and divided by
# either yardstick, and the same within each of the host's two states (the yardstick's
# batches split where their log values divide best, 1-D two-means), with the 95% CI
# half-width a median of that many batches would have (2.46 x spread / sqrt(n)).
#
# Environment: BENCH_CPU, INSTANCES (space-separated instance ids), KEEP=FILE keeps the CSV
# (`python3 scripts/host-states.py FILE` reads it again).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/host-states.sh OUTPUTS [ROUNDS]}
rounds=${2:-400}
cpu=${BENCH_CPU:-1}
instances=${INSTANCES:-"ML-KEM-512-clean ML-KEM-768-avx2 FrodoKEM-640-SHAKE-clean FrodoKEM-640-AES-opt HQC-128-clean sntrup761-clean sntrup761-avx2 ML-KEM-1024-clean"}
[[ $(uname -m) == x86_64 ]] || { echo "host-states: the probe reads the TSC (x86-64 only)" >&2; exit 2; }
yard="$out/yardstick/yardstick.so"
[[ -f $yard ]] || { echo "host-states: no $yard: run the campaign's time step first" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc -O2 -Wall -Wextra -o "$tmp/probe" scripts/host-states.c -ldl
args=()
for id in $instances; do
    so=$(find "$out/build" -path "*/$id/$id.so" | head -1)
    [[ -n $so ]] || { echo "host-states: $id is not built in $out/build" >&2; exit 2; }
    sym=$(nm -D --defined-only "$so" | awk '$3 ~ /crypto_kem_keypair$/ {print $3; exit}')
    args+=("$so" "$sym")
done
echo "host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs); load before: $(cut -d' ' -f1-3 /proc/loadavg); $(date -u +%FT%TZ)"
"$tmp/probe" "$cpu" "$rounds" "$yard" "${args[@]}" > "$tmp/batches.csv"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
[[ -z ${KEEP:-} ]] || cp "$tmp/batches.csv" "$KEEP"
python3 scripts/host-states.py "$tmp/batches.csv"
