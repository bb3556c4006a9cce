"""The stretch of each run the analysis measures: the whole run (the default), from a start
until an end, or each run's last seconds (values at the end, as the relocation paper reads
them; a measured interval after a warm-up, as the soft-link paper's). Rows of the run's
tables outside it are left out of every metric, placed in time by ``TIME_COLUMNS``.
"""
from __future__ import annotations

from dataclasses import dataclass

US = 1_000_000


@dataclass(frozen=True)
class Window:
    """The stretch of each run the metrics measure, in seconds of simulated time: from
    ``start`` until ``end`` (None: the run's end), or the ``last`` seconds of each run."""
    start: float = 0.0
    end: float | None = None
    last: float | None = None

    def __post_init__(self) -> None:
        if self.last is not None and (self.start or self.end is not None):
            raise ValueError("a window is either its last seconds or a start and an end, not both")
        if self.start < 0 or (self.last is not None and self.last <= 0) or \
                (self.end is not None and self.end <= self.start):
            raise ValueError(f"window: expected 0 <= start < end and last > 0, got {self}")

    @property
    def whole(self) -> bool:
        return self.start == 0 and self.end is None and self.last is None

    @property
    def tag(self) -> str:
        """The window in a few words ("last 60 s", "20-40 s", "from 20 s")."""
        if self.last is not None:
            return f"last {self.last:g} s"
        return f"{self.start:g}-{self.end:g} s" if self.end is not None else f"from {self.start:g} s"

    @property
    def phrase(self) -> str:
        """The window as a page says what it measures ("the last 60 s of each run")."""
        if self.last is not None:
            return f"the last {self.last:g} s of each run"
        if self.end is not None:
            return f"simulated time {self.start:g}-{self.end:g} s of each run"
        return f"each run from {self.start:g} s of simulated time on"

    def of(self, sim_end_us: int) -> tuple[int, int]:
        """(start, end) in microseconds for a run that ended at ``sim_end_us``."""
        if self.last is not None:
            return max(sim_end_us - round(self.last * US), 0), sim_end_us
        end = sim_end_us if self.end is None else min(round(self.end * US), sim_end_us)
        return min(round(self.start * US), end), end


WHOLE_RUN = Window()
KEYS = {"from": "start", "until": "end", "last": "last"}  # a window as a figure file or a listing gives it


def from_mapping(given: dict) -> Window:
    """The window ``{from, until}`` or ``{last}`` (seconds) names (ValueError when it is not one)."""
    if not isinstance(given, dict) or not given or set(given) - set(KEYS):
        raise ValueError(f"expected {{from: S, until: S}} or {{last: S}} in seconds, got {given!r}")
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in given.values()):
        raise ValueError(f"expected numbers of seconds, got {given!r}")
    return Window(**{KEYS[key]: float(value) for key, value in given.items()})


def as_mapping(window: Window) -> dict:
    """``window`` as ``from_mapping`` reads it."""
    if window.last is not None:
        return {"last": window.last}
    return {"from": window.start, **({"until": window.end} if window.end is not None else {})}


def label_in(label: str, window: Window) -> str:
    """How a run is named in a report that measures it over ``window`` alongside a report of
    the whole run ("relocation-pop [last 60 s]")."""
    return f"{label} [{window.tag}]"


# the column that places a row of each table in time (rows outside a window are not measured)
TIME_COLUMNS = {"messages": "t_arrive_us", "deliveries": "t_pub_us", "delivery_groups": "t_pub_us",
                "samples": "t_us", "events": "t_us",
                "expected": "t_pub_us", "covering_sets": "t_us"}


def add_arguments(parser) -> None:
    """``--from``/``--until`` or ``--last`` (the job's and ``pubsub-emu analyze``'s)."""
    parser.add_argument("--from", dest="start", type=float, default=0.0, metavar="SECONDS",
                        help="measure from this simulated time on (default: the start)")
    parser.add_argument("--until", dest="end", type=float, metavar="SECONDS",
                        help="measure until this simulated time (default: each run's end)")
    parser.add_argument("--last", type=float, metavar="SECONDS",
                        help="measure each run's last SECONDS only (values at the end)")


def from_arguments(args) -> Window:
    """The window ``add_arguments``'s options name (ValueError when they contradict)."""
    return Window(args.start, args.end, args.last)


def arguments(window: Window) -> list[str]:
    """The command-line options that name ``window``."""
    if window.last is not None:
        return ["--last", str(window.last)]
    return (["--from", str(window.start)] if window.start else []) + \
        (["--until", str(window.end)] if window.end is not None else [])
