#!/usr/bin/env bash
# Calibration of `ngcc-pipe compare` on records (issue 28): how often it calls a difference
# where there is none (false alarms) and how often it finds a real one (detection), on this
# host. A benchmark to run on a quiet machine, not a test: it takes minutes per repetition.
#
#   scripts/compare-calibration.sh quick [N]    (default; N repetitions, default 3)
#       Per repetition three short campaigns of ML-KEM-512/768 clean (the quick campaign's
#       submission, time step `trials=5 trial="1s"`): A and A2 built alike with the guide
#       flags (-O3 -march=native -fomit-frame-pointer), B built with -O2, each run into its
#       own folder one after the other. `compare A A2` should find 0 significant
#       (adjusted, and raw), `compare A B` should flag the operations -O2 slows down.
#       Prints per repetition and in total: significant A/A2 (false alarms) and slower A/B
#       (detections) over the 6 operations, for the verdict (adjusted ratio) and for the raw
#       ratio judged the same way, and the widest 95% CI half-width of A/A2.
#
#   scripts/compare-calibration.sh example OUTPUTS
#       The example campaign's time session re-run twice into copies of OUTPUTS (an output
#       folder of pipelines/x86_1.kdl that is built and timed), minutes apart, then compared:
#       significant operations and the widest CI half-width (issue: 0 of 51, at most 5%);
#       per copy, the operations that reached the precision target (issue: at least 45 of
#       51; the others with their achieved ±%) and the share of rounds whose yardstick ran at
#       1.3x its median or more that are marked interfered (issue: at least 90%).
#
# Environment: BAND (percent, default 2), KEEP=1 keeps the temporary folder.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
mode=${1:-quick}
band=${BAND:-2}
cargo build --release --workspace -q
ngcc="$repo/target/release/ngcc-pipe"
work=$(mktemp -d "${TMPDIR:-/tmp}/ngcc-calibration.XXXXXX")
if [ "${KEEP:-0}" != 1 ]; then trap 'rm -rf "$work"' EXIT; else echo "work folder: $work"; fi

# Counts over a compare CSV: significant (verdict slower/faster), slower, the same for the
# raw ratio judged against the band, and the widest CI half-width of the verdict's ratio.
summary() {
    python3 - "$1" "$band" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
band = float(sys.argv[2]) / 100
def raw(r):
    lo, hi = float(r["ci_low"]), float(r["ci_high"])
    return "slower" if lo > 1 + band else "faster" if hi < 1 - band else "-"
sig = sum(r["verdict"] in ("slower", "faster") for r in rows)
slower = sum(r["verdict"] == "slower" for r in rows)
raw_sig = sum(raw(r) != "-" for r in rows)
raw_slower = sum(raw(r) == "slower" for r in rows)
def half(r):
    p = "adjusted_" if r["verdict_from"] == "adjusted" else ""
    m = float(r[p + "ratio"] if p else r["ratio"])
    return (float(r[p + "ci_high"]) - float(r[p + "ci_low"])) / 2 / m
widest = max((half(r) for r in rows), default=float("nan"))
print(len(rows), sig, slower, raw_sig, raw_slower, f"{widest * 100:.2f}")
PY
}

if [ "$mode" = quick ]; then
    reps=${2:-3}
    # The quick campaign's layout (its manifest includes ../../../submissions).
    mkdir -p "$work/pipelines"
    cp -r pipelines/quick "$work/pipelines/"
    cp -r submissions "$work/"
    for variant in guide o2; do
        flags='-O3 -march=native -fomit-frame-pointer'
        [ "$variant" = o2 ] && flags='-O2'
        cat > "$work/pipelines/$variant.kdl" <<KDL
