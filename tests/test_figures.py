"""``pubsub-emu figure``: every figure's test-sized runs and report, and its input errors."""
import contextlib
import dataclasses
import io
import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from actors.results import read_table
from experiments import figures
from experiments.check import EXCUSES
from experiments.cli import main
from analysis.job import PLOTS_OVER_TIME
from analysis.window import label_in
from experiments.build import check_arguments, rebuild_workload, resolve, workloads_shared
from protocols.errors import InputError
from tests.conftest import PROJECT_ROOT

SCENARIOS = PROJECT_ROOT / "experiments" / "scenarios"


@pytest.mark.parametrize("figure, label, shipped", [
    ("burst_covering", "lazy", "unsub_burst_small_lazy.yaml"),
    ("burst_pruning", "selective", "unsub_burst_small_selective.yaml"),
    ("burst_pruning", "incremental", "unsub_burst_small_incremental.yaml"),
    ("burst_clustered", "active", "clustered_small_active.yaml"),
    ("burst_clustered", "selective", "clustered_small_selective.yaml"),
    ("burst_paper000", "lazy", "burst_paper000_small_lazy.yaml"),
    ("burst_paper000", "incremental", "burst_paper000_small_incremental.yaml"),
    ("burst_paper000_triggered", "t2100_active", "burst_paper000_small_active.yaml"),
    ("sweep_unsubscriptions", "200_selective", "unsub_burst_small_sweep_unsubs200_selective.yaml"),
    ("sweep_degree", "degree10_active", "unsub_burst_small_sweep_degree10_active.yaml"),
    ("mobile_monitors", "active", "mobile_monitors_small_active.yaml"),
    ("mobile_monitors", "selective", "mobile_monitors_small_selective.yaml"),
    ("mobile_monitors", "moving_active", "mobile_monitors_small_moving_active.yaml"),
    ("mobile_monitors", "moving_selective", "mobile_monitors_small_moving_selective.yaml"),
    ("mobile_rush_hour", "active", "mobile_paper_small_active.yaml"),
    ("mobile_rush_hour", "incremental", "mobile_paper_small_incremental.yaml"),
    ("mobile_rush_hour", "owned_active", "mobile_paper_small_owned_active.yaml"),
    ("mobile_rush_hour", "owned_incremental", "mobile_paper_small_owned_incremental.yaml"),
    ("mobile_rush_hour", "nested_active", "mobile_paper_small_nested_active.yaml"),
    ("mobile_rush_hour", "nested_incremental", "mobile_paper_small_nested_incremental.yaml"),
    ("mobile_rush_hour_paper", "active", "mobile_paper_small_active.yaml"),
    ("mobile_rush_hour_paper", "incremental", "mobile_paper_small_incremental.yaml"),
    ("mobile_rush_hour_10min", "active", "mobile_rush_hour_small_active.yaml"),
    ("mobile_rush_hour_10min", "incremental", "mobile_rush_hour_small_incremental.yaml"),
    ("workflow", "active", "workflow_paper_small_active.yaml"),
    ("workflow", "incremental", "workflow_paper_small_incremental.yaml"),
    ("workflow_per_instance", "active", "workflow_small_active.yaml"),
    ("workflow_per_instance", "incremental", "workflow_small_incremental.yaml"),
    ("relocation_enterprise", "static", "relocation_small_enterprise_static.yaml"),
    ("relocation_random", "grape_delay", "relocation_small_random_grape_delay.yaml"),
    ("relocation_enterprise", "pop", "relocation_small_enterprise_pop.yaml"),
    ("multitree_localized1", "MULT", "multitree_paper_small.yaml"),
])
def test_small_runs_are_the_shipped_test_sized_scenarios(figure, label, shipped):
    loaded = figures.load(figure)
    scenario, *_ = loaded.runs[label]
    small = resolve(scenario, loaded.overrides(label, small=True)).scenario
    assert small["name"] == f"{figure}-{label}"
    assert {**small, "name": None} == {**resolve(SCENARIOS / shipped).scenario, "name": None}


def test_every_figure_resolves():
    """Test-sized always. Full-sized, a run that overrides its scenario has its keys, overlay
    and generator arguments checked without building its workload (a figure's full size builds
    1.4 million quotes; test_scenarios checks the shipped full-size files the same way, and the
    fixture below builds and runs every figure's scenarios test-sized).
    Figures that run the same workload (the soft-link paper's datasets, the multi-tree
    paper's) build it once."""
    assert len(figures.names()) >= 8
    with workloads_shared():
        for name in figures.names():
            figure = figures.load(name)
            figures.check(figure, small=True)
            for label, (scenario, own, _) in figure.runs.items():
                if own:
                    check_arguments(scenario, figure.overrides(label, small=False))


def test_a_full_size_override_is_checked_without_building_the_workload(tmp_path):
    scenario = SCENARIOS / "burst_paper000_active.yaml"
    assert check_arguments(scenario, ["workload.generator.degree=700"])["workload"]["generator"]["degree"] == 700
    with pytest.raises(InputError, match=re.escape("workload.generator.degre: unknown parameter of generator "
                                                   "'covering_degree'; did you mean 'degree'?")):
        check_arguments(scenario, ["workload.generator.degre=700"])
    with pytest.raises(InputError, match="workload.generator.degree: expected int"):
        check_arguments(scenario, ["workload.generator.degree=lots"])


def test_every_figure_states_its_setup_and_draws_its_papers_panels():
    for name in figures.names():
        figure = figures.load(name)
        assert figure.paper and figure.paper_figure and figure.small_keeps, name
        assert figure.setup and figure.panels and figure.summary, name
        assert all(s.why for s in figure.setup if s.departs), name
        assert figure.sweep_key is None or set(figure.series) == set(figure.runs), name


