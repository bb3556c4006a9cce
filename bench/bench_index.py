"""Index benchmark (issues 2 and 12): match and covering queries against 1k, 10k and 100k
SIENA-style subscriptions, insert/remove cost, and the naive loop over the scalar oracle for
comparison; with ``--table covering-degree``, covering and covered-by queries on the burst
workload's table (every entry ``[class,eq,'STOCK'],[price,>=,lo],[price,<,hi]``: roots over
disjoint ranges, each covering ``degree`` disjoint narrower ones); with ``--table
wide-advertisements``, the mobile rush hour's SRT (issue 18): advertisements of all 1,000
SIENA attributes (``[w,isPresent,0]`` each), the subscriptions' intersection question against
them, and the table's memory per cell (growth of the process's resident size).

    python bench/bench_index.py [--sizes 1000,10000,100000] [--queries 200] [--rounds 3] [--disjunctions F]
    python bench/bench_index.py --table covering-degree [--sizes 10000,100000,1000000]
    python bench/bench_index.py --table wide-advertisements [--sizes 2000]

``--disjunctions F`` makes a fraction F of the subscriptions (entries and probes)
disjunctions of two or three. Prints one row per table size (each indexed figure the best of ``--rounds`` fresh tables: the
median call of the best round); figures go to bench/RESULTS.md with date and machine.
"""
import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from protocols.index import FilterIndex  # noqa: E402
from protocols.language import covers, matches, parse_filter  # noqa: E402
from workloads.generators import SienaVocabulary, rng_for  # noqa: E402


