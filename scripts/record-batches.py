#!/usr/bin/env python3
"""Write one timing record's batches as CSV, for the estimator's tests.

    scripts/record-batches.py outputs/x86_1/records/ml-kem/ML-KEM-768-clean__keygen.json \
        > tests/fixtures/batches/NAME.csv

One line per batch the session timed: its calls, the KEM's ticks, whether the engine judged
it interfered (1) or clean (0), the ticks of each yardstick block inside it (`;` between
blocks), the runner process that timed it (0 for records of one process) and whether the
record's estimate used it (1) or not (0). The header names the record, its host and when it ran, so a test reading
the file can say what it rests on. src/measure/states.rs reads such a recording."""
import json
import sys

if len(sys.argv) != 2:
    sys.exit("usage: scripts/record-batches.py RECORD.json > FILE.csv")
rec = json.load(open(sys.argv[1]))
if rec.get("kind") != "time":
    sys.exit(f"{sys.argv[1]}: not a time record")
data = rec["data"]
trials = data["output"]["trials"]
why = data["rounds"]["interference"]
env = data.get("environment") or {}
cpu = env.get("cpu_model") or "unknown CPU"
processes = data["rounds"].get("processes") or [0] * len(trials)
used = set(data["rounds"].get("used") or range(len(trials)))
columns = "iters,cycles,interfered,gauge_ticks,process,used"
print(f"# {rec['id']} ({rec.get('started', '?')}, {cpu}): {columns}")
print(columns)
for i, (t, w, p) in enumerate(zip(trials, why, processes)):
    blocks = ";".join(str(g) for g in t.get("gauge_cycles", []))
    print(f"{t['iters']},{t['cycles']},{1 if w else 0},{blocks},{p},{1 if i in used else 0}")
