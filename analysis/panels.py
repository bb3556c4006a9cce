"""A figure's panels, drawn from the analysis's metric tables (``REPORT/tables/<metric>``,
read with pyarrow: no Spark), the way the paper draws its figure.

A panel plots one column ``y`` of one metric table, one line or bar per variant, in one of
six kinds:

- ``time``: ``y`` over simulated time (``t_s``); the time axis is shared by every time panel
  of the page and cut to where something happens; a burst narrower than a tenth of the axis
  gets an inset that zooms on it;
- ``cdf``: the share of deliveries against ``x`` (hops, delay), as steps;
- ``bars``: one bar per variant, its value written on it (``relative_to`` divides by one
  variant's value; ``whiskers: [LOW, HIGH]`` draws whiskers from the bar's LOW column to its
  HIGH column, as the papers draw a mean with its 10th and 90th percentiles);
- ``categories``: grouped bars, one group per value of ``x`` (message kind, broker; ``order:
  core`` puts the core brokers in their order along the core);
- ``sweep``: ``y`` against a setting the runs vary, one line per series;
- ``curve``: ``y`` against another column ``x`` of the table (a clustering's trees), one
  line per variant; ``scale`` is its x axis's, as for a cdf.

A variant run with several seeds (runs named ``<variant>_seed<N>``, several run names for one
variant) is drawn as the mean over its seeds with the 95% confidence interval
(``analysis.spread``): time, cdf, curve and sweep lines with a band, bars with error bars, and
a ratio to another variant (``relative_to``) as the interval of the per-seed ratios.

A figure with a window (values at the end, or a measured interval) draws every panel but
the time ones from the report of its runs over that window; ``measured: run`` or ``window``
says otherwise. Rows are first filtered by ``where`` (column: value, or column: [values], any of
them) and, where several remain per variant
and ``x``, combined by ``reduce`` (sum, max or mean). Variants whose data came out identical
are drawn once and named together ("S2 = SH: identical"); a panel whose values are all zero
is not drawn, and the page says so instead.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
from matplotlib.ticker import NullFormatter
from matplotlib.transforms import offset_copy

from analysis import spread, style
from analysis.style import plt
from analysis.window import Window

KINDS = ("time", "cdf", "bars", "categories", "sweep", "curve")
REDUCERS = {"sum": np.sum, "max": np.max, "mean": np.mean}
BURST_SHARE = 0.1  # a burst above a tenth of its peak, narrower than this share of the axis, gets an inset


@dataclass(frozen=True)
class Panel:
    title: str
    table: str
    y: str
    kind: str = "time"
    x: str | None = None
    where: dict = field(default_factory=dict)
    reduce: str = "sum"
    scale: str = "linear"
    variants: tuple[str, ...] = ()  # which variants it draws (default: every one)
    relative_to: str | None = None
    order: str | None = None
    measured: str | None = None  # "run" or "window" (default: window, but for time panels)
    whiskers: tuple[str, str] | None = None  # bars: the columns a bar's whiskers reach down and up to
    paper_panel: str | None = None  # the paper's panel this one answers ("Fig. 7(e)"), for the caption

    @property
    def x_column(self) -> str | None:
        return "t_s" if self.kind == "time" else self.x

    def over_window(self) -> bool:
        """Whether, in a figure with a window, the panel is drawn from the window's report."""
        return self.measured == "window" or (self.measured is None and self.kind != "time")


@dataclass(frozen=True)
class Sweep:
    """The setting a sweep figure varies: its axis label and, per variant, (series, value)."""
    label: str
    points: dict[str, tuple[str, float]]


@dataclass(frozen=True)
class _Page:
    """What every panel of a page shares."""
    variants: list[str]
    looks: dict
    sweep: Sweep | None
    core: list[str]  # the core brokers in order along the core
    marks: tuple = ()  # the paper's values (experiments.paper_values.PaperValue: y, run, relative_to, paper)


@dataclass(frozen=True)
class Windowed:
    """A figure's runs measured over its window: the report's tables, run name there -> variant
    label, and the window."""
    tables: Path
    runs: dict[str, str]
    window: Window
    seconds: tuple[float, float]  # the window on the time axis (of the longest run), shaded on time panels


@dataclass(frozen=True)
class Drawn:
    """What became of a panel on the page: its letter, a note when it was not drawn, and the
    window it measures (None: whole runs)."""
    letter: str
    panel: Panel
    note: str | None = None
    window: str | None = None


PHASE_COLOUR = "#f2c14e"
NARROW_PHASE = 0.005  # a phase shorter than this share of the time axis is also marked by a line at its start


