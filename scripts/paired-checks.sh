#!/usr/bin/env bash
# The acceptance checks of interleaved rounds and `compare --measure` (issue 17), to run on
# a quiet machine (they measure). Usage: scripts/paired-checks.sh [aa-runs, default 20]
#   1. A/A: the quick campaign's outputs against themselves, `aa-runs` times: every
#      operation must have |ratio - 1| <= 1% and verdict `same` in at least 19 of 20 runs.
#   2. -O0: ML-KEM-512-clean built at -O0 against the -O3 build: every one of its
#      operations must be `slower` (ML-KEM-768-clean, built the same way twice: `same`).
# Exit 0 when both hold; each run's CSV is kept in the printed folder.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-20}
cargo build --release --workspace -q
bin=./target/release/ngcc-pipe
out=$(mktemp -d)
echo "outputs and CSVs: $out"
$bin run pipelines/quick.kdl --outputs "$out/a" -q || true

fail=0
for i in $(seq 1 "$runs"); do
    $bin compare --measure "$out/a" "$out/a" --csv "$out/aa-$i.csv" >"$out/aa-$i.md"
done
# Per operation: runs with |ratio - 1| <= 1% and verdict `same`.
python3 - "$out" "$runs" <<'PY' || fail=1
import csv, glob, sys
out, runs = sys.argv[1], int(sys.argv[2])
good = {}
for f in sorted(glob.glob(f"{out}/aa-*.csv")):
    for r in csv.DictReader(open(f)):
        k = (r["instance"], r["op"])
        ok = abs(float(r["ratio"]) - 1) <= 0.01 and r["verdict"] == "same"
        good[k] = good.get(k, 0) + ok
need = runs - max(1, runs // 20)
bad = {k: n for k, n in good.items() if n < need}
for k, n in sorted(good.items()):
    print(f"A/A {k[0]} {k[1]}: {n}/{runs} within 1% and same")
sys.exit(1 if bad or not good else 0)
PY

# The same campaign with ML-KEM-512-clean at -O0 (see scripts/compare-O0.sh).
mkdir -p "$out/pipelines"
cp -r pipelines/quick.kdl pipelines/quick "$out/pipelines/"
cp -r submissions "$out/"
python3 - "$out/pipelines/quick/ml-kem/manifest.kdl" <<'PY'
import sys
p = sys.argv[1]
s = open(p).read().rstrip()
assert s.endswith("}")
s = s[:-1] + '    when level="512" {\n        cflags "-O0"\n    }\n}\n'
open(p, "w").write(s)
PY
$bin run "$out/pipelines/quick.kdl" --outputs "$out/b" -q || true
$bin compare --measure "$out/a" "$out/b" --csv "$out/O0.csv" | tee "$out/O0.md"
python3 - "$out/O0.csv" <<'PY' || fail=1
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
bad = [r for r in rows if r["instance"] == "ML-KEM-512-clean" and r["verdict"] != "slower"]
bad += [r for r in rows if r["instance"] != "ML-KEM-512-clean" and r["verdict"] != "same"]
print("-O0 check:", "ok" if rows and not bad else f"failed on {[(r['instance'], r['op']) for r in bad]}")
sys.exit(1 if bad or not rows else 0)
PY
exit $fail
