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

import pickle
from dataclasses import dataclass

from protocols.errors import InputError

from .storage import RunDir

FOLDER = "checkpoints"
SETUP = "run.pkl"
COMPLETE = "complete.json"


@dataclass
class Checkpoint:
    epoch: int
    t_us: int  # every event before it was processed
    wall_s: float  # the run's wall time when it was taken
    snapshots: list[str]  # one per host, by host number, relative to the run directory


class Checkpoints:
    """The checkpoints of one run: when the next is due, taking it, and the latest complete one."""

    def __init__(self, run_dir: RunDir, every_us: int | None, hosts: int, max_recoveries: int,
                 latest: Checkpoint | None = None) -> None:
        self.run_dir = run_dir
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
        folder = _epoch_folder(epoch)
        snapshots = _snapshots(folder, self.hosts)
        epochs = transport.checkpoint(snapshots)
        if set(epochs) != {epoch}:
            raise RuntimeError(f"checkpoint {epoch}: hosts are at result epochs {sorted(set(epochs))}")
        self.run_dir.write_json(f"{folder}/{COMPLETE}",
                                {"epoch": epoch, "t_us": t_us, "wall_s": round(wall_s, 3), "hosts": self.hosts})
        previous, self.latest = self.latest, Checkpoint(epoch, t_us, wall_s, snapshots)
        if previous is not None:
            self.run_dir.delete(_epoch_folder(previous.epoch))
        self.next_due = self._due_after(t_us)
        return self.latest

    def restore_point(self) -> Checkpoint | None:
        """The checkpoint to restore after a host was lost (None: start again from the
        beginning); the next checkpoint falls due as if the run had just reached it."""
        self.next_due = self._due_after(self.latest.t_us if self.latest else 0)
        return self.latest

    def remove(self) -> None:
        self.run_dir.delete(FOLDER)

    # ------------------------------------------------------------------ resuming a run

    def save_setup(self, spec, hosts: int, placement: dict[str, int]) -> None:
        """What ``--resume`` needs to rebuild the run's hosts without the scenario file."""
        self.run_dir.write_pickle(f"{FOLDER}/{SETUP}", (spec, hosts, placement))

    @classmethod
    def of_run(cls, run_dir: RunDir):
        """The setup and the latest complete checkpoint of an interrupted run, for ``--resume``;
        incomplete and older checkpoints are removed. Returns ``(spec, hosts, placement,
        checkpoints)``."""
        setup = f"{FOLDER}/{SETUP}"
        if not run_dir.is_file(setup):
            raise InputError(f"--resume {run_dir}: the run kept no checkpoints (set runtime.checkpoint_every "
                             "to make a run resumable); run the scenario again")
        try:
            spec, hosts, placement = run_dir.read_pickle(setup)
        except (pickle.UnpicklingError, EOFError, AttributeError, ImportError, ValueError) as exc:
            raise InputError(f"--resume {run_dir}: {setup} cannot be read ({exc}); "
                             "it was written by another version or is damaged") from None
        found, latest = latest_complete(run_dir), None
        for name in run_dir.names(FOLDER, "epoch-*"):
            if found is None or f"{FOLDER}/{name}" != found[0]:
                run_dir.delete(f"{FOLDER}/{name}")
        if found is not None:
            folder, info = found
            latest = Checkpoint(info["epoch"], info["t_us"], info["wall_s"], _snapshots(folder, info["hosts"]))
        checkpoints = cls(run_dir, spec.checkpoint_every_us, max(hosts, 1), spec.max_recoveries, latest)
        return spec, hosts, placement, checkpoints


def latest_complete(run_dir: RunDir) -> tuple[str, dict] | None:
    """The folder and record (``complete.json``) of a run's latest complete checkpoint, None
    where it has none; changes nothing."""
    for name in reversed(run_dir.names(FOLDER, "epoch-*")):
        folder = f"{FOLDER}/{name}"
        if run_dir.is_file(f"{folder}/{COMPLETE}"):
            return folder, run_dir.read_json(f"{folder}/{COMPLETE}")
    return None


def _epoch_folder(epoch: int) -> str:
    return f"{FOLDER}/epoch-{epoch:05d}"


def _snapshots(folder: str, hosts: int) -> list[str]:
    return [f"{folder}/host-{host:04d}.pkl" for host in range(hosts)]
