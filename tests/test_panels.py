"""The rules every figure's panels follow (analysis/style.py, analysis/panels.py), on
hand-made metric tables: identical variants drawn once and named, no all-zero panel, no
shared prefix in legends, a unit for every plotted column, integer ticks for counts."""
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analysis import panels, style
from analysis.panels import Panel, Sweep
from experiments import figures

RUNS = {"fig-S0": "S0", "fig-S1": "S1", "fig-S2": "S2", "fig-SH": "SH"}


def _write(tables, name, rows):
    folder = tables / name
    folder.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows), folder / "part-0.parquet")


@pytest.fixture
def tables(tmp_path):
    root = tmp_path / "tables"
    over_time = []
    for run, slope in (("fig-S0", 3), ("fig-S1", 2), ("fig-S2", 1), ("fig-SH", 1)):
        over_time += [{"run": run, "t_s": float(t), "pub_copies_per_s": float(slope * t)} for t in range(20)]
    _write(root, "throughput", over_time)
    _write(root, "summary", [{"run": run, "false_positive_fraction": 0.0, "yield": y, "max_s": m}
                             for run, y, m in (("fig-S0", 0.4, 2.0), ("fig-S1", 0.45, 1.0), ("fig-S2", 0.5, 1.0),
                                               ("fig-SH", 0.5, 0.5))])
    return root


def _legend(ax):
    return [text.get_text() for text in ax.get_legend().get_texts()]


def test_identical_variants_are_drawn_once_and_named_together(tables):
    panel = Panel("traffic", "throughput", "pub_copies_per_s")
    rows = panels._rows(tables, panel, RUNS)
    fig, ax = style.plt.subplots()
    page = panels._Page(list(RUNS.values()), style.styles(list(RUNS.values())), None, [])
    panels._time(ax, panel, rows, page)
    assert _legend(ax) == ["S0", "S1", "S2 = SH: identical"]
    assert len(ax.lines) == 3
    style.plt.close(fig)


def test_a_panel_of_zeros_is_not_drawn_and_the_page_says_so(tables, tmp_path):
    spec = [Panel("False positives", "summary", "false_positive_fraction", kind="bars"),
            Panel("Yield", "summary", "yield", kind="bars"),
            Panel("traffic", "throughput", "pub_copies_per_s")]
    drawn = panels.draw(spec, tables, RUNS, "title", tmp_path / "page.png")
    assert [(d.letter, d.note) for d in drawn] == [("a", "zero in every run"), ("b", None), ("c", None)]
    assert (tmp_path / "page.png").stat().st_size > 10_000


def test_time_panels_shade_and_name_the_figures_phases_and_other_panels_do_not(tables, tmp_path, monkeypatch):
    saved = []
    monkeypatch.setattr(style, "save", lambda fig, path: saved.append(fig))
    spec = [Panel("traffic", "throughput", "pub_copies_per_s"), Panel("Yield", "summary", "yield", kind="bars")]
    panels.draw(spec, tables, RUNS, "title", tmp_path / "page.png", phases=[("rush", 4.0, 9.0)])
    time_ax, bars_ax = saved[0].axes
    bands = [p for p in time_ax.patches if p.get_facecolor()[:3] != (1.0, 1.0, 1.0)]
    assert len(bands) == 1 and bands[0].get_x() == 4.0 and bands[0].get_width() == 5.0
    assert [t.get_text() for t in time_ax.texts] == [" rush"] and " rush" not in [t.get_text() for t in bars_ax.texts]
    style.plt.close(saved[0])


def test_a_burst_panels_legend_sits_under_its_axis_label_and_a_short_phase_gets_a_line(tmp_path, monkeypatch):
    """Four variants rising to the top right with a spike in the middle (an inset), beside a
    categories panel whose bars reach the top (one variant's all zero, said in the legend): both
    legends below their axis labels, clear of the data; a 0.2-s phase on a 200-s axis is marked
    by a line at its start as well as its band (a 30-s one by its band alone), and one past the
    axis not at all."""
    root = tmp_path / "tables"
    slopes = {"fig-S0": 4, "fig-S1": 3, "fig-S2": 2, "fig-SH": 1}
    spike = {100: 500}
    _write(root, "throughput", [{"run": run, "t_s": float(t), "pub_copies_per_s": float(slope * t + spike.get(t, 0))}
                                for run, slope in slopes.items() for t in range(200)])
    _write(root, "messages_by_broker", [{"run": run, "broker": f"b{i}", "triggered_messages": (slope - 1) * (i + 1)}
                                        for run, slope in slopes.items() for i in range(5)])  # SH: none at all
    saved = []
    monkeypatch.setattr(style, "save", lambda fig, path: saved.append(fig))
    spec = [Panel("traffic", "throughput", "pub_copies_per_s"),
            Panel("triggered", "messages_by_broker", "triggered_messages", kind="categories", x="broker")]
    panels.draw(spec, root, RUNS, "title", tmp_path / "page.png",
                phases=[("unsubscriptions", 100.0, 100.2), ("rush", 150.0, 180.0), ("later", 300.0, 310.0)])
    fig = saved[0]
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for ax in (fig.axes[0], fig.axes[-1]):
        legend = ax.get_legend().get_window_extent(renderer)
        labels = [ax.xaxis.label.get_window_extent(renderer)] + [t.get_window_extent(renderer)
                                                                 for t in ax.get_xticklabels() if t.get_text()]
        assert legend.y1 <= min(label.y0 for label in labels), ax.get_title()
        assert len(ax.get_legend().get_texts()) == 4
    assert [t.get_text() for t in fig.axes[-1].get_legend().get_texts()][-1] == "SH: 0 everywhere"  # not a bar lost
    time_ax = fig.axes[0]
    assert [line.get_xdata()[0] for line in time_ax.lines if line.get_color() == panels.PHASE_COLOUR] == [100.0]
    assert [t.get_text() for t in time_ax.texts] == [" unsubscriptions", " rush"]  # "later" is past the axis
    style.plt.close(fig)