def test_listing_and_input_errors(tmp_path, capsys):
    assert main(["figure", "--list"]) == 0
    listed = capsys.readouterr().out
    assert all(f"{name}: " in listed for name in figures.names())
    assert main(["figure", "softlinks_dens"]) == 2
    assert "no such figure; did you mean 'softlinks_dense'?" in capsys.readouterr().err
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "file").write_text("x")
    assert main(["figure", "burst_covering", "--out", str(tmp_path / "taken")]) == 2
    assert main(["figure", "burst_covering", "--out", str(tmp_path / "taken"), "--force"]) == 2
    assert "holds no figure's runs" in capsys.readouterr().err
    assert (tmp_path / "taken" / "file").exists()  # --force removes only a figure's own output
    assert main(["figure"]) == 2
    assert main(["figure", "burst_covering", "--set", "runtime.costs=padre", "--out", str(tmp_path / "new")]) == 2
    assert "padre" in capsys.readouterr().err and not (tmp_path / "new" / "runs").exists()


def test_a_figures_analysis_gets_the_driver_memory_asked_for(tmp_path, monkeypatch):
    """``figure --driver-memory``: the analysis of ten four-hour runs needs more than the 4g default."""
    from analysis import submit

    asked = []
    monkeypatch.setattr(submit, "run_job", lambda reports, small, bucket, master, memory, measured: asked.append(
        memory) or 0)
    monkeypatch.setattr(figures, "run_figures", lambda chosen, small, analyse, *rest, **options: [analyse([])])
    assert main(["figure", "burst_covering", "--driver-memory", "12g", "--out", str(tmp_path / "f")]) == 0
    assert asked == ["12g"]


def test_a_figure_file_with_a_mistake_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(figures, "FIGURE_DIR", tmp_path)
    good = (PROJECT_ROOT / "experiments" / "figures" / "softlinks_dense.yaml").read_text()
    (tmp_path / "softlinks_dense.yaml").write_text(good)  # figures whose paper_values another takes
    (tmp_path / "takes.yaml").write_text("paper_values: {from: softlinks_dense}\n")
    (tmp_path / "states.yaml").write_text("paper_values: [{claim: c, where: w, paper: 2, ours: {y: yield, run: pop}}]\n")
    bursts = (PROJECT_ROOT / "experiments" / "figures" / "burst_covering.yaml").read_text()
    assert bursts.count("order: core,") == 1 and "run: packing, at: core-E}" in bursts
    for mistake, message in ((good.replace("kind: cdf", "kind: pie", 1), "kind: expected one of"),
                             (good.replace("y: yield", "y: yeild", 1), "no unit or definition"),
                             (good.replace("summary: [", "summary: [no_column, ", 1), "unknown column(s) no_column"),
                             (good.replace("paper_figure:", "paper_figures:", 1), "did you mean 'paper_figure'"),
                             (good + "\nsummary: yes: no\n", "not valid YAML"),
                             (good + "\nsweep: {key: seed, label: seed, inverse: true}\n", "optionally reciprocal"),
                             (good + "\nwindow: {lsat: 60}\n", "window: expected {from: S, until: S} or {last: S}"),
                             (good + "\nwindow: {last: 60, small: {from: 9, until: 3}}\n", "window (or its small): "),
                             (good.replace("kind: cdf", "kind: cdf, measured: end", 1), "measured: expected run or"),
                             (good.replace("y: yield, kind: bars", "y: yield, kind: bars, whiskers: p10_s", 1),
                              "expected whiskers: [LOW_COLUMN, HIGH_COLUMN]"),
                             (good.replace("y: yield, kind: bars", "y: yield, kind: bars, whiskers: [p10_s]", 1),
                              "whiskers: expected two columns"),
                             (good + "\nphases: [{label: rush, from: 5}]\n", "phases[0]: expected {label: TEXT"),
                             (good + "\nphases: [{label: rush, injected: unsub, from: 5}]\n",
                              "or {label: TEXT, injected: KIND}"),
                             (good + "\nphases: [{label: rush, injected: unsubscribe}]\n",
                              "phases[0].injected: expected one of adv, unadv, sub, unsub, pub"),
                             (good + "\nphases: [{label: rush, from: 9, until: 3}]\n", "phases[0]: window: expected 0"),
                             (good + "\nphases: [{label: a, from: 1, until: 3, small: {last: 2}}]\n",
                              "phases[0]: a phase needs both from and until"),
                             (good + "\npaper_values: [{claim: c, where: w, paper: 2, ours: {y: yield, run: NOPE}}]\n",
                              "paper_values[0].ours.run: no run 'NOPE' in this figure"),
                             (good + "\npaper_values: [{claim: c, where: w, paper: lots, ours: {y: yield, run: S0}}]\n",
                              "paper_values[0].paper: expected a number, got 'lots'"),
                             (good + "\npaper_values: [{claim: c, paper: 2, ours: {y: yield, run: S0}}]\n",
                              "paper_values[0]: expected the keys claim, where, paper, ours and no others but why"),
                             (good + "\npaper_values: [{claim: c, where: w, paper: 2, ours: {y: yield, run: S0}, "
                                     "why: ' '}]\n", "paper_values[0].why: expected the cause in words"),
                             (good + "\npaper_values: [{claim: c, where: w, paper: 2, ours: {y: yield, run: S0}, "
                                     "why: 5}]\n", "paper_values[0].why: expected the cause in words, got 5"),
                             (good + "\npaper_values: [{claim: c, where: w, paper: 2, ours: {y: yield, largest_of: "
                                     "[S0, S1], relative_to: S2}}]\n", "paper_values[0].ours: expected {y: SUMMARY"),
                             (good + "\npaper_values: [{claim: c, where: w, paper: 2, ours: {y: yield, largest_of: "
                                     "[S0]}}]\n", "paper_values[0].ours.largest_of: expected a list of two runs"),
                             (good + "\npaper_values: [{claim: c, where: w, paper: 2, ours: {y: yield, largest_of: "
                                     "[S0, S9]}}]\n", "paper_values[0].ours.largest_of: no run 'S9'"),
                             (good + "\npaper_values: [{claim: c, where: w, paper: 2, ours: {y: yield, run: S0, "
                                     "compare: ratio}}]\n", "paper_values[0].ours.compare: expected change or ratio"),
                             (good + "\npaper_values: [{claim: c, where: w, paper: 2, ours: {y: yield, run: S0, "
                                     "at: core-A}}]\n", "at 'core-A' needs the column of one of this figure's "
                                                        "categories panels (it has none), not 'yield'"),
                             (good + "\npaper_values: [{claim: c, where: w, paper: 2, ours: {y: yield, run: S0, "
                                     "relative_to: S1, at: core-A}}]\n", "at: a category's value is one run's"),
                             (good + "\npaper_values: [{claim: c, where: w, paper: 2, ours: {y: yield, largest_of: "
                                     "[S0, S1], at: core-A}}]\n", "at: a category's value is one run's"),
                             (good + "\npaper_values: {from: softlinks_dens}\n",
                              "paper_values.from 'softlinks_dens': no such figure; did you mean 'softlinks_dense'?"),
                             (good + "\npaper_values: {from: softlinks_dense, too: 1}\n",
                              "paper_values: expected a list of entries or {from: FIGURE}"),
                             (good + "\npaper_values: {from: takes}\n", "takes.yaml takes its own from another figure"),
                             (good + "\npaper_values: {from: softlinks_dense}\n", "softlinks_dense.yaml states no paper values"),
                             (good + "\npaper_values: {from: states}\n", "paper_values[0].ours.run: no run 'pop'"),
                             (good + "\nsmall_runs: [S0, S9]\n", "small_runs: expected a list of two or more of"),
                             (good + "\nsmall_runs: [S0]\n", "small_runs: expected a list of two or more of"),
                             (bursts.replace("order: core,", "order: core, variants: [lazy, active],", 1),
                              "run 'packing' is not drawn on the categories panel of triggered_messages "
                              "(its variants: lazy, active)")):
        (tmp_path / "bad.yaml").write_text(mistake)
        with pytest.raises(InputError, match=re.escape(message)):
            figures.load("bad")


