"""The compiled build and the pure-Python one (protocols/compiled.py, setup.py): where a C
compiler is at hand the install compiles the per-message modules and the tests run them, and
both builds write the same tables for one scenario of every family."""
import json
import os
import shutil
import subprocess
import sys

import pytest

import actors.engine
import protocols.routing
from protocols import compiled
from tests.conftest import MISSING_DATA, PROJECT_ROOT

HAS_COMPILED = all(compiled.compiled_of(module) for module in compiled.COMPILED)
PURE_ASKED = compiled.sources_asked()


def test_the_install_compiled_every_listed_module_where_a_c_compiler_is_and_the_tests_run_them():
    if shutil.which("cc") is None:
        assert not compiled.running_compiled(), "no C compiler here, yet compiled modules are imported"
        return
    assert HAS_COMPILED, "a C compiler is here but the install compiled nothing (`pip install -v -e .` says why)"
    assert not compiled.stale_modules(), "sources changed since they were compiled: `pip install -e .` again"
    assert compiled.running_compiled() != PURE_ASKED
    imported = (actors.engine.__file__, protocols.routing.__file__)
    assert all(path.endswith(".py") == PURE_ASKED for path in imported), imported


def fingerprints(tmp_path, pure: bool) -> tuple[str, dict]:
    """The fingerprints of every reference scenario in one build; in the pure-Python one, every
    kernel call's argument types checked against those declared for its entry point (kernels.py)."""
    out = tmp_path / ("pure.json" if pure else "compiled.json")
    flag = "1" if pure else ""
    environment = {**os.environ, compiled.PURE_PYTHON: flag, "PUBSUB_EMU_CHECK_KERNEL_TYPES": flag}
    done = subprocess.run([sys.executable, "bench/fingerprint.py", "--out", str(out)], cwd=PROJECT_ROOT,
                          env=environment, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    build = next(line for line in done.stdout.splitlines() if line.startswith("build: "))
    return build, json.loads(out.read_text())


@pytest.mark.slow
def test_the_compiled_and_the_pure_python_build_write_identical_tables_for_one_scenario_of_every_family(tmp_path):
    # (the pure-Python runs also hold every kernel call to its declared types: a call that passes
    # others would fail its run, where the compiled build's entry points would misread them)
    if not HAS_COMPILED:
        pytest.skip(f"{MISSING_DATA}a compiled build (the install had no C compiler)")
    compiled_build, compiled_tables = fingerprints(tmp_path, pure=False)
    pure_build, pure_tables = fingerprints(tmp_path, pure=True)
    assert (compiled_build, pure_build) == ("build: compiled build",
                                            f"build: pure-Python build ({compiled.PURE_PYTHON} is set)")
    assert len(compiled_tables) >= 20 and int(compiled_tables["engine-zero"]["deliveries"].split(":")[0]) > 30_000
    assert compiled_tables == pure_tables


# a compiler that builds setup.py's probe of Python.h but none of the compiled modules (a compiler
# that runs out of memory on mypyc's C, say): the build's own failure, after mypyc's translation
FAILS_PAST_THE_PROBE = '#!/bin/sh\ncase "$*" in *probe.c*) exec cc "$@";; esac\nexit 1\n'


@pytest.mark.slow
@pytest.mark.parametrize("failing, says", [
    (None, "no working C compiler for Python extensions"),
    (FAILS_PAST_THE_PROBE, "compiling failed"),
], ids=["no-compiler", "fails-past-the-probe"])
def test_an_install_whose_c_compiler_fails_says_why_and_is_pure_python(tmp_path, failing, says):
    # from a copy: pip builds in the checkout's build/, where another test's install may be building
    checkout, target = tmp_path / "checkout", tmp_path / "installed"
    shutil.copytree(PROJECT_ROOT, checkout, ignore=shutil.ignore_patterns(
        ".git", "build", "runs", "*.so", "*.egg-info", "__pycache__", ".hypothesis", compiled.DIGESTS))
    compiler = "false"
    if failing is not None:
        if shutil.which("cc") is None:
            pytest.skip(f"{MISSING_DATA}a C compiler (cc) to fail past the probe")
        compiler = tmp_path / "cc-failing"
        compiler.write_text(failing)
        compiler.chmod(0o755)
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-v", "--no-deps", "--target", str(target),
                           str(checkout)], env={**os.environ, "CC": str(compiler)}, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"building pure Python, the per-message modules not compiled: {says}" in done.stdout + done.stderr
    assert not list(target.rglob("*.so")) and not (target / "protocols" / compiled.DIGESTS).exists()
    imported = subprocess.run(
        [sys.executable, "-c", "import actors.engine, protocols.compiled as c; print(actors.engine.__file__, "
                               "c.running_compiled(), c.stale_modules())"],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(target), compiled.PURE_PYTHON: ""},
        capture_output=True, text=True, check=True)
    assert imported.stdout.split() == [str(target / "actors" / "engine.py"), "False", "[]"]


