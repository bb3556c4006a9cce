"""How ``pubsub-emu analyze`` starts the analysis job: spark-submit's command line, and a
class-data archive that takes seconds off every start of the driver JVM.

Loading Spark's classes is a large part of a small run's analysis. The first analysis on a
machine has the JVM write the classes it loaded to an archive as it exits (AppCDS,
``-XX:ArchiveClassesAtExit``; about 200 MB, and that run takes longer); later analyses map
the archive instead of loading and verifying the classes again (bench/LOG.md). The archive
lives in the user's cache directory under a name that changes with the JVM and Spark
installations; a JVM that finds an archive it cannot use ignores it and loads classes as usual.
``PUBSUB_EMU_CLASS_ARCHIVE=off`` turns the archive off.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import analysis.job
from analysis import window
from analysis.window import WHOLE_RUN, Window

SMALL_RUN_DRIVER_MEMORY = "2g"  # a larger heap makes the serial collector slower on small runs
DRIVER_MEMORY = "4g"
LOG_FILE = "analysis.log"  # in the report directory: Spark's output and the job's


def spark_home() -> Path:
    return Path(importlib.util.find_spec("pyspark").submodule_search_locations[0])


def run_job(reports: list, small: bool, bucket: float | None, master: str,
            driver_memory: str | None, measured: Window = WHOLE_RUN, report=None) -> int:
    """Run ``analysis/job.py`` with spark-submit, in its own process, on ``reports``
    (``analysis.job.Requested``: a report directory, its runs' paths and maybe a window of its
    own; several are computed in one pass), with this interpreter as Spark's Python (so a
    virtual environment need not be activated); its exit status. ``small``: the runs are small
    (``analysis.job.is_small``). Spark's and the job's output go to ``OUT/analysis.log`` of
    every report; ``report`` (stderr by default) gets an opening line and, when the job fails,
    its cause in one line."""
    report = report or (lambda line: print(line, file=sys.stderr))
    memory = driver_memory or (SMALL_RUN_DRIVER_MEMORY if small else DRIVER_MEMORY)
    archive = _class_archive()
    java_options = [analysis.job.SMALL_RUN_JAVA_OPTIONS] if small else []
    if archive is not None:
        java_options.append(archive.java_options)
    command = [str(spark_home() / "bin" / "spark-submit"), "--master", master, "--driver-memory", memory,
               "--conf", "spark.log.level=WARN", "--conf", "spark.ui.enabled=false"]
    if java_options:
        command += ["--driver-java-options", " ".join(java_options)]
    for requested in reports:
        requested.out.mkdir(parents=True, exist_ok=True)
    log = reports[0].out / LOG_FILE
    listing = None
    if len(reports) == 1 and reports[0].window is None and reports[0].plots is True:  # as the command line names it
        command += [analysis.job.__file__, *map(str, reports[0].runs), "--out", str(reports[0].out)]
    else:
        with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="reports-", delete=False) as listing:
            json.dump([requested.listed() for requested in reports], listing)
        command += [analysis.job.__file__, "--reports", listing.name]
    if bucket is not None:
        command += ["--bucket", str(bucket)]
    command += window.arguments(measured)
    first = " (the first on this machine: it also writes Spark's class archive, about a minute more, once)" \
        if archive is not None and archive.writing is not None else ""
    runs = sum(len(requested.runs) for requested in reports)
    report(f"analysis: {runs} run(s){f' in {len(reports)} reports' if len(reports) > 1 else ''} with Spark{first}; "
           f"log: {log}")
    environment = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    status = 1
    try:
        with open(log, "w") as output:
            status = subprocess.run(command, env=environment, stdout=output, stderr=subprocess.STDOUT).returncode
    finally:  # an interrupted run leaves no half-written archive behind
        if archive is not None:
            archive.finish(status == 0)
        if listing is not None:
            os.unlink(listing.name)
    for requested in reports[1:]:
        shutil.copyfile(log, requested.out / LOG_FILE)
    if status != 0:
        report(f"analysis: failed: {failure_cause(log)} (the whole output: {log})")
    return status


def failure_cause(log: Path) -> str:
    """The line of a failed job's output that names its cause: the last Python exception
    (``Name: message``), else the job's own error line, else the last line."""
    lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
    for line in reversed(lines):
        if line.startswith("analysis: error:"):
            return line.removeprefix("analysis: error:").strip()
        head = line.split(":", 1)[0]  # ModuleNotFoundError, pyspark.errors...AnalysisException
        if ":" in line and all(part.isidentifier() for part in head.split(".")) \
                and head.endswith(("Error", "Exception")):
            return line
    return lines[-1] if lines else "no output"


class _ClassArchive:
    """The archive at ``path``: used when it exists, otherwise written by this run (to a
    temporary name, moved into place only when the run succeeded)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.writing = None if path.exists() else path.with_name(f".{path.name}.{os.getpid()}.tmp")

    @property
    def java_options(self) -> str:
        quiet = "-Xlog:cds*=off"  # the dump lists every class it skips (signed jars, generated code)
        if self.writing is None:
            return f"-XX:SharedArchiveFile={self.path} {quiet}"
        return f"-XX:ArchiveClassesAtExit={self.writing} {quiet}"

    def finish(self, succeeded: bool) -> None:
        if self.writing is None:
            return
        if succeeded and self.writing.exists():
            os.replace(self.writing, self.path)
        else:
            self.writing.unlink(missing_ok=True)


def _class_archive() -> _ClassArchive | None:
    """The archive for this JVM and Spark, or None when it is turned off, when there is no
    writable cache directory or no java to key it by, or when the cache path holds a space
    (spark-submit splits the JVM's options at spaces)."""
    if os.environ.get("PUBSUB_EMU_CLASS_ARCHIVE", "").lower() in ("off", "0", "false", "no"):
        return None
    java = _java()
    if java is None:
        return None
    installations = f"{java.resolve()}:{java.stat().st_mtime_ns}:{spark_home().resolve()}"
    key = hashlib.sha256(installations.encode()).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pubsub-emu"
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    if not os.access(cache, os.W_OK) or any(c.isspace() for c in str(cache)):
        return None
    return _ClassArchive(cache / f"spark-classes-{key}.jsa")


def _java() -> Path | None:
    """The java spark-submit starts: ``$JAVA_HOME/bin/java`` or the one on the PATH."""
    home = os.environ.get("JAVA_HOME")
    found = Path(home) / "bin" / "java" if home else shutil.which("java")
    return Path(found) if found and Path(found).exists() else None