def test_time_panels_keep_the_window_the_other_panels_measure_in_view(tables, tmp_path, monkeypatch):
    """Activity ends at 19 s (the last change of the traffic's levels); the window runs to 40 s."""
    from analysis.window import Window

    saved = []
    monkeypatch.setattr(style, "save", lambda fig, path: saved.append(fig))
    spec = [Panel("traffic", "throughput", "pub_copies_per_s"), Panel("Yield", "summary", "yield", kind="bars")]
    panels.draw(spec, tables, RUNS, "title", tmp_path / "page.png")
    assert saved[0].axes[0].get_xlim()[1] == pytest.approx(19 * 1.03)
    windowed = panels.Windowed(tables, RUNS, Window(start=10.0), (10.0, 40.0))
    panels.draw(spec, tables, RUNS, "title", tmp_path / "page.png", windowed=windowed)
    assert saved[1].axes[0].get_xlim()[1] == 40.0
    style.plt.close(saved[0])
    style.plt.close(saved[1])


def test_bars_merge_identical_variants_and_divide_by_a_reference(tables):
    fig, ax = style.plt.subplots()
    page = panels._Page(list(RUNS.values()), style.styles(list(RUNS.values())), None, [])
    panel = Panel("Largest delay", "summary", "max_s", kind="bars", relative_to="S0")
    panels._bars(ax, panel, panels._rows(tables, panel, RUNS), page)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["S0", "S1 = S2\n(identical)", "SH"]
    assert [round(p.get_height(), 3) for p in ax.patches] == [1.0, 0.5, 0.25]
    style.plt.close(fig)



def test_bars_whiskers_span_their_two_columns_and_a_bar_reads_its_mean_alone(tmp_path):
    probes = {"S0": (2.0, 1.0, 4.0), "S1": (1.0, 0.5, 3.0), "S2": (0.5, 0.25, 0.75)}
    _write(tmp_path, "summary", [{"run": f"fig-{v}", "probe_mean_s": mean, "probe_p10_s": low, "probe_p90_s": high}
                                 for v, (mean, low, high) in probes.items()])
    variants = list(probes)
    page = panels._Page(variants, style.styles(variants), None, [])
    panel = Panel("Probe delay", "summary", "probe_mean_s", kind="bars", whiskers=("probe_p10_s", "probe_p90_s"))
    panels.check(panel, variants)
    fig, ax = style.plt.subplots()
    panels._bars(ax, panel, panels._rows(tmp_path, panel, {f"fig-{v}": v for v in variants}), page)
    bars = next(c for c in ax.containers if hasattr(c, "errorbar"))
    whiskers = bars.errorbar.lines[2][0].get_segments()
    assert [(round(w[0][1], 3), round(w[1][1], 3)) for w in whiskers] == [(low, high) for _, low, high in probes.values()]
    assert [t.get_text() for t in ax.texts] == ["2", "1", "0.5"]
    assert ax.get_ylim()[1] >= 4.0
    style.plt.close(fig)
    for wrong, expected in ((Panel("p", "summary", "probe_mean_s", whiskers=("probe_p10_s", "probe_p90_s")), "bars"),
                            (Panel("p", "summary", "probe_mean_s", kind="bars", whiskers=("probe_p10_s", "p99")), "p99"),
                            (Panel("p", "summary", "probe_mean_s", kind="bars", relative_to="S0",
                                   whiskers=("probe_p10_s", "probe_p90_s")), "relative_to")):
        with pytest.raises(ValueError, match=expected):
            panels.check(wrong, variants)

def test_the_papers_values_are_drawn_on_the_bars_and_time_panels_of_their_column(tables):
    """A dashed line across the bar of the value's run (over a reference when the value is a
    ratio), the axis raised to show it; a dotted level in the run's colour over time; none on
    a panel of another column."""
    from experiments.paper_values import PaperValue

    marks = (PaperValue("yield", "Table 2", 0.9, "yield", "S1"), PaperValue("delay", "Fig. 10", 4.0, "max_s", "SH", "S0"),
             PaperValue("traffic", "Fig. 11", 30.0, "pub_copies_per_s", "S0"),
             PaperValue("traffic", "Fig. 11", 10.0, "pub_copies_per_s", "S2"),
             PaperValue("traffic", "Fig. 11", 10.0, "pub_copies_per_s", "SH"))
    page = panels._Page(list(RUNS.values()), style.styles(list(RUNS.values())), None, [], marks)
    fig, (yields, ratios, other, traffic) = style.plt.subplots(1, 4)
    for ax, panel in ((yields, Panel("Yield", "summary", "yield", kind="bars")),
                      (ratios, Panel("Largest delay", "summary", "max_s", kind="bars", relative_to="S0")),
                      (other, Panel("Largest delay", "summary", "max_s", kind="bars"))):
        panels._bars(ax, panel, panels._rows(tables, panel, RUNS), page)
    panels._time(traffic, Panel("traffic", "throughput", "pub_copies_per_s"),
                 panels._rows(tables, Panel("traffic", "throughput", "pub_copies_per_s"), RUNS), page)
    (dashed,) = yields.collections
    assert dashed.get_segments()[0].tolist() == [[1 - 0.45, 90.0], [1 + 0.45, 90.0]]  # S1, the second bar, in %
    assert yields.get_ylim()[1] == pytest.approx(90.0 * 1.35) and panels.PAPER_LABEL in _legend(yields)
    (dashed,) = ratios.collections
    assert dashed.get_segments()[0].tolist() == [[2 - 0.45, 4.0], [2 + 0.45, 4.0]]  # SH over S0
    assert not other.collections and other.get_legend() is None
    s0, s2 = traffic.lines[-2:]  # S2 and SH state one value: one level, in S2's colour
    assert list(s0.get_ydata()) == [30.0, 30.0] and s0.get_linestyle() == ":" and s0.get_color() == page.looks["S0"].colour
    assert list(s2.get_ydata()) == [10.0, 10.0] and s2.get_color() == page.looks["S2"].colour
    assert len(traffic.lines) == 3 + 2  # S0, S1, S2 = SH, and two levels
    assert [label for label in _legend(traffic) if label.startswith("dotted")] == [
        "dotted: the paper's, S0 (table below)", "dotted: the paper's, S2 (table below)"]
    style.plt.close(fig)


