"""Reads the CSV of scripts/host-states.c (see scripts/host-states.sh) and prints, per KEM,
the robust spread of its batches (raw, divided by the yardstick timed inside the batch, and
divided by the round's own yardstick batch) and the same within each of the host's two states."""
import csv
import math
import statistics as st
import sys
from collections import defaultdict


def spread(xs):
    m = st.median(xs)
    return 1.4826 * st.median([abs(x - m) for x in xs]) / m


def ci(xs):
    """95% CI half-width (%) of a median of these batches: 1.96 x 1.2533 x spread / sqrt(n)."""
    return 2.46 * spread(xs) / math.sqrt(len(xs)) * 100


def two_states(values):
    """The cut between the host's two states: where two means fit the sorted log values best
    (1-D two-means, prefix sums), each side holding at least 5% of the batches."""
    logs = sorted(math.log(v) for v in values)
    n = len(logs)
    s1 = [0.0]
    s2 = [0.0]
    for x in logs:
        s1.append(s1[-1] + x)
        s2.append(s2[-1] + x * x)

    def sse(a, b):
        k = b - a
        return s2[b] - s2[a] - (s1[b] - s1[a]) ** 2 / k

    best = min(range(max(1, n // 20), n - max(1, n // 20)), key=lambda i: sse(0, i) + sse(i, n))
    return math.exp((logs[best - 1] + logs[best]) / 2)


def main(path):
    rows = list(csv.DictReader(open(path)))
    ys = [float(r["yardstick_in_batch"]) for r in rows]
    cut = two_states(ys)
    fast_y = [y for y in ys if y < cut]
    slow_y = [y for y in ys if y >= cut]
    print(
        f"batches: {len(rows)}; yardstick spread {spread(ys)*100:.1f}%; fast state: "
        f"{len(fast_y)/len(ys)*100:.0f}% of batches, yardstick {st.median(fast_y)/st.median(slow_y):.2f}x "
        "the other state's"
    )
    print(
        f"{'KEM keygen':32} {'n':>4} {'raw':>6} {'/in-batch':>9} {'/round':>7} | {'fast n':>6} "
        f"{'spread':>6} {'CI':>6} | {'other n':>7} {'spread':>6} {'CI':>6} | fast/other"
    )
    by = defaultdict(list)
    for r in rows:
        by[r["kem"]].append(r)
    for kem, rs in sorted(by.items()):
        k = [float(r["kem_ticks"]) for r in rs]
        yin = [float(r["yardstick_in_batch"]) for r in rs]
        yr = [float(r["yardstick_of_round"]) for r in rs]
        fast = [x for x, y in zip(k, yin) if y < cut]
        slow = [x for x, y in zip(k, yin) if y >= cut]

        def state(xs):
            if len(xs) < 3:
                return f"{len(xs):>6} {'-':>6} {'-':>6}"
            return f"{len(xs):>6} {spread(xs)*100:5.1f}% {ci(xs):5.2f}%"

        ratio = f"{st.median(fast)/st.median(slow):.3f}" if len(fast) > 2 and len(slow) > 2 else "-"
        name = kem.replace("PQCLEAN_", "").replace("_crypto_kem_keypair", "")
        print(
            f"{name:32} {len(k):4} {spread(k)*100:5.1f}% {spread([a/b for a, b in zip(k, yin)])*100:8.1f}% "
            f"{spread([a/b for a, b in zip(k, yr)])*100:6.1f}% | {state(fast)} | {' ' + state(slow)} | {ratio}"
        )


if __name__ == "__main__":
    main(sys.argv[1])