def _shade_phases(ax, phases: list[tuple[str, float, float]]) -> None:
    """Each phase as a pale band named at the top of the plot; one too short to see as a band
    (ten seconds of unsubscriptions on a four-hour axis) also as a line where it starts."""
    low, high = ax.get_xlim()
    for label, start, end in phases:
        if end < low or start > high:  # not on this axis (a workload's, past the run's end)
            continue
        ax.axvspan(start, end, color=PHASE_COLOUR, alpha=0.18, linewidth=0, zorder=0)
        if end - start < NARROW_PHASE * (high - low):
            ax.axvline(start, color=PHASE_COLOUR, linewidth=1.2, zorder=0)
        ax.text(start, 0.99, f" {label}", transform=ax.get_xaxis_transform(), va="top", ha="left",
                fontsize="small", color="0.3")


LEGEND_BELOW = ("time", "categories")  # panels whose lines or bars may fill every corner
LOG_HEADROOM = 1.6  # a log axis's top over its tallest bar: the bar clear of the frame


def _legend_below(ax) -> None:
    """The panel's legend under its axis label, in columns, where it covers no line or bar."""
    handles, labels = ax.get_legend_handles_labels()
    if ax.get_legend() is not None:
        ax.get_legend().remove()
    if not handles:
        return
    fig = ax.figure
    lowest = ax.get_tightbbox(fig.canvas.get_renderer()).y0  # the tick labels' and axis label's bottom
    depth = (ax.transAxes.transform((0, 0))[1] - lowest) * 72 / fig.dpi + 4  # in points, as layouts keep it
    columns = 2 if max(map(len, labels)) > 24 else min(len(labels), 4)
    ax.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0), ncol=columns, fontsize="small",
              frameon=False, bbox_transform=offset_copy(ax.transAxes, fig=fig, y=-depth, units="points"))


def check(panel: Panel, variants: list[str]) -> None:
    """A panel's spec is complete and names known columns and variants (ValueError otherwise)."""
    if panel.kind not in KINDS:
        raise ValueError(f"kind: expected one of {', '.join(KINDS)}, got {panel.kind!r}")
    if panel.kind in ("cdf", "categories", "curve") and not panel.x:
        raise ValueError(f"x: a {panel.kind} panel names its x column")
    if panel.reduce not in REDUCERS:
        raise ValueError(f"reduce: expected one of {', '.join(REDUCERS)}, got {panel.reduce!r}")
    if panel.scale not in ("linear", "log"):
        raise ValueError(f"scale: expected linear or log, got {panel.scale!r}")
    if panel.measured not in (None, "run", "window"):
        raise ValueError(f"measured: expected run or window, got {panel.measured!r}")
    for column in (panel.y, panel.x_column) if panel.kind != "categories" else (panel.y,):
        if column is not None and column not in style.MEASURES:
            raise ValueError(f"{column!r}: no unit or definition known for this column "
                             "(analysis.style.MEASURES)")
    if panel.whiskers is not None:
        _check_whiskers(panel)
    unknown = [v for v in (*panel.variants, *([panel.relative_to] if panel.relative_to else [])) if v not in variants]
    if unknown:
        raise ValueError(f"variants: {', '.join(unknown)} not among the figure's runs ({', '.join(variants)})")


def draw(panels: list[Panel], tables: Path, runs: dict[str, str], title: str, path: Path,
         sweep: Sweep | None = None, windowed: Windowed | None = None,
         looks: dict[str, str] | None = None, phases: list[tuple[str, float, float]] = (),
         marks: tuple = ()) -> list[Drawn]:
    """Draw ``panels`` on one page at ``path`` from the metric tables under ``tables``;
    ``runs``: run name in the tables -> variant label, in the figure's order; ``windowed``:
    the runs over the figure's window, which panels but time ones are drawn from; ``looks``:
    variant -> a look it shares with others (the same strategy in two datasets); ``phases``:
    (label, from s, until s) stretches the time panels shade and name; ``marks``: the paper's
    values, drawn on the bars, time and sweep panels of their column (a dashed line across the
    bar, a dotted level in the run's colour, a star at the run's setting), and those naming a
    category on its categories panel (a dashed line across the run's bar there)."""
    variants = list(dict.fromkeys(runs.values()))
    page = _Page(variants, style.styles(variants, looks), sweep, _core_order(tables), tuple(marks))
    shown, drawn = [], []
    for i, panel in enumerate(panels):
        over = windowed if windowed is not None and panel.over_window() else None
        rows = _rows(over.tables, panel, over.runs) if over else _rows(tables, panel, runs)
        letter = chr(ord("a") + i)
        note = _nothing_to_draw(panel, rows, page.core)
        drawn.append(Drawn(letter, panel, note, over and over.window.phrase))
        if note is None:
            shown.append((letter, panel, rows, _measured_over(panel, windowed)))
    if not shown:
        return drawn
    columns = 1 if len(shown) == 1 else 2
    lines = -(-len(shown) // columns)
    fig, axes = plt.subplots(lines, columns, figsize=(6.2 * columns, 3.9 * lines), squeeze=False)
    for ax in axes.flat[len(shown):]:
        ax.set_visible(False)
    time_range = _shared_time_range([(panel, rows) for _, panel, rows, _ in shown if panel.kind == "time"])
    if time_range is not None and windowed is not None:  # the stretch the other panels measure stays in view
        time_range = (time_range[0], max(time_range[1], windowed.seconds[1]))
    for ax, (letter, panel, rows, measured) in zip(axes.flat, shown):
        _PLOTTERS[panel.kind](ax, panel, rows, page)
        if panel.kind == "time" and windowed is not None:
            ax.axvspan(*windowed.seconds, color="grey", alpha=0.12, linewidth=0, zorder=0)
        if panel.kind == "time" and time_range is not None:
            ax.set_xlim(*time_range)
            _inset_for_burst(ax, panel, rows, page, time_range)
        if panel.kind == "time":
            _shade_phases(ax, phases)
        if panel.kind in LEGEND_BELOW:
            _legend_below(ax)
        ax.set_title(f"({letter}) {panel.title}{measured}", loc="left", fontsize="medium")
        ax.grid(True, alpha=0.3)
    fig.suptitle(title, fontsize="large")
    title_lines = title.count("\n") + 1
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.25 * title_lines / fig.get_figheight()))  # room for the title's lines
    style.save(fig, path)
    return drawn


