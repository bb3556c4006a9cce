"""``pubsub-emu figure``: every figure's test-sized runs and report, and its input errors."""
import pytest

from experiments import figures
from experiments.cli import main
from experiments.scenario import resolve
from tests.conftest import PROJECT_ROOT

SCENARIOS = PROJECT_ROOT / "experiments" / "scenarios"


@pytest.mark.parametrize("figure, label, shipped", [
    ("burst_covering", "lazy", "unsub_burst_small_lazy.yaml"),
    ("burst_pruning", "selective", "unsub_burst_small_selective.yaml"),
    ("burst_pruning", "incremental", "unsub_burst_small_incremental.yaml"),
    ("sweep_unsubscriptions", "200_selective", "unsub_burst_small_sweep_unsubs200_selective.yaml"),
    ("sweep_degree", "degree10_active", "unsub_burst_small_sweep_degree10_active.yaml"),
    ("mobile_monitors", "active", "mobile_monitors_small_active.yaml"),
    ("mobile_rush_hour", "active", "mobile_rush_hour_small_active.yaml"),
    ("mobile_rush_hour", "incremental", "mobile_rush_hour_small_incremental.yaml"),
    ("workflow", "active", "workflow_small_active.yaml"),
    ("workflow", "incremental", "workflow_small_incremental.yaml"),
    ("relocation_enterprise", "static", "relocation_small_enterprise_static.yaml"),
    ("relocation_random", "grape_delay", "relocation_small_random_grape_delay.yaml"),
    ("relocation_enterprise", "pop", "relocation_small_enterprise_pop.yaml"),
    ("multitree_localized2", "MULT", "multitree_small_mult.yaml"),
    ("multitree_localized2", "SemCast-filtered", "multitree_small_semcast_filtered.yaml"),
])
def test_small_runs_are_the_shipped_test_sized_scenarios(figure, label, shipped):
    loaded = figures.load(figure)
    scenario, *_ = loaded.runs[label]
    small = resolve(scenario, loaded.overrides(label, small=True)).scenario
    assert small["name"] == f"{figure}-{label}"
    assert {**small, "name": None} == {**resolve(SCENARIOS / shipped).scenario, "name": None}


def test_every_figure_resolves():
    """Test-sized always; full-sized where a run overrides its scenario (the others are
    shipped scenarios plus a name, which test_scenarios validates)."""
    assert len(figures.names()) >= 8
    for name in figures.names():
        figure = figures.load(name)
        figures.check(figure, small=True)
        if any(own for _, own, _ in figure.runs.values()):
            figures.check(figure, small=False)


def test_listing_and_input_errors(tmp_path, capsys):
    assert main(["figure", "--list"]) == 0
    listed = capsys.readouterr().out
    assert all(f"{name}: " in listed for name in figures.names())
    assert main(["figure", "no_such_figure"]) == 2
    assert "no such figure" in capsys.readouterr().err
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "file").write_text("x")
    assert main(["figure", "burst_covering", "--out", str(tmp_path / "taken")]) == 2
    assert main(["figure"]) == 2


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.parametrize("name", figures.names())
def test_figure_small_runs_and_reports(name, tmp_path, capsys, ray_session, analysis_in_session):
    out = tmp_path / name
    assert main(["figure", name, "--small", "--out", str(out)]) == 0
    figure = figures.load(name)
    page = (out / "figure.md").read_text()
    assert capsys.readouterr().out.strip().endswith(str(out / "figure.md"))
    for label in figure.runs:
        assert f"| {name}-{label} |" in page
        assert (out / "runs" / label / "manifest.json").is_file()
    shown = [title for title in figure.plots if f"## {title}" in page]
    assert shown, "the figure shows none of its plots"
    for title in shown:
        image = page.split(f"## {title}\n\n![{title}](", 1)[1].split(")", 1)[0]
        assert (out / image).stat().st_size > 5000
