"""The report's figures, drawn with matplotlib from the small collected metric tables.

Each function takes rows (dicts) of one metric table, the run labels in the order given on the
command line (which fixes each run's colour in every figure) and the output path, and returns
the path written, or None when the runs hold nothing to draw.
"""
from __future__ import annotations

import textwrap
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)
import numpy as np  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from analysis import style  # noqa: E402


def _colours(labels: list[str]) -> dict[str, tuple]:
    return {label: look.colour for label, look in style.styles(labels).items()}


def _series(rows: list[dict], x: str, y: str, **where) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per run, the (x, y) points of the rows matching ``where``, sorted by x."""
    points = defaultdict(list)
    for row in rows:
        if all(row[k] == v for k, v in where.items()) and row[y] is not None:
            points[row["run"]].append((row[x], row[y]))
    return {run: tuple(np.array(v) for v in zip(*sorted(p))) for run, p in points.items()}


# the time tables the report plots over simulated time: table -> (its measures, what splits a
# run's rows into series besides the run)
TIME_TABLES = {
    "delay_over_time": (("mean_s",), ()),
    "queue_at_arrivals": (("max_queue",), ("broker",)),
    "queue_over_time": (("max_queue",), ()),
    "table_size_over_time": (("mean_prt", "preserved"), ("role",)),
    "links_over_time": (("soft_links", "mean_uplink"), ()),
    "throughput": (("deliveries_per_s", "pub_copies_per_s"), ()),
    "completeness_over_time": (("delivered_fraction",), ()),
}


def time_range(collected: dict) -> tuple[float, float] | None:
    """The time axis every time plot of a report shares: from zero to a little past the last
    activity any of them shows (``style.last_activity``: a table that stopped changing, a rate
    that fell to zero)."""
    last = 0.0
    for table, (columns, keys) in TIME_TABLES.items():
        series = defaultdict(list)
        for row in collected.get(table, []):
            series[(row["run"], *(row[k] for k in keys))].append(row)
        for rows in series.values():
            rows.sort(key=lambda row: row["t_s"])
            for column in columns:
                last = max(last, style.last_activity(column, [r["t_s"] for r in rows], [r[column] for r in rows]))
    return style.time_range(last)


def _time_axis(axes, span) -> None:
    """Every axis of ``axes`` over the report's shared time ``span`` (None: each its data's)."""
    if span is not None:
        for ax in np.ravel(axes):
            ax.set_xlim(*span)


def _in_unit(series: dict, column: str) -> dict:
    """``series`` of ``column`` as its measure shows it (a fraction in percent)."""
    return {run: (x, style.measure(column).scale(y)) for run, (x, y) in series.items()}


def _save(fig, path: Path) -> Path:
    for ax in fig.axes:
        style.separate_thousands(ax)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _queue_axis(ax) -> None:
    """A queue axis from zero: linear with whole messages while queues stay short, else
    symmetric-log labelled in plain numbers."""
    top = max(ax.get_ylim()[1], 1)
    if top > 50:
        ax.set_yscale("symlog", linthresh=1)
        style.readable_log(ax)
    else:
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylim(0, top)


def _roles(rows: list[dict]) -> list[str]:
    """The roles in ``rows``, ``all`` first; a role that every broker has (its rows repeat
    ``all``'s) is left out."""
    roles = sorted({r["role"] for r in rows}, key=lambda role: (role != "all", role))
    return roles[:1] if len(roles) == 2 and roles[0] == "all" else roles


def _grouped_bars(ax, categories: list[str], labels: list[str], height) -> None:
    """One bar per run in each category, side by side; ``height(label, category)``. Runs whose
    bars are all equal are drawn once and named together."""
    heights = {label: np.array([height(label, c) for c in categories], dtype=float) for label in labels}
    groups = style.identical_groups(heights, labels)
    width = 0.8 / len(groups)
    looks = style.styles(labels)
    for i, group in enumerate(groups):
        ax.bar(np.arange(len(categories)) + i * width, heights[group[0]], width, color=looks[group[0]].colour,
               hatch=looks[group[0]].hatch, label=style.group_label(group))
    long = len(categories) > 6 or max(len(str(c)) for c in categories) > 8
    ax.set_xticks(np.arange(len(categories)) + 0.4 - width / 2, categories, rotation=35 if long else 0,
                  ha="right" if long else "center")


_LEGEND_INSIDE = 8, 40  # at most this many runs, with names at most this long, fit inside the axes


def _legend(ax, widen: bool = True) -> None:
    """The runs' legend: inside the axes for a few short names, beside them for many runs (a
    sweep's) or long names (identical runs named together); ``widen`` as ``_legend_beside``."""
    handles, names = ax.get_legend_handles_labels()
    most, longest = _LEGEND_INSIDE
    if len(names) <= most and all(len(name) <= longest for name in names):
        ax.legend(fontsize="small")
    else:
        _legend_beside(ax, widen)


def _legend_beside(ax, widen: bool = True) -> None:
    """The runs' legend beside the axes, long names wrapped; ``widen``: the figure grows to
    hold it (once per figure: the panels of one column share the room)."""
    handles, names = ax.get_legend_handles_labels()
    longest = _LEGEND_INSIDE[1]
    wrapped = [textwrap.fill(name, longest, subsequent_indent="  ") for name in names]
    lines = sum(name.count("\n") + 1 for name in wrapped)
    fig = ax.figure
    if widen:
        fig.set_size_inches(fig.get_figwidth() + 4, max(fig.get_figheight(), 0.8 + 0.2 * lines))  # every line
    ax.legend(handles, wrapped, fontsize="x-small", loc="upper left", bbox_to_anchor=(1.01, 1), borderaxespad=0)


def _lines(ax, labels, series) -> list[list[str]]:
    """One line per run in its colour and line style; runs whose series are identical drawn
    once and named together. Returns those groups (none: nothing drawn)."""
    looks = style.styles(labels)
    groups = style.identical_groups(series, labels)
    for group in groups:
        ax.plot(*series[group[0]], color=looks[group[0]].colour, linestyle=looks[group[0]].line,
                label=style.group_label(group))
    return groups


def _panel_legends(axes, groups: list[list[list[str]]]) -> None:
    """The legend on the first of panels drawn by ``_lines`` (``groups``: each one's), and
    again on each panel whose runs came out identical differently (a run hidden under another's
    line there is named)."""
    _legend(axes[0])
    for ax, own in zip(axes[1:], groups[1:]):
        if own and own != groups[0]:
            _legend(ax, widen=False)
    _fit_stacked_legends(axes)


def _fit_stacked_legends(axes) -> None:
    """Panels stacked in one column, more than one with a legend beside it: the figure grows
    tall enough that each legend fits beside its own panel (a long first legend would
    otherwise run into the next one's, and the last run off the figure)."""
    legends = [ax.get_legend() for ax in axes if ax.get_legend() is not None]
    if len(legends) < 2 or len({round(ax.get_position().x0, 3) for ax in axes}) > 1:
        return
    lines = max(sum(text.get_text().count("\n") + 1 for text in legend.get_texts()) for legend in legends)
    fig = axes[0].figure
    fig.set_size_inches(fig.get_figwidth(), max(fig.get_figheight(), len(axes) * (0.2 * lines + 0.6)))


def _steps(ax, labels, series) -> None:
    """A distribution per run as steps, in its colour and line style; identical runs drawn
    once and named together."""
    looks = style.styles(labels)
    for group in style.identical_groups(series, labels):
        ax.step(*series[group[0]], where="post", color=looks[group[0]].colour, linestyle=looks[group[0]].line,
                label=style.group_label(group))


def _faint_lines(ax, labels, series) -> None:
    """A second measure of each run beside its line from ``_lines``: thin and faint, in the
    run's colour and line style."""
    looks = style.styles(labels)
    for label in labels:
        if label in series:
            ax.plot(*series[label], color=looks[label].colour, linestyle=looks[label].line, linewidth=0.8, alpha=0.45)


def delay_over_time(rows, labels, path: Path, span=None):
    fig, ax = plt.subplots(figsize=(9, 4.5))
    drawn = _lines(ax, labels, _series(rows, "t_s", "mean_s"))
    _faint_lines(ax, labels, _series(rows, "t_s", "max_s"))
    if not drawn:
        plt.close(fig)
        return None
    ax.set(title="Publication delivery delay (thick: mean, thin and faint: largest)", xlabel="simulated time (s)",
           ylabel="delay (s)", yscale="log")
    style.readable_log(ax)
    _time_axis(ax, span)
    _legend(ax)
    return _save(fig, path)


def delay_cdf(rows, labels, path: Path):
    fig, ax = plt.subplots(figsize=(7, 4.5))
    series = _series(rows, "delay_s", "cdf")
    _steps(ax, labels, series)
    if not series:
        plt.close(fig)
        return None
    ax.set(title="Distribution of delivery delays", xlabel="delay (s)", ylabel="fraction of deliveries",
           xscale="log", ylim=(0, 1.02))
    style.readable_log(ax, "x")
    _legend(ax)
    return _save(fig, path)


def queues_core(rows, labels, core: list[str], path: Path, span=None):
    """One panel per core broker, in order along the core, runs overlaid."""
    if not core:
        return None
    fig, axes = plt.subplots(len(core), 1, figsize=(9, 2.2 * len(core)), sharex=True, squeeze=False)
    for ax, broker in zip(axes[:, 0], core):
        _lines(ax, labels, _series(rows, "t_s", "max_queue", broker=broker))
        ax.set(ylabel="queue (msgs)", title=f"input queue of {broker} (longest found by an arrival per bucket)")
        _queue_axis(ax)
        ax.legend(fontsize="small")  # per panel: which runs came out identical differs by broker
    axes[-1, 0].set_xlabel("simulated time (s)")
    _time_axis(axes, span)
    return _save(fig, path)


def _time_panels(rows, labels, columns: list[str], shape: tuple[int, int], figsize, span, **shared):
    """One panel per column over simulated time ``span``, runs overlaid; None when there is nothing."""
    fig, axes = plt.subplots(*shape, figsize=figsize, **shared)
    drawn = [_lines(ax, labels, _series(rows, "t_s", column)) for ax, column in zip(axes, columns)]
    if not any(drawn):
        plt.close(fig)
        return None, None
    _time_axis(axes, span)
    _panel_legends(axes, drawn)
    return fig, axes


def queues_overall(rows, labels, path: Path, span=None):
    """Mean and largest input queue over time; not drawn when no broker had a queue at any sample."""
    if not any(r["max_queue"] for r in rows):
        return None
    fig, axes = _time_panels(rows, labels, ["mean_queue", "max_queue"], (1, 2), (12, 4.5), span, sharey=True)
    if fig is None:
        return None
    # sampled: a burst shorter than the sampling interval shows only in the queues arrivals found
    axes[0].set(title="Mean input queue over all brokers, at each sample", ylabel="queue (msgs)")
    axes[1].set(title="Largest input queue of any broker, at each sample")
    for ax in axes:
        ax.set(xlabel="simulated time (s)")
        _queue_axis(ax)
    return _save(fig, path)


def table_sizes(rows, labels, path: Path, span=None):
    roles = _roles(rows)
    if not roles:
        return None
    height = max(2.4 * len(roles), 4.5)  # one role alone: room for the legend beside its lines
    fig, axes = plt.subplots(len(roles), 1, figsize=(9, height), sharex=True, squeeze=False)
    drawn = []
    for ax, role in zip(axes[:, 0], roles):
        drawn.append(_lines(ax, labels, _series(rows, "t_s", "mean_prt", role=role)))
        ax.set(title=f"routing-table (PRT) size, {'all brokers' if role == 'all' else role + ' brokers'}",
               ylabel="mean entries")
    _panel_legends(axes[:, 0], drawn)
    axes[-1, 0].set_xlabel("simulated time (s)")
    _time_axis(axes, span)
    return _save(fig, path)


def preserved_entries(rows, labels, path: Path, span=None):
    """Pruning's preserved routing entries over all brokers (runs without pruning have none)."""
    series = _series([r for r in rows if r["role"] == "all"], "t_s", "preserved")
    if not any(y.any() for _, y in series.values()):
        return None
    fig, ax = plt.subplots(figsize=(9, 4))
    _lines(ax, labels, series)
    ax.set(title="Preserved subscriptions (kept as aggregates after unsubscription), all brokers",
           xlabel="simulated time (s)", ylabel="entries")
    _time_axis(ax, span)
    _legend(ax)
    return _save(fig, path)


def links(rows, labels, path: Path, span=None):
    """Soft links held over all brokers, and uplink utilisation (mean and largest broker), per
    sample, each panel only where some run has it; None when no run has soft links or uplink
    limits."""
    held = _series(rows, "t_s", "soft_links")
    mean, largest = (_in_unit(_series(rows, "t_s", column), column) for column in ("mean_uplink", "max_uplink"))
    shown = [kind for kind, series in (("held", held), ("uplink", mean)) if series]
    if not shown:
        return None
    fig, axes = plt.subplots(len(shown), 1, figsize=(9, 4 if len(shown) == 1 else 6), sharex=True, squeeze=False)
    for ax, kind in zip(axes[:, 0], shown):
        if kind == "held":
            _lines(ax, labels, held)
            ax.set(title="Soft links held, all brokers", ylabel="links")
        else:
            _lines(ax, labels, mean)
            _faint_lines(ax, labels, largest)
            ax.set(title="Uplink utilisation: mean (thick) and busiest broker (thin, faint)",
                   ylabel="share of each sample sending (%)", ylim=(0, 105))
        _legend_beside(ax, widen=ax is axes[0, 0])  # lines start high on the left: a legend inside covers them
    _fit_stacked_legends(axes[:, 0])
    axes[-1, 0].set_xlabel("simulated time (s)")
    _time_axis(axes, span)
    return _save(fig, path)


def triggered_along_core(rows, labels, core: list[str], path: Path):
    """Triggered subscriptions arriving at each core broker, in order along the core."""
    if not core:
        return None
    triggered = defaultdict(int)
    for r in rows:
        if r["kind"] in ("sub", "sub_batch"):
            triggered[r["run"], r["broker"]] += r["triggered"] or 0
    fig, ax = plt.subplots(figsize=(9, 4.5))
    _grouped_bars(ax, core, labels, lambda label, broker: triggered[label, broker])
    ax.set(title="Triggered subscriptions received, along the core", xlabel="core broker",
           ylabel="subscriptions")
    _legend(ax)
    return _save(fig, path)


def messages_by_kind(rows, labels, path: Path):
    kinds = sorted({r["kind"] for r in rows})
    if not kinds:
        return None
    processed = defaultdict(int)
    for r in rows:
        processed[r["run"], r["kind"]] += r["processed"]
    fig, ax = plt.subplots(figsize=(9, 4.5))
    _grouped_bars(ax, kinds, labels, lambda label, kind: processed[label, kind])
    ax.set(title="Messages processed by kind (all brokers)", xlabel="message kind", ylabel="messages",
           yscale="log")
    _legend(ax)
    return _save(fig, path)


def utilisation(rows, labels, path: Path):
    series = {}
    for label in labels:
        values = sorted((100 * r["utilisation"] for r in rows if r["run"] == label), reverse=True)
        if values:
            series[label] = (np.arange(1, len(values) + 1), np.array(values))
    fig, ax = plt.subplots(figsize=(9, 4.5))
    _lines(ax, labels, series)
    ax.set(title="Broker utilisation (busy time / simulated time), brokers ranked",
           xlabel="broker rank", ylabel="input utilisation (%)")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # ranks are whole brokers
    ax.set_ylim(bottom=0)
    _legend(ax)
    return _save(fig, path)


def hop_cdf(rows, labels, path: Path):
    series = _series(rows, "hops", "cdf")
    if not series:
        return None
    fig, ax = plt.subplots(figsize=(7, 4.5))
    _steps(ax, labels, series)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set(title="Publication hop counts", xlabel="hops from publisher's broker", ylabel="fraction of deliveries",
           ylim=(0, 1.02))
    _legend(ax)
    return _save(fig, path)


def throughput(rows, labels, path: Path, span=None):
    fig, axes = _time_panels(rows, labels, ["deliveries_per_s", "pub_copies_per_s"], (2, 1), (9, 6), span,
                             sharex=True)
    if fig is None:
        return None
    axes[0].set(title="Throughput: deliveries to clients", ylabel="deliveries / s")
    axes[1].set(title="Network traffic: publication copies between brokers", ylabel="copies / s",
                xlabel="simulated time (s)")
    return _save(fig, path)


def forwarding(rows, labels, path: Path):
    """False-positive and pure-forwarder fractions per role."""
    roles = _roles(rows)
    if not roles:
        return None
    value = {(r["run"], r["role"]): r for r in rows}
    panels = [(column, title) for column, title in (
        ("false_positive_fraction", "False-positive publication copies"),
        ("pure_forward_fraction", "Pure-forwarder publication copies")) if any(r[column] for r in rows)]
    if not panels:
        return None
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4.5), squeeze=False)
    for ax, (column, title) in zip(axes[0], panels):
        _grouped_bars(ax, roles, labels,
                      lambda label, role: 100 * ((value.get((label, role)) or {}).get(column) or 0))
        ax.set(title=title + ("" if len(panels) == 2 else " (no false positives in any run)"),
               xlabel="broker role", ylabel="share of copies (%)")
        _legend(ax, widen=ax is axes[0, 0])  # each its own: runs identical in one panel may differ in the other
    return _save(fig, path)


