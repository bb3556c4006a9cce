"""The analysis job: turns one or several run directories into metric tables, plots and a report.

    spark-submit analysis/job.py RUN_DIR [RUN_DIR ...] --out REPORT_DIR [--bucket SECONDS]

Runs with any Spark master (``local[*]`` when none is given) and never imports Ray. Writes
``REPORT_DIR/tables/<metric>/`` (Parquet, one folder per metric), ``*.png``, ``summary.csv``
and ``report.md``. Exit status 2 when a path is not a complete run directory.
"""
from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

if __package__ in (None, ""):  # run as a file by spark-submit: make the project importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from analysis import metrics, plots, style, window  # noqa: E402
from analysis.report import write_report  # noqa: E402
from analysis.runs import Run, RunError, check_runs, read_tables  # noqa: E402

SMALL_RUN_EVENTS = 2_000_000  # below this many events over all runs, the small-run settings
SMALL_RUN_SETTINGS = {"spark.sql.shuffle.partitions": "1", "spark.sql.adaptive.enabled": "false"}
# for the driver JVM where it starts (spark-submit's command line, see analysis/submit.py)
SMALL_RUN_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
SMALL_RUN_QUERIES_AT_ONCE = 3  # a query on little data keeps one core busy planning, the other idle


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="analysis/job.py", description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run directories or URIs")
    parser.add_argument("--out", type=Path, default=Path("report"), help="report directory (default: report)")
    parser.add_argument("--bucket", type=float, help="time bucket in seconds (default: about 1/100 of the longest run)")
    window.add_arguments(parser)
    return parser