def _measured_over(panel: Panel, windowed: Windowed | None) -> str:
    """What a panel's title adds in a figure with a window: the window, or that the panel
    measures whole runs (time panels, which show the whole run, add nothing)."""
    if windowed is None:
        return ""
    if panel.over_window():
        return f" ({windowed.window.tag})"
    return " (whole run)" if panel.kind != "time" else ""


def _rows(tables: Path, panel: Panel, runs: dict[str, str]) -> dict[str, list[dict]]:
    """The panel's rows per variant, filtered by ``where``."""
    folder = tables / panel.table
    if not folder.is_dir():
        raise ValueError(f"table {panel.table!r}: the analysis wrote no such table ({tables})")
    wanted = set(panel.variants or runs.values())
    found = defaultdict(list)
    for row in pq.read_table(folder).to_pylist():
        variant = runs.get(row.get("run"))
        if variant in wanted and all(_holds(row.get(k), v) for k, v in panel.where.items()):
            found[variant].append(row)
    return found


def _holds(value, wanted) -> bool:
    """``where``'s condition on one column: equal to ``wanted``, or one of a list of values."""
    return value in wanted if isinstance(wanted, list) else value == wanted


def _core_order(tables: Path) -> list[str]:
    """The core brokers along the core, as the analysis found them (its first run's)."""
    folder = tables / "core_order"
    if not folder.is_dir():
        return []
    rows = sorted(pq.read_table(folder).to_pylist(), key=lambda r: (r["run"], r["position"]))
    first = rows[0]["run"] if rows else None
    return [r["broker"] for r in rows if r["run"] == first]


def _nothing_to_draw(panel: Panel, rows: dict[str, list[dict]], core: list[str]) -> str | None:
    if panel.order == "core" and not core:
        return "no core brokers in these runs"
    values = [row[panel.y] for variant_rows in rows.values() for row in variant_rows if row.get(panel.y) is not None]
    if not values:
        return "no data in any run"
    if panel.kind != "cdf" and not any(values):
        return "zero in every run"
    return None


def _check_whiskers(panel: Panel) -> None:
    if panel.kind != "bars" or panel.relative_to:
        raise ValueError("whiskers: only a bars panel without relative_to has whiskers")
    if len(panel.whiskers) != 2:
        raise ValueError(f"whiskers: expected two columns [LOW, HIGH], got {list(panel.whiskers)!r}")
    for column in panel.whiskers:
        if column not in style.MEASURES:
            raise ValueError(f"whiskers: {column!r}: no unit or definition known for this column "
                             "(analysis.style.MEASURES)")


def _points(panel: Panel, rows: list[dict]) -> tuple[np.ndarray, np.ndarray]:
    """(x, y) of one variant, sorted by x, rows at one x combined by ``reduce``."""
    grouped = defaultdict(list)
    for row in rows:
        if row.get(panel.y) is not None:
            grouped[row[panel.x_column]].append(row[panel.y])
    xs = sorted(grouped)
    reduce = REDUCERS[panel.reduce]
    return np.array(xs, dtype=float), style.measure(panel.y).scale([reduce(grouped[x]) for x in xs])


def _value(panel: Panel, rows: list[dict]) -> float | None:
    """One run's value: its rows combined by ``reduce``."""
    values = [row[panel.y] for row in rows if row.get(panel.y) is not None]
    return float(REDUCERS[panel.reduce](values)) if values else None


def _by_seed(rows: list[dict]) -> dict[int | None, list[dict]]:
    """A variant's rows per run, keyed by the run's seed (None: the variant's one run)."""
    grouped = defaultdict(list)
    for row in rows:
        grouped[spread.variant_of(row.get("run") or "")[1]].append(row)
    return grouped


