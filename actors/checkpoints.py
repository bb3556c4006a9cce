"""Emulator recovery: checkpoints of every host, and what a restored or resumed run needs.

Under the run directory (storage every host can write):

    checkpoints/run.pkl                    the RunSpec, host count and placement (for --resume)
    checkpoints/epoch-00003/host-0000.pkl  one host's state, written by that host
    checkpoints/epoch-00003/complete.json  written last, once every host's state is in place

A checkpoint is taken between chunks, when no message is between hosts, every
``runtime.checkpoint_every`` of virtual time. Taking checkpoint E commits every host's parts of
the epochs before E; restoring it deletes the parts of epochs E and later
(``results.TableWriter.discard_after``), so a restored run writes nothing twice. Only the newest
complete checkpoint is kept, and a run that completes removes them all.
"""
from __future__ import annotations

import json
import os
import pickle
import shutil
from dataclasses import dataclass
from pathlib import Path

from protocols.errors import InputError

FOLDER = "checkpoints"
SETUP = "run.pkl"
COMPLETE = "complete.json"


class HostLost(RuntimeError):
    """A host actor died: its process was killed or its node is gone (not an error of its own)."""

    def __init__(self, host: int, cause: BaseException) -> None:
        super().__init__(f"host {host} lost: {type(cause).__name__}: {str(cause).splitlines()[0] if str(cause) else ''}")
        self.host = host


@dataclass
class Checkpoint:
    epoch: int
    t_us: int  # every event before it was processed
    wall_s: float  # the run's wall time when it was taken
    snapshots: list[str]  # one per host, by host number


class Checkpoints:
    """The checkpoints of one run: when the next is due, taking it, and the latest complete one."""

    def __init__(self, run_dir: Path, every_us: int | None, hosts: int, max_recoveries: int,
                 latest: Checkpoint | None = None) -> None:
        self.folder = Path(run_dir) / FOLDER
        self.every_us = every_us
        self.hosts = hosts
        self.max_recoveries = max_recoveries
        self.latest = latest
        self.next_due = self._due_after(latest.t_us if latest else 0)

    def _due_after(self, t_us: int) -> float:
        if not self.every_us:
            return float("inf")
        return (t_us // self.every_us + 1) * self.every_us

    def due(self, t_us: int) -> bool:
        return t_us >= self.next_due

    def take(self, transport, t_us: int, wall_s: float) -> Checkpoint:
        """Every host writes its state; the checkpoint counts once all of them have."""
        epoch = (self.latest.epoch if self.latest else 0) + 1
        folder = self.folder / f"epoch-{epoch:05d}"
        folder.mkdir(parents=True, exist_ok=True)
        snapshots = [str(folder / f"host-{host:04d}.pkl") for host in range(self.hosts)]
        epochs = transport.checkpoint(snapshots)
        if set(epochs) != {epoch}:
            raise RuntimeError(f"checkpoint {epoch}: hosts are at result epochs {sorted(set(epochs))}")
        _write_json(folder / COMPLETE, {"epoch": epoch, "t_us": t_us, "wall_s": round(wall_s, 3), "hosts": self.hosts})
        previous, self.latest = self.latest, Checkpoint(epoch, t_us, wall_s, snapshots)
        if previous is not None:
            shutil.rmtree(self.folder / f"epoch-{previous.epoch:05d}", ignore_errors=True)
        self.next_due = self._due_after(t_us)
        return self.latest

    def restore_point(self) -> list[str] | None:
        """The snapshots to restore after a host was lost (None: start again from the
        beginning), and the next checkpoint falls due as if the run had just reached it."""
        self.next_due = self._due_after(self.latest.t_us if self.latest else 0)
        return self.latest.snapshots if self.latest else None

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)

    # ------------------------------------------------------------------ resuming a run

    def save_setup(self, spec, hosts: int, placement: dict[str, int]) -> None:
        """What ``--resume`` needs to rebuild the run's hosts without the scenario file."""
        self.folder.mkdir(parents=True, exist_ok=True)
        tmp = self.folder / (SETUP + ".tmp")
        with open(tmp, "wb") as file:
            pickle.dump((spec, hosts, placement), file, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, self.folder / SETUP)

    @classmethod
    def of_run(cls, run_dir: Path):
        """The setup and the latest complete checkpoint of an interrupted run, for ``--resume``;
        incomplete and older checkpoints are removed. Returns ``(spec, hosts, placement,
        checkpoints)``."""
        folder = Path(run_dir) / FOLDER
        try:
            with open(folder / SETUP, "rb") as file:
                spec, hosts, placement = pickle.load(file)
        except FileNotFoundError:
            raise InputError(f"--resume {run_dir}: the run kept no checkpoints (set runtime.checkpoint_every "
                             "to make a run resumable); run the scenario again") from None
        except (pickle.UnpicklingError, EOFError, AttributeError, ImportError) as exc:
            raise InputError(f"--resume {run_dir}: {folder / SETUP} cannot be read ({exc}); "
                             "it was written by another version or is damaged") from None
        latest = None
        for epoch_folder in sorted(folder.glob("epoch-*"), reverse=True):
            complete = epoch_folder / COMPLETE
            if latest is None and complete.exists():
                info = json.loads(complete.read_text())
                snapshots = [str(epoch_folder / f"host-{h:04d}.pkl") for h in range(info["hosts"])]
                latest = Checkpoint(info["epoch"], info["t_us"], info["wall_s"], snapshots)
            else:
                shutil.rmtree(epoch_folder, ignore_errors=True)
        checkpoints = cls(run_dir, spec.checkpoint_every_us, max(hosts, 1), spec.max_recoveries, latest)
        return spec, hosts, placement, checkpoints


def _write_json(path: Path, data: dict) -> None:
    tmp = path.with_name("." + path.name + ".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)