def test_a_figure_takes_another_figures_paper_values_by_name():
    """relocation_random answers relocation_paper_random's five claims with runs of the same
    labels: its file names that figure rather than copying them."""
    taken, source = figures.load("relocation_random"), figures.load("relocation_paper_random")
    assert len(source.paper_values) == 5 and taken.paper_values == source.paper_values
    assert "from:" in (PROJECT_ROOT / "experiments" / "figures" / "relocation_random.yaml").read_text()


def test_a_papers_value_at_a_category_is_read_from_its_panel_into_the_rows_and_a_wrong_category_named(tmp_path):
    """The page's table reads ``triggered at core-E`` from the categories panel's bars, per
    variant; a category the panel does not have (core-F) is refused by name, not left "not
    measured"."""
    from types import SimpleNamespace

    from experiments.paper_values import PaperValue
    from tests.test_panels import RUNS, _triggered_along_the_core

    panel = _triggered_along_the_core(tmp_path)
    stated = (PaperValue("E", "Fig. 7(d)", 5900.0, "triggered", "S0", at="core-E"),
              PaperValue("A", "Fig. 7(d)", 100.0, "triggered", "S1", at="core-A"))
    figure = SimpleNamespace(name="bursts", paper_values=stated, panels=[panel])
    assert figures._category_values(figure, tmp_path, RUNS, None) == {
        "S0": {"triggered at core-E": 9000.0}, "S1": {"triggered at core-A": 90.0}}
    figure.paper_values = (*stated, PaperValue("F", "Fig. 7(d)", 1.0, "triggered", "S2", at="core-F"))
    with pytest.raises(InputError, match=re.escape("figure bursts: paper_values: 'F': at 'core-F': no such category "
                                                   "on the panel 'Triggered' (its categories: core-A, core-B, core-E)")):
        figures._category_values(figure, tmp_path, RUNS, None)


def test_a_figure_with_small_runs_makes_only_those_test_sized():
    figure = figures.load("softlinks_paper_throughput")
    small = figure.sized(small=True)
    assert list(small.runs) == [label for label in figure.runs if label in figure.small_runs]
    assert 2 <= len(small.runs) < len(figure.runs) and "S1_fanout15" not in small.runs
    assert figure.sized(small=False) is figure and figures.load("burst_covering").sized(small=True).runs.keys() == {
        "none", "lazy", "active", "packing"}
    assert set(figures.check(small, small=True)) == {figures.Instance(label) for label in small.runs}


def test_a_figures_phases_are_read_for_full_and_test_sized_runs():
    figure = figures.load("mobile_rush_hour")
    assert figure.phases_at(small=False) == [("morning rush", 2400.0, 3120.0)]
    assert figure.phases_at(small=True) == [("morning rush", 60.0, 132.0)]
    assert figures.load("softlinks_dense").phases_at(small=False) == []