def _estimate(panel: Panel, rows: list[dict]) -> tuple[float | None, float | None]:
    """A variant's value: (mean over its seeds, half-width of the interval; None for one run)."""
    values = [v for v in (_value(panel, seed_rows) for seed_rows in _by_seed(rows).values()) if v is not None]
    if not values:
        return None, None
    return spread.interval(values)


def _series(panel: Panel, rows: list[dict]) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(x, y, half-width or None) of a variant: its run's points, or at each x the mean over
    the seeds that have one and its interval."""
    runs = [_points(panel, seed_rows) for seed_rows in _by_seed(rows).values()]
    if len(runs) == 1:
        return (*runs[0], None)
    xs = np.unique(np.concatenate([x for x, _ in runs]))
    at = [dict(zip(x.tolist(), y.tolist())) for x, y in runs]
    found = [spread.interval([values[x] for values in at if x in values]) for x in xs.tolist()]
    return xs, np.array([m for m, _ in found]), np.array([h if h is not None else 0.0 for _, h in found])


def _line_panel(ax, panel, rows, page: _Page, step: bool) -> None:
    variants, looks = page.variants, page.looks
    events = style.measure(panel.y).steps
    series = {v: _series(panel, rows[v]) for v in variants if rows.get(v)}
    for group in style.identical_groups({v: (x, y) for v, (x, y, _) in series.items()}, variants):
        x, y, half = series[group[0]]
        kwargs = looks[group[0]].line_kwargs(points=0 if events else len(x))  # a marker would read as an event
        label = style.group_label(group)
        if step:
            ax.step(x, y, where="post", label=label, **kwargs)
        else:
            ax.plot(x, y, label=label, **kwargs)
        if half is not None:
            ax.fill_between(x, y - half, y + half, step="post" if step else None, color=looks[group[0]].colour,
                            alpha=0.2, linewidth=0)
    style.label_axis(ax, "x", panel.x_column)
    style.label_axis(ax, "y", panel.y)
    ax.legend(fontsize="small", framealpha=0.85)


def _log_y(ax, panel: Panel) -> None:
    """Logarithmic y where the values span a decade or more: symmetric around zero for counts
    (queues of 0 stay on the plot); linear from zero otherwise."""
    values = np.concatenate([line.get_ydata() for line in ax.lines] + [[p.get_height() for p in ax.patches]])
    positive = values[values > 0]
    if not len(positive) or positive.max() < 10 * positive.min():
        ax.set_ylim(bottom=0)
        return
    if style.measure(panel.y).integer:
        ax.set_yscale("symlog", linthresh=1)
        ax.set_ylim(bottom=0)
    else:
        ax.set_yscale("log")
    style.readable_log(ax)


def _time(ax, panel, rows, page: _Page) -> None:
    _line_panel(ax, panel, rows, page, step=style.measure(panel.y).steps)
    _paper_levels(ax, panel, page)
    if panel.scale == "log":
        _log_y(ax, panel)
    else:
        ax.set_ylim(bottom=0)


def _curve(ax, panel, rows, page: _Page) -> None:
    """``y`` against the column ``x``, a line per variant from zero; ``scale`` is the x axis's."""
    _line_panel(ax, panel, rows, page, step=False)
    ax.set_ylim(bottom=0)
    _x_scale(ax, panel)


def _cdf(ax, panel, rows, page: _Page) -> None:
    """A distribution: ``scale`` is its x axis's."""
    _line_panel(ax, panel, rows, page, step=True)
    ax.set_ylim(0, 102)
    _x_scale(ax, panel)


def _x_scale(ax, panel: Panel) -> None:
    if panel.scale == "log":
        ax.set_xscale("log")
        style.readable_log(ax, "x")


def _bars(ax, panel, rows, page: _Page) -> None:
    variants, looks = page.variants, page.looks
    estimates = {v: _estimate(panel, rows[v]) for v in variants if rows.get(v)}
    estimates = {v: found for v, found in estimates.items() if found[0] is not None}
    m = style.measure(panel.y)
    if panel.relative_to:
        estimates = _relative(panel, rows, estimates)
        m = style.relative(panel.y, panel.relative_to)
        ax.axhline(1.0, color="grey", linewidth=0.8)
    groups = style.identical_groups({v: mean for v, (mean, _) in estimates.items()}, variants)
    heights = [float(m.scale(estimates[g[0]][0])) for g in groups]
    halves = [estimates[g[0]][1] for g in groups]
    errors = None if all(h is None for h in halves) else [float(m.scale(h or 0.0)) for h in halves]
    texts = [_format(h, m) + (f" ± {_format(e, m)}" if errors else "") for h, e in zip(heights, errors or heights)]
    tops = heights
    if panel.whiskers:
        errors = _whisker_lengths(panel, rows, groups, heights, m)
        texts = [_format(h, m) for h in heights]
        tops = [h + above for h, above in zip(heights, errors[1])]
    positions = np.arange(len(groups))
    bars = ax.bar(positions, heights, yerr=errors, capsize=4 if errors else 0,
                  color=[looks[g[0]].colour for g in groups], hatch=[looks[g[0]].hatch for g in groups],
                  edgecolor="black", linewidth=0.5)
    ax.bar_label(bars, labels=texts, fontsize="small", padding=2)
    marked, written = _paper_bars(ax, panel, page, groups, m, max(tops + [0]))
    crowded = len(groups) > 4
    ax.set_xticks(positions, [" = ".join(g) + ("\n(identical)" if len(g) > 1 else "") for g in groups],
                  rotation=30 if crowded else 0, ha="right" if crowded else "center", fontsize="small")
    if panel.relative_to:
        ax.set_ylabel(m.label)
    else:
        style.label_axis(ax, "y", panel.y)
    ax.set_ylim(0, max(tops + marked + [0]) * (1.35 if marked or written else 1.15) or 1)  # room for the marks