def relocation(rows, summary, labels, path: Path):
    """The publisher-relocation paper's comparison: broker message rate, input utilisation,
    delivery delay and the relocation protocols' control overhead, one bar per run (drawn when
    some run relocated a publisher or traced)."""
    if not any(r["migrations"] or r["control_messages"] for r in rows):
        return None
    colours = _colours(labels)
    by_run = {r["run"]: r for r in rows}
    delays = {r["run"]: r.get("mean_s") for r in summary}
    panels = [("mean_msg_rate", by_run), ("mean_utilisation", by_run),
              ("mean_s", {run: {"mean_s": d} for run, d in delays.items()}), ("control_share", by_run)]
    many = len(labels) > 8  # a sweep's runs: names upright under their bars, on a taller figure
    fig, axes = plt.subplots(1, 4, figsize=(max(14, 0.9 * len(labels)), 5.5 if many else 4))
    for ax, (column, source) in zip(axes, panels):
        present = [label for label in labels if (source.get(label) or {}).get(column) is not None]
        measure = style.measure(column)
        ax.bar(range(len(present)), measure.scale([source[label][column] for label in present]),
               color=[colours[label] for label in present])
        ax.set_xticks(range(len(present)), present, rotation=90 if many else 30, ha="center" if many else "right",
                      fontsize="x-small" if many else "small")
        ax.set_title(measure.label, fontsize="small")
    return _save(fig, path)