def test_a_phase_of_injected_messages_spans_them_over_the_runs_manifests():
    """burst_covering's unsubscriptions wherever the runs' workloads put them (as a clustered
    placement delays them), from the earliest first to the latest last over the runs, beside
    its probes' fixed stretch; runs whose manifests record none leave them unshaded, by name."""
    figure = figures.load("burst_covering")
    manifests = ({"injected": {"unsub": {"count": 20, "first_s": 6483.0, "last_s": 6492.5},
                               "pub": {"count": 9, "first_s": 0.0, "last_s": 9.0}}},
                 {"injected": {"unsub": {"count": 20, "first_s": 6483.5, "last_s": 6493.0}}},
                 {"injected": {}})
    assert figure.phases_at(small=False, manifests=manifests) == [("unsub.", 6483.0, 6493.0),
                                                                  ("probes", 2451.0, 2571.0)]
    assert figure.unshaded(manifests) == []
    older = ({"name": "made before manifests recorded injections"},)
    assert figure.phases_at(small=True, manifests=older) == [("probes", 112.5, 124.5)]
    assert figure.unshaded(older) == ["unsub."]


def test_a_figures_headline_wraps_its_overrides_under_the_title():
    overrides = (*(f"workload.generator.{key}=160" for key in ("small", "medium", "large", "monitored")),
                 "workload.generator.trace=../shared/trace-of-the-paper-x.csv")  # would break at a hyphen
    figure = dataclasses.replace(figures.load("workflow"), changed=overrides)
    rows = [{"brokers": 40, "sim_end_s": 3600.0}]
    title, *under = figures._headline(figure, rows, small=False).split("\n")
    assert title == figure.title and len(under) >= 2, under  # wrapped, not one line as wide as the overrides
    assert all(len(line) <= figures.HEADLINE_WIDTH for line in under)
    assert " ".join(under) == "(40 brokers, 60 min simulated" + "".join(f"; {o}" for o in overrides) + ")"
    assert figures._headline(figures.load("workflow"), rows, small=True).split("\n")[1:] == [
        "(40 brokers, 60 min simulated, test-sized)"]


def test_a_page_names_the_runs_that_ended_with_a_backlog_and_their_delay_counting_it():
    def checked(expected, in_flight, delay=None):
        excused = dict.fromkeys(EXCUSES, 0) | {"in flight at the end": in_flight}
        return {"expected_pairs": expected, "excused": excused, **({"delay": delay} if delay else {})}

    line = figures._backlog_line({
        "t700_active": checked(2_000, 610, {"delivered_mean_s": 1029.0, "in_flight_at_end": 610,
                                            "mean_counting_in_flight_s": 2345.6}),
        "t700_incremental": checked(2_000, 20),  # 1%: not a backlog
        "older": checked(1_000, 500)})  # checked before checks gave delays
    assert "t700_active 30% (at least 2,346 s)" in line and "older 50%." in line and "incremental" not in line
    assert figures._backlog_line({"t700_incremental": checked(2_000, 20)}) is None
    assert figures._backlog_line(None) is None


@pytest.fixture(scope="module")
def every_figure_small(tmp_path_factory, ray_session, spark_session):
    """``pubsub-emu figure --all --small``: every figure's test-sized runs, all analysed in one
    Spark job (each figure's report of its own runs), and each figure's page; what it printed."""
    from tests.conftest import analyses_in

    out = tmp_path_factory.mktemp("figures")
    with analyses_in(spark_session), contextlib.redirect_stdout(io.StringIO()) as printed:
        assert main(["figure", "--all", "--small", "--out", str(out)]) == 0
    return out, printed.getvalue().split()


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.parametrize("name", figures.names())
def test_figure_small_runs_and_reports(name, every_figure_small):
    root, pages = every_figure_small
    out = root / f"{name}-small"
    assert str(out / "figure.md") in pages
    figure = figures.load(name).sized(small=True)
    page = (out / "figure.md").read_text()
    for label in figure.runs:
        assert f"| {label} |" in page
        assert (out / "runs" / label / "manifest.json").is_file()
    assert "![" in page and (out / "figure.png").stat().st_size > 20_000
    assert "Deliveries checked: exact (`pubsub-emu check`" in page  # every run of every figure
    checks = json.loads((out / "checks.json").read_text())
    assert sorted(checks) == sorted(figure.runs) and all(c["exact"] for c in checks.values())
    summary_rows = pq.read_table(out / "report" / "tables" / "summary").to_pandas().set_index("run")
    for label in figure.runs:  # the check kept beside each run gives the summary its oracle column
        bound = summary_rows.loc[figure.run_name(label), "mean_counting_in_flight_s"]
        owed = checks[label]["delay"]["mean_counting_in_flight_s"]
        assert pd.isna(bound) if owed is None else bound == pytest.approx(owed), label
    captions = [line for line in page.splitlines() if line.startswith("- (")]
    assert len(captions) == len(figure.panels)
    assert sum("not drawn" not in c for c in captions) >= 2, "the figure draws fewer than two of its panels"
    for panel, caption in zip(figure.panels, captions):  # the paper's letters, where they differ from ours
        assert (f"(the paper's {panel.paper_panel})" in caption) == (panel.paper_panel is not None), caption
    assert "## Setup: the paper's and ours" in page and "| setting | paper | ours | test-sized |" in page
    assert "brokers" in page.split("\n\n")[2]  # the runs' real size
    assert "## The generic report" in page
    drawn = [f"{report.name}/{image.name}" for report in (out / "report", out / figures.WINDOW_REPORT)
             for image in report.glob("*.png")]
    assert drawn and all(f"]({image})" in page for image in drawn)  # only the generic plots the page shows
    summary = (out / "report" / "summary.csv").read_text()  # the report of this figure's runs alone
    assert sorted(line.split(",")[0] for line in summary.splitlines()[1:]) == sorted(
        figure.run_name(label) for label in figure.runs)
    if figure.measured(small=True) is not None:
        _assert_values_over_the_window(figure, out, page)