def _whisker_lengths(panel: Panel, rows: dict, groups: list[list[str]], heights: list[float], m: style.Measure
                     ) -> list[list[float]]:
    """How far each bar's whiskers reach below and above it: to the means over its seeds of the
    panel's two ``whiskers`` columns (none where a column has no value)."""
    below, above = [], []
    for group, height in zip(groups, heights):
        low, high = (_estimate(replace(panel, y=column), rows[group[0]])[0] for column in panel.whiskers)
        below.append(max(height - float(m.scale(low)), 0.0) if low is not None else 0.0)
        above.append(max(float(m.scale(high)) - height, 0.0) if high is not None else 0.0)
    return [below, above]


PAPER_LABEL = "the paper's value (table below)"
LARGEST_LABEL = "the paper's largest over these runs (table below)"
LARGEST_DASHES = (0, (1, 1.5))  # dotted: told apart from a single run's dashed value on the same panel
OFF_SCALE = 4  # a paper's value beyond this many times our largest is written or named, not drawn
NEAR_ZERO = 50  # on bars, a paper's value below our largest over this would sit on the axis: written
FAR_ABOVE_LABEL = "the paper's, far above"


def _far_above(value: float, ours: float) -> bool:
    """Whether a paper's value would flatten ours (the largest of the panel) if drawn."""
    return ours > 0 and value > OFF_SCALE * ours


def _marks_of(panel: Panel, page: _Page) -> list:
    """The paper's values a panel draws: of its column and reference; on a categories panel,
    those naming a category (``at``), elsewhere the others."""
    return [mark for mark in page.marks if mark.y == panel.y and mark.relative_to == panel.relative_to
            and (mark.at is not None) == (panel.kind == "categories")]


def _paper_bars(ax, panel: Panel, page: _Page, groups: list[list[str]], m: style.Measure, tallest: float
                ) -> tuple[list[float], bool]:
    """The paper's value of a bar's run as a dashed line across the bar (the paper's largest
    over several runs, ``largest_of``, dotted across each of their bars). A value more than
    ``OFF_SCALE`` times our tallest bar is written at the top of its bar, with an arrow, so that
    it does not flatten ours (a test-sized run against the paper's hours); one under our tallest
    over ``NEAR_ZERO``, which a line would draw on the axis, is written low over its bar. Returns
    the drawn values' heights and whether any was written at the top."""
    heights, labelled, written, above = [], set(), [], False
    for position, group in enumerate(groups):
        far, low = [], []
        for mark in _marks_of(panel, page):
            if any(run in group for run in mark.runs):
                height = float(m.scale(mark.paper))
                if _far_above(height, tallest):
                    far.append((mark, height))
                    continue
                if height * NEAR_ZERO < tallest:
                    low.append(f"paper: {_valued(height, m)} (near 0 here)")
                    continue
                heights.append(height)
                label, dashes = (PAPER_LABEL, "--") if len(mark.runs) == 1 else (LARGEST_LABEL, LARGEST_DASHES)
                ax.hlines(height, position - 0.45, position + 0.45, colors="black", linestyles=dashes,
                          linewidth=1.6, zorder=2.5, label=None if label in labelled else label)
                labelled.add(label)
        if far:
            written.append(_off_scale(ax, position, _far_above_text(far, len(group) > 1, m)))
            above = True
        if low:
            written.append(_off_scale(ax, position, "\n".join(low), at=0.12, va="bottom"))
    if heights:
        ax.legend(fontsize="small", framealpha=0.85)
        for text in ax.texts:  # the bars' values stay readable where the paper's line crosses them
            if text not in written:
                text.set_bbox({"facecolor": "white", "edgecolor": "none", "alpha": 0.8, "pad": 1})
    return heights, above


def _far_above_text(far: list, merged: bool, m: style.Measure) -> str:
    """The paper's values far above one bar; on a bar that stands for several identical runs,
    each named by its run."""
    if not merged:
        return "\n".join(f"paper: {_format(height, m)} \u2191" for _, height in far)
    return "\n".join(f"paper, {'/'.join(mark.runs)}: {_format(height, m)} \u2191" for mark, height in far)