def test_the_papers_largest_over_runs_is_named_by_all_of_them_over_time(tables):
    from experiments.paper_values import PaperValue

    marks = (PaperValue("at most", "Fig. 6", 20.0, "pub_copies_per_s", ("S1", "S2")),)
    page = panels._Page(list(RUNS.values()), style.styles(list(RUNS.values())), None, [], marks)
    fig, ax = style.plt.subplots()
    panel = Panel("traffic", "throughput", "pub_copies_per_s")
    panels._time(ax, panel, panels._rows(tables, panel, RUNS), page)
    level = ax.lines[-1]
    assert list(level.get_ydata()) == [20.0, 20.0] and level.get_color() == page.looks["S1"].colour
    assert [label for label in _legend(ax) if label.startswith("dotted")] == [
        "dotted: the paper's, largest of S1/S2 (table below)"]
    style.plt.close(fig)


def test_a_sweep_draws_one_line_per_series_against_the_setting(tables):
    fig, ax = style.plt.subplots()
    sweep = Sweep("unsubscriptions", {"S0": ("active", 100), "S1": ("active", 200), "S2": ("selective", 100),
                                      "SH": ("selective", 200)})
    page = panels._Page(list(RUNS.values()), style.styles(list(RUNS.values())), sweep, [])
    panel = Panel("Largest delay", "summary", "max_s", kind="sweep")
    panels._sweep(ax, panel, panels._rows(tables, panel, RUNS), page)
    assert _legend(ax) == ["active", "selective"]
    assert [list(line.get_ydata()) for line in ax.lines] == [[2.0, 1.0], [1.0, 0.5]]
    assert ax.get_xlabel() == "unsubscriptions"
    style.plt.close(fig)


def test_the_papers_largest_over_runs_is_named_so_on_their_bars(tables):
    from experiments.paper_values import PaperValue

    marks = (PaperValue("at most", "Fig. 6", 0.6, "yield", ("S1", "S2")),)
    page = panels._Page(list(RUNS.values()), style.styles(list(RUNS.values())), None, [], marks)
    fig, ax = style.plt.subplots()
    panel = Panel("Yield", "summary", "yield", kind="bars")
    panels._bars(ax, panel, panels._rows(tables, panel, RUNS), page)
    assert [c.get_segments()[0].tolist() for c in ax.collections] == [[[0.55, 60.0], [1.45, 60.0]],
                                                                      [[1.55, 60.0], [2.45, 60.0]]]  # S1, S2 = SH
    assert _legend(ax) == [panels.LARGEST_LABEL]
    single = ax.hlines(0, 0, 1, linestyles="--", linewidth=1.6).get_linestyle()  # a single run's value
    assert all(c.get_linestyle() != single for c in ax.collections[:2])  # dotted, told apart from it
    style.plt.close(fig)


def test_a_papers_value_far_above_our_bars_is_written_at_the_top_not_drawn(tables):
    """The paper's 4,400 s against our largest delay of 2 s: written above S0's bar, the axis
    kept to our bars; a value within scale is still a dashed line."""
    from experiments.paper_values import PaperValue

    marks = (PaperValue("delay", "Fig. 7", 4400.0, "max_s", "S0"), PaperValue("delay", "Fig. 7", 3.0, "max_s", "SH"))
    page = panels._Page(list(RUNS.values()), style.styles(list(RUNS.values())), None, [], marks)
    fig, ax = style.plt.subplots()
    panel = Panel("Largest delay", "summary", "max_s", kind="bars")
    panels._bars(ax, panel, panels._rows(tables, panel, RUNS), page)
    (written,) = [t for t in ax.texts if t.get_text().startswith("paper:")]
    assert written.get_text() == "paper: 4,400 \u2191" and written.xy == (0, 0.97)
    (dashed,) = ax.collections
    assert dashed.get_segments()[0].tolist() == [[2 - 0.45, 3.0], [2 + 0.45, 3.0]]  # SH, the third bar
    assert ax.get_ylim()[1] == pytest.approx(3.0 * 1.35)
    assert written.get_bbox_patch().get_linestyle() == "--"
    style.plt.close(fig)



def test_the_papers_values_far_above_a_bar_of_identical_runs_are_written_once_each_named(tables):
    from experiments.paper_values import PaperValue

    marks = (PaperValue("delay", "Fig. 7", 5000.0, "max_s", "S1"), PaperValue("delay", "Fig. 7", 6000.0, "max_s", "S2"))
    page = panels._Page(list(RUNS.values()), style.styles(list(RUNS.values())), None, [], marks)
    fig, ax = style.plt.subplots()
    panel = Panel("Largest delay", "summary", "max_s", kind="bars")
    panels._bars(ax, panel, panels._rows(tables, panel, RUNS), page)  # S1 = S2, the second bar
    (written,) = [t for t in ax.texts if t.get_text().startswith("paper")]
    assert written.get_text() == "paper, S1: 5,000 \u2191\npaper, S2: 6,000 \u2191" and written.xy == (1, 0.97)
    style.plt.close(fig)


def test_a_papers_value_near_zero_on_our_bars_is_written_low_not_drawn_on_the_axis(tables):
    """The paper's 0.01 s against our largest delay of 2 s would be a line on the axis: written
    low over SH's bar instead; the axis keeps its room for marks at the top only when one is there."""
    from experiments.paper_values import PaperValue

    page = panels._Page(list(RUNS.values()), style.styles(list(RUNS.values())), None, [],
                        (PaperValue("delay", "Fig. 7", 0.01, "max_s", "SH"),))
    fig, ax = style.plt.subplots()
    panel = Panel("Largest delay", "summary", "max_s", kind="bars")
    panels._bars(ax, panel, panels._rows(tables, panel, RUNS), page)
    (written,) = [t for t in ax.texts if t.get_text().startswith("paper")]
    assert written.get_text() == "paper: 0.01 s (near 0 here)" and written.xy == (2, 0.12)
    assert not ax.collections and ax.get_ylim()[1] == pytest.approx(2.0 * 1.15)
    style.plt.close(fig)

