"""The test suite's own rules (tests/conftest.py): only missing optional data may skip a test;
under xdist, tests that start Ray or Spark go to one worker (those of a fixture heavy enough to
take a worker of its own to another), and tests that share a module-scoped fixture go to one
worker together."""
from tests.conftest import PROJECT_ROOT, RUNTIME_GROUP

pytest_plugins = ["pytester"]

CONFTEST = (PROJECT_ROOT / "tests" / "conftest.py").read_text()


def test_only_missing_optional_data_may_skip_a_test(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_skips="""
        from pathlib import Path

        import pytest
        from conftest import skip_without

        def test_skipped_for_another_reason():
            pytest.skip("not today")

        def test_without_its_data():
            skip_without(Path("/no/such/data"), "the data")

        def test_with_its_data(tmp_path):
            skip_without(tmp_path, "the data")
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rs")
    result.assert_outcomes(passed=1, failed=1, skipped=1)
    result.stdout.fnmatch_lines(["*_ test_skipped_for_another_reason _*",
                                 "skipped for a reason other than missing optional data: Skipped: not today"])


def test_tests_sharing_a_module_fixture_or_the_runtimes_go_to_one_worker(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_groups="""
        import pytest

        @pytest.fixture(scope="module")
        def runs():
            return 1

        @pytest.mark.ray
        def test_marked(runs):
            pass

        def test_in_spark(spark_session):
            pass

        def test_one(runs):
            pass

        def test_two(runs, tmp_path):
            pass

        def test_alone(tmp_path):
            pass

        @pytest.fixture(scope="module")
        def every_figure_small(spark_session):
            return 1

        def test_with_a_worker_of_its_own(every_figure_small, runs):
            pass
    """)
    items, _ = pytester.inline_genitems()
    groups = {item.name: [mark.args for mark in item.iter_markers("xdist_group")] for item in items}
    runtime = [(RUNTIME_GROUP,)]
    assert groups == {"test_marked": runtime, "test_in_spark": runtime, "test_one": [("test_groups:runs",)],
                      "test_two": [("test_groups:runs",)], "test_alone": [],
                      "test_with_a_worker_of_its_own": [(f"{RUNTIME_GROUP}:every_figure_small",)]}


def test_a_test_that_starts_ray_outside_the_runtime_group_fails_under_xdist(pytester, monkeypatch):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_starts="""
        import sys
        import types

        import pytest

        def _start_ray():
            sys.modules["ray"] = types.SimpleNamespace(is_initialized=lambda: True, shutdown=lambda: None)

        def test_starts_ray_unmarked():
            _start_ray()

        @pytest.mark.ray
        def test_starts_ray_marked():
            _start_ray()
    """)
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    monkeypatch.setenv("RAY_TMPDIR", str(pytester.path))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*this test started Ray but is not marked ray*"])