def _assert_values_over_the_window(figure, out: Path, page: str) -> None:
    """A figure with a window: its runs analysed whole and over the window in the same job,
    the summary and the panels but time and ``measured: run`` ones from the window's report."""
    window = figure.measured(small=True)
    tables = {name: pq.read_table(out / report / "tables" / "summary").to_pandas().set_index("run")
              for name, report in (("whole", "report"), ("window", figures.WINDOW_REPORT))}
    for label in figure.runs:
        whole, inside = tables["whole"].loc[figure.run_name(label)], tables["window"].loc[
            label_in(figure.run_name(label), window)]
        assert 0 < inside.deliveries < whole.deliveries, label
        assert inside.sim_end_s == whole.sim_end_s
    assert f"## Summary over {window.phrase}" in page and "## Summary over whole runs" in page
    captions = [line for line in page.splitlines() if line.startswith("- (")]
    for panel, caption in zip(figure.panels, captions):
        assert caption.endswith(f"over {window.phrase}.") == (panel.kind != "time" and panel.measured != "run"), caption
        assert ("shaded: the window" in caption) == (panel.kind == "time"), caption
    images = dict(re.findall(r"^!\[(.+)\]\((.+)\)$", page.split("## The generic report")[1], re.M))
    for title, image in images.items():  # plots over time whole, the others over the window, as the panels
        report = "report" if title in PLOTS_OVER_TIME else figures.WINDOW_REPORT
        assert image.startswith(report + "/") and (out / image).is_file(), (title, image)


@pytest.mark.ray
@pytest.mark.slow
def test_figure_reuses_complete_runs_and_force_starts_over(tmp_path, capsys, ray_session, analysis_in_session,
                                                          every_figure_small):
    """A figure's directory from ``figure --all`` (runs, report, page), taken on by a call
    for that figure alone: it runs nothing and redoes the analysis; ``--force`` reruns."""
    together = every_figure_small[0] / "relocation_enterprise-small"
    out = tmp_path / "figure"
    shutil.copytree(together, out)
    (out / "report" / "stale").write_text("from the earlier call")
    manifests = {p: p.stat().st_mtime_ns for p in (out / "runs").glob("*/manifest.json")}
    command = ["figure", "relocation_enterprise", "--small", "--out", str(out)]
    capsys.readouterr()
    assert main(command) == 0
    assert "all 4 run(s) in" in capsys.readouterr().err
    assert len(manifests) == 4 and {p: p.stat().st_mtime_ns for p in manifests} == manifests
    assert not (out / "report" / "stale").exists()  # the analysis is redone
    _assert_same_tables(out / "report" / "tables", together / "report" / "tables")
    changed = [*command, "--set", "runtime.costs=zero"]
    assert main(changed) == 2  # another setup in the same directory: refused, the runs kept
    assert "holds another sweep" in capsys.readouterr().err
    assert {p: p.stat().st_mtime_ns for p in manifests} == manifests
    assert main([*changed, "--force"]) == 0  # started over
    assert "4 run(s) to go" in capsys.readouterr().err
    assert all(p.stat().st_mtime_ns != t for p, t in manifests.items())
    page = (out / "figure.md").read_text()
    assert "for every run (`figure --set`): `runtime.costs=zero`." in page
    assert "these runs changed it with `runtime.costs=zero` (`figure --set`)." in page
    assert main(["analyze", str(out), "--out", str(tmp_path / "again")]) == 0  # a figure's directory: its runs
    summary = (tmp_path / "again" / "summary.csv").read_text()
    assert all(f"relocation_enterprise-{label}," in summary for label in ("static", "pop", "grape_load", "grape_delay"))


def _assert_same_tables(alone: Path, together: Path) -> None:
    """A figure analysed alone and with every other figure in one job: the same metric tables
    (but for the runs' paths, and sums of floating-point numbers added up in another order)."""
    names = sorted(p.name for p in alone.iterdir())
    assert names == sorted(p.name for p in together.iterdir())
    for name in names:
        frames = [pq.read_table(folder / name).to_pandas().drop(columns=["path"], errors="ignore")
                  for folder in (alone, together)]
        frames = [f.loc[f.round(9).sort_values(list(f.columns)).index].reset_index(drop=True) for f in frames]
        pd.testing.assert_frame_equal(*frames, check_exact=False, rtol=1e-9, obj=name)


def test_a_sweep_over_an_interval_draws_its_rate(tmp_path):
    """``sweep: {reciprocal: true}``: runs set the time between quotes, the axis shows quotes a second."""
    figure = figures.load("relocation_paper_load")
    for label in figure.runs:
        interval = float(label.split("_")[0].removeprefix("r")) ** -1
        (tmp_path / "runs" / label).mkdir(parents=True)
        scenario = {"workload": {"generator": {"publish_interval": interval}}}
        (tmp_path / "runs" / label / "manifest.json").write_text(json.dumps({"scenario": scenario}))
    sweep = figures.sweep_points(figure, tmp_path, [figures.Instance(label) for label in figure.runs])
    assert sweep.points["r160_grape_load"] == ("grape_load", pytest.approx(160))
    assert sorted({x for _, x in sweep.points.values()}) == pytest.approx([25, 100, 160, 200])