def multitree(rows, labels, path: Path):
    """The multi-tree paper's comparison: publication copies between brokers per publication
    once a plan is active, one bar per run; beside it the cost against the sampling factor per
    algorithm when the runs vary it, else the trees of each run's last plan."""
    if not rows:
        return None
    colours = _colours(labels)
    by_run = {r["run"]: r for r in rows}
    present = [label for label in labels if label in by_run]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    cost = [by_run[label]["planned_copies_per_publication"] or 0 for label in present]
    axes[0].bar(range(len(present)), cost, color=[colours[label] for label in present])
    axes[0].set_xticks(range(len(present)), present, rotation=30, ha="right", fontsize="small")
    axes[0].set(title="Communication cost once a plan is active", ylabel="copies per publication")
    if len({r["sample"] for r in rows}) > 1:
        for algorithm in sorted({r["algorithm"] for r in rows}):
            points = sorted((r["sample"], r["planned_copies_per_publication"] or 0)
                            for r in rows if r["algorithm"] == algorithm)
            axes[1].plot(*zip(*points), marker="o", label=algorithm)
        axes[1].set(title="Cost against sampling factor", xlabel="sampling factor", ylabel="copies per publication")
        samples = [r["sample"] for r in rows]
        if max(samples) >= 10 * min(samples):  # factors a decade or more apart (the paper's 0.001-0.5)
            axes[1].set_xscale("log")
            style.readable_log(axes[1], "x")
        axes[1].legend(fontsize="small")
    else:
        axes[1].bar(range(len(present)), [by_run[label]["clusters"] or 0 for label in present],
                    color=[colours[label] for label in present])
        axes[1].set_xticks(range(len(present)), present, rotation=30, ha="right", fontsize="small")
        axes[1].set(title="Trees of the last plan", ylabel="trees (cluster 0 included)")
    return _save(fig, path)