system "calibration" {
    bench-cpu 1
    cc "gcc"
    isolation "machine"
}
flags "$variant" "$flags"
submissions "quick/*/manifest.kdl"
submissions-root ".."
outputs "../outputs/$variant"
step "source"
step "build" needs="source" flags="$variant" timeout="10m"
step "kat" needs="build" modes="single"
step "time" needs="kat" exclusive=#true ops="keygen enc dec" trials=5 trial="1s" min-iters=5 samples=101 timeout="10m"
KDL
    done
    "$ngcc" check "$work/pipelines/guide.kdl" >/dev/null
    "$ngcc" check "$work/pipelines/o2.kdl" >/dev/null
    total=(0 0 0 0 0 0)
    for rep in $(seq 1 "$reps"); do
        for run in a a2 b; do
            p=guide; [ "$run" = b ] && p=o2
            "$ngcc" run "$work/pipelines/$p.kdl" --outputs "$work/$rep/$run" -q
        done
        "$ngcc" compare "$work/$rep/a" "$work/$rep/a2" --band "$band" --csv "$work/$rep/aa.csv" >"$work/$rep/aa.md"
        "$ngcc" compare "$work/$rep/a" "$work/$rep/b" --band "$band" --csv "$work/$rep/ab.csv" >"$work/$rep/ab.md"
        read -r n aa_sig _ aa_raw _ aa_widest < <(summary "$work/$rep/aa.csv")
        read -r _ _ ab_slower _ ab_raw_slower _ < <(summary "$work/$rep/ab.csv")
        echo "repetition $rep: A/A2 significant $aa_sig/$n (raw $aa_raw/$n), widest CI ±$aa_widest%;" \
            "A/B slower $ab_slower/$n (raw $ab_raw_slower/$n)"
        total=($((total[0] + n)) $((total[1] + aa_sig)) $((total[2] + aa_raw)) \
            $((total[3] + ab_slower)) $((total[4] + ab_raw_slower)) 0)
    done
    echo "false alarms (A/A2): $((total[1]))/$((total[0])) adjusted, $((total[2]))/$((total[0])) raw"
    echo "detections (A/B, -O2 slower): $((total[3]))/$((total[0])) adjusted, $((total[4]))/$((total[0])) raw"
elif [ "$mode" = example ]; then
    src=${2:?usage: scripts/compare-calibration.sh example OUTPUTS}
    for copy in a b; do
        cp -a "$src" "$work/$copy"
        "$ngcc" run pipelines/x86_1.kdl --outputs "$work/$copy" --force '*/time:*' --only '*/time:*' -q || true
    done
    "$ngcc" compare "$work/a" "$work/b" --band "$band" --csv "$work/ab.csv" >"$work/ab.md"
    read -r n sig _ raw_sig _ widest < <(summary "$work/ab.csv")
    echo "re-run against re-run: significant $sig/$n (raw $raw_sig/$n), widest CI ±$widest%"
    for copy in a b; do
        python3 - "$work/$copy" "$copy" <<'PY'
import glob, json, statistics, sys
reached, missed, slow, slow_marked = 0, [], 0, 0
for f in sorted(glob.glob(sys.argv[1] + "/records/*/*.json")):
    r = json.load(open(f))
    if r.get("kind") != "time" or r.get("status") != "ok":
        continue
    rounds = (r.get("data") or {}).get("rounds")
    if not rounds:
        continue
    e = rounds["estimate"]
    half = (e["ci_high"] - e["ci_low"]) / 2 / e["median"]
    if rounds["reached"]:
        reached += 1
    else:
        missed.append(f'{r["instance"]} {r["op"]} ±{half * 100:.2f}%')
    y = rounds.get("yardstick")
    if y:
        med = statistics.median(y["values"])
        for i, v in enumerate(y["values"]):
            if v >= 1.3 * med:
                slow += 1
                slow_marked += bool(rounds["interference"][i])
total = reached + len(missed)
print(f"copy {sys.argv[2]}: precision reached {reached}/{total}")
for m in missed:
    print(f"  not reached: {m}")
share = f"{slow_marked / slow * 100:.0f}%" if slow else "n/a"
print(f"  rounds with the yardstick at 1.3x its median or more: {slow} (over all operations), marked interfered: {slow_marked} ({share})")
PY
    done
else
    echo "usage: scripts/compare-calibration.sh [quick [N] | example OUTPUTS]" >&2
    exit 2
fi