@pytest.mark.ray
@pytest.mark.slow
def test_a_run_two_figures_share_is_run_once_and_copied(tmp_path, every_figure_small):
    """``figure --all``: a run the same in two figures (but its name) is run for the first and
    copied, renamed, into the second; the copy is what running it again gives."""
    from actors.coordinator import run
    from tests.test_runtime import sorted_rows

    root = every_figure_small[0]
    first_run, shared = {}, []
    for name in figures.names():
        figure = figures.load(name).sized(small=True)
        for instance, identity in figures.check(figure, small=True).items():
            if identity in first_run:
                shared.append((first_run[identity], (figure, instance.label)))
            else:
                first_run[identity] = (figure, instance.label)
    assert len(shared) >= 5
    for (source, source_label), (figure, label) in shared:
        manifest = json.loads((root / f"{figure.name}-small" / "runs" / label / "manifest.json").read_text())
        assert (manifest["name"], manifest["scenario"]["name"]) == (figure.run_name(label),) * 2
        assert manifest["copied_from"] == source.run_name(source_label)
    (source, _), (figure, label) = min(shared, key=lambda pair: pair[1][0].name != "relocation_paper_threshold")
    copied = root / f"{figure.name}-small" / "runs" / label
    scenario, *_ = figure.runs[label]
    run(resolve(scenario, [*figure.overrides(label, small=True), "runtime.hosts=0"]), tmp_path / "again", progress=False)
    for table in ("deliveries", "messages", "samples", "events"):
        assert sorted_rows(copied, table) == sorted_rows(tmp_path / "again", table), table
    assert read_table(copied, "deliveries").num_rows > 0


@pytest.mark.ray
@pytest.mark.slow
def test_the_soft_link_papers_runs_deliver_the_oracles_pairs(every_figure_small):
    """The test-sized runs of softlinks_paper_hops (DT1 and DT2 under every strategy) and
    softlinks_paper_configs (C1, C2 and C3 under S0 and SH): exactly the pairs the brute-force
    oracle finds in their workloads, none twice."""
    from tests.oracle import expected_deliveries, scenario_records

    expected = {}
    for name in ("softlinks_paper_hops", "softlinks_paper_configs"):
        figure = figures.load(name)
        for label, (scenario, *_) in figure.runs.items():
            spec = resolve(scenario, figure.overrides(label, small=True))
            workload = json.dumps([spec.scenario["workload"], spec.scenario["seed"], sorted(spec.graph.edges)])
            if workload not in expected:
                expected[workload] = expected_deliveries(scenario_records(scenario, figure.overrides(label, small=True)))
            deliveries = read_table(every_figure_small[0] / f"{name}-small" / "runs" / label, "deliveries")
            pairs = list(zip(deliveries.column("pub_id").to_pylist(), deliveries.column("sub_id").to_pylist()))
            assert len(pairs) == len(set(pairs)) and set(pairs) == expected[workload], (name, label)
    assert len(expected) == 4 and min(len(pairs) for pairs in expected.values()) > 20_000


@pytest.mark.ray
@pytest.mark.slow
def test_mobile_monitors_pruning_triggers_fewer_subscriptions(every_figure_small):
    """On the figure's test-sized runs (the shipped ``mobile_monitors_small_*`` scenarios)."""
    runs = {mode: {t: read_table(every_figure_small[0] / "mobile_monitors-small" / "runs" / mode, t).to_pandas()
                   for t in ("messages", "deliveries", "samples")} for mode in ("active", "selective")}
    pairs = {mode: set(zip(run["deliveries"].pub_id, run["deliveries"].sub_id)) for mode, run in runs.items()}
    assert len(pairs["active"]) > 10_000
    # stationary subscribers get the same deliveries; a publication racing a monitor's move
    # may reach it or not depending on how long the brokers' queues made it travel
    differ = pairs["selective"] ^ pairs["active"]
    assert all(sub.startswith("MON") for _, sub in differ) and len(differ) <= 0.001 * len(pairs["active"])
    triggered = {mode: ((run["messages"].kind == "sub") & run["messages"].triggered_by.notna()).sum()
                 for mode, run in runs.items()}
    assert triggered["selective"] < triggered["active"] / 2
    assert runs["selective"]["samples"].preserved.max() > 0


@pytest.mark.ray
@pytest.mark.slow
def test_a_trace_threshold_no_publisher_reaches_moves_none(every_figure_small):
    """relocation_paper_threshold's 12,800 (test-sized: 100, more quotes than a publisher makes):
    no session completes, so no publisher moves and GRAPE sends no control message, while POP
    still traces (the paper: "GRAPE never performed a single relocation")."""
    figure = figures.load("relocation_paper_threshold")
    out = every_figure_small[0] / "relocation_paper_threshold-small"
    summary = pq.read_table(out / "report" / "tables" / "summary").to_pandas().set_index("run")
    row = lambda label: summary.loc[figure.run_name(label)]  # noqa: E731
    for algorithm in ("pop", "grape_load"):
        assert row(f"{algorithm}_t12800").migrations == 0 and row(f"{algorithm}_t10").migrations > 0
    assert row("grape_load_t12800").control_share == 0 < row("grape_load_t400").control_share
    assert row("pop_t12800").control_share > row("pop_t400").control_share