def _off_scale(ax, position: float, text: str, at: float = 0.97, va: str = "top"):
    """A paper's value off our scale, written over its bar in a dashed box: at the top (``at``,
    a share of the axis' height) for one far above, low for one near zero."""
    return ax.annotate(text, (position, at), xycoords=ax.get_xaxis_transform(), ha="center", va=va,
                       fontsize="small", zorder=3,
                       bbox={"facecolor": "white", "edgecolor": "black", "linestyle": "--", "pad": 2})


def _paper_levels(ax, panel: Panel, page: _Page) -> None:
    """The paper's value of a run over time as a dotted level in the run's colour; one more than
    ``OFF_SCALE`` times our highest is named in the legend instead."""
    shown = panel.variants or page.variants
    # one level per value, in its first shown run's colour (S2 and SH: the paper's 2,200), named by its runs
    levels: dict[float, tuple[str, str]] = {}
    for mark in _marks_of(panel, page):
        runs = [run for run in mark.runs if run in shown]
        if runs:
            named = runs[0] if len(mark.runs) == 1 else f"largest of {'/'.join(runs)}"
            levels.setdefault(mark.paper, (runs[0], named))
    m = style.measure(panel.y)
    tallest = _highest(ax)
    for value, (run, named) in levels.items():
        level, look = float(m.scale(value)), {"color": page.looks[run].colour, "linestyle": ":", "linewidth": 1.6}
        if _far_above(level, tallest):  # named in the legend only, so that ours keeps the panel
            ax.plot([], [], **look, label=f"{FAR_ABOVE_LABEL}: {named} {_valued(level, m)}")
        else:  # each level names its runs: two runs' levels differ by colour alone otherwise
            ax.axhline(level, **look, label=f"dotted: the paper's, {named} (table below)")
    if levels:
        ax.legend(fontsize="small", framealpha=0.85)


def _valued(value: float, m: style.Measure) -> str:
    """A value with the unit its axis label ends with ("mean delivery delay (s)": "4,400 s")."""
    unit = m.label[m.label.rfind("(") + 1:-1] if m.label.endswith(")") else ""
    return f"{_format(value, m)} {unit}".rstrip()


def _highest(ax) -> float:
    """The highest finite value the panel's lines draw (0 without any)."""
    values = [np.asarray(line.get_ydata(), float) for line in ax.lines]
    return max((float(v[np.isfinite(v)].max()) for v in values if np.isfinite(v).any()), default=0.0)


def _paper_points(ax, panel: Panel, page: _Page, series_looks: dict) -> None:
    """On a sweep, the paper's value of one run as a star at its setting, and the largest of
    several (``largest_of``) as a dotted level across their settings, in the series' colour; one
    more than ``OFF_SCALE`` times our highest is named in the legend instead."""
    m, starred, tallest = style.measure(panel.y), False, _highest(ax)
    for mark in _marks_of(panel, page):
        points = [page.sweep.points[run] for run in mark.runs if run in page.sweep.points]
        if not points:
            continue
        names = list(dict.fromkeys(name for name, _ in points))
        colour = series_looks[names[0]].colour if len(names) == 1 else "black"  # runs of several series
        xs, y = [x for _, x in points], float(m.scale(mark.paper))
        if _far_above(y, tallest):  # named in the legend only, so that ours keeps the panel
            where = " and ".join(f"{x:g}" for x in xs)
            ax.plot([], [], marker="*", markersize=10, color=colour, markeredgecolor="black", linestyle="none",
                    label=f"{FAR_ABOVE_LABEL}: {' and '.join(names)} {_valued(y, m)} at {where}")
        elif len(xs) == 1:
            ax.plot(xs, [y], marker="*", markersize=13, color=colour, markeredgecolor="black", linestyle="none",
                    label=None if starred else PAPER_LABEL, zorder=4)
            starred = True
        else:  # the paper's maximum over the runs: named, as it is no value at any one setting
            ax.hlines(y, min(xs), max(xs), colors=colour, linestyles=":", linewidth=1.8, zorder=4,
                      label=f"the paper's largest, {' and '.join(names)}")


def _relative(panel: Panel, rows: dict, estimates: dict) -> dict:
    """Each variant's value over ``relative_to``'s: per seed, then the interval of the ratios."""
    base_rows = rows.get(panel.relative_to)
    if not base_rows or not estimates.get(panel.relative_to, (None,))[0]:
        return {}
    base = {seed: _value(panel, seed_rows) for seed, seed_rows in _by_seed(base_rows).items()}
    found = {}
    for variant in estimates:
        own = {seed: _value(panel, seed_rows) for seed, seed_rows in _by_seed(rows[variant]).items()}
        found[variant] = spread.ratios({s: v for s, v in own.items() if v is not None},
                                       {s: v for s, v in base.items() if v is not None})
    return found


def _format(value: float, m: style.Measure) -> str:
    if m.integer:
        return f"{value:,.0f}"
    if m.percent:
        return f"{value:.1f}%" if value >= 1 or value == 0 else f"{value:.2g}%"
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.3g}"  # 4,600 rather than 4.6e+03


