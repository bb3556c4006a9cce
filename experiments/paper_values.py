"""A figure's ``paper_values``: the numbers the paper's text states for it, each beside ours.

Each entry names a claim, where the paper states it, the paper's number and where ours comes
from: a summary column of one run, its ratio to another run's (``relative_to``), the largest
of several runs' (``largest_of``: the paper's "at most", "the maximum overhead"), or one run's
bar in one category of the figure's categories panel of that column (``at``: "about 700
messages triggered at broker A" is ``{y: triggered_messages, run: active, at: core-A}``). A ratio
is compared as a change (the paper's "12% jump" is 1.12 and shows as +12%), so that ours / the
paper's compares what changed, not two numbers near 1. The verdict says whether ours is within a
factor of two of the paper's, beyond it, or goes the other way: where it is not within, the
page's setup table or RESULTS must say why (the project's rule for differences over 2x); an
entry's optional ``why`` puts the measured cause after such a verdict on the page (not after
"within 2x", which a test-sized run of the same figure may reach).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from analysis import style
from protocols.errors import InputError

ENTRY_KEYS = ("claim", "where", "paper", "ours")
OPTIONAL_KEYS = ("why",)
AGREEING = ("agrees", "within 2x")  # verdicts that need no cause: an entry's why is not shown beside them
OURS_KEYS = ("y", "run", "largest_of", "relative_to", "compare", "at")


@dataclass(frozen=True)
class PaperValue:
    claim: str
    where: str
    paper: float
    y: str  # a summary column
    run: str | tuple[str, ...]  # one run, or several whose largest value the paper states ("at most 5%")
    relative_to: str | None = None
    as_ratio: bool = False  # a ratio to another run compared as it is ("9% of POP's"), not as its change
    at: object = None  # a category of the figure's categories panel of ``y`` (a broker): its bar there
    why: str = ""  # the measured cause of a difference, shown after a verdict that is not within 2x

    @property
    def runs(self) -> tuple[str, ...]:
        return self.run if isinstance(self.run, tuple) else (self.run,)

    @property
    def column(self) -> str:
        """Where the value stands in a run's row: the summary column, or ``Y at CATEGORY``
        (experiments/figures.py ``_category_values`` adds those)."""
        return self.y if self.at is None else category_column(self.y, self.at)

    def ours(self, rows: dict[str, dict]) -> float | None:
        """Our value from the summary rows by run label (None where a run has none)."""
        values = [value for run in self.runs if (value := (rows.get(run) or {}).get(self.column)) is not None]
        value = max(values) if values else None
        if value is None or self.relative_to is None:
            return value
        base = (rows.get(self.relative_to) or {}).get(self.column)
        return None if not base else value / base


def category_column(y: str, category) -> str:
    return f"{y} at {category}"


def parse(given, runs: list[str], known_columns: list[str], path: Path, category_columns: tuple[str, ...] = ()
          ) -> list[PaperValue]:
    """``paper_values`` of the figure file ``path`` (``category_columns``: the columns of its
    categories panels, which ``at`` may name); InputError names the entry and key."""
    if not isinstance(given, list):
        raise InputError(f"{path}: paper_values: expected a list of {{{', '.join(ENTRY_KEYS)}}} mappings")
    found = []
    for i, entry in enumerate(given):
        where = f"{path}: paper_values[{i}]"
        if not isinstance(entry, dict) or not set(ENTRY_KEYS) <= set(entry) <= set(ENTRY_KEYS + OPTIONAL_KEYS):
            raise InputError(f"{where}: expected the keys {', '.join(ENTRY_KEYS)} and no others but why")
        why = entry.get("why", "")
        if "why" in entry and (not isinstance(why, str) or not why.strip()):
            raise InputError(f"{where}.why: expected the cause in words, got {why!r}")
        if isinstance(entry["paper"], bool) or not isinstance(entry["paper"], (int, float)):
            raise InputError(f"{where}.paper: expected a number, got {entry['paper']!r}")
        ours = _checked_ours(entry["ours"], runs, known_columns, category_columns, f"{where}.ours")
        largest_of = ours.get("largest_of")
        found.append(PaperValue(str(entry["claim"]), str(entry["where"]), float(entry["paper"]), ours["y"],
                                tuple(largest_of) if largest_of else ours["run"], ours.get("relative_to"),
                                ours.get("compare") == "ratio", ours.get("at"), why.strip()))
    return found


def _checked_ours(ours, runs: list[str], known_columns: list[str], category_columns: tuple[str, ...], where: str
                  ) -> dict:
    if not isinstance(ours, dict) or "y" not in ours or not set(ours) <= set(OURS_KEYS) \
            or ("run" in ours) == ("largest_of" in ours) or ("largest_of" in ours and "relative_to" in ours):
        raise InputError(f"{where}: expected {{y: SUMMARY COLUMN, run: RUN}} and optionally relative_to: RUN "
                         "(with compare: change or ratio), or {y: SUMMARY COLUMN, largest_of: [RUN, ...]}")
    if "at" in ours:
        if "run" not in ours or "relative_to" in ours:
            raise InputError(f"{where}.at: a category's value is one run's: expected {{y: COLUMN, run: RUN, at: "
                             "CATEGORY}")
        if ours["y"] not in category_columns:
            raise InputError(f"{where}.y: at {ours['at']!r} needs the column of one of this figure's categories "
                             f"panels ({', '.join(category_columns) or 'it has none'}), not {ours['y']!r}")
    elif ours["y"] not in known_columns:
        raise InputError(f"{where}.y: unknown summary column {ours['y']!r}")
    if "compare" in ours and ("relative_to" not in ours or ours["compare"] not in ("change", "ratio")):
        raise InputError(f"{where}.compare: expected change or ratio, with relative_to")
    largest_of = ours.get("largest_of")
    if largest_of is not None and (not isinstance(largest_of, list) or len(largest_of) < 2):
        raise InputError(f"{where}.largest_of: expected a list of two runs or more")
    for key, named in (("run", [ours.get("run")]), ("relative_to", [ours.get("relative_to")]),
                       ("largest_of", largest_of or [])):
        for run in named:
            if key in ours and run not in runs:
                raise InputError(f"{where}.{key}: no run {run!r} in this figure (runs: {', '.join(runs)})")
    return ours


def verdict(paper: float, ours: float | None, changes: bool, ratio_as_is: bool = False) -> tuple[float | None, str]:
    """(ours / paper, in words); ``changes``: of the changes (value - 1), as for a ratio to
    another run but one whose claim names the ratio itself; ``ratio_as_is``: a ratio to another
    run compared as it is, which goes the other way where one is above 1 and the other below."""
    if ours is None:
        return None, "not measured"
    a, b = (ours - 1, paper - 1) if changes else (ours, paper)
    if b == 0:  # "virtually identical"; "decreasing to 0 NRS messages at broker E"
        return None, "agrees" if a == 0 else "differs: the paper's " + ("has no change" if changes else "is 0")
    ratio = a / b
    if ratio_as_is and (ours - 1) * (paper - 1) < 0:  # "60% of active's time" against 1.10 of it
        return ratio, "the other way"
    if ratio <= 0:
        return ratio, "the other way" if a else ("no change in ours" if changes else "none in ours")
    return ratio, "within 2x" if 0.5 <= ratio <= 2 else "differs by more than 2x"


def table(values: list[PaperValue], rows: list[dict]) -> str:
    """The page's table: claim, where, the paper's value, ours, ours / paper, verdict."""
    from analysis.report import markdown_table

    by_run = {row["run"]: row for row in rows}
    lines = [markdown_table([_row(value, by_run) for value in values], _COLUMNS)]
    if any(value.relative_to and not value.as_ratio for value in values):
        lines += ["", "A value against another run's is shown as the change (+12%: 1.12 times), and ours / paper "
                      "divides the changes" + ("; where the claim names a ratio (\"9% of POP's\"), the ratios."
                                               if any(value.as_ratio for value in values) else ".")]
    return "\n".join(lines)


_COLUMNS = [("claim", "claim", "{}"), ("where", "where in the paper", "{}"), ("paper", "paper", "{}"),
            ("ours", "ours", "{}"), ("ratio", "ours / paper", "{:.2f}"), ("verdict", "", "{}")]


def _row(value: PaperValue, by_run: dict[str, dict]) -> dict:
    ours = value.ours(by_run)
    changes = value.relative_to is not None and not value.as_ratio
    ratio, words = verdict(value.paper, ours, changes, value.as_ratio)
    if value.why and words not in AGREEING:
        words += f"; cause: {value.why}"
    share = value.relative_to is None and getattr(style.MEASURES.get(value.y), "percent", False)  # yield, control
    return {"claim": value.claim, "where": value.where, "paper": _shown(value.paper, changes, share),
            "ours": None if ours is None else _shown(ours, changes, share), "ratio": ratio, "verdict": words}


def _shown(value: float, change: bool, share: bool) -> str:
    """A change as +12%, a share as 5.0%, other values with four significant digits."""
    if change:
        return f"{value - 1:+.0%}"
    return f"{value:.1%}" if share else f"{value:,.4g}"