@pytest.mark.ray
@pytest.mark.slow
def test_the_saturating_runs_deliver_only_the_oracles_pairs_and_all_of_the_warm_ups(every_figure_small):
    """softlinks_paper_throughput's uncapped runs at a saturating rate (Figs. 13a on C1 and 13b
    on C2, S0 and S2): every delivery is one the brute-force oracle expects, none twice, and
    every publication of the warm-up (published half a second or more before the rate rises)
    reaches all its subscribers; later ones may still be queued when the run ends."""
    from tests.oracle import expected_deliveries, scenario_records

    figure = figures.load("softlinks_paper_throughput")
    root = every_figure_small[0] / "softlinks_paper_throughput-small" / "runs"
    oracles = {}  # S0's and S2's runs share their workload: its oracle is computed once
    for label in ("S0", "S2_fanout35", "C2_S0", "C2_S2_fanout35"):
        scenario, *_ = figure.runs[label]
        overrides = figure.overrides(label, small=True)
        records = scenario_records(scenario, overrides)
        rises = resolve(scenario, overrides).scenario["workload"]["generator"]["high_rate_from"]
        warm_up = {r["id"] for r in records if r["op"] == "publish" and r["t"] < rises - 0.5}
        workload = json.dumps(records)
        if workload not in oracles:
            oracles[workload] = expected_deliveries(records)
        expected = oracles[workload]
        deliveries = read_table(root / label, "deliveries")
        pairs = list(zip(deliveries.column("pub_id").to_pylist(), deliveries.column("sub_id").to_pylist()))
        assert len(pairs) == len(set(pairs)) and set(pairs) <= expected, label
        assert {p for p in pairs if p[0] in warm_up} == {p for p in expected if p[0] in warm_up}, label


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.parametrize("name, s0, s2, cap, gain", [
    ("softlinks_paper_throughput", "capped_S0", "capped_S2", 150, 1.5),
    ("softlinks_paper_planetlab", "DT4_S0", "DT4_S2", 45, 1.5),
    ("softlinks_paper_planetlab", "DT5_S0", "DT5_S2", 45, 1.2),
])
def test_capped_uplinks_send_no_faster_than_the_cap_and_s0_delivers_less(every_figure_small, name, s0, s2, cap, gain):
    """The soft-link paper's capped runs (Fig. 14 on C1, Fig. 13c on CPL): no broker's copies
    leave faster than its uplink's cap; over the measured interval S0 delivers less than its
    publications match (the rest wait on uplinks at the end), S2 ``gain`` times as many or
    more; every delivery made is one the brute-force oracle expects, none twice; the
    summary's throughputs are the deliveries of the interval's publications over its length
    and the deliveries made in it, the latter as high over either half of C1's interval."""
    from tests.oracle import expected_deliveries, scenario_records
    from workloads.oracle import expected_subscribers

    figure = figures.load(name)
    root = every_figure_small[0] / f"{name}-small"
    window = figure.measured(small=True)
    manifest = json.loads((root / "runs" / s0 / "manifest.json").read_text())
    start, end = window.of(manifest["sim_end_us"])
    summary = pq.read_table(root / figures.WINDOW_REPORT / "tables" / "summary").to_pandas().set_index("run")
    throughput = pq.read_table(root / figures.WINDOW_REPORT / "tables" / "throughput").to_pandas().set_index("run")
    delivered, expected, share = {}, {}, {}
    for label in (s0, s2):
        messages = read_table(root / "runs" / label, "messages").to_pandas()
        copies = messages[messages.sender.notna()].sort_values(["sender", "t_arrive_us"])
        gaps = copies.groupby("sender").t_arrive_us.diff().dropna()
        assert gaps.min() >= 1_000_000 // cap and (gaps < 1_000_000 // (cap - 10)).mean() > 0.1, label  # busy
        deliveries = read_table(root / "runs" / label, "deliveries").to_pandas()
        scenario, *_ = figure.runs[label]
        records = scenario_records(scenario, figure.overrides(label, small=True))
        workload = json.dumps(records)  # the same under every strategy: its oracle is computed once
        if workload not in expected:
            expected[workload] = expected_deliveries(records)
        pairs = list(zip(deliveries.pub_id, deliveries.sub_id))
        assert len(pairs) == len(set(pairs)) and set(pairs) <= expected[workload], label  # some late, none wrong
        delivered[label] = int(deliveries.t_pub_us.between(start, end).sum())
        row = summary.loc[label_in(figure.run_name(label), window)]
        assert row.deliveries == delivered[label]
        assert row.deliveries_per_s == pytest.approx(delivered[label] / ((end - start) / 1e6))
        made = deliveries.t_deliver_us
        assert row.delivered_per_s == pytest.approx(made.between(start, end).sum() / ((end - start) / 1e6))
        owed = owed_by(root / "runs" / label, start, end)
        share[label] = row.delivered_share
        assert share[label] == pytest.approx(made.between(start, end).sum() / owed), label
        over_time = throughput.loc[label_in(figure.run_name(label), window)].sort_values("t_s")
        by_hand = backlog_by_hand(root / "runs" / label, deliveries, start, end, over_time.t_s.tolist())
        assert over_time.backlog.astype(int).tolist() == by_hand and by_hand[-1] > 0, label
        if name == "softlinks_paper_throughput":  # saturated and steady: the rate is the same over either half
            middle = (start + end) // 2
            first, second = (((made >= a) & (made < b)).sum() for a, b in ((start, middle), (middle, end)))
            assert second == pytest.approx(first, rel=0.2), label
    scenario, *_ = figure.runs[s0]
    matched = sum(count for _, t, count in expected_subscribers(
        resolve(scenario, figure.overrides(s0, small=True)).injections) if start <= t <= end)
    assert delivered[s0] < 0.8 * matched and delivered[s2] > gain * delivered[s0]
    assert share[s0] < 0.8 and share[s2] > share[s0]  # S0 falls behind what is offered, S2 less so