def test_a_papers_level_far_above_our_lines_is_named_in_the_legend_not_drawn(tables):
    """The paper's 4,400 s over time against our delays of at most a few seconds: a legend entry
    in the run's colour, no level stretching the axis; a level within scale is still drawn."""
    from experiments.paper_values import PaperValue

    marks = (PaperValue("delay", "Fig. 7", 4400.0, "pub_copies_per_s", "S0"),
             PaperValue("delay", "Fig. 7", 10.0, "pub_copies_per_s", "S1"))
    page = panels._Page(list(RUNS.values()), style.styles(list(RUNS.values())), None, [], marks)
    fig, ax = style.plt.subplots()
    panel = Panel("traffic", "throughput", "pub_copies_per_s")
    panels._time(ax, panel, panels._rows(tables, panel, RUNS), page)
    far = [line for line in ax.lines if line.get_label().startswith("the paper's, far above")]
    assert [line.get_label() for line in far] == ["the paper's, far above: S0 4,400"]  # the measure names no unit
    assert far[0].get_color() == page.looks["S0"].colour and not len(far[0].get_ydata())
    (level,) = [line for line in ax.lines if list(line.get_ydata()) == [10.0, 10.0]]
    assert level.get_color() == page.looks["S1"].colour
    assert ax.get_ylim()[1] < 4400 and far[0].get_label() in _legend(ax)
    style.plt.close(fig)


def test_a_sweep_marks_the_papers_value_of_a_run_and_the_largest_of_a_series(tables):
    from experiments.paper_values import PaperValue

    sweep = Sweep("unsubscriptions", {"S0": ("active", 100), "S1": ("active", 200), "S2": ("selective", 100),
                                      "SH": ("selective", 200)})
    marks = (PaperValue("one", "Fig. 5", 3.0, "max_s", "S1"), PaperValue("at most", "Fig. 6", 1.5, "max_s", ("S2", "SH")))
    page = panels._Page(list(RUNS.values()), style.styles(list(RUNS.values())), sweep, [], marks)
    fig, ax = style.plt.subplots()
    panels._sweep(ax, Panel("Largest delay", "summary", "max_s", kind="sweep"),
                  panels._rows(tables, Panel("Largest delay", "summary", "max_s", kind="sweep"), RUNS), page)
    star = ax.lines[-1]
    assert list(star.get_xdata()) == [200] and list(star.get_ydata()) == [3.0] and star.get_marker() == "*"
    (level,) = ax.collections
    assert level.get_segments()[0].tolist() == [[100, 1.5], [200, 1.5]]
    assert _legend(ax)[-2:] == [panels.PAPER_LABEL, "the paper's largest, selective"] and ax.get_ylim()[1] >= 3.0
    style.plt.close(fig)


def test_a_sweeps_paper_value_far_above_ours_is_named_in_the_legend_not_starred(tables):
    """The paper's 1,200 s at 200 unsubscriptions against our largest of 2 s: a legend entry,
    the axis kept to ours."""
    from experiments.paper_values import PaperValue

    sweep = Sweep("unsubscriptions", {"S0": ("active", 100), "S1": ("active", 200), "S2": ("selective", 100),
                                      "SH": ("selective", 200)})
    marks = (PaperValue("far", "Fig. 8", 1200.0, "max_s", "S1"),)
    page = panels._Page(list(RUNS.values()), style.styles(list(RUNS.values())), sweep, [], marks)
    fig, ax = style.plt.subplots()
    panel = Panel("Largest delay", "summary", "max_s", kind="sweep")
    panels._sweep(ax, panel, panels._rows(tables, panel, RUNS), page)
    assert "the paper's, far above: active 1,200 s at 200" in _legend(ax)
    assert not [line for line in ax.lines if len(line.get_xdata()) and line.get_marker() == "*"]
    assert ax.get_ylim()[1] < 100
    style.plt.close(fig)


def test_a_curve_draws_a_column_against_another_per_variant_in_its_order(tmp_path):
    """Figs. 6-7 of the multi-tree paper: a clustering's cost after each merge step against
    its trees, rows filtered by plan; points sorted by x whatever the rows' order."""
    steps = [{"run": run, "plan": plan, "trees": trees, "cost": float(trees * slope + plan)}
             for run, slope in (("fig-S0", 2), ("fig-S1", 1)) for plan in (1, 2) for trees in (5, 1, 3)]
    _write(tmp_path, "multitree_steps", steps)
    panel = Panel("Cost after each step", "multitree_steps", "sampled_cost_per_document", kind="curve", x="trees",
                  where={"plan": 1}, scale="log")
    rows = panels._rows(tmp_path, panel, RUNS)
    rows = {v: [{**r, "sampled_cost_per_document": r["cost"]} for r in found] for v, found in rows.items()}
    fig, ax = style.plt.subplots()
    page = panels._Page(["S0", "S1"], style.styles(["S0", "S1"]), None, [])
    panels._PLOTTERS["curve"](ax, panel, rows, page)
    assert [(list(line.get_xdata()), list(line.get_ydata())) for line in ax.lines] == [
        ([1, 3, 5], [3, 7, 11]), ([1, 3, 5], [2, 4, 6])]
    assert ax.get_xlabel().startswith("trees") and _legend(ax) == ["S0", "S1"]
    assert ax.get_xscale() == "log" and ax.get_ylim()[0] == 0  # scale: the x axis's, as a cdf's
    style.plt.close(fig)
    with pytest.raises(ValueError, match="x: a curve panel names its x column"):
        panels.check(Panel("no x", "multitree_steps", "sampled_cost_per_document", kind="curve"), ["S0"])


