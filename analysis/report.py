"""``report.md`` and ``summary.csv``: one row per run, the per-role forwarding table and the figures."""
from __future__ import annotations

import csv
from pathlib import Path

from analysis import spread

# summary columns shown in the report: (column, heading, format)
SUMMARY_COLUMNS = [
    ("run", "run", "{}"),
    ("brokers", "brokers", "{}"),
    ("sim_end_s", "simulated (s)", "{:.0f}"),
    ("publications", "publications", "{:,}"),
    ("deliveries", "deliveries", "{:,}"),
    ("deliveries_per_s", "deliveries/s", "{:,.0f}"),
    ("delivered_per_s", "delivered in window/s", "{:,.0f}"),
    ("owed_per_s", "owed in window/s", "{:,.0f}"),
    ("delivered_share", "delivered / owed", "{:.1%}"),
    ("mean_hops", "mean hops", "{:.2f}"),
    ("mean_s", "mean delay (s)", "{:.3g}"),
    ("p90_s", "p90 delay (s)", "{:.3g}"),
    ("max_s", "max delay (s)", "{:.3g}"),
    ("mean_counting_in_flight_s", "mean delay counting the backlog (s)", "{:.3g}"),
    ("probe_mean_s", "probe delay (s)", "{:.3g}"),
    ("probe_p10_s", "probe p10 (s)", "{:.3g}"),
    ("probe_p90_s", "probe p90 (s)", "{:.3g}"),
    ("peak_queue", "peak queue", "{:,}"),
    ("peak_broker", "at broker", "{}"),
    ("peak_mean_queue", "peak mean queue", "{:,.0f}"),
    ("peak_core_mean_queue", "peak core mean queue", "{:,.0f}"),
    ("t_peak_s", "at (s)", "{:.0f}"),
    ("drain_s", "drain (s)", "{:.0f}"),
    ("triggered_subs", "triggered subs", "{:,}"),
    ("final_mean_prt", "final mean PRT", "{:.1f}"),
    ("final_core_prt", "final core PRT", "{:.1f}"),
    ("messages_processed", "messages", "{:,}"),
    ("dropped", "dropped", "{:,}"),
    ("pub_copies", "publication messages", "{:,}"),
    ("pub_copies_per_s", "publication messages/s", "{:,.0f}"),
    ("false_positive_fraction", "false positives", "{:.2%}"),
    ("pure_forward", "pure-forwarded copies", "{:,}"),
    ("pure_forward_fraction", "pure forwarding", "{:.2%}"),
    ("yield", "yield", "{:.2%}"),
    ("final_soft_links", "soft links at the end", "{:,}"),
    ("mean_covering_set", "covering set", "{:,.1f}"),
    ("mean_wst_anchors", "WST anchors", "{:.1f}"),
    ("predicate_evaluations_per_match", "predicates per publication handled", "{:,.1f}"),
    ("predicate_evaluations_per_publication", "predicates per publication, every broker", "{:,.1f}"),
    ("mean_msg_rate", "msgs/s per broker", "{:.1f}"),
    ("mean_utilisation", "mean utilisation", "{:.2%}"),
    ("migrations", "migrations", "{:,}"),
    ("control_share", "relocation control", "{:.2%}"),
    ("mean_wait_s", "migration wait (s)", "{:.3g}"),
    ("mean_selection_s", "selection (s)", "{:.3g}"),
    ("mean_trace_state", "trace state/broker", "{:,.1f}"),
    ("peak_trace_state", "peak trace state", "{:,}"),
    ("multitree", "multi-tree", "{}"),
    ("planned_copies_per_publication", "copies/publication (planned)", "{:.2f}"),
    ("clusters", "trees", "{:,}"),
]
ROLE_COLUMNS = [
    ("run", "run", "{}"), ("role", "role", "{}"), ("pub_copies", "copies", "{:,}"),
    ("false_positives", "false positives", "{:,}"), ("false_positive_fraction", "fraction", "{:.2%}"),
    ("pure_forward", "pure forwarding", "{:,}"), ("pure_forward_fraction", "fraction", "{:.2%}"),
]
FAULT_COLUMNS = [
    ("run", "run", "{}"), ("fault", "fault", "{}"), ("kind", "kind", "{}"), ("target", "on", "{}"),
    ("start_s", "start (s)", "{:g}"), ("end_s", "end (s)", "{:g}"),
    ("publications_dropped", "publications dropped", "{:,}"), ("deliveries_lost", "deliveries lost", "{:,}"),
    ("recovery_s", "recovered after (s)", "{:.3f}"),
]


