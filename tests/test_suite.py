"""The test suite's own rules (tests/conftest.py): only missing optional data may skip a test,
and tests that share a module-scoped fixture go to one xdist worker together."""
from tests.conftest import PROJECT_ROOT

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


def test_tests_sharing_a_module_fixture_go_to_one_worker(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_groups="""
        import pytest

        @pytest.fixture(scope="module")
        def runs():
            return 1

        def test_one(runs):
            pass

        def test_two(runs, tmp_path):
            pass

        def test_alone(tmp_path):
            pass
    """)
    items, _ = pytester.inline_genitems()
    groups = {item.name: [mark.args for mark in item.iter_markers("xdist_group")] for item in items}
    assert groups == {"test_one": [("test_groups:runs",)], "test_two": [("test_groups:runs",)], "test_alone": []}