def faults(completeness, faults_rows, drop_rows, labels, path: Path, span=None):
    """Runs with faults: the share of the oracle's deliveries made over time, fault windows
    shaded, and the messages dropped by cause (drawn when some run had faults)."""
    if not completeness:
        return None
    colours = _colours(labels)
    fig, axes = plt.subplots(2, 1, figsize=(10, 7), gridspec_kw={"height_ratios": [3, 2]})
    _lines(axes[0], labels, _series(completeness, "t_s", "delivered_fraction"))
    for row in faults_rows:
        end = row["end_s"] if row["end_s"] is not None else axes[0].get_xlim()[1]
        axes[0].axvspan(row["start_s"], end, color=colours.get(row["run"], "grey"), alpha=0.12)
    axes[0].set(title="Deliveries made of those the oracle expects (faults shaded)", xlabel="publication time (s)",
                ylabel="delivered fraction", ylim=(0, 1.05))
    _time_axis(axes[0], span)
    _legend(axes[0])
    causes = sorted({r["cause"] for r in drop_rows if r["cause"]})
    totals = defaultdict(int)
    for r in drop_rows:
        totals[(r["run"], r["cause"])] += r["dropped"]
    if causes:
        _grouped_bars(axes[1], causes, labels, lambda label, cause: totals[(label, cause)])
    axes[1].set(title="Messages dropped by cause", ylabel="messages")
    return _save(fig, path)