WRITE_TABLES = """
import pickle, sys
from protocols.index import FilterIndex
from protocols.language import parse_filter
from protocols.routing import LOCAL, RoutingTable

index, table = FilterIndex(), RoutingTable(["B", "C"])
for key, text in enumerate(FILTERS):
    index.add(key, parse_filter(text))
    table.add_route(("S", key), parse_filter(text), LOCAL if key % 2 else 0, f"client{key}")
index.remove(1)
table.remove(("S", 2))
sys.stdout.buffer.write(pickle.dumps((index, table, index.work)))
"""

READ_TABLES = """
import pickle, sys
from protocols.language import parse_publication

index, table, work = pickle.loads(sys.stdin.buffer.read())
for text in PUBLICATIONS:
    routes = table.match(parse_publication(text))
    print(index.matching(parse_publication(text)), table.ids_of(routes.local).tolist(), routes.groups)
print(work.match_queries > 0)
"""


@pytest.mark.parametrize("written_pure", [True, False], ids=["pure-to-compiled", "compiled-to-pure"])
def test_tables_pickled_by_one_build_answer_the_same_in_the_other(written_pure):
    """A checkpoint may be resumed by the other build (a cluster's nodes, an edited checkout):
    the index's and the routing table's state pickle the same way in both."""
    if not HAS_COMPILED:
        pytest.skip(f"{MISSING_DATA}a compiled build (the install had no C compiler)")
    filters = ["[s,neq,'IBM'],[x,>,1]", "[x,>,1]", "[s,str-postfix,'LL'],[x,<,9]", "[s,eq,'DELL']", "[x,>=,4]"]
    publications = ["[s,'DELL'],[x,5]", "[s,'IBM'],[x,5]", "[s,'DELL'],[x,0]", "[x,4]"]
    setup = f"FILTERS = {filters!r}\nPUBLICATIONS = {publications!r}\n"

    def python(code: str, pure: bool, given: bytes = b"") -> bytes:
        environment = {**os.environ, compiled.PURE_PYTHON: "1" if pure else ""}
        return subprocess.run([sys.executable, "-c", setup + code], input=given, cwd=PROJECT_ROOT, env=environment,
                              capture_output=True, check=True).stdout

    pickled = python(WRITE_TABLES, pure=written_pure)
    answers = python(READ_TABLES, pure=not written_pure, given=pickled).decode()
    assert answers == python(READ_TABLES, pure=written_pure, given=pickled).decode()
    lines = answers.splitlines()  # (IBM's publication misses the first filter, which excludes it)
    assert lines[0].startswith("[0, 2, 3, 4] ") and lines[1].startswith("[4] ") and lines[-1] == "True"


def test_where_the_time_goes_times_the_table_questions_whichever_build_is_installed():
    """``bench_engine.py --where`` times the routing table's questions by wrapping them; compiled,
    their callers reach them directly and every one would read zero, so it runs the sources."""
    done = subprocess.run([sys.executable, "bench/bench_engine.py", "--where", "--operations", "200"],
                          cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    questions = {line.split()[0]: int(line.split()[1].replace(",", "")) for line in
                 done.stdout.split("of which routing-table questions")[1].splitlines()[1:] if "calls" in line}
    assert questions.get("match", 0) > 0 and questions.get("add", 0) > 0, done.stdout


def test_the_engine_benchmark_names_its_build_and_instruction_counts_refuse_to_compare_two(monkeypatch):
    """A ratio of instructions between a compiled checkout and a pure-Python one (a new worktree,
    or an edited checkout) would be mostly the build's: the engine benchmark names the build it
    ran, and the instruction counts refuse two different ones."""
    done = subprocess.run([sys.executable, "bench/bench_engine.py", "--operations", "20", "--hosts", "0",
                           "--profiles", "zero"], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines()[0] == f"build: {compiled.build_name()}"
    monkeypatch.syspath_prepend(str(PROJECT_ROOT / "bench"))
    import bench_instructions

    pure = "pure-Python build (PUBSUB_EMU_PURE_PYTHON is set)"
    assert bench_instructions.builds_differ(["compiled build", pure])
    assert not bench_instructions.builds_differ([pure, pure])
    assert not bench_instructions.builds_differ(["compiled build", bench_instructions.UNNAMED])