def _cell(value, fmt: str) -> str:
    if value is None:
        return "-"
    try:
        return escaped(fmt.format(value))
    except (TypeError, ValueError):
        return escaped(str(value))


def escaped(text: str) -> str:
    """``text`` fit for one cell of a Markdown table."""
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_table(rows: list[dict], columns) -> str:
    """Rows as a Markdown table; a value with an interval (``<column>_ci`` in the row) reads
    "mean ± half-width"."""
    lines = ["| " + " | ".join(heading for _, heading, _ in columns) + " |",
             "|" + "|".join("---" for _ in columns) + "|"]
    lines += ["| " + " | ".join(_with_interval(row, c, fmt) for c, _, fmt in columns) + " |" for row in rows]
    return "\n".join(lines)


def _with_interval(row: dict, column: str, fmt: str) -> str:
    value, half = row.get(column), row.get(f"{column}_ci")
    if half is None or value is None:
        return _cell(value, fmt)
    fmt = _MEAN_FORMATS.get(fmt, fmt)
    return f"{_cell(value, fmt)} ± {_cell(half, fmt)}"


_MEAN_FORMATS = {"{:,}": "{:,.1f}"}  # a mean of counts, and its interval, has a decimal


def seeds_table(rows: list[dict], columns) -> str | None:
    """The variants run with several seeds (``analysis.spread``): per column the mean and its
    95% confidence interval; None when no variant has several seeds."""
    numeric = [c for c in columns if c[0] not in ("run", "peak_broker", "multitree")]
    summarised = spread.summarised(rows, [c for c, _, _ in numeric])
    if not summarised:
        return None
    for row in summarised:
        row["seeds"] = f"{len(row['seeds'])} ({', '.join(map(str, row['seeds']))})"
    measured = [c for c in numeric if any(row.get(c[0]) is not None for row in summarised)]
    return markdown_table(summarised, [("run", "variant", "{}"), ("seeds", "seeds", "{}"), *measured])


def write_report(out: Path, runs, collected: dict, figures: dict[str, Path], bucket_us: int) -> None:
    order = {r.label: i for i, r in enumerate(runs)}
    summary = sorted(collected["summary"], key=lambda row: order[row["run"]])
    with open(out / "summary.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(summary[0]))
        writer.writeheader()
        writer.writerows(summary)
    roles = sorted(collected["forwarding_by_role"], key=lambda r: (order[r["run"]], r["role"] != "all", r["role"]))
    sections = [
        "# Run analysis", "",
        "Runs: " + ", ".join(f"`{r.label}` ({r.path})" for r in runs) + ".",
        f"Time buckets of {bucket_us / 1e6:g} s. Tables are in `tables/` (Parquet); "
        "definitions in `analysis/metrics.py`." + _window_line(runs), "",
        "## Summary", "", markdown_table(summary, SUMMARY_COLUMNS), "",
    ]
    over_seeds = seeds_table(summary, SUMMARY_COLUMNS)
    if over_seeds:
        sections += ["## Summary over seeds", "", f"Each value: the {spread.DESCRIBED}.", "", over_seeds, ""]
    sections += [
        "## Forwarding by broker role", "", markdown_table(roles, ROLE_COLUMNS), "",
    ]
    if collected["faults"]:
        faults = sorted(collected["faults"], key=lambda r: (order[r["run"]], r["fault"]))
        sections += ["## Faults", "", "Deliveries lost count the oracle's subscribers not reached by the "
                     "publications from a fault's start until it recovered; recovered after: from its end "
                     "until the last delivery of the first publication after it that reached every subscriber.",
                     "", markdown_table(faults, FAULT_COLUMNS), ""]
    for title, path in figures.items():
        sections += [f"## {title}", "", f"![{title}]({path.name})", ""]
    (out / "report.md").write_text("\n".join(sections))


def _window_line(runs) -> str:
    """What the metrics measure when it is not every run's whole simulated time."""
    if all(run.window.whole for run in runs):
        return ""
    spans = ", ".join(f"`{run.label}` {start / 1e6:g}-{end / 1e6:g} s" for run in runs
                      for start, end in [run.measured_us])
    return (f" **Measured over a window of simulated time** (rows placed by arrival, publication or sample time): "
            f"{spans}.")