def default_bucket_us(runs) -> int:
    """About a hundred buckets over the longest run, rounded down to 1, 2 or 5 times a power of ten."""
    target = max(max(r.sim_end_us for r in runs) // 100, 1)
    scale = 10 ** (len(str(target)) - 1)
    return max(step * scale for step in (1, 2, 5) if step * scale <= target)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        runs = check_runs(args.runs, window.from_arguments(args))
    except (RunError, ValueError) as exc:
        print(f"analysis: error: {exc}", file=sys.stderr)
        return 2
    if args.bucket is not None and args.bucket <= 0:
        print(f"analysis: error: --bucket {args.bucket}: must be positive", file=sys.stderr)
        return 2
    spark = spark_session(is_small(runs))
    try:
        analyse_runs(spark, runs, args.out, args.bucket)
    finally:
        spark.stop()
    print(args.out / "report.md")
    return 0


def analyse_runs(spark, runs: list[Run], out: Path, bucket: float | None = None) -> None:
    """The job on checked ``runs`` in ``spark``, with time buckets of ``bucket`` seconds
    (default: ``default_bucket_us``)."""
    bucket_us = default_bucket_us(runs) if bucket is None else int(bucket * 1_000_000)
    analyse(spark, runs, out, bucket_us, is_small(runs))


def is_small(runs) -> bool:
    """Whether the runs are small enough that the JVM warming up and per-stage overhead, not
    the data, take the time: then the driver JVM compiles with C1 only (``SMALL_RUN_JAVA_OPTIONS``)
    on a smaller heap, and queries shuffle into one partition without adaptive planning, several
    at once (bench/RESULTS.md)."""
    return sum(int(run.manifest.get("events") or 0) for run in runs) < SMALL_RUN_EVENTS


def spark_session(small: bool = False, driver_memory: str | None = None):
    """A Spark session, local unless spark-submit named a master; ``driver_memory`` applies
    where the session starts its own JVM (not under spark-submit, which started it)."""
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName("pubsub-emu analysis")
    if not SparkConf().contains("spark.master"):
        builder = builder.master("local[*]")
    settings = {"spark.sql.session.timeZone": "UTC", "spark.ui.showConsoleProgress": "false",
                "spark.ui.enabled": "false"}
    if small:
        settings |= SMALL_RUN_SETTINGS
    else:
        settings["spark.sql.shuffle.partitions"] = "8"
    if driver_memory:
        settings["spark.driver.memory"] = driver_memory
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def analyse(spark, runs, out: Path, bucket_us: int, small: bool = False) -> None:
    """Compute every metric, write its table, draw the figures and write the report.
    Queries run while later ones are planned; ``small``: several at once (see ``is_small``)."""
    tables = metrics.with_derived(read_tables(spark, runs), bucket_us)
    tables["samples"] = tables["samples"].cache()
    out.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(SMALL_RUN_QUERIES_AT_ONCE if small else 1) as pool:
        running = {}

        def start(name: str, frame) -> None:
            running[name] = pool.submit(_collect, name, frame, out)

        # first the metrics of the tables alone, while the shared intermediate results are planned
        start("delay_over_time", metrics.delay_over_time(tables, bucket_us))
        start("delay_distribution", metrics.delay_distribution(tables))
        start("delay_by_pair", metrics.delay_by_pair(tables))
        start("queue_over_time", metrics.queue_over_time(tables))
        start("table_size_over_time", metrics.table_size_over_time(tables))
        start("links_over_time", metrics.links_over_time(tables))
        start("hop_counts", metrics.hop_counts(tables))
        start("throughput", metrics.throughput(tables, bucket_us))
        start("drops", metrics.drops(tables))
        queue_files = pool.submit(metrics.queue_per_broker(tables).write.mode("overwrite").parquet,
                                  str(out / "tables" / "queue_per_broker"))
        arrivals = metrics.queue_at_arrivals(tables).cache()
        start("queue_at_arrivals", arrivals)
        peaks = metrics.queue_peaks(tables, arrivals, bucket_us).cache()
        start("queue_peaks", peaks)
        by_broker = metrics.messages_by_broker(tables).cache()
        start("messages_by_broker", by_broker)
        load = metrics.broker_load(tables, by_broker, {r.label: r.measured_us[1] - r.measured_us[0] for r in runs})
        load = load.cache()
        start("broker_load", load)
        moves = metrics.migrations(tables).cache()
        start("migrations", moves)
        moved = metrics.relocation(tables, by_broker, load, moves).cache()
        start("relocation", moved)
        trees = metrics.multitree(tables, runs).cache()
        start("multitree", trees)
        per_broker = metrics.forwarding(tables).cache()
        start("forwarding", per_broker)
        by_role = metrics.forwarding_by_role(per_broker).cache()
        start("forwarding_by_role", by_role)
        pubs = metrics.completeness(tables, runs).cache()
        start("faults", metrics.faults(tables, pubs, runs))
        start("completeness_over_time", metrics.completeness_over_time(pubs, bucket_us))
        start("summary", metrics.summary(tables, runs, by_broker, peaks, by_role, moved, trees))
        orders = metrics.core_order(tables)
        core = _core(orders, runs)
    _write_core_order(orders, out)
    queue_files.result()
    collected = {name: result.result() for name, result in running.items()}
    figures = _figures(collected, core, [r.label for r in runs], out)
    write_report(out, runs, collected, figures, bucket_us)


def _collect(name: str, frame, out: Path) -> list[dict]:
    """``frame``'s rows, also written to ``out/tables/name``."""
    started = time.perf_counter()
    table = frame.toArrow()
    folder = out / "tables" / name
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, folder / "part-0.parquet")
    print(f"analysis: {name}: {table.num_rows:,} rows in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return table.to_pylist()


def _write_core_order(orders: dict[str, list[str]], out: Path) -> None:
    """``tables/core_order``: per run, each core broker and its position along the core."""
    rows = [(run, broker, position) for run, order in sorted(orders.items()) for position, broker in enumerate(order)]
    folder = out / "tables" / "core_order"
    folder.mkdir(parents=True, exist_ok=True)
    table = pa.table({"run": pa.array([r[0] for r in rows], pa.string()),
                      "broker": pa.array([r[1] for r in rows], pa.string()),
                      "position": pa.array([r[2] for r in rows], pa.int32())})
    pq.write_table(table, folder / "part-0.parquet")


def _core(orders: dict[str, list[str]], runs) -> list[str]:
    """The core order of the first run that has one (runs compared side by side share a topology)."""
    for run in runs:
        if orders.get(run.label):
            return orders[run.label]
    return []


def _figures(collected: dict, core: list[str], labels: list[str], out: Path) -> dict[str, Path]:
    """The report's plots, runs named without the prefix they all share."""
    names = style.short_labels(labels)
    c = {metric: [{**row, "run": names.get(row["run"], row["run"])} if "run" in row else row for row in rows]
         for metric, rows in collected.items()}
    labels = [names[label] for label in labels]
    drawn = {
        "Delivery delay over time": plots.delay_over_time(c["delay_over_time"], labels, out / "delay_over_time.png"),
        "Delivery delay distribution": plots.delay_cdf(c["delay_distribution"], labels, out / "delay_cdf.png"),
        "Core broker input queues": plots.queues_core(c["queue_at_arrivals"], labels, core, out / "queues_core.png"),
        "Input queues over all brokers": plots.queues_overall(c["queue_over_time"], labels, out / "queues_overall.png"),
        "Routing-table size": plots.table_sizes(c["table_size_over_time"], labels, out / "table_size.png"),
        "Preserved entries": plots.preserved_entries(c["table_size_over_time"], labels, out / "preserved.png"),
        "Soft links and uplinks": plots.links(c["links_over_time"], labels, out / "links.png"),
        "Triggered subscriptions along the core": plots.triggered_along_core(
            c["messages_by_broker"], labels, core, out / "triggered_core.png"),
        "Messages by kind": plots.messages_by_kind(c["messages_by_broker"], labels, out / "messages_by_kind.png"),
        "Broker utilisation": plots.utilisation(c["broker_load"], labels, out / "utilisation.png"),
        "Publisher relocation": plots.relocation(c["relocation"], c["summary"], labels, out / "relocation.png"),
        "Multi-tree communication cost": plots.multitree(c["multitree"], labels, out / "multitree.png"),
        "Hop counts": plots.hop_cdf(c["hop_counts"], labels, out / "hops_cdf.png"),
        "Throughput and traffic": plots.throughput(c["throughput"], labels, out / "throughput.png"),
        "False positives and pure forwarders": plots.forwarding(
            c["forwarding_by_role"], labels, out / "forwarding.png"),
        "Faults: deliveries made and messages dropped": plots.faults(
            c["completeness_over_time"], c["faults"], c["drops"], labels, out / "faults.png"),
    }
    return {title: path for title, path in drawn.items() if path is not None}


if __name__ == "__main__":
    sys.exit(main())
