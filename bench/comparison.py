"""What the side-by-side benchmarks (bench_softlinks.py, bench_relocation.py) share: run each
variant of a scenario in this process, one after the other, and print a Markdown table."""
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from actors.coordinator import run  # noqa: E402
from experiments.build import resolve  # noqa: E402

SCENARIOS = ROOT / "experiments" / "scenarios"


def compare(label: str, variants: dict[str, Path], overrides: list[str], measure) -> list[dict]:
    """One row per variant: ``{label: name, "wall_s", "events_per_s", **measure(run_dir, manifest)}``."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, scenario in variants.items():
            out = Path(tmp) / name
            started = time.perf_counter()
            manifest = run(resolve(scenario, overrides), out, progress=False)
            wall = time.perf_counter() - started
            rows.append({label: name, "wall_s": wall, "events_per_s": manifest["events"] / wall,
                         **measure(out, manifest)})
            print(f"{name}: {wall:.1f} s", file=sys.stderr)
    return rows


def print_table(rows: list[dict], columns: list[tuple[str, str]]) -> None:
    """``columns``: (key, format) pairs."""
    print("| " + " | ".join(name for name, _ in columns) + " |")
    print("|" + "---|" * len(columns))
    for row in rows:
        print("| " + " | ".join(fmt.format(row[name]) for name, fmt in columns) + " |")
