"""Run directories (DESIGN.md sections 7 and 9) as the Spark job reads them.

Checks each directory before Spark starts (a user's mistake is one clear message, exit 2),
labels each run for the plots, and loads every table of every run into one DataFrame per
table with a ``run`` column. Tables that gained protocol columns in some runs are merged by
name; a table a run never wrote (no rows) is empty, not missing.
"""
from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.parquet as pq

from actors.results import has_table, read_table
from actors.storage import RunDir, is_uri
from analysis.window import TIME_COLUMNS, WHOLE_RUN, Window

# The contract columns of each table (DESIGN.md section 9) in Spark DDL, for tables without rows.
TABLES = {
    "messages": "broker string, sender string, kind string, msg_id string, t_arrive_us bigint, "
                "t_start_us bigint, t_end_us bigint, queue_len int, sent int, dropped boolean",
    "deliveries": "pub_id string, sub_id string, client string, broker string, t_pub_us bigint, "
                  "t_deliver_us bigint, hops int",
    "samples": "t_us bigint, broker string, queue_len int, prt_size int, srt_size int, busy_us bigint",
    "events": "t_us bigint, broker string, kind string, detail string",
    "brokers": "broker string, role string, host int",
    "links": "a string, b string, latency_us bigint",
    "expected": "pub_id string, t_pub_us bigint, subscribers int",
    "covering_sets": "t_us bigint, broker string, entries int, wst_anchors int, covering_set_size int, "
                     "publications int, predicate_evaluations bigint, evaluations_per_publication double",
}
# The emulator's deliveries counted per publication, broker, time and hops (runs written before
# it have none: their deliveries are grouped instead, see ``_delivery_groups``).
GROUPS = "pub_id string, broker string, t_pub_us bigint, t_deliver_us bigint, hops int, deliveries int"
# Nullable columns protocols add; a run without them reads them as null.
PROTOCOL_COLUMNS = {
    "messages": {"cause": "string", "batch_size": "int", "triggered_by": "string", "origin": "bigint"},
    "samples": {"preserved": "int", "soft_links": "int", "gainful_peers": "int", "trace_state": "int",
                "uplink_utilisation": "double"},
}


class RunError(Exception):
    """A path given to the job is not a complete run directory."""


@dataclass(frozen=True)
class Run:
    label: str  # how plots and tables name the run
    path: RunDir  # a local directory or a URI
    manifest: dict
    window: Window = WHOLE_RUN
    checked: dict | None = None  # the run's ``pubsub-emu check`` result, where ``figure`` kept one (CHECK_FILE)

    @property
    def sim_end_us(self) -> int:
        return int(self.manifest.get("sim_end_us") or 0)

    @property
    def measured_us(self) -> tuple[int, int]:
        """The (start, end) of simulated time the metrics measure."""
        return self.window.of(self.sim_end_us)


CHECK_FILE = "check.json"  # ``figure`` keeps each run's check here, for the summary's oracle columns


def check_runs(paths: list[str | Path], window: Window = WHOLE_RUN) -> list[Run]:
    """The complete runs at ``paths`` (directories or URIs), labelled by scenario name (plus
    directory when names repeat), each measured over ``window``."""
    run_dirs = [_run_dir(p) for p in paths]
    manifests = [_manifest(r) for r in run_dirs]
    names = [m.get("name") or r.name for r, m in zip(run_dirs, manifests)]
    runs = []
    for run_dir, manifest, name in zip(run_dirs, manifests, names):
        label = name if names.count(name) == 1 else f"{name} ({run_dir.name})"
        runs.append(Run(label, run_dir, manifest, window, _checked(run_dir)))
    labels = [r.label for r in runs]
    if len(set(labels)) != len(labels):
        raise RunError(f"the same run directory is given twice: {', '.join(map(str, paths))}")
    return runs


def same_tables(runs: list[Run]) -> dict[str, str]:
    """Run label -> the label of an earlier run of ``runs`` whose tables are the very same
    files (hard links: ``figure`` copies a run that two figures share) measured over the same
    window: its metrics are that run's under another name. Runs at URIs are never matched."""
    first: dict = {}
    same = {}
    for run in runs:
        files = _local_files(run.path)
        if files is None:
            continue
        source = first.setdefault((files, run.window), run.label)
        if source != run.label:
            same[run.label] = source
    return same


def _local_files(run_dir: RunDir) -> tuple | None:
    """The identities (device, inode) of a local run's Parquet files, None for a URI."""
    if is_uri(run_dir.location):
        return None
    found = []
    for folder, _, names in os.walk(run_dir.root):
        found += [os.stat(os.path.join(folder, name)) for name in names if name.endswith(".parquet")]
    return tuple(sorted((s.st_dev, s.st_ino) for s in found)) or None


def _run_dir(path) -> RunDir:
    try:
        return RunDir(path)
    except ValueError as exc:
        raise RunError(str(exc)) from None


