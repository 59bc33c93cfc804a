#!/usr/bin/env bash
# `ngcc-pipe compare` demonstration: the quick campaign twice, the second time with
# ML-KEM-512-clean compiled at -O0. The comparison must mark that instance's operations as
# significant and leave ML-KEM-768-clean alone. Usage: scripts/compare-O0.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --workspace -q
out=$(mktemp -d)
# A copy of the quick campaign with the same layout (its manifest includes ../submissions).
mkdir -p "$out/pipelines"
cp -r pipelines/quick.kdl pipelines/quick "$out/pipelines/"
cp -r submissions "$out/"
# The later -O0 wins over the profile's -O3 for this one instance.
python3 - "$out/pipelines/quick/ml-kem/manifest.kdl" <<'PY'
import sys
p = sys.argv[1]
s = open(p).read().rstrip()
assert s.endswith("}")
s = s[:-1] + '    when level="512" {\n        cflags "-O0"\n    }\n}\n'
open(p, "w").write(s)
PY
./target/release/ngcc-pipe run pipelines/quick.kdl --outputs "$out/a" -q || true
./target/release/ngcc-pipe run "$out/pipelines/quick.kdl" --outputs "$out/b" -q || true
./target/release/ngcc-pipe compare "$out/a" "$out/b" --csv "$out/compare.csv"
echo "csv: $out/compare.csv"
