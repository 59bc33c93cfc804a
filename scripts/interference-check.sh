#!/usr/bin/env bash
# Issue 17's campaign checks, to run on a quiet machine (nothing else running):
#   quiet A, quiet B: the campaign's timing steps twice back to back; every operation's median
#                     must agree within 3% (check 3);
#   loaded:           the timing steps again with `taskset -c <bench-cpu> yes` running for
#                     20 s in the middle; the rounds under that load must be marked interfered
#                     (far more of them than in the quiet runs) and every median must stay
#                     within 5% of quiet A's (check 4).
# The objects are built (and their KATs run) once, in quiet A; B and loaded re-run only the
# `time` steps on copies. Prints, per run, how many members were marked in each round, so the
# load shows as a block of marked rounds. Usage:
#   scripts/interference-check.sh [pipeline, default pipelines/x86_1.kdl] [bench cpu, default 1]
#                                 [seconds into the loaded run before the load, default 60]
# Exit 0 when both checks pass.
set -euo pipefail
cd "$(dirname "$0")/.."
pipeline=${1:-pipelines/x86_1.kdl}
cpu=${2:-1}
delay=${3:-60}
cargo build --release --workspace -q
bin=./target/release/ngcc-pipe
out=${OUT:-$(mktemp -d)}
echo "outputs: $out"
stamp() { date -u +%T; }
echo "$(stamp) quiet A"
$bin run "$pipeline" --outputs "$out/quiet-a" -q --only '*/time:*' || true
cp -a "$out/quiet-a" "$out/quiet-b"
echo "$(stamp) quiet B"
$bin run "$pipeline" --outputs "$out/quiet-b" -q --only '*/time:*' --force '*/time:*' || true
cp -a "$out/quiet-a" "$out/loaded"
echo "$(stamp) loaded (yes on cpu $cpu from ${delay}s for 20 s)"
(
    sleep "$delay"
    echo "$(stamp) load starts"
    timeout 20 taskset -c "$cpu" yes >/dev/null || true
    echo "$(stamp) load ends"
) &
load=$!
$bin run "$pipeline" --outputs "$out/loaded" -q --only '*/time:*' --force '*/time:*' || true
wait "$load" || true
echo "$(stamp) done"
python3 - "$out" <<'PY'
import glob, json, os, sys

out = sys.argv[1]
OPS = ("keygen", "enc", "dec")


def load(run):
    """(submission, instance, op) -> time record data, for the records of one run."""
    recs = {}
    for path in glob.glob(os.path.join(out, run, "records", "*", "*.json")):
        try:
            r = json.load(open(path))
        except ValueError:
            continue
        if r.get("kind") != "time" or r.get("status") != "ok":
            continue
        d = r["data"]
        if not d.get("rounds") or not d.get("summary"):
            continue
        recs[(r["submission"], r["instance"], r["op"])] = d
    return recs


def marked_per_round(recs):
    """For each round of the session: how many members were marked interfered, of how many."""
    n = max((len(d["rounds"]["interference"]) for d in recs.values()), default=0)
    marked = [0] * n
    for d in recs.values():
        for i, why in enumerate(d["rounds"]["interference"]):
            marked[i] += 1 if why else 0
    return marked, len(recs)


def strip(marked, members):
    """Rounds as characters: '.' under 10% of members marked, '+' under half, '#' half or more."""
    return "".join("." if m < 0.1 * members else "+" if m < 0.5 * members else "#" for m in marked)


runs = {run: load(run) for run in ("quiet-a", "quiet-b", "loaded")}
heavy = {}
for run, recs in runs.items():
    marked, members = marked_per_round(recs)
    heavy[run] = sum(1 for m in marked if m >= 0.5 * members)
    total = sum(marked)
    print(f"{run}: {members} members, {len(marked)} rounds, {total} member-rounds marked "
          f"({total / max(1, members * len(marked)):.1%}); rounds with half or more marked: {heavy[run]}")
    print("  " + strip(marked, members))

a, b, l = runs["quiet-a"], runs["quiet-b"], runs["loaded"]


def median(d):
    return d["summary"]["median_cycles"]


def compare(x, y, limit, label):
    keys = sorted(x.keys() & y.keys())
    bad = []
    for k in keys:
        r = median(y[k]) / median(x[k])
        if abs(r - 1) > limit:
            bad.append((k, r))
    rs = [median(y[k]) / median(x[k]) for k in keys]
    print(f"{label}: {len(keys) - len(bad)}/{len(keys)} within {limit:.0%}"
          + (f" (ratios {min(rs):.3f}-{max(rs):.3f})" if rs else ""))
    for k, r in bad:
        print(f"  {k[1]} {k[2]}: {r:.3f}")
    return bool(keys) and not bad


ok3 = compare(a, b, 0.03, "check 3, quiet B / quiet A medians")
ok4 = compare(a, l, 0.05, "check 4, loaded / quiet A medians")
# The load must show: more rounds with half or more members marked than in either quiet run.
marks = heavy["loaded"] > max(heavy["quiet-a"], heavy["quiet-b"])
print(f"check 4, load marked: {'yes' if marks else 'NO'} "
      f"({heavy['loaded']} heavily marked rounds loaded, {heavy['quiet-a']} and {heavy['quiet-b']} quiet)")
print("PASS" if ok3 and ok4 and marks else "FAIL")
sys.exit(0 if ok3 and ok4 and marks else 1)
PY