@pytest.mark.ray
@pytest.mark.slow
def test_the_soft_link_measured_interval_is_the_hand_computed_one(every_figure_small):
    """softlinks_paper_forwarders over its window (DT1 under S0 and S2): deliveries, mean hops
    and pure forwarding as counted by hand from the run's rows in the window (deliveries by
    publication time, copies by arrival)."""
    figure = figures.load("softlinks_paper_forwarders")
    root = every_figure_small[0] / "softlinks_paper_forwarders-small"
    window = figure.measured(small=True)
    summary = pq.read_table(root / figures.WINDOW_REPORT / "tables" / "summary").to_pandas().set_index("run")
    for label in ("DT1_S0", "DT1_S2"):
        run = root / "runs" / label
        start, end = window.of(json.loads((run / "manifest.json").read_text())["sim_end_us"])
        deliveries = read_table(run, "deliveries").to_pandas()
        deliveries = deliveries[deliveries.t_pub_us.between(start, end)]
        messages = read_table(run, "messages").to_pandas()
        copies = messages[(messages.kind == "pub") & messages.t_end_us.notna() & messages.t_arrive_us.between(start, end)]
        delivered_at = set(zip(deliveries.pub_id, deliveries.broker))
        pure = sum((p, b) not in delivered_at for p, b in zip(copies.msg_id, copies.broker))
        row = summary.loc[label_in(figure.run_name(label), window)]
        assert row.deliveries == len(deliveries) > 10_000
        assert row.mean_hops == pytest.approx(deliveries.hops.mean())
        assert (row.pub_copies, row.pure_forward) == (len(copies), pure)
        assert row.pure_forward_fraction == pytest.approx(pure / len(copies))
        made = deliveries_made_in(read_table(run, "deliveries").to_pandas(), start, end)
        owed = owed_by(run, start, end)
        assert row.owed_per_s == pytest.approx(owed / ((end - start) / 1e6))
        assert row.delivered_share == pytest.approx(made / owed) and row.delivered_share > 0.98, label  # keeps up


def deliveries_made_in(deliveries, start: int, end: int) -> int:
    return int(deliveries.t_deliver_us.between(start, end).sum())


def owed_by(run_dir, start: int, end: int) -> int:
    """The deliveries the oracle says a run's publications made from ``start`` to ``end`` owe."""
    return sum(n for t, n in owed_per_publication(run_dir) if start <= t <= end)


def owed_per_publication(run_dir) -> list[tuple[int, int]]:
    """(time, deliveries owed) of each publication a run made, from its scenario's workload (not
    from the ``expected`` table the check wrote); one due at the run's end is never made."""
    from workloads.oracle import expected_subscribers

    manifest = json.loads((run_dir / "manifest.json").read_text())
    _, injections = rebuild_workload(manifest, str(run_dir / "manifest.json"))
    return [(t, n) for _, t, n in expected_subscribers(injections) if t < manifest["sim_end_us"]]


def backlog_by_hand(run_dir, deliveries, start: int, end: int, buckets_s) -> list[int]:
    """At the end of each of ``buckets_s`` (their starts, evenly spaced): the deliveries owed by
    the publications made from ``start`` to ``end`` up to then, less those made by then."""
    width = round((buckets_s[1] - buckets_s[0]) * 1e6)
    owed = pd.Series(dict(owed_per_publication(run_dir)))
    owed = owed[(owed.index >= start) & (owed.index <= end)]
    made = deliveries[deliveries.t_pub_us.between(start, end)].t_deliver_us
    return [int(owed[owed.index // width * width <= round(b * 1e6)].sum() - (made // width * width <= round(b * 1e6)).sum())
            for b in buckets_s]


def test_the_list_names_each_figures_paper_setup_and_last_full_size_time(tmp_path, capsys):
    """``figure --list``: per figure its paper and figure number, whether it keeps the paper's
    setup, and its full size's wall time: from its last run under --out, else as recorded."""
    record = tmp_path / "burst_covering" / "runs" / "sweep.json"
    record.parent.mkdir(parents=True)
    record.write_text(json.dumps({"points": [{"status": "complete", "wall_s": w} for w in (100, 3600, 200)]}))
    assert main(["figure", "--list", "--out", str(tmp_path)]) == 0
    listed = capsys.readouterr().out
    blocks = {block.split(":", 1)[0]: block for block in listed.split("\n") if block and not block.startswith(" ")}
    assert sorted(blocks) == figures.names()
    lines = listed.split("burst_covering:", 1)[1].splitlines()[:3]
    figure = figures.load("burst_covering")
    assert f'{figure.paper_figure} of "{figure.paper}"; the paper\'s setup; 4 runs' in lines[1]
    assert f"full size: 65 min of runs (3, the longest 60 min), last run in {tmp_path / 'burst_covering'}" in lines[2]
    delay = listed.split("\nsoftlinks_paper_delay:", 1)[1].splitlines()[1]
    assert "the paper's setup in candidate links, subscriptions, rate and measured interval, costs" in delay


@pytest.mark.ray
@pytest.mark.slow
def test_fanout_splits_covering_sets_over_tables_that_links_leave_alone(every_figure_small):
    """softlinks_paper_fanout (Fig. 12): subscriptions travel the primary tree, so every run's
    brokers hold the same tables sample by sample whatever the fanout; more links give more
    WST anchors and larger covering sets; the page sets the paper's values beside ours."""
    out = every_figure_small[0] / "softlinks_paper_fanout-small"
    measured = {label: read_table(out / "runs" / label, "covering_sets").sort_by([("t_us", "ascending"),
                                                                                   ("broker", "ascending")])
                for label in ("F5", "F15", "F25")}
    assert measured["F5"].num_rows == 60 * 15  # 60 brokers, a sample every 2 s of 30 s
    for label in ("F15", "F25"):
        assert measured[label]["entries"].equals(measured["F5"]["entries"]), label
    mean = {label: {column: pc.mean(table[column]).as_py() for column in ("wst_anchors", "covering_set_size")}
            for label, table in measured.items()}
    assert mean["F5"]["wst_anchors"] < mean["F15"]["wst_anchors"] < mean["F25"]["wst_anchors"]
    assert mean["F5"]["covering_set_size"] < mean["F25"]["covering_set_size"]
    page = (out / "figure.md").read_text()
    assert "## The paper's values beside ours" in page and "| +12% |" in page and "| +34% |" in page
