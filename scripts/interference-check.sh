#!/usr/bin/env bash
# Interference detection (issue 17), to run on a quiet machine: the timing steps of a
# campaign once quietly, then again with `taskset -c <bench-cpu> yes` running for 20 s in
# the middle. The loaded run must mark rounds as interfered and every median must stay
# within 5% of the quiet run's. Usage: scripts/interference-check.sh [pipeline, default
# pipelines/x86_1.kdl] [bench cpu, default 1] [seconds before the load starts, default 20]
set -euo pipefail
cd "$(dirname "$0")/.."
pipeline=${1:-pipelines/x86_1.kdl}
cpu=${2:-1}
delay=${3:-20}
cargo build --release --workspace -q
bin=./target/release/ngcc-pipe
out=$(mktemp -d)
echo "outputs: $out"
$bin run "$pipeline" --outputs "$out/quiet" -q || true
cp -r "$out/quiet" "$out/loaded"
( sleep "$delay"; timeout 20 taskset -c "$cpu" yes >/dev/null ) &
load=$!
$bin run "$pipeline" --outputs "$out/loaded" --force '*/time:*' -q || true
wait "$load" || true
python3 - "$out/quiet/reports/results.csv" "$out/loaded/reports/results.csv" <<'PY'
import csv, sys
q = {(r["instance"], r["op"]): r for r in csv.DictReader(open(sys.argv[1])) if r["median_cycles"]}
l = {(r["instance"], r["op"]): r for r in csv.DictReader(open(sys.argv[2])) if r["median_cycles"]}
marked = sum(int(r["interfered_rounds"] or 0) for r in l.values())
worst = 0.0
for k in sorted(q.keys() & l.keys()):
    ratio = float(l[k]["median_cycles"]) / float(q[k]["median_cycles"])
    worst = max(worst, abs(ratio - 1))
    print(f"{k[0]} {k[1]}: loaded/quiet {ratio:.3f}, interfered rounds {l[k]['interfered_rounds']}")
print(f"interfered rounds in the loaded run: {marked}; largest median change {worst:.1%}")
sys.exit(0 if marked > 0 and worst <= 0.05 and q.keys() & l.keys() else 1)
PY