def _checked(path: RunDir) -> dict | None:
    """The run's check result kept beside its tables, or None (never checked, or unreadable)."""
    if not path.is_file(CHECK_FILE):
        return None
    try:
        found = path.read_json(CHECK_FILE)
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def _manifest(path: RunDir) -> dict:
    if not path.is_dir():
        raise RunError(f"{path}: not a directory")
    if not path.is_file("manifest.json"):
        raise RunError(f"{path}: not a run directory (no manifest.json)")
    try:
        manifest = path.read_json("manifest.json")
    except (OSError, ValueError) as exc:
        raise RunError(f"{path.path('manifest.json')}: not valid JSON: {exc}") from None
    status = manifest.get("status") if isinstance(manifest, dict) else None
    if status != "complete":
        reason = f" ({manifest['error']})" if isinstance(manifest, dict) and manifest.get("error") else ""
        raise RunError(f"{path}: run status is {status!r}, not 'complete'{reason}")
    return manifest


# Tables of a row or a few per broker, written once at the start of a run: read without Spark
# jobs into local relations (metrics collect them, joins broadcast them).
STATIC_TABLES = ("brokers", "links")


def read_tables(spark, runs: list[Run]) -> dict:
    """One DataFrame per table over all ``runs``, with a ``run`` column."""
    from pyspark.sql import functions as F

    tables = {table: _read_static(spark, runs, table) for table in STATIC_TABLES}
    tables["owing"] = _owing(spark, runs)
    for table, ddl in TABLES.items():
        if table in STATIC_TABLES:
            continue
        read = _read_runs(spark, runs, table, ddl)
        if table == "deliveries":
            windowed = [run for run in runs if not run.window.whole]
            tables["delivered"] = _delivered_in_window(_read_runs(spark, windowed, table, ddl))
        if table == "expected":  # a run with faults lists the publications its workload had past its end too
            read = (read.join(F.broadcast(tables["owing"]), "run")
                    .where(F.col("t_pub_us") < F.col("sim_end_us")).drop("sim_end_us"))
        frame = _measured(read, table)
        for column, kind in PROTOCOL_COLUMNS.get(table, {}).items():
            if column not in frame.columns:
                frame = frame.withColumn(column, F.lit(None).cast(kind))
        tables[table] = frame
    tables["delivery_groups"] = _delivery_groups(spark, runs)
    return tables


def _delivery_groups(spark, runs: list[Run]):
    """(run, pub_id, broker, t_pub_us, t_deliver_us, hops, n): the deliveries counted per
    publication, broker, time and hops, inside each run's window. A run's own
    ``delivery_groups`` table where it has one; the deliveries of the others (written before
    the emulator wrote it) grouped, which at a paper's size is most of an analysis's time
    (bench/RESULTS.md). A key may have more than one row: the metrics add them up."""
    from pyspark.sql import functions as F

    keys = ["run", "pub_id", "broker", "t_pub_us", "t_deliver_us", "hops"]
    written = [run for run in runs if has_table(run.path, "delivery_groups")]
    groups = (_measured(_read_runs(spark, written, "delivery_groups", GROUPS), "delivery_groups")
              .select(*keys, F.col("deliveries").cast("bigint").alias("n")))
    older = [run for run in runs if run not in written]
    if not older:
        return groups
    deliveries = _measured(_read_runs(spark, older, "deliveries", TABLES["deliveries"]), "deliveries")
    return groups.unionByName(deliveries.groupBy(*keys).agg(F.count(F.lit(1)).alias("n")))


SOURCE_FILE = "_source_file"  # a run table's rows joined to their run by the file they came from


def _read_runs(spark, runs: list[Run], table: str, ddl: str):
    """``table`` of every run in one scan, each row labelled with its run by the file it came
    from (a join with the list of each run's files, as Spark names them). One scan, not one
    per run joined by unions: on small runs Spark's time goes to planning and running each
    scan of a query, so a union of runs made every query as many times dearer
    (bench/RESULTS.md)."""
    from pyspark.sql import functions as F

    # a run in two reports (whole, and over a window) is listed and read once, labelled once per report
    by_path: dict[str, list[Run]] = {}
    for run in runs:
        by_path.setdefault(run.path.spark_path(table), []).append(run)
    parts = {path: same[0].path.names(table, "*.parquet") for path, same in by_path.items()}
    present = {path: same for path, same in by_path.items() if parts[path]}
    if not present:
        return local_frame(spark, [], f"{ddl}, run string, {MEASURED_FROM} bigint, {MEASURED_UNTIL} bigint")
    schema = _merged_schema([(same[0].path, table, parts[path]) for path, same in present.items()])
    frame = spark.read.schema(schema).parquet(*present)
    listed = _files_of(spark, schema, frame, present)
    files = local_frame(spark, [(file, run.label, *_bounds(run)) for file, same in listed for run in same],
                        f"{SOURCE_FILE} string, run string, {MEASURED_FROM} bigint, {MEASURED_UNTIL} bigint")
    return frame.withColumn(SOURCE_FILE, F.input_file_name()).join(F.broadcast(files), SOURCE_FILE).drop(SOURCE_FILE)


