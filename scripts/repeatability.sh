#!/usr/bin/env bash
# Repeatability: two back-to-back runs of the quick pipeline, then the mean cycles of every
# operation of one instance (default ML-KEM-512-clean) compared between the two runs.
# Passes when every operation agrees within 3%. Usage: scripts/repeatability.sh [INSTANCE]
set -euo pipefail
cd "$(dirname "$0")/.."
instance=${1:-ML-KEM-512-clean}
cargo build --release --workspace -q
out=$(mktemp -d)
for run in a b; do
    ./target/release/ngcc-pipe run pipelines/quick.kdl --outputs "$out/$run" -q || true
done
./target/release/ngcc-pipe compare "$out/a" "$out/b"
echo
echo "mean cycles of $instance, run a vs run b (results.csv):"
awk -F, -v inst="$instance" '
    FNR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
    $col["instance"] == inst && $col["mean_cycles"] != "" {
        key = $col["op"]
        if (FILENAME ~ /\/a\//) a[key] = $col["mean_cycles"]; else b[key] = $col["mean_cycles"]
    }
    END {
        bad = 0; n = 0
        for (op in a) {
            if (!(op in b)) continue
            r = b[op] / a[op]; n++
            d = r > 1 ? r - 1 : 1 - r
            printf "  %-7s %14.1f %14.1f  ratio %.4f  %s\n", op, a[op], b[op], r, (d <= 0.03 ? "within 3%" : "DIFFERS by more than 3%")
            if (d > 0.03) bad = 1
        }
        if (n == 0) { print "  no timing rows for " inst; exit 2 }
        exit bad
    }' "$out/a/reports/results.csv" "$out/b/reports/results.csv"