def _categories(ax, panel, rows, page: _Page) -> None:
    variants, looks = page.variants, page.looks
    categories = _category_order(panel, rows, page.core)
    present = [v for v in variants if rows.get(v)]
    estimates = {v: [_category_estimate(panel, rows[v], c) for c in categories] for v in present}
    heights = {v: np.array([mean for mean, _ in found]) for v, found in estimates.items()}
    groups = style.identical_groups(heights, present)
    width = 0.8 / len(groups)
    scale = style.measure(panel.y).scale
    for i, group in enumerate(groups):
        halves = [half for _, half in estimates[group[0]]]
        errors = None if all(h is None for h in halves) else scale(np.array([h or 0.0 for h in halves]))
        ax.bar(np.arange(len(categories)) + i * width, scale(heights[group[0]]), width, yerr=errors,
               capsize=2 if errors is not None else 0, color=looks[group[0]].colour, hatch=looks[group[0]].hatch,
               edgecolor="black", linewidth=0.5,
               label=style.group_label(group) + ("" if heights[group[0]].any() else ": 0 everywhere"))
    _paper_categories(ax, panel, page, groups, categories, width, heights)
    long = max(len(str(c)) for c in categories) > 6 or len(categories) > 8
    ax.set_xticks(np.arange(len(categories)) + 0.4 - width / 2, categories, rotation=35 if long else 0,
                  ha="right" if long else "center", fontsize="small")
    ax.set_xlabel({"kind": "message kind", "broker": "broker",
                   "hops_moved": "distance moved (overlay hops from origin to target broker)"}.get(panel.x, panel.x))
    style.label_axis(ax, "y", panel.y)
    if panel.scale == "log":
        _log_y(ax, panel)
        if ax.get_yscale() != "linear":
            ax.set_ylim(top=ax.get_ylim()[1] * LOG_HEADROOM)
    ax.legend(fontsize="small", framealpha=0.85)


def _paper_categories(ax, panel: Panel, page: _Page, groups: list[list[str]], categories: list, width: float,
                      heights: dict[str, np.ndarray]) -> None:
    """The paper's value of a run in a category as a dashed line across that run's bar there;
    on a linear axis one more than ``OFF_SCALE`` times our tallest bar is written over the bar
    instead, and on a log axis a value of 0 (the paper's "decreasing to 0") is written low."""
    m = style.measure(panel.y)
    tallest = max((float(m.scale(h.max())) for h in heights.values() if len(h)), default=0.0)
    labelled = False
    for mark in _marks_of(panel, page):
        group = next((i for i, g in enumerate(groups) if mark.run in g), None)
        if group is None or mark.at not in categories:
            continue
        x, height = categories.index(mark.at) + group * width, float(m.scale(mark.paper))
        if panel.scale != "log" and _far_above(height, tallest):
            _off_scale(ax, x, f"paper: {_format(height, m)} \u2191")
        elif panel.scale == "log" and height <= 0:
            _off_scale(ax, x, f"paper: {_format(height, m)}", at=0.05, va="bottom")
        else:
            ax.hlines(height, x - width / 2, x + width / 2, colors="black", linestyles="--", linewidth=1.6, zorder=2.5,
                      label=None if labelled else PAPER_LABEL)
            labelled = True


def category_values(panel: Panel, tables: Path, runs: dict[str, str]) -> dict[str, dict]:
    """Each variant's bar in each category of a categories panel, as drawn (the mean over
    seeds; 0 where a run has none)."""
    rows = _rows(tables, panel, runs)
    categories = _category_order(panel, rows, _core_order(tables))
    return {variant: {c: _category_estimate(panel, found, c)[0] for c in categories} for variant, found in rows.items()}


def _category_estimate(panel: Panel, rows: list[dict], category) -> tuple[float, float | None]:
    """A variant's value in one category (0 where a run has none): its run's, or the mean over
    its seeds and the interval."""
    values = []
    for seed_rows in _by_seed(rows).values():
        found = [r[panel.y] for r in seed_rows if r.get(panel.x) == category and r.get(panel.y) is not None]
        values.append(float(REDUCERS[panel.reduce](found)) if found else 0.0)
    return spread.interval(values)


def _category_order(panel: Panel, rows: dict[str, list[dict]], core: list[str]) -> list:
    """The categories in the variants' rows, sorted; ``order: core``: the core brokers, in
    their order along the core."""
    if panel.order == "core":
        return core
    return sorted({row[panel.x] for variant_rows in rows.values() for row in variant_rows})