def _files_of(spark, schema, frame, present: dict[str, list[Run]]) -> list[tuple[str, list[Run]]]:
    """Each file of ``frame`` as Spark names it, with the runs of the folder it lies in: one
    listing of every folder, each file matched back to its folder; where one is not matched
    (a location Spark's filesystem writes otherwise), one listing per folder, as Spark names
    the files under it."""
    folders = {_folder(path): same for path, same in present.items()}
    listed = [(file, folders.get(_folder(file, parent=True))) for file in frame.inputFiles()]
    if all(same is not None for _, same in listed):
        return listed
    return [(file, same) for path, same in present.items()
            for file in spark.read.schema(schema).parquet(path).inputFiles()]


def _folder(location: str, parent: bool = False) -> tuple[str, str, str]:
    """A table folder (or, with ``parent``, the folder of a file in it) as scheme, host and
    normalised path, whether given as a local path or as Spark names a file (``file:/...``,
    escaped)."""
    parts = urlparse(location)
    path = posixpath.normpath(unquote(parts.path) if parts.scheme else location)
    host = "" if parts.netloc == "localhost" else parts.netloc
    return parts.scheme or "file", host, posixpath.dirname(path) if parent else path


MEASURED_FROM, MEASURED_UNTIL = "_measured_from_us", "_measured_until_us"  # a row's run's window; null: whole


def _bounds(run: Run) -> tuple[int | None, int | None]:
    return (None, None) if run.window.whole else run.measured_us


def _measured(frame, table: str):
    """The rows of ``table`` inside their run's window (every row of a whole run): one
    comparison a row against the bounds its run's file brought (a condition per run made each
    row's cost grow with the runs windowed)."""
    return frame.where(_inside_window(TIME_COLUMNS[table])).drop(MEASURED_FROM, MEASURED_UNTIL)


def _inside_window(time_column: str):
    """True for a row whose ``time_column`` lies inside its run's window (every row of a whole run)."""
    from pyspark.sql import functions as F

    time = F.col(time_column)
    return F.col(MEASURED_FROM).isNull() | time.between(F.col(MEASURED_FROM), F.col(MEASURED_UNTIL))


def _owing(spark, runs: list[Run]):
    """The runs that hold an ``expected`` table (what their publications owe), with their end."""
    return local_frame(spark, [(r.label, r.sim_end_us) for r in runs if has_table(r.path, "expected")],
                       "run string, sim_end_us bigint")


def _delivered_in_window(deliveries):
    """Per run measured over a window, the deliveries made inside it, whenever their
    publication was made (``deliveries`` keeps those published inside it): a throughput that
    counts what the brokers delivered in the window, backlog included, not what of the
    window's publications they delivered by the run's end (0 when none was made inside it).
    A whole run has no row: it delivered its deliveries, which the metrics count anyway (a
    second scan of the biggest table cost a paper-size analysis a quarter of its time)."""
    from pyspark.sql import functions as F

    return deliveries.groupBy("run").agg(F.count(F.when(_inside_window("t_deliver_us"), 1)).alias("delivered"))


def local_frame(spark, rows: list[tuple], ddl: str):
    """A DataFrame of a few ``rows`` made in the driver, its columns given in Spark DDL, handed
    to the JVM as Arrow. ``createDataFrame`` of Python rows would make it a Python RDD that
    every query touching it recomputes in a Python worker (a second or so a query)."""
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType

    schema = to_arrow_schema(StructType.fromDDL(ddl))
    return spark.createDataFrame(pa.Table.from_pylist([dict(zip(schema.names, row)) for row in rows], schema))


def _read_static(spark, runs: list[Run], table: str):
    """``table`` of every run, read with pyarrow into a local relation (no Spark job)."""
    columns = [column.split()[0] for column in TABLES[table].split(", ")]
    parts = []
    for run in runs:
        rows = read_table(run.path, table).select(columns)
        parts.append(rows.append_column("run", pa.array([run.label] * rows.num_rows, pa.string())))
    return spark.createDataFrame(pa.concat_tables(parts))


def _merged_schema(tables: list[tuple[RunDir, str, list[str]]]):
    """The union of the columns of every part (run directory, table, part names), read from
    their footers: what Spark's ``mergeSchema`` finds, without the Spark job it runs per table
    (seconds on a small run)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    schemas = [pq.read_schema(run_dir.path(f"{table}/{part}"), filesystem=run_dir.fs)
               for run_dir, table, parts in tables for part in parts]
    return from_arrow_schema(pa.unify_schemas(schemas))
