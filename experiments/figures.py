"""``pubsub-emu figure``: the runs and the report of one figure of the seed papers.

A figure is a small YAML file in ``experiments/figures/``:

    title: what the figure shows
    paper: the paper's title
    runs:                          # label -> a scenario of experiments/scenarios and overrides
      active: {scenario: unsub_burst_active.yaml}
      selective: {scenario: unsub_burst_selective.yaml, set: [...], small: [protocol.pruning.window=20s]}
    small: [duration=300s, ...]    # --small: overrides that make every run test-sized (a run's
                                   # own ``small`` ones come after these)
    plots: [Delivery delay over time, ...]   # the report's figures this one shows

``run_figure`` runs the variants as a sweep (concurrent Ray tasks, ``experiments/sweep.py``)
into ``OUT/runs/<label>`` (named ``<figure>-<label>``), analyses them side by side into
``OUT/report`` and writes ``OUT/figure.md``: the summary rows and the chosen plots.
"""
from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import yaml

from protocols.errors import InputError

FIGURE_DIR = Path(__file__).resolve().parent / "figures"
SCENARIO_DIR = Path(__file__).resolve().parent / "scenarios"
# the summary columns a figure's page shows (formats from the analysis report)
SUMMARY = ("run", "deliveries", "mean_hops", "mean_s", "p90_s", "max_s", "peak_queue", "drain_s", "triggered_subs",
           "final_mean_prt", "messages_processed", "pure_forward_fraction", "yield", "final_soft_links",
           "mean_msg_rate", "mean_utilisation", "migrations", "control_share", "mean_wait_s", "mean_selection_s",
           "multitree", "planned_copies_per_publication", "clusters")


@dataclass(frozen=True)
class Figure:
    name: str
    title: str
    paper: str
    runs: dict[str, tuple[Path, list[str], list[str]]]  # label -> (scenario, overrides, --small overrides)
    small: list[str]
    plots: list[str]

    def overrides(self, label: str, small: bool) -> list[str]:
        """A run's overrides: its own, then --small's (the figure's, then the run's), then its name."""
        _, own, own_small = self.runs[label]
        return [*own, *(self.small + own_small if small else []), f"name={self.name}-{label}"]


def names() -> list[str]:
    return sorted(p.stem for p in FIGURE_DIR.glob("*.yaml"))


def load(name: str) -> Figure:
    path = FIGURE_DIR / f"{name}.yaml"
    if not path.is_file():
        raise InputError(f"figure {name!r}: no such figure (known: {', '.join(names())})")
    data = yaml.safe_load(path.read_text())
    if not isinstance(data, dict) or set(data) - {"title", "paper", "runs", "small", "plots"}:
        raise InputError(f"{path}: expected a mapping of title, paper, runs, small and plots")
    runs = {}
    for label, entry in (data.get("runs") or {}).items():
        if not isinstance(entry, dict) or "scenario" not in entry or set(entry) - {"scenario", "set", "small"}:
            raise InputError(f"{path}: runs.{label}: expected {{scenario: FILE, set: [KEY=VALUE, ...], "
                             "small: [...]}}")
        scenario = SCENARIO_DIR / entry["scenario"]
        if not scenario.is_file():
            raise InputError(f"{path}: runs.{label}.scenario: {scenario} not found")
        runs[str(label)] = (scenario, [str(s) for s in entry.get("set") or []],
                            [str(s) for s in entry.get("small") or []])
    if not runs:
        raise InputError(f"{path}: runs: a figure needs at least one run")
    return Figure(name, str(data.get("title", name)), str(data.get("paper", "")), runs,
                  [str(s) for s in data.get("small") or []], [str(p) for p in data.get("plots") or []])


def check(figure: Figure, small: bool) -> None:
    """Every run's scenario resolves (InputError otherwise), before anything runs."""
    from experiments.scenario import resolve

    for label, (scenario, *_) in figure.runs.items():
        resolve(scenario, figure.overrides(label, small))


def run_figure(figure: Figure, out: Path, small: bool, analyse, max_parallel: int, address: str | None = None,
               report=print) -> Path:
    """Run every variant (``max_parallel`` at once), analyse them with ``analyse(run_dirs,
    report_dir) -> exit status`` and write ``OUT/figure.md``; returns its path."""
    from experiments.sweep import Point, run_sweep

    check(figure, small)
    points = [Point(label, scenario, figure.overrides(label, small)) for label, (scenario, *_) in figure.runs.items()]
    record = run_sweep(points, out / "runs", max_parallel, address, report)
    failed = [p["name"] for p in record["points"] if p["status"] != "complete"]
    if failed:
        raise RuntimeError(f"runs failed: {', '.join(failed)} (see {out / 'runs' / 'sweep.json'})")
    if analyse([out / "runs" / p.name for p in points], out / "report") != 0:
        raise RuntimeError(f"the analysis of {out / 'runs'} failed")
    return _write_page(figure, out, out / "report", small)


def _write_page(figure: Figure, out: Path, report: Path, small: bool) -> Path:
    from analysis.report import SUMMARY_COLUMNS, markdown_table

    with open(report / "summary.csv") as f:
        rows = [{k: _number(v) for k, v in row.items()} for row in csv.DictReader(f)]
    # a column every run leaves empty or at zero (no soft links, no migrations) says nothing here
    columns = [c for c in SUMMARY_COLUMNS if c[0] in SUMMARY and any(row.get(c[0]) not in (None, 0) for row in rows)]
    lines = [f"# {figure.title}", "", f"Paper: {figure.paper}." if figure.paper else "",
             f"Runs{' (test-sized: --small)' if small else ''}: " + ", ".join(figure.runs) + ".", "",
             markdown_table(rows, columns)]
    drawn = _drawn_plots(report)
    for title in figure.plots:
        if title in drawn:
            lines += ["", f"## {title}", "", f"![{title}](report/{drawn[title]})"]
    lines += ["", "Every metric and plot of these runs: [report/report.md](report/report.md)."]
    page = out / "figure.md"
    page.write_text("\n".join(lines) + "\n")
    return page


def _number(text: str):
    """A summary.csv cell as a number where it is one (None when empty)."""
    if text == "":
        return None
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return text


def _drawn_plots(report: Path) -> dict[str, str]:
    """Plot title -> image file, as the analysis report lists them."""
    drawn = {}
    for line in (report / "report.md").read_text().splitlines():
        if line.startswith("![") and "](" in line:
            title, image = line[2:].split("](", 1)
            drawn[title] = image.rstrip(")")
    return drawn