def timed(calls) -> float:
    """Median microseconds per call."""
    times = []
    for call in calls:
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1e6)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", help="table sizes (default 1000,10000,100000; wide-advertisements 500,2000)")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3, help="best of this many rounds (the VM is noisy)")
    parser.add_argument("--table", choices=("siena", "covering-degree", "wide-advertisements"), default="siena")
    parser.add_argument("--disjunctions", type=float, default=0.0,
                        help="fraction of subscriptions that are disjunctions of 2-3 (siena table)")
    args = parser.parse_args()
    args.sizes = args.sizes or ("500,2000" if args.table == "wide-advertisements" else "1000,10000,100000")
    if args.table == "covering-degree":
        covering_degree_table(args)
        return
    if args.table == "wide-advertisements":
        wide_advertisements_table(args)
        return
    language, rng = SienaVocabulary(), rng_for(0, "bench_index")
    print(f"{'entries':>8} {'match us':>9} {'naive match us':>15} {'cover us':>9} {'naive cover us':>15} "
          f"{'normalise us':>13} {'insert us':>10} {'remove us':>10} {'matches/pub':>12}")
    for size in [int(s) for s in args.sizes.split(",")]:
        filters = [parse_filter(subscription(language, rng, args.disjunctions)) for _ in range(size)]
        started = time.perf_counter()
        for f in filters:
            for d in f.disjuncts:
                d.constraints  # the normal form: computed once per filter, whatever tables hold it
        normalise = (time.perf_counter() - started) * 1e6 / size
        pubs = [language.publication(rng) for _ in range(args.queries)]
        probes = [parse_filter(subscription(language, rng, args.disjunctions)) for _ in range(args.queries)]
        rounds = [one_round(filters, pubs, probes) for _ in range(args.rounds)]
        insert, match_us, cover_us, remove, hits = (min(column) for column in zip(*rounds))
        few = max(3, args.queries // 20)
        naive_match = timed([lambda p=p: [k for k, f in enumerate(filters) if matches(f, p)] for p in pubs[:few]])
        naive_cover = timed([lambda q=q: [k for k, f in enumerate(filters) if covers(f, q)] for q in probes[:few]])
        print(f"{size:>8} {match_us:>9.1f} {naive_match:>15.0f} {cover_us:>9.1f} {naive_cover:>15.0f} "
              f"{normalise:>13.1f} {insert:>10.1f} {remove:>10.1f} {hits:>12.1f}")


def subscription(language: SienaVocabulary, rng, disjunctions: float) -> str:
    """A SIENA-style subscription, with probability ``disjunctions`` a disjunction of 2-3."""
    disjuncts = rng.randint(2, 3) if disjunctions and rng.random() < disjunctions else 1
    return " || ".join(language.subscription(rng) for _ in range(disjuncts))


def one_round(filters, pubs, probes) -> tuple[float, float, float, float, float]:
    """Microseconds per insert, match, covering query and remove, and matches per publication."""
    index = FilterIndex()
    started = time.perf_counter()
    for key, f in enumerate(filters):
        index.add(key, f)
    insert = (time.perf_counter() - started) * 1e6 / len(filters)
    match_us = timed([lambda p=p: index.matching(p) for p in pubs])
    cover_us = timed([lambda f=f: index.covering(f) for f in probes])
    hits = statistics.mean(len(index.matching(p)) for p in pubs)
    removed = len(filters) // 10
    started = time.perf_counter()
    for key in range(removed):
        index.remove(key)
    remove = (time.perf_counter() - started) * 1e6 / removed
    return insert, match_us, cover_us, remove, hits


def covering_degree_filters(size: int, degree: int = 30) -> list:
    """The burst workload's subscriptions, roots and children interleaved as subscribers issue them."""
    roots, width, step = size // (degree + 1), 100.0, 100.0 / degree

    def range_filter(low: float, high: float) -> str:  # full precision: ranges must stay disjoint
        return f"[class,eq,'STOCK'],[price,>=,{low!r}],[price,<,{high!r}]"

    filters = []
    for i in range(roots):
        filters.append(range_filter(i * width, (i + 1) * width))
        filters += [range_filter(i * width + j * step, i * width + (j + 1) * step) for j in range(degree)]
    return [parse_filter(t) for t in filters]


def covering_degree_table(args) -> None:
    rng = rng_for(0, "bench_index/covering-degree")
    print(f"{'entries':>8} {'covering us':>12} {'covered-by us':>14} {'insert us':>10} {'answers':>8}")
    for size in [int(s) for s in args.sizes.split(",")]:
        filters = covering_degree_filters(size)
        probes = [filters[rng.randrange(len(filters))] for _ in range(args.queries)]
        best = None
        for _ in range(args.rounds):
            index = FilterIndex()
            started = time.perf_counter()
            for key, f in enumerate(filters):
                index.add(key, f)
            insert = (time.perf_counter() - started) * 1e6 / len(filters)
            row = (timed([lambda f=f: index.covering(f) for f in probes]),
                   timed([lambda f=f: index.covered_by(f) for f in probes]), insert)
            best = row if best is None else tuple(map(min, best, row))
        answers = statistics.mean(len(index.covering(f)) + len(index.covered_by(f)) for f in probes)
        print(f"{len(filters):>8} {best[0]:>12.1f} {best[1]:>14.1f} {best[2]:>10.1f} {answers:>8.1f}", flush=True)


def resident_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def wide_advertisements_table(args) -> None:
    language, rng = SienaVocabulary(), rng_for(0, "bench_index/wide-advertisements")
    vocabulary = ",".join(f"[{w},isPresent,0]" for w in language.words)
    probes = [parse_filter(language.subscription(rng)) for _ in range(args.queries)]
    print(f"{'entries':>8} {'cells':>10} {'bytes/cell':>11} {'insert us':>10} {'intersecting us':>16} "
          f"{'remove us':>10}")
    for size in [int(s) for s in args.sizes.split(",")]:
        advertisements = [parse_filter(vocabulary) for _ in range(size)]
        for f in advertisements:
            f.constraints  # the normal form, which the tables share, outside the table's memory
        before = resident_mb()
        index = FilterIndex()
        started = time.perf_counter()
        for key, f in enumerate(advertisements):
            index.add(key, f)
        insert = (time.perf_counter() - started) * 1e6 / size
        cells = size * len(language.words)
        per_cell = (resident_mb() - before) * 1e6 / cells
        intersecting = timed([lambda f=f: index.intersecting_slots(f) for f in probes])
        started = time.perf_counter()
        for key in range(0, size, 2):
            index.remove(key)
        remove = (time.perf_counter() - started) * 1e6 / len(range(0, size, 2))
        print(f"{size:>8} {cells:>10} {per_cell:>11.0f} {insert:>10.0f} {intersecting:>16.0f} {remove:>10.0f}",
              flush=True)


if __name__ == "__main__":
    main()