def test_where_keeps_rows_equal_to_a_value_or_to_any_of_a_list(tmp_path):
    """The burst figures count triggered subscriptions: single ones and packing's batches, not
    the unsubscriptions active covering sends when a released subscription covers others."""
    _write(tmp_path, "messages_by_broker", [
        {"run": "fig-S0", "broker": "core-E", "kind": kind, "triggered": n}
        for kind, n in (("sub", 300), ("unsub", 266), ("sub_batch", 7), ("pub", 0))])
    counted = {}
    for where in ({"kind": "sub"}, {"kind": ["sub", "sub_batch"]}, {}):
        panel = Panel("Triggered", "messages_by_broker", "triggered", kind="categories", x="broker", where=where)
        counted[str(where)] = sum(r["triggered"] for r in panels._rows(tmp_path, panel, RUNS)["S0"])
    assert list(counted.values()) == [300, 307, 573]


def _triggered_along_the_core(tables):
    _write(tables, "core_order", [{"run": "fig-S0", "broker": b, "position": i}
                                  for i, b in enumerate(("core-A", "core-B", "core-E"))])
    _write(tables, "messages_by_broker", [
        {"run": run, "broker": broker, "kind": "sub", "triggered": n}
        for run, counts in (("fig-S0", (700, 2000, 9000)), ("fig-S1", (90, 40, 0)), ("fig-S2", (5, 5, 5)),
                            ("fig-SH", (5, 5, 5)))
        for broker, n in zip(("core-A", "core-B", "core-E"), counts)])
    return Panel("Triggered", "messages_by_broker", "triggered", kind="categories", x="broker", order="core",
                 scale="log")


def test_a_papers_value_at_a_category_is_drawn_across_its_runs_bar_there_and_nowhere_else(tables):
    """"About 700 at broker A, almost 5,900 at E" (active, S0) and "decreasing to 0 at E"
    (S1): dashed lines across S0's bars at core-A and core-E, the 0 written low (a log axis
    has no 0); a bars panel of the same column draws none of them."""
    from experiments.paper_values import PaperValue

    panel = _triggered_along_the_core(tables)
    marks = (PaperValue("A", "Fig. 7(d)", 700.0, "triggered", "S0", at="core-A"),
             PaperValue("E", "Fig. 7(d)", 5900.0, "triggered", "S0", at="core-E"),
             PaperValue("E", "Fig. 7(d)", 0.0, "triggered", "S1", at="core-E"))
    page = panels._Page(list(RUNS.values()), style.styles(list(RUNS.values())), None,
                        panels._core_order(tables), marks)
    fig, (ax, bars) = style.plt.subplots(1, 2)
    panels._categories(ax, panel, panels._rows(tables, panel, RUNS), page)
    width = 0.8 / 3  # S0, S1, S2 = SH
    segments = [c.get_segments()[0].tolist() for c in ax.collections if c.get_linestyle()[0][1] is not None]  # dashed
    assert sorted(segments) == sorted([[[0 - width / 2, 700.0], [0 + width / 2, 700.0]],
                                       [[2 - width / 2, 5900.0], [2 + width / 2, 5900.0]]])
    (zero,) = [t for t in ax.texts if t.get_text().startswith("paper")]
    assert zero.get_text() == "paper: 0" and zero.xy == (2 + width, 0.05)
    assert panels.PAPER_LABEL in _legend(ax)
    summary = Panel("Triggered", "messages_by_broker", "triggered", kind="bars")
    panels._bars(bars, summary, panels._rows(tables, summary, RUNS), page)
    assert not bars.collections
    style.plt.close(fig)


def test_category_values_are_the_bars_drawn_and_the_papers_value_reads_them(tables):
    from experiments import paper_values

    panel = _triggered_along_the_core(tables)
    values = panels.category_values(panel, tables, RUNS)
    assert values["S0"] == {"core-A": 700.0, "core-B": 2000.0, "core-E": 9000.0} and values["S1"]["core-E"] == 0.0
    value = paper_values.PaperValue("E", "Fig. 7(d)", 5900.0, "triggered", "S0", at="core-E")
    rows = {"S0": {value.column: values["S0"]["core-E"], "triggered": 1.0}}
    assert value.column == "triggered at core-E" and value.ours(rows) == 9000.0
    assert paper_values.verdict(value.paper, value.ours(rows), False) == (pytest.approx(9000 / 5900), "within 2x")


@pytest.mark.parametrize("settings, scale", [((1, 4, 16, 63), "log"), ((0.001, 0.003, 0.01, 0.1), "log"),
                                             ((1, 25, 50, 75), "linear"), ((10, 30, 50, 70), "linear")])
def test_a_sweep_axis_is_logarithmic_where_its_settings_grow_by_ratios(tables, settings, scale):
    """Broker counts 1, 4, 16, 63 by ratio; weights 1, 25, 50, 75 by difference."""
    fig, ax = style.plt.subplots()
    sweep = Sweep("setting", dict(zip(RUNS.values(), [("line", x) for x in settings], strict=True)))
    page = panels._Page(list(sweep.points), style.styles(list(sweep.points)), sweep, [])
    panel = Panel("Yield", "summary", "yield", kind="sweep")
    panels._sweep(ax, panel, panels._rows(tables, panel, RUNS), page)
    assert ax.get_xscale() == scale
    style.plt.close(fig)


