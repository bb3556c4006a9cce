"""``pip install .`` (not editable) gives a working emulator, compiled where a C compiler is: in a
fresh virtual environment, away from the checkout, the quick start's scenario runs and a figure is made from the
scenarios, figure files and cost profiles the package carries."""
import json
import os
import shutil
import subprocess
import venv

import pytest

from tests.conftest import PROJECT_ROOT


@pytest.mark.ray  # its figure starts a Ray instance (in a process of its own): with the runtime tests, not beside
@pytest.mark.slow
def test_a_plain_install_runs_the_quick_start_and_a_figure(tmp_path):
    environment = tmp_path / "venv"
    # the dependencies come from this environment (they are the registries' own packages);
    # the emulator itself is built and installed from the checkout, as pip install . does
    venv.EnvBuilder(system_site_packages=True, with_pip=True).create(environment)
    python = environment / "bin" / "python"
    subprocess.run([python, "-m", "pip", "install", "--quiet", "--no-deps", str(PROJECT_ROOT)], check=True,
                   capture_output=True)
    installed = subprocess.run([python, "-c", "import experiments, sys; print(experiments.__file__)"],
                               cwd=tmp_path, check=True, capture_output=True, text=True).stdout
    assert str(environment) in installed and str(PROJECT_ROOT) not in installed
    scenarios = subprocess.run([python, "-c", "from experiments.figures import SCENARIO_DIR; print(SCENARIO_DIR)"],
                               cwd=tmp_path, check=True, capture_output=True, text=True).stdout.strip()
    emulator = environment / "bin" / "pubsub-emu"
    run = subprocess.run([emulator, "run", f"{scenarios}/quickstart.yaml", "--set", "runtime.hosts=0",
                          "--set", "duration=5s", "--out", "quick"], cwd=tmp_path, capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    if shutil.which("cc"):  # the install compiled the per-message modules (setup.py)
        assert "compiled build" in run.stderr, run.stderr
    assert json.loads((tmp_path / "quick" / "manifest.json").read_text())["status"] == "complete"
    # the cheapest figure (4 runs of seconds): its scenarios extend others, which must resolve inside the package
    figure = subprocess.run([emulator, "figure", "relocation_enterprise", "--small", "--out", "figure"], cwd=tmp_path,
                            capture_output=True, text=True, env={**os.environ, "PATH": f"{environment}/bin:{os.environ['PATH']}"})
    assert figure.returncode == 0, figure.stderr[-3000:]
    page = (tmp_path / "figure" / "figure.md").read_text()
    assert "Deliveries checked: exact" in page and (tmp_path / "figure" / "figure.png").stat().st_size > 20_000
