"""The analysis job: turns one or several run directories into metric tables, plots and a report.

    spark-submit analysis/job.py RUN_DIR [RUN_DIR ...] --out REPORT_DIR [--bucket SECONDS]
    spark-submit analysis/job.py --reports REPORTS.json [--bucket SECONDS]

Runs with any Spark master (``local[*]`` when none is given) and never imports Ray. Writes
``REPORT_DIR/tables/<metric>/`` (Parquet, one folder per metric), ``*.png``, ``summary.csv``
and ``report.md``. ``--reports`` names several reports, a JSON list of ``{"out": REPORT_DIR,
"runs": [RUN_DIR, ...]}``: each is the report of its runs alone, but every metric is computed
for all of them in one pass (on small runs Spark's time goes to each query, not to the rows:
several figures' reports cost about what one does). A report may measure its runs over a
window of its own (``"window": {"last": 60}`` or ``{"from": 20, "until": 40}``, seconds), so
that one job reports the same runs whole and, say, over their last minute; ``"plots": false``
leaves a report's plots out (its tables, summary and page only), ``"plots": [TITLE, ...]`` draws
those alone. Exit status 2 when a path is not a complete run directory.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import NamedTuple

if __package__ in (None, ""):  # run as a file by spark-submit: make the project importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from analysis import metrics, plots, style, window  # noqa: E402
from analysis.report import write_report  # noqa: E402
from analysis.runs import Run, RunError, check_runs, local_frame, read_tables, same_tables  # noqa: E402

SMALL_RUN_EVENTS = 2_000_000  # below this many events over all runs, the small-run settings
# or many small runs (a figure's test-sized ones): none above the first, all together below the second
MANY_SMALL_RUNS = (100_000, 8_000_000)
SMALL_RUN_SETTINGS = {"spark.sql.shuffle.partitions": "1", "spark.sql.adaptive.enabled": "false"}
# for the driver JVM where it starts (spark-submit's command line, see analysis/submit.py)
# C1 alone would also shrink the JIT's code cache to 48 MB, which a job of a few hundred small runs
# fills ("Out of space in CodeCache"): it keeps the default size of tiered compilation
SMALL_RUN_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:ReservedCodeCacheSize=240m"
SMALL_RUN_QUERIES_AT_ONCE = 3  # a query on little data keeps one core busy planning, the other idle
UNDRAWN = ("queue_per_broker",)  # tables a report writes but neither plots nor pages read


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="analysis/job.py", description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="*", metavar="RUN_DIR", help="run directories or URIs")
    parser.add_argument("--out", type=Path, default=Path("report"), help="report directory (default: report)")
    parser.add_argument("--reports", type=Path, help="several reports at once: a JSON list of {out, runs}")
    parser.add_argument("--bucket", type=float, help="time bucket in seconds (default: about 1/100 of the longest run)")
    window.add_arguments(parser)
    return parser


def default_bucket_us(runs) -> int:
    """About a hundred buckets over the longest run, rounded down to 1, 2 or 5 times a power of ten."""
    target = max(max(r.sim_end_us for r in runs) // 100, 1)
    scale = 10 ** (len(str(target)) - 1)
    return max(step * scale for step in (1, 2, 5) if step * scale <= target)


class Requested(NamedTuple):
    """A report a job is asked for: its directory, its runs' paths and, when it measures them
    over a window of its own, that window; ``looks``: run name -> a look several runs share
    (a figure's, so that its report draws them as its panels do)."""
    out: Path
    runs: list
    window: window.Window | None = None
    plots: bool | tuple[str, ...] = True  # False: tables, summary and page only; titles: those plots alone
    looks: dict | None = None

    def listed(self) -> dict:
        """Its entry in a ``--reports`` listing."""
        own = {"window": window.as_mapping(self.window)} if self.window is not None else {}
        own |= {} if self.plots is True else {"plots": self.plots if self.plots is False else list(self.plots)}
        own |= {"looks": dict(self.looks)} if self.looks else {}
        return {"out": str(self.out), "runs": list(map(str, self.runs)), **own}


@dataclass(frozen=True)
class Report:
    """One report of the job: its directory, its runs and its time buckets."""
    out: Path
    runs: list[Run]
    bucket_us: int
    plots: bool | tuple[str, ...] = True  # as ``Requested.plots``
    looks: dict = field(default_factory=dict)  # run name -> a look several runs share


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        reports = _reports(args)
    except (RunError, ValueError) as exc:
        print(f"analysis: error: {exc}", file=sys.stderr)
        return 2
    runs = [run for report in reports for run in report.runs]
    spark = spark_session(is_small(runs))
    try:
        with stage_progress(spark):
            analyse(spark, reports, is_small(runs))
    finally:
        spark.stop()
    for report in reports:
        print(report.out / "report.md")
    return 0


def _reports(args) -> list[Report]:
    if args.bucket is not None and args.bucket <= 0:
        raise ValueError(f"--bucket {args.bucket}: must be positive")
    if args.runs and args.reports:
        raise ValueError("give run directories (and --out), or --reports, not both")
    if not args.runs and not args.reports:
        raise ValueError("give run directories (and --out), or --reports")
    measured = window.from_arguments(args)
    if args.runs:
        return [report_of(check_runs(args.runs, measured), args.out, args.bucket)]
    try:
        listing = json.loads(args.reports.read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"--reports {args.reports}: not a JSON list of {{out, runs}}: {exc}") from None
    try:
        return reports_listed(listing, measured, args.bucket)
    except (RunError, ValueError) as exc:
        raise type(exc)(f"--reports {args.reports}: {exc}") from None


def reports_listed(listing: list, measured: window.Window, bucket: float | None = None) -> list[Report]:
    """The reports of a ``--reports`` listing, each of its runs measured over its own window
    or else ``measured``. The runs of a report with a window of its own are named
    ``window.label_in`` (the same runs may be in another report whole)."""
    reports = []
    try:
        for given in listing:
            runs = check_runs(given["runs"], measured)
            if "window" in given:
                own = window.from_mapping(given["window"])
                runs = [replace(run, label=window.label_in(run.label, own), window=own) for run in runs]
            report = report_of(runs, Path(given["out"]), bucket)
            reports.append(replace(report, plots=_plots_listed(given.get("plots", True)),
                                   looks=dict(given.get("looks") or {})))
    except (TypeError, KeyError) as exc:
        raise ValueError(f"not a JSON list of {{out, runs, window}}: {exc!r}") from None
    labels = [run.label for report in reports for run in report.runs]
    if len(set(labels)) != len(labels):
        raise RunError("two reports have runs of the same name")
    return reports


def _plots_listed(given) -> bool | tuple[str, ...]:
    if isinstance(given, bool):
        return given
    if isinstance(given, list) and all(title in PLOTS for title in given):
        return tuple(given)
    raise ValueError(f"plots: expected true, false or a list of the report's plot titles ({', '.join(PLOTS)}), "
                     f"got {given!r}")


def report_of(runs: list[Run], out: Path, bucket: float | None = None) -> Report:
    """The report of checked ``runs`` into ``out``, with time buckets of ``bucket`` seconds
    (default: ``default_bucket_us``)."""
    return Report(out, runs, default_bucket_us(runs) if bucket is None else int(bucket * 1_000_000))


def analyse_runs(spark, runs: list[Run], out: Path, bucket: float | None = None) -> None:
    """The job on checked ``runs`` in ``spark``, with time buckets of ``bucket`` seconds
    (default: ``default_bucket_us``)."""
    analyse(spark, [report_of(runs, out, bucket)], is_small(runs))


def is_small(runs) -> bool:
    """Whether the runs are small enough that the JVM warming up and per-stage overhead, not
    the data, take the time: then the driver JVM compiles with C1 only (``SMALL_RUN_JAVA_OPTIONS``)
    on a smaller heap, queries shuffle into one partition without adaptive planning, several
    at once, and the per-broker queues are collected once rather than written by Spark per report
    (bench/RESULTS.md). A run counts once however many reports list it (whole and over
    a window) and under however many names (``same_tables``). Many runs each small count as small
    up to a total (``MANY_SMALL_RUNS``): there each query's time is per run and per stage, not per
    row (bench/RESULTS.md, "The test suite on two cores", session 55)."""
    same = same_tables(runs)
    distinct = {str(run.path): run for run in runs if run.label not in same}
    events = [int(run.manifest.get("events") or 0) for run in distinct.values()]
    largest, most = MANY_SMALL_RUNS
    return sum(events) < SMALL_RUN_EVENTS or (max(events, default=0) < largest and sum(events) < most)


def spark_session(small: bool = False, driver_memory: str | None = None):
    """A Spark session, local unless spark-submit named a master; ``driver_memory`` and, for
    ``small``, the small runs' JVM options apply where the session starts its own JVM (not under
    spark-submit, which started it)."""
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName("pubsub-emu analysis")
    if not SparkConf().contains("spark.master"):
        builder = builder.master("local[*]")
    settings = {"spark.sql.session.timeZone": "UTC", "spark.ui.showConsoleProgress": "false",
                "spark.ui.enabled": "false"}
    if small:  # the JVM's options apply where the session starts it (spark-submit's come from analysis/submit.py)
        settings |= SMALL_RUN_SETTINGS | {"spark.driver.extraJavaOptions": SMALL_RUN_JAVA_OPTIONS}
    else:
        settings["spark.sql.shuffle.partitions"] = "8"
    if driver_memory:
        settings["spark.driver.memory"] = driver_memory
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


PROGRESS_EVERY_S = 60.0


@contextmanager
def stage_progress(spark, every_s: float = PROGRESS_EVERY_S):
    """While the body runs, every ``every_s`` seconds a line on stderr (the analysis's log)
    with the tasks done of each Spark stage running: a paper-size run's metrics read tens of
    millions of rows for many minutes (billions of deliveries, for most of an hour, in runs
    written before the delivery groups were), and Spark's own progress is off."""
    tracker = spark.sparkContext.statusTracker()
    stop = threading.Event()

    def report() -> None:
        while not stop.wait(every_s):
            stages = [tracker.getStageInfo(stage) for stage in sorted(tracker.getActiveStageIds())]
            running = [f"stage {s.stageId}: {s.numCompletedTasks:,} of {s.numTasks:,} tasks" for s in stages if s]
            if running:
                print(f"analysis: running {'; '.join(running)}", file=sys.stderr, flush=True)

    thread = threading.Thread(target=report, name="stage progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def analyse(spark, reports: list[Report], small: bool = False) -> None:
    """Compute every metric over all ``reports``' runs, then write each report: its tables,
    figures and page. Queries run while later ones are planned; ``small``: several at once
    (see ``is_small``)."""
    every_run = [run for report in reports for run in report.runs]
    same = same_tables(every_run)  # computed once, under the first one's name
    runs = [run for run in every_run if run.label not in same]
    for report in reports:
        report.out.mkdir(parents=True, exist_ok=True)
    width = metrics.bucket_width({run.label: report.bucket_us for report in reports for run in report.runs})
    tables = metrics.with_derived(read_tables(spark, runs), width)
    tables["samples"] = tables["samples"].cache()
    with ThreadPoolExecutor(SMALL_RUN_QUERIES_AT_ONCE if small else 1) as pool:
        running = {}

        def start(name: str, frame) -> None:
            running[name] = pool.submit(_collect, name, frame)

        # first the metrics of the tables alone, while the shared intermediate results are planned
        start("delay_over_time", metrics.delay_over_time(tables, width))
        start("delay_distribution", metrics.delay_distribution(tables))
        start("delay_by_pair", metrics.delay_by_pair(tables, runs))
        start("queue_over_time", metrics.queue_over_time(tables))
        start("table_size_over_time", metrics.table_size_over_time(tables))
        start("links_over_time", metrics.links_over_time(tables))
        start("hop_counts", metrics.hop_counts(tables))
        start("throughput", metrics.throughput(tables, width))
        start("load_over_time", metrics.load_over_time(tables, width))
        start("drops", metrics.drops(tables))
        queues = metrics.queue_per_broker(tables)
        if small:  # one query, written per report with the other tables: a Spark write per report cost more
            start("queue_per_broker", queues)
            queue_files = []
        else:
            queue_files = [pool.submit(_write_queue_per_broker, queues, report, same) for report in reports]
        arrivals = metrics.queue_at_arrivals(tables).cache()
        start("queue_at_arrivals", arrivals)
        peaks = metrics.queue_peaks(tables, arrivals, width).cache()
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
        start("multitree_steps", metrics.multitree_steps(tables))
        per_broker = metrics.forwarding(tables).cache()
        start("forwarding", per_broker)
        by_role = metrics.forwarding_by_role(per_broker, tables).cache()
        start("forwarding_by_role", by_role)
        pubs = metrics.completeness(tables, runs).cache()
        start("faults", metrics.faults(tables, pubs, runs))
        start("completeness_over_time", metrics.completeness_over_time(pubs, width))
        start("summary", metrics.summary(tables, runs, by_broker, peaks, by_role, moved, trees))
        orders = metrics.core_order(tables)
    for written in queue_files:
        written.result()
    collected = {name: result.result() for name, result in running.items()}
    collected["migrations"] = metrics.with_hops_moved(collected["migrations"], metrics.overlay_links(tables))
    ends = {row["run"]: row["sim_end_s"] for row in collected["summary"].select(["run", "sim_end_s"]).to_pylist()}
    collected["migrations_over_time"] = metrics.migrations_over_time(collected["migrations"], ends)
    collected = {name: _with_same(table, same, every_run) for name, table in collected.items()}
    orders |= {label: orders[source] for label, source in same.items() if source in orders}
    _write_all(reports, collected, orders)


def _collect(name: str, frame) -> pa.Table:
    started = time.perf_counter()
    table = frame.toArrow()
    print(f"analysis: {name}: {table.num_rows:,} rows in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return table


def _with_same(table: pa.Table, same: dict[str, str], runs: list[Run]) -> pa.Table:
    """``table`` with the rows of each run in ``same`` (label -> the run computed in its
    place): that run's rows, renamed (and with its own path where a table names paths)."""
    if "run" not in table.column_names:
        return table
    paths = {run.label: str(run.path) for run in runs}
    copies = []
    for label, source in same.items():
        rows = table.filter(pc.equal(table["run"], source))
        rows = rows.set_column(rows.schema.get_field_index("run"), "run", pa.array([label] * len(rows), pa.string()))
        if "path" in rows.column_names:
            rows = rows.set_column(rows.schema.get_field_index("path"), "path",
                                   pa.array([paths[label]] * len(rows), pa.string()))
        copies.append(rows)
    return pa.concat_tables([table, *copies]) if copies else table


def _write_queue_per_broker(queues, report: Report, same: dict[str, str]) -> None:
    """``tables/queue_per_broker`` of ``report`` (large: written by Spark, never collected,
    unless the job is small); a run computed under another's name takes that run's rows."""
    from pyspark.sql import functions as F

    names = [(same.get(run.label, run.label), run.label) for run in report.runs]
    mine = local_frame(queues.sparkSession, names, "computed string, name string")
    queues = (queues.join(F.broadcast(mine), F.col("run") == F.col("computed"))
              .drop("run", "computed").withColumnRenamed("name", "run").select(*queues.columns))
    queues.write.mode("overwrite").parquet(str(report.out / "tables" / "queue_per_broker"))


def _write_all(reports: list[Report], collected: dict[str, pa.Table], orders: dict[str, list[str]]) -> None:
    """Every report written: several at once, each in a process of its own, where there are
    cores to spare (drawing the plots is most of it, about a quarter of a second a plot in
    matplotlib, which draws on one core)."""
    workers = min(len(reports), os.cpu_count() or 1)
    if workers < 2:
        for report in reports:
            _write(report, _rows_of(report, collected), orders)
        return
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        written = [pool.submit(_write, report, _rows_of(report, collected), orders) for report in reports]
        for done in written:
            done.result()


def _rows_of(report: Report, collected: dict[str, pa.Table]) -> dict[str, pa.Table]:
    """Every metric table's rows of ``report``'s runs."""
    labels = pa.array([run.label for run in report.runs], pa.string())
    return {name: table.filter(pc.is_in(table["run"], labels)) for name, table in collected.items()}


def _write(report: Report, tables: dict[str, pa.Table], orders: dict[str, list[str]]) -> None:
    """``report``'s tables (its runs' rows of every metric), figures and page."""
    labels = [run.label for run in report.runs]
    rows = {}
    for name, table in tables.items():
        folder = report.out / "tables" / name
        folder.mkdir(parents=True, exist_ok=True)
        for stale in folder.iterdir():  # an earlier analysis's, Spark's part files among them
            stale.unlink()
        pq.write_table(table, folder / "part-0.parquet")
        if name not in UNDRAWN:
            rows[name] = table.to_pylist()
    mine = {label: orders[label] for label in labels if label in orders}
    _write_core_order(mine, report.out)
    wanted = PLOTS if report.plots is True else report.plots or ()
    figures = _figures(rows, _core(mine, report.runs), labels, report.out, report.looks, wanted)
    write_report(report.out, report.runs, rows, figures, report.bucket_us)


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


PLOTS = ("Delivery delay over time", "Delivery delay distribution", "Core broker input queues",
         "Input queues over all brokers", "Routing-table size", "Preserved entries", "Soft links and uplinks",
         "Triggered subscriptions along the core", "Messages by kind", "Broker utilisation", "Publisher relocation",
         "Multi-tree communication cost", "Hop counts", "Throughput and traffic",
         "False positives and pure forwarders", "Faults: deliveries made and messages dropped")  # report order
PLOTS_OVER_TIME = ("Delivery delay over time", "Core broker input queues", "Input queues over all brokers",
                   "Routing-table size", "Preserved entries", "Soft links and uplinks", "Throughput and traffic",
                   "Faults: deliveries made and messages dropped")


def _figures(collected: dict, core: list[str], labels: list[str], out: Path, looks: dict[str, str],
             wanted=PLOTS) -> dict[str, Path]:
    """The report's plots of the titles ``wanted``, in the report's order, runs named without
    the prefix they all share, in the looks they share (run name -> look)."""
    names = style.short_labels(labels)
    c = {metric: [{**row, "run": names.get(row["run"], row["run"])} if "run" in row else row for row in rows]
         for metric, rows in collected.items()}
    labels = style.Variants([names[label] for label in labels],
                            {names[label]: look for label, look in looks.items() if label in names})
    span = plots.time_range(c)
    draw = {
        "Delivery delay over time": lambda: plots.delay_over_time(c["delay_over_time"], labels,
                                                                  out / "delay_over_time.png", span),
        "Delivery delay distribution": lambda: plots.delay_cdf(c["delay_distribution"], labels, out / "delay_cdf.png"),
        "Core broker input queues": lambda: plots.queues_core(c["queue_at_arrivals"], labels, core,
                                                              out / "queues_core.png", span),
        "Input queues over all brokers": lambda: plots.queues_overall(c["queue_over_time"], labels,
                                                                      out / "queues_overall.png", span),
        "Routing-table size": lambda: plots.table_sizes(c["table_size_over_time"], labels, out / "table_size.png",
                                                        span),
        "Preserved entries": lambda: plots.preserved_entries(c["table_size_over_time"], labels,
                                                             out / "preserved.png", span),
        "Soft links and uplinks": lambda: plots.links(c["links_over_time"], labels, out / "links.png", span),
        "Triggered subscriptions along the core": lambda: plots.triggered_along_core(
            c["messages_by_broker"], labels, core, out / "triggered_core.png"),
        "Messages by kind": lambda: plots.messages_by_kind(c["messages_by_broker"], labels,
                                                           out / "messages_by_kind.png"),
        "Broker utilisation": lambda: plots.utilisation(c["broker_load"], labels, out / "utilisation.png"),
        "Publisher relocation": lambda: plots.relocation(c["relocation"], c["summary"], labels,
                                                         out / "relocation.png"),
        "Multi-tree communication cost": lambda: plots.multitree(c["multitree"], labels, out / "multitree.png"),
        "Hop counts": lambda: plots.hop_cdf(c["hop_counts"], labels, out / "hops_cdf.png"),
        "Throughput and traffic": lambda: plots.throughput(c["throughput"], labels, out / "throughput.png", span),
        "False positives and pure forwarders": lambda: plots.forwarding(
            c["forwarding_by_role"], labels, out / "forwarding.png"),
        "Faults: deliveries made and messages dropped": lambda: plots.faults(
            c["completeness_over_time"], c["faults"], c["drops"], labels, out / "faults.png", span),
    }
    drawn = {title: draw[title]() for title in PLOTS if title in wanted}
    return {title: path for title, path in drawn.items() if path is not None}


if __name__ == "__main__":
    sys.exit(main())