def _sweep(ax, panel, rows, page: _Page) -> None:
    variants, sweep = page.variants, page.sweep
    if sweep is None:
        raise ValueError(f"panel {panel.title!r}: a sweep panel needs the figure's sweep: setting")
    series = defaultdict(list)
    for variant in variants:
        value, half = _estimate(panel, rows.get(variant, []))
        if variant in sweep.points and value is not None:
            name, x = sweep.points[variant]
            series[name].append((x, value, np.nan if half is None else half))
    names = list(dict.fromkeys(sweep.points[v][0] for v in variants if v in sweep.points))
    series_looks = style.styles(names)
    lines = {name: tuple(np.array(v, dtype=float) for v in zip(*sorted(series[name]))) for name in names
             if series[name]}
    xs = sorted({x for name in lines for x in lines[name][0]})
    scale = style.measure(panel.y).scale
    for group in style.identical_groups({name: (x, y) for name, (x, y, _) in lines.items()}, names):
        x, y, half = lines[group[0]]
        looks = series_looks[group[0]]
        if len(x) == 1 and len(xs) > 1:  # a series the setting does not apply to (S0 has no soft links)
            ax.axhline(scale(y)[0], color=looks.colour, linestyle="--", linewidth=1.2,
                       label=f"{style.group_label(group)} (one run, at {sweep.label.split(' (')[0]} {x[0]:g})")
            if not np.isnan(half[0]):
                ax.axhspan(scale(y - half)[0], scale(y + half)[0], color=looks.colour, alpha=0.12, linewidth=0)
            continue
        ax.plot(x, scale(y), label=style.group_label(group), **looks.line_kwargs(points=len(x)))
        if not np.isnan(half).all():
            ax.fill_between(x, scale(y - half), scale(y + half), color=looks.colour, alpha=0.2, linewidth=0)
    _paper_points(ax, panel, page, series_looks)
    ax.set_xlabel(sweep.label)
    if _evenly_spaced_in_log(xs):  # settings spread over decades (sampling factors, broker counts)
        ax.set_xscale("log")
    ax.set_xticks(xs, [f"{float(f'{x:.4g}'):g}" for x in xs])  # 750, not 750.002 (a reciprocal's rounding)
    ax.xaxis.set_minor_formatter(NullFormatter())
    style.label_axis(ax, "y", panel.y)
    if panel.scale == "log":
        _log_y(ax, panel)
    else:
        ax.set_ylim(0, ax.get_ylim()[1] * 1.08)
    ax.legend(fontsize="small", framealpha=0.85)


def _evenly_spaced_in_log(xs: list[float]) -> bool:
    """Whether settings spanning a decade or more are spaced more evenly by ratio (1, 4, 16, 63)
    than by difference (1, 25, 50, 75, 100)."""
    if not xs or xs[0] <= 0 or xs[-1] < 10 * xs[0]:
        return False
    if len(xs) < 3:
        return True

    def unevenness(values) -> float:
        steps = np.diff(values)
        return float(np.std(steps) / np.mean(steps))

    return unevenness(np.log(xs)) < unevenness(np.array(xs))


_PLOTTERS = {"time": _time, "cdf": _cdf, "bars": _bars, "categories": _categories, "sweep": _sweep, "curve": _curve}


def _shared_time_range(panels: list[tuple[Panel, dict]]) -> tuple[float, float] | None:
    """From zero to a little past the last activity any time panel shows (``style.last_activity``)."""
    return style.time_range(max((style.last_activity(panel.y, *_series(panel, variant_rows)[:2])
                                 for panel, rows in panels for variant_rows in rows.values()), default=0.0))


def _inset_for_burst(ax, panel: Panel, rows: dict, page: _Page, time_range) -> None:
    """An inset zoomed on the peaks when every variant's values above a tenth of the highest
    fall within a tenth of the time axis (a one-point spike otherwise)."""
    series = {v: _series(panel, rows[v])[:2] for v in page.variants if rows.get(v)}
    if not series:
        return
    x = np.concatenate([vx for vx, _ in series.values()])
    y = np.concatenate([vy for _, vy in series.values()])
    if len(y) < 10 or y.max() <= 0:
        return
    high = np.sort(x[y >= BURST_SHARE * y.max()])  # over every variant: one burst, or several apart
    width = high[-1] - high[0]
    span = time_range[1] - time_range[0]
    if width >= BURST_SHARE * span:
        return
    pad = max(width, span / 50)
    start, end = max(high[0] - pad, time_range[0]), min(high[-1] + 2 * pad, time_range[1])
    inset = ax.inset_axes([0.56, 0.42, 0.41, 0.5])
    for v, (vx, vy) in series.items():
        keep = (vx >= start) & (vx <= end)
        inset.plot(vx[keep], vy[keep], **page.looks[v].line_kwargs())
    inset.set_xlim(start, end)
    inset.tick_params(labelsize="x-small")
    inset.set_title("zoom on the burst", fontsize="x-small")
    if ax.get_yscale() != "linear":
        inset.set_yscale(ax.get_yscale(), **({"linthresh": 1} if ax.get_yscale() == "symlog" else {}))
        style.readable_log(inset)
    if ax.get_ylim()[0] == 0:
        inset.set_ylim(bottom=0)
    ax.indicate_inset_zoom(inset, edgecolor="grey")
