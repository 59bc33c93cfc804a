#!/usr/bin/env bash
# Where does a campaign object lose time against a static build? (issue 9)
# For one built instance (default: ML-KEM-768-clean of outputs/x86_1), builds programs that
# speak `bench fidelity`'s reference protocol (kem-native/c/minimal_loop.c: `ready`, then one
# `cycles C` per batch size on stdin) and times each against the static reference, batches
# of the two alternating in 101 shuffled rounds on the bench core:
#   static-again  the static reference built a second time (same layout): the noise floor
#   static-rev    the static reference with its sources linked in reverse order (layout)
#   static-pic    compiled with the campaign's -fPIC -fno-semantic-interposition, static
#   pie           linked dynamically against glibc, PIE
#   so-objs       the campaign object's own .o files linked statically
#   so-nomap      those objects as a .so without the export map (all internal calls via PLT)
#   so            the campaign's .so itself, called from the same C loop
#   so-<order>    each other link order of the campaign's object (`layouts=` on the time
#                 step: so-reversed, so-shuffle-1, ...), called from the same C loop; with
#                 them the script also prints the mean of `so` and these ratios: what the
#                 campaign's figure (the mean over its layouts) is to this static build
#   so-shuf-K     the campaign's objects linked as a .so (with its export map) in shuffled
#                 order K (K = 1..4, seeded by K)
#   static-shuf-K the same objects linked statically in shuffled order K
# Prints the median per-round ratio (variant / reference) with quartiles, per variant.
# Usage: scripts/so-vs-static.sh [outputs/x86_1] [ml-kem/ML-KEM-768-clean] [keygen] [cpu 1]
# VARIANTS="so so-reversed ..." times only those (default: all).
# Run `ngcc-pipe run pipelines/x86_1.kdl --only '<instance>/build'` first. Quiet machine.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath "${1:-outputs/x86_1}")
inst=${2:-ml-kem/ML-KEM-768-clean}
op=${3:-keygen}
cpu=${4:-1}
rec="$out/records/${inst%%/*}/${inst##*/}__build.json"
[ -f "$rec" ] || { echo "so-vs-static: no build record $rec" >&2; exit 2; }
work=$(mktemp -d)
echo "work folder: $work"
so="$out/$(jq -r .data.object "$rec")"
ns=$(jq -r .data.namespace "$rec")
read -r pk sk ct ss < <(jq -r '.data.api | "\(.pk) \(.sk) \(.ct) \(.ss)"' "$rec")
flags=$(jq -r '.data.flags | join(" ")' "$rec")
link=$(jq -r --arg so "$so" '.commands[] | select(index("-o") as $i | $i != null and .[$i + 1] == $so) | join(" ")' "$rec")
objs=$(echo "$link" | tr ' ' '\n' | grep '\.o$' | tr '\n' ' ')
map=$(echo "$link" | tr ' ' '\n' | sed -n 's/^-Wl,--version-script=//p')
# The compile commands of the instance's sources give the include folders and the sources.
compiles=$(jq -r '.commands[] | select(index("-c") != null and (.[-1] | test("/obj/"))) | join(" ")' "$rec")
incs=$(echo "$compiles" | tr ' ' '\n' | grep '^-I' | sort -u | tr '\n' ' ')
srcs=$(echo "$compiles" | awk '{for (i = 1; i < NF; i++) if ($i == "-c") print $(i + 1)}' | sort -u | tr '\n' ' ')
# Primitive sources: the shared objects' sources are the primitives of the submission.
psrcs=""
for o in $objs; do
    case "$o" in */_shared/*) stem=$(basename "$o" .o); stem=${stem#*-}
        for i in $incs; do f="${i#-I}/$stem.c"; [ -f "$f" ] && psrcs="$psrcs $f" && break; done ;;
    esac
done
defs="-DNGCC_KEYPAIR=${ns}crypto_kem_keypair -DNGCC_ENC=${ns}crypto_kem_enc -DNGCC_DEC=${ns}crypto_kem_dec -DNGCC_PK=$pk -DNGCC_SK=$sk -DNGCC_CT=$ct -DNGCC_SS=$ss"
ml=kem-native/c/minimal_loop.c
layouts=$(jq -r '.data.layouts // [] | .[] | "\(.name) \(.object)"' "$rec")
layout_variants=$(echo "$layouts" | awk 'NF { printf "so-%s ", $1 }')
# The loop calling the campaign object: randomness installed through its ngcc hook.
sed 's/^int main(int argc, char \*\*argv) {/void ngcc_set_randombytes(int (*f)(uint8_t *, size_t));\nint main(int argc, char **argv) {\n    ngcc_set_randombytes(ngcc_getrandom);/' \
    "$ml" >"$work/hooked.c"
cd "$work"
# shellcheck disable=SC2086
{
    gcc -static $flags $incs $defs -DNGCC_DRNG=PQCLEAN_randombytes -o reference "$OLDPWD/$ml" $srcs $psrcs
    gcc -static $flags $incs $defs -DNGCC_DRNG=PQCLEAN_randombytes -o static-again "$OLDPWD/$ml" $srcs $psrcs
    gcc -static $flags $incs $defs -DNGCC_DRNG=PQCLEAN_randombytes -o static-rev "$OLDPWD/$ml" \
        $(echo $srcs $psrcs | tr ' ' '\n' | tac | tr '\n' ' ')
    gcc -static $flags -fPIC -fno-semantic-interposition $incs $defs -DNGCC_DRNG=PQCLEAN_randombytes \
        -o static-pic "$OLDPWD/$ml" $srcs $psrcs
    gcc $flags $incs $defs -DNGCC_DRNG=PQCLEAN_randombytes -o pie "$OLDPWD/$ml" $srcs $psrcs
    gcc -static $flags $defs -DNGCC_DRNG=ngcc_getrandom -o so-objs hooked.c $objs
    gcc $flags -shared -o nomap.so $objs
    gcc $flags $defs -DNGCC_DRNG=ngcc_getrandom -o so-nomap hooked.c ./nomap.so -Wl,-rpath,"$work"
    gcc $flags $defs -DNGCC_DRNG=ngcc_getrandom -o so hooked.c "$so" -Wl,-rpath,"$(dirname "$so")"
    while read -r name obj; do
        [ -n "$name" ] || continue
        gcc $flags $defs -DNGCC_DRNG=ngcc_getrandom -o "so-$name" hooked.c "$out/$obj" \
            -Wl,-rpath,"$(dirname "$out/$obj")"
    done <<<"$layouts"
    for k in 1 2 3 4; do
        order=$(echo $objs | tr ' ' '\n' | shuf --random-source=<(yes "$k") | tr '\n' ' ')
        gcc $flags -shared -Wl,--version-script="$map" -o "shuf$k.so" $order
        gcc $flags $defs -DNGCC_DRNG=ngcc_getrandom -o "so-shuf-$k" hooked.c "./shuf$k.so" -Wl,-rpath,"$work"
        gcc -static $flags $defs -DNGCC_DRNG=ngcc_getrandom -o "static-shuf-$k" hooked.c $order
    done
}
cat >pair.py <<'EOF'
import random, statistics, subprocess, sys
op, cpu, ref, var = sys.argv[1:5]
procs = []
for exe in (ref, var):
    p = subprocess.Popen(["taskset", "-c", cpu, exe, op], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True, bufsize=1)
    if not p.stdout.readline().startswith("ready"):
        sys.exit(f"{exe}: no ready line")
    procs.append(p)
# Calls per batch: about 20 ms of the reference.
n = 2
while True:
    procs[0].stdin.write(f"{n}\n"); procs[0].stdin.flush()
    if int(procs[0].stdout.readline().split()[1]) > 40_000_000 or n > 1 << 20:
        break
    n *= 2
vals = [[], []]
for _ in range(101):
    order = [0, 1]
    random.shuffle(order)
    for i in order:
        procs[i].stdin.write(f"{n}\n"); procs[i].stdin.flush()
        vals[i].append(int(procs[i].stdout.readline().split()[1]) / n)
for p in procs:
    p.stdin.close(); p.wait()
r = sorted(b / a for a, b in zip(*vals))
print(f"{var:<13} {statistics.median(vals[1]):>12.0f} {statistics.median(vals[0]):>12.0f}   "
      f"{statistics.median(r):.4f} ({r[25]:.4f}-{r[75]:.4f})")
EOF
echo "$inst $op, $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "variant       cycles/op    reference    variant/reference (quartiles)"
all="static-again static-rev static-pic pie so-objs so-nomap so ${layout_variants} \
so-shuf-1 so-shuf-2 so-shuf-3 so-shuf-4 static-shuf-1 static-shuf-2 static-shuf-3 static-shuf-4"
: >ratios
for v in ${VARIANTS:-$all}; do
    python3 pair.py "$op" "$cpu" ./reference "./$v" | tee -a ratios
done
if [ -n "$layout_variants" ]; then
    # The campaign's figure is the mean over its layouts: `so` (listed) and so-<order>.
    awk -v want="so $layout_variants" 'BEGIN { n = split(want, w, " "); for (i = 1; i <= n; i++) keep[w[i]] = 1 }
        { v = $1; sub(/^\.\//, "", v) } (v in keep) { s += $4; k++ }
        END { if (k) printf "campaign layouts (%d), mean of their ratios: %.4f\n", k, s / k }' ratios
fi