def test_labels_lose_the_prefix_every_run_shares():
    assert style.short_labels(["softlinks_dense-S0", "softlinks_dense-S1"]) == {
        "softlinks_dense-S0": "S0", "softlinks_dense-S1": "S1"}
    assert style.short_labels(["a-b", "c-d"]) == {"a-b": "a-b", "c-d": "c-d"}
    assert style.short_labels(["x-1", "x-"]) == {"x-1": "x-1", "x-": "x-"}  # a label would be empty
    assert style.short_labels(["fig-S0 [last 60 s]", "fig-S2 [last 60 s]"]) == {  # a window report's
        "fig-S0 [last 60 s]": "S0", "fig-S2 [last 60 s]": "S2"}
    assert style.short_labels(["fig-S0 [last 6 s]", "fig-S2 [last 60 s]"]) == {
        "fig-S0 [last 6 s]": "S0 [last 6 s]", "fig-S2 [last 60 s]": "S2 [last 60 s]"}


def test_every_variant_differs_by_more_than_colour():
    looks = list(style.styles([f"v{i}" for i in range(8)]).values())
    assert len({(look.line, look.marker) for look in looks}) == 8


def test_runs_of_one_look_share_it_and_the_others_keep_their_order():
    """``look:`` in a figure's runs: one strategy in two datasets in one colour, each dataset
    in its line style; runs without a look keep a colour and line of their own."""
    looks = style.styles(["DT4_S0", "DT4_S2", "DT5_S0", "DT5_S2", "extra"],
                         {"DT4_S0": "S0", "DT5_S0": "S0", "DT4_S2": "S2", "DT5_S2": "S2"})
    assert looks["DT4_S0"].colour == looks["DT5_S0"].colour != looks["DT4_S2"].colour == looks["DT5_S2"].colour
    assert looks["DT4_S0"].line == looks["DT4_S2"].line != looks["DT5_S0"].line == looks["DT5_S2"].line
    assert len({(look.colour, look.line, look.marker) for look in looks.values()}) == 5
    assert looks["extra"].colour not in (looks["DT4_S0"].colour, looks["DT4_S2"].colour)
    assert figures.load("softlinks_paper_planetlab").looks["DT5_SH"] == "SH"
    labels = ["S0", "S1_fanout5", "S2_fanout5", "capped_S0", "capped_S1"]  # a sweep and a capped set
    swept = style.styles(labels, {label: label.replace("capped_", "")[:2] for label in labels})
    assert swept["capped_S0"].line == swept["capped_S1"].line != swept["S1_fanout5"].line == swept["S2_fanout5"].line
    assert swept["capped_S0"].hatch == swept["capped_S1"].hatch and swept["S0"].line == "-"


def test_the_generic_report_draws_runs_in_the_looks_their_figure_gives_them(tmp_path):
    """A figure's looks travel with its report's listing (run name -> look) and its plots draw
    them: one strategy in two datasets in one colour, as on the figure's panels."""
    from analysis import job, plots

    requested = job.Requested(tmp_path / "report", ["fig-DT4_S0"], looks={"fig-DT4_S0": "S0"})
    assert requested.listed()["looks"] == {"fig-DT4_S0": "S0"}
    assert "looks" not in job.Requested(tmp_path / "report", ["fig-DT4_S0"]).listed()
    labels = style.Variants(["DT4_S0", "DT4_S2", "DT5_S0", "DT5_S2"],
                            {"DT4_S0": "S0", "DT5_S0": "S0", "DT4_S2": "S2", "DT5_S2": "S2"})
    series = {label: ([0.0, 1.0], [float(i), float(i + 1)]) for i, label in enumerate(labels)}
    fig, ax = style.plt.subplots()
    plots._lines(ax, labels, series)
    colours = {line.get_label(): line.get_color() for line in ax.lines}
    assert colours["DT4_S0"] == colours["DT5_S0"] != colours["DT4_S2"] == colours["DT5_S2"]
    assert [line.get_linestyle() for line in ax.lines] == ["-", "-", "--", "--"]
    style.plt.close(fig)
    fig, ax = style.plt.subplots()  # bars: the second dataset's hatched
    plots._grouped_bars(ax, ["all"], labels, lambda label, role: 1.0 + labels.index(label))
    assert [p.get_hatch() or "" for p in ax.patches] == ["", "", "//", "//"]
    style.plt.close(fig)


def test_linear_axes_separate_thousands_and_keep_plain_decimals():
    fig, ax = style.plt.subplots()
    ax.bar([0, 1], [0.5, 1.4])
    style.label_axis(ax, "y", "mean_hops")
    fig.canvas.draw()
    assert [t.get_text() for t in ax.get_yticklabels()][:3] == ["0.0", "0.2", "0.4"]
    ax.set_ylim(0, 160_000)
    fig.canvas.draw()
    assert "160,000" in [t.get_text() for t in ax.get_yticklabels()]
    style.plt.close(fig)
    fig, ax = style.plt.subplots()  # the generic report's plots: category labels kept
    ax.bar([0, 1], [4_000, 12_000])
    ax.set_xticks([0, 1], ["pub", "sub"])
    style.separate_thousands(ax)
    fig.canvas.draw()
    assert "10,000" in [t.get_text() for t in ax.get_yticklabels()]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["pub", "sub"]
    style.plt.close(fig)


def test_a_panel_must_name_a_column_with_a_unit():
    with pytest.raises(ValueError, match="no unit or definition"):
        panels.check(Panel("x", "summary", "made_up_column"), ["a"])
    with pytest.raises(ValueError, match="not among the figure's runs"):
        panels.check(Panel("x", "summary", "max_s", kind="bars", relative_to="OPT"), ["a"])
    assert all(m.label and m.definition for m in style.MEASURES.values())


def test_counts_get_integer_ticks():
    fig, ax = style.plt.subplots()
    ax.plot([0, 1], [0, 3])
    style.label_axis(ax, "y", "hops")
    assert all(float(t).is_integer() for t in ax.get_yticks())
    assert ax.get_ylabel() == "hops"
    style.plt.close(fig)


