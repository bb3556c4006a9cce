import contextlib
import os
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

PROJECT_ROOT = Path(__file__).resolve().parent.parent
MISSING_DATA = "optional data missing: "  # the one reason a test may be skipped


def skip_without(path: Path, what: str) -> None:
    """Skip the calling test when the optional data at ``path`` is not there."""
    if not path.exists():
        pytest.skip(f"{MISSING_DATA}{what} at {path}")


def pytest_configure(config):
    """Under pytest-xdist every worker starts its own local Ray instance (the ``ray_session``
    fixture, or a run that starts Ray itself) with its own temporary directory, so workers'
    sessions, sockets and logs never meet (unless ``RAY_TMPDIR`` says where they go)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker and "RAY_TMPDIR" not in os.environ:
        # short: Ray's socket paths under it must stay within the 107 characters a socket allows
        os.environ["RAY_TMPDIR"] = tempfile.mkdtemp(prefix=f"ray-{worker}-")


RUNTIME_FIXTURES = ("ray_session", "spark_session", "analysis_in_session")
RUNTIME_GROUP = "ray-and-spark"
# Module fixtures whose tests take a worker of their own, with its own Ray instance and Spark
# session: every figure's test-sized runs and their analysis are about two thirds of the
# runtime tests' time, and on one worker with the rest they made it the suite's critical path
# (bench/RESULTS.md, issue 34).
OWN_RUNTIME_FIXTURES = ("every_figure_small",)


@pytest.hookimpl(tryfirst=True)  # before xdist reads the marks
def pytest_collection_modifyitems(config, items):
    """How ``--dist loadgroup`` shares tests out among xdist workers. Tests that start Ray or
    Spark (marked ``ray``, or using the session's Ray instance or Spark session) go to one
    worker: a second Ray instance or JVM on two cores slows both workers' runtime tests
    (bench/RESULTS.md), while the other worker runs the tests that need neither. The
    exception is ``OWN_RUNTIME_FIXTURES``: their tests form a second runtime group. Tests that
    share a module-scoped fixture (runs made once and checked by several tests) go to one
    worker together, which builds the fixture once."""
    for item in items:
        fixtures = item._fixtureinfo.name2fixturedefs
        own = sorted(set(fixtures) & set(OWN_RUNTIME_FIXTURES))
        if own:
            item.add_marker(pytest.mark.xdist_group(f"{RUNTIME_GROUP}:{own[0]}"))
        elif item.get_closest_marker("ray") or any(name in fixtures for name in RUNTIME_FIXTURES):
            item.add_marker(pytest.mark.xdist_group(RUNTIME_GROUP))
        elif shared := sorted(name for name, definitions in fixtures.items() if definitions[-1].scope == "module"):
            item.add_marker(pytest.mark.xdist_group(f"{item.module.__name__}:{shared[0]}"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """Under xdist, a test outside the runtime group that starts Ray in this process fails: it
    would put a second Ray instance on the machine (mark it ``ray``)."""
    running_before = _ray_running()
    result = yield
    grouped = any(mark.args[0].startswith(RUNTIME_GROUP) for mark in item.iter_markers("xdist_group"))
    if os.environ.get("PYTEST_XDIST_WORKER") and not grouped and not running_before and _ray_running():
        sys.modules["ray"].shutdown()
        pytest.fail("this test started Ray but is not marked ray (tests/conftest.py: RUNTIME_GROUP)")
    return result


def _ray_running() -> bool:
    ray = sys.modules.get("ray")
    return ray is not None and ray.is_initialized()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A test skipped for any reason but missing optional data fails: a skip must not hide
    a check that stopped running."""
    outcome = yield
    report = outcome.get_result()
    if report.skipped and not hasattr(report, "wasxfail"):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        if not reason.removeprefix("Skipped: ").startswith(MISSING_DATA):
            report.outcome = "failed"
            report.longrepr = f"skipped for a reason other than missing optional data: {reason}"


@pytest.fixture(scope="session")
def ray_session():
    """One local Ray instance shared by every test of the session (of the xdist worker), whose
    runs hand their host actors on to the next run (``hosts_kept``: a new host process costs
    about 3 s of CPU, and the cross-host tests start about a hundred)."""
    import ray

    from actors.transports import hosts_kept, ray_runtime_env

    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR",
                 runtime_env=ray_runtime_env())
    with hosts_kept():
        yield ray


@pytest.fixture(scope="session")
def spark_session():
    """One local Spark session (and JVM) for every analysis of the session (of the xdist
    worker), with the analysis job's settings for small runs."""
    import sys

    from analysis import job

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = job.spark_session(small=True, driver_memory="1g")
    yield spark
    spark.stop()


@contextlib.contextmanager
def analyses_in(spark):
    """Within it, ``pubsub-emu analyze`` and ``figure`` run the analysis job in ``spark``
    instead of a spark-submit process of their own: the same job on the same runs, without a
    JVM started and warmed up for each figure (tests/test_analysis.py runs spark-submit)."""
    from analysis import job, submit
    from analysis.window import WHOLE_RUN

    def run_job(reports, small, bucket, master, driver_memory, measured=WHOLE_RUN) -> int:
        try:
            job.analyse(spark, job.reports_listed([requested.listed() for requested in reports], measured, bucket), small)
            return 0
        finally:
            spark.catalog.clearCache()

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(submit, "run_job", run_job)
        yield


@pytest.fixture
def analysis_in_session(spark_session):
    """``analyses_in`` the worker's Spark session, for one test."""
    with analyses_in(spark_session):
        yield


@pytest.fixture
def write_scenario(tmp_path):
    """Write a scenario mapping (and optional side files) and return its path."""

    def write(scenario: dict, files: dict[str, str] | None = None, name: str = "scenario.yaml") -> Path:
        for file_name, text in (files or {}).items():
            (tmp_path / file_name).write_text(text)
        path = tmp_path / name
        path.write_text(yaml.safe_dump(scenario, sort_keys=False))
        return path

    return write
