from pathlib import Path

import pytest
import yaml

PROJECT_ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def ray_session():
    """One local Ray instance shared by every test of the session."""
    import ray

    from actors.coordinator import ray_runtime_env

    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR",
                 runtime_env=ray_runtime_env())
    yield ray


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