def test_the_generic_reports_bars_merge_identical_runs_and_skip_queues_that_never_formed(tmp_path):
    from analysis import plots

    fig, ax = style.plt.subplots()
    share = {"S0": 40.0, "S1": 30.0, "S2": 20.0, "SH": 20.0}
    plots._grouped_bars(ax, ["all", "edge"], list(share), lambda label, role: share[label])
    ax.legend()
    assert _legend(ax) == ["S0", "S1", "S2 = SH: identical"] and len(ax.patches) == 6
    style.plt.close(fig)
    calm = [{"run": run, "t_s": float(t), "mean_queue": 0.0, "max_queue": 0} for run in share for t in range(5)]
    assert plots.queues_overall(calm, list(share), tmp_path / "calm.png") is None
    calm[3]["max_queue"] = 2
    assert plots.queues_overall(calm, list(share), tmp_path / "queued.png") == tmp_path / "queued.png"


def test_the_links_plot_draws_only_what_some_run_has(tmp_path, monkeypatch):
    """Soft links without uplink caps: one panel, not an empty utilisation one beside it; with
    caps, both; with neither, no plot."""
    from analysis import plots

    drawn = []
    monkeypatch.setattr(plots, "_save", lambda fig, path: drawn.append([ax.get_title() for ax in fig.axes]) or path)
    rows = [{"run": run, "t_s": float(t), "soft_links": 10 * t if run == "SH" else 0, "mean_uplink": None,
             "max_uplink": None} for run in ("S0", "SH") for t in range(4)]
    assert plots.links(rows, ["S0", "SH"], tmp_path / "links.png") == tmp_path / "links.png"
    for row in rows:
        row.update(mean_uplink=0.5, max_uplink=0.9)
    plots.links(rows, ["S0", "SH"], tmp_path / "links.png")
    assert [len(titles) for titles in drawn] == [1, 2] and drawn[0][0] == "Soft links held, all brokers"
    assert plots.links([{**row, "soft_links": None, "mean_uplink": None, "max_uplink": None} for row in rows],
                       ["S0", "SH"], tmp_path / "none.png") is None


@pytest.mark.parametrize("runs, name, beside", [(3, "run_{i}", False), (12, "run_{i}", True),
                                               (3, "run_{i} = other_run_{i} = third_run_{i}: identical", True),
                                               (12, "run_{i} = other_run_{i} = third_run_{i}: identical", True)])
def test_a_legend_of_many_runs_or_long_names_goes_beside_the_plot_on_a_wider_figure(runs, name, beside):
    from analysis import plots

    fig, ax = style.plt.subplots(figsize=(9, 2.4))  # as short as a one-role table-size plot
    for i in range(runs):
        ax.plot([0, 1], [i, i], label=name.format(i=i))
    plots._legend(ax)
    legend = ax.get_legend()
    assert len(legend.get_texts()) == runs
    fig.canvas.draw()
    outside = legend.get_window_extent().x0 > ax.get_window_extent().x1
    assert (fig.get_figwidth() == 13) == beside and outside == beside
    assert legend.get_window_extent().y0 >= 0  # the figure is tall enough for every line
    assert all(len(line) <= 40 for t in legend.get_texts() for line in t.get_text().split("\n"))


def test_bars_of_runs_past_the_palette_differ_by_pattern():
    from analysis import plots

    fig, ax = style.plt.subplots()
    labels = [f"run{i}" for i in range(12)]
    plots._grouped_bars(ax, ["pub"], labels, lambda label, kind: float(labels.index(label)))
    assert [p.get_hatch() or "" for p in ax.patches] == [""] * 10 + ["//"] * 2
    assert ax.patches[0].get_facecolor() == ax.patches[10].get_facecolor()  # the palette repeats
    style.plt.close(fig)


def test_activity_is_a_level_changing_or_another_measure_not_zero():
    t = [0.0, 10.0, 20.0, 30.0, 40.0]
    assert style.last_activity("mean_prt", t, [5, 8, 8, 8, 8]) == 10.0  # a table that stopped growing
    assert style.last_activity("mean_prt", t, [5, 5, 5, 5, 5]) == 0.0
    assert style.last_activity("deliveries_per_s", t, [3, 0, 4, 0, 0]) == 20.0  # a rate that fell to zero
    assert style.last_activity("mean_s", t, [0.1, None, 0.2, None, None]) == 20.0
    assert style.time_range(20.0) == (0.0, 20.6) and style.time_range(0.0) is None


def test_the_generic_time_plots_of_a_report_share_one_time_axis_cut_to_activity(tmp_path, monkeypatch):
    """Table sizes sampled until 300 s stopped changing at 50 s, deliveries went on until 240 s:
    every time plot runs from 0 to just past 240 s, the plots not over time keep their own axes."""
    from analysis import job, plots

    limits = {}
    monkeypatch.setattr(plots, "_save", lambda fig, path: limits.update(
        {path.name: {tuple(round(x, 1) for x in ax.get_xlim()) for ax in fig.axes}}) or path)
    runs = ["fig-none", "fig-active"]
    samples = [float(t) for t in range(0, 301, 10)]
    collected = {name: [] for name in plots.TIME_TABLES} | {"faults": [], "drops": []} | {
        "table_size_over_time": [{"run": run, "t_s": t, "role": "all", "mean_prt": min(t, 50.0) + i,
                                  "preserved": None} for i, run in enumerate(runs) for t in samples],
        "delay_over_time": [{"run": run, "t_s": t, "mean_s": 0.01, "max_s": 0.02}
                            for run in runs for t in samples if t <= 240],
        "throughput": [{"run": run, "t_s": t, "deliveries_per_s": 5.0 if t <= 240 else 0.0,
                        "pub_copies_per_s": 9.0 if t <= 240 else 0.0} for run in runs for t in samples],
        "hop_counts": [{"run": run, "hops": h, "cdf": h / 3} for run in runs for h in (1, 2, 3)],
    }
    figures = job._figures(collected, [], runs, tmp_path, {}, wanted=job.PLOTS_OVER_TIME + ("Hop counts",))
    assert set(figures) == {"Delivery delay over time", "Routing-table size", "Throughput and traffic", "Hop counts"}
    assert limits["table_size.png"] == limits["delay_over_time.png"] == limits["throughput.png"] == {(0.0, 247.2)}
    assert limits["hops_cdf.png"] != {(0.0, 247.2)}
    limits.clear()
    assert set(job._figures(collected, [], runs, tmp_path, {}, wanted=("Hop counts",))) == {"Hop counts"}
    assert set(limits) == {"hops_cdf.png"}


