"""Run directories (DESIGN.md sections 7 and 9) as the Spark job reads them.

Checks each directory before Spark starts (a user's mistake is one clear message, exit 2),
labels each run for the plots, and loads every table of every run into one DataFrame per
table with a ``run`` column. Tables that gained protocol columns in some runs are merged by
name; a table a run never wrote (no rows) is empty, not missing.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from actors.results import read_table
from actors.storage import RunDir
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
}
# Nullable columns protocols add; a run without them reads them as null.
PROTOCOL_COLUMNS = {
    "messages": {"cause": "string", "batch_size": "int", "triggered_by": "string"},
    "samples": {"preserved": "int", "soft_links": "int", "uplink_utilisation": "double"},
}


class RunError(Exception):
    """A path given to the job is not a complete run directory."""


@dataclass(frozen=True)
class Run:
    label: str  # how plots and tables name the run
    path: RunDir  # a local directory or a URI
    manifest: dict
    window: Window = WHOLE_RUN

    @property
    def sim_end_us(self) -> int:
        return int(self.manifest.get("sim_end_us") or 0)

    @property
    def measured_us(self) -> tuple[int, int]:
        """The (start, end) of simulated time the metrics measure."""
        return self.window.of(self.sim_end_us)


def check_runs(paths: list[str | Path], window: Window = WHOLE_RUN) -> list[Run]:
    """The complete runs at ``paths`` (directories or URIs), labelled by scenario name (plus
    directory when names repeat), each measured over ``window``."""
    run_dirs = [_run_dir(p) for p in paths]
    manifests = [_manifest(r) for r in run_dirs]
    names = [m.get("name") or r.name for r, m in zip(run_dirs, manifests)]
    runs = []
    for run_dir, manifest, name in zip(run_dirs, manifests, names):
        label = name if names.count(name) == 1 else f"{name} ({run_dir.name})"
        runs.append(Run(label, run_dir, manifest, window))
    labels = [r.label for r in runs]
    if len(set(labels)) != len(labels):
        raise RunError(f"the same run directory is given twice: {', '.join(map(str, paths))}")
    return runs


def _run_dir(path) -> RunDir:
    try:
        return RunDir(path)
    except ValueError as exc:
        raise RunError(str(exc)) from None


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
    for table, ddl in TABLES.items():
        if table in STATIC_TABLES:
            continue
        frames = [_measured(_read_table(spark, run.path, table, ddl), table, run).withColumn("run", F.lit(run.label))
                  for run in runs]
        frame = frames[0]
        for other in frames[1:]:
            frame = frame.unionByName(other, allowMissingColumns=True)
        for column, kind in PROTOCOL_COLUMNS.get(table, {}).items():
            if column not in frame.columns:
                frame = frame.withColumn(column, F.lit(None).cast(kind))
        tables[table] = frame
    return tables


def _measured(frame, table: str, run: Run):
    """The rows of ``table`` inside the run's window (every row for the whole run)."""
    from pyspark.sql import functions as F

    if run.window.whole:
        return frame
    start, end = run.measured_us
    return frame.where(F.col(TIME_COLUMNS[table]).between(start, end))


def _read_static(spark, runs: list[Run], table: str):
    """``table`` of every run, read with pyarrow into a local relation (no Spark job)."""
    columns = [column.split()[0] for column in TABLES[table].split(", ")]
    parts = []
    for run in runs:
        rows = read_table(run.path, table).select(columns)
        parts.append(rows.append_column("run", pa.array([run.label] * rows.num_rows, pa.string())))
    return spark.createDataFrame(pa.concat_tables(parts))


def _read_table(spark, run_dir: RunDir, table: str, ddl: str):
    parts = run_dir.names(table, "*.parquet")
    if not parts:
        return spark.createDataFrame([], ddl)
    return spark.read.schema(_merged_schema(run_dir, table, parts)).parquet(run_dir.spark_path(table))


def _merged_schema(run_dir: RunDir, table: str, parts: list[str]):
    """The union of the parts' columns, read from their footers: what Spark's ``mergeSchema``
    finds, without the Spark job it runs per table (seconds on a small run)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    schemas = [pq.read_schema(run_dir.path(f"{table}/{part}"), filesystem=run_dir.fs) for part in parts]
    return from_arrow_schema(pa.unify_schemas(schemas))
