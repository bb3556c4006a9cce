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
PURE_ASKED = os.environ.get(compiled.PURE_PYTHON, "") not in ("", "0")


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
    out = tmp_path / ("pure.json" if pure else "compiled.json")
    environment = {**os.environ, compiled.PURE_PYTHON: "1" if pure else ""}
    done = subprocess.run([sys.executable, "bench/fingerprint.py", "--out", str(out)], cwd=PROJECT_ROOT,
                          env=environment, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    build = next(line for line in done.stdout.splitlines() if line.startswith("build: "))
    return build, json.loads(out.read_text())


@pytest.mark.slow
def test_the_compiled_and_the_pure_python_build_write_identical_tables_for_one_scenario_of_every_family(tmp_path):
    if not HAS_COMPILED:
        pytest.skip(f"{MISSING_DATA}a compiled build (the install had no C compiler)")
    compiled_build, compiled_tables = fingerprints(tmp_path, pure=False)
    pure_build, pure_tables = fingerprints(tmp_path, pure=True)
    assert (compiled_build, pure_build) == ("build: compiled", "build: pure Python")
    assert len(compiled_tables) >= 20 and int(compiled_tables["engine-zero"]["deliveries"].split(":")[0]) > 30_000
    assert compiled_tables == pure_tables


@pytest.mark.slow
def test_an_install_whose_c_compiler_fails_says_why_and_is_pure_python(tmp_path):
    target = tmp_path / "installed"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-v", "--no-deps", "--target", str(target),
                           str(PROJECT_ROOT)], env={**os.environ, "CC": "false"}, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "building pure Python, the per-message modules not compiled: compiling failed" in done.stdout + done.stderr
    packages = [target / package for package in ("actors", "protocols")]  # (a checkout's build/ may hold others)
    assert not [path for package in packages for path in package.glob("*.so")]
    assert not (target / "protocols" / compiled.DIGESTS).exists()
    imported = subprocess.run(
        [sys.executable, "-c", "import actors.engine, protocols.compiled as c; print(actors.engine.__file__, "
                               "c.running_compiled(), c.stale_modules())"],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(target), compiled.PURE_PYTHON: ""},
        capture_output=True, text=True, check=True)
    assert imported.stdout.split() == [str(target / "actors" / "engine.py"), "False", "[]"]