def test_a_panel_whose_runs_came_out_identical_differently_names_them(tmp_path, monkeypatch):
    """Routing-table sizes per role: on the inner brokers lazy = active (one line), on all
    brokers not; the inner panel gets a legend of its own saying so, the core panel (grouped as
    all brokers) none."""
    from analysis import plots

    legends = []
    monkeypatch.setattr(plots, "_save", lambda fig, path: legends.extend(
        [t.get_text() for t in ax.get_legend().get_texts()] if ax.get_legend() else None for ax in fig.axes) or path)
    size = {("lazy", "inner"): 3.0, ("active", "inner"): 3.0, ("lazy", "all"): 3.0, ("active", "all"): 2.0,
            ("lazy", "core"): 5.0, ("active", "core"): 4.0}
    rows = [{"run": run, "t_s": float(t), "role": role, "mean_prt": size[run, role] * t}
            for run, role in size for t in range(5)]
    plots.table_sizes(rows, ["lazy", "active"], tmp_path / "table_size.png")
    assert legends == [["lazy", "active"], None, ["lazy = active: identical"]]


def test_stacked_panels_with_long_legends_of_their_own_keep_each_beside_its_panel(tmp_path, monkeypatch):
    """Throughput and traffic over time for 22 runs (a figure with a sweep on two
    configurations): the traffic panel names its own identical runs, so both panels carry a
    long legend beside them; neither runs into the other or off the figure."""
    from analysis import plots

    checked = []

    def check(fig, path):
        fig.tight_layout()  # as _save lays a plot out
        fig.canvas.draw()
        top, bottom = (ax.get_legend().get_window_extent() for ax in fig.axes)
        checked.append(top.y0 >= bottom.y1 and bottom.y0 >= 0)
        return path

    monkeypatch.setattr(plots, "_save", check)
    runs = [f"C2_S{i % 3}_fanout{i}" for i in range(22)]
    rows = [{"run": run, "t_s": float(t), "deliveries_per_s": (i + 1) * t,
             "pub_copies_per_s": (i // 2 + 1) * t} for i, run in enumerate(runs) for t in range(5)]
    plots.throughput(rows, runs, tmp_path / "throughput.png")
    assert checked == [True]


SEEDED = {f"fig-{v}_seed{s}": v for v in ("S0", "S2") for s in (1, 2, 3)}


@pytest.fixture
def seeded(tmp_path):
    """Three seeds of S0 and S2: yields 0.4/0.5/0.6 and 0.5/0.5/0.8, copies over time 1, 2, 3
    times t and, for S2, the same every seed."""
    root = tmp_path / "seeded"
    yields = {"S0": (0.4, 0.5, 0.6), "S2": (0.5, 0.5, 0.8)}
    _write(root, "summary", [{"run": run, "yield": yields[v][int(run[-1]) - 1]} for run, v in SEEDED.items()])
    _write(root, "throughput", [{"run": run, "t_s": float(t), "pub_copies_per_s": float(t * (int(run[-1]) if v == "S0"
                                                                                             else 2))}
                                for run, v in SEEDED.items() for t in range(5)])
    return root


def test_seeds_are_drawn_as_the_mean_with_a_students_t_interval(seeded):
    from scipy import stats

    page = panels._Page(["S0", "S2"], style.styles(["S0", "S2"]), None, [])
    fig, (bars, time) = style.plt.subplots(1, 2)
    bar_panel = Panel("Yield", "summary", "yield", kind="bars")
    panels._bars(bars, bar_panel, panels._rows(seeded, bar_panel, SEEDED), page)
    half = stats.t.ppf(0.975, 2) * 0.1 / 3 ** 0.5  # S0: 0.4, 0.5, 0.6 (standard deviation 0.1)
    assert [p.get_height() for p in bars.patches] == pytest.approx([50.0, 60.0])  # percent: the means
    (errors,) = [c for c in bars.containers if hasattr(c, "has_yerr")]
    (low, high), _ = (segment[:, 1] for segment in errors.lines[2][0].get_segments())  # S0's, S2's
    assert (low, high) == pytest.approx((100 * (0.5 - half), 100 * (0.5 + half)))
    line_panel = Panel("traffic", "throughput", "pub_copies_per_s")
    panels._time(time, line_panel, panels._rows(seeded, line_panel, SEEDED), page)
    s0 = time.lines[0]
    assert list(s0.get_ydata()) == pytest.approx([2.0 * t for t in range(5)])  # the mean of t, 2t and 3t
    band = time.collections[0].get_paths()[0].vertices[:, 1]
    assert band.max() == pytest.approx(8 + stats.t.ppf(0.975, 2) * 4 / 3 ** 0.5)  # at t = 4: 4, 8, 12
    style.plt.close(fig)


def test_a_ratio_over_seeds_is_the_interval_of_the_per_seed_ratios(seeded):
    from scipy import stats

    from analysis import spread

    panel = Panel("Yield", "summary", "yield", kind="bars", relative_to="S0")
    rows = panels._rows(seeded, panel, SEEDED)
    found = panels._relative(panel, rows, {v: panels._estimate(panel, rows[v]) for v in ("S0", "S2")})
    ratios = [0.5 / 0.4, 0.5 / 0.5, 0.8 / 0.6]
    mean = sum(ratios) / 3
    sd = (sum((r - mean) ** 2 for r in ratios) / 2) ** 0.5
    assert found["S2"] == pytest.approx((mean, stats.t.ppf(0.975, 2) * sd / 3 ** 0.5))
    assert found["S0"] == pytest.approx((1.0, 0.0))
    assert spread.interval([3.0]) == (3.0, None) and spread.variant_of("a-b_seed12") == ("a-b", 12)
