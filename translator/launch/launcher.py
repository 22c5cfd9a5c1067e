"""The launcher seam: how a smoke run's ranks are started, followed and stopped.

A :class:`Launcher` builds what would run (``--dry-run`` prints it), then submits it, waits for
its end, collects the tail of its output and cancels it on ``--timeout``, Ctrl-C or SIGTERM.
The ranks write their results into the work folder (shared with the nodes), where the smoke
run reads them whatever started them. One module per launcher: :mod:`.local` (torchrun here),
:mod:`.slurm` (sbatch), :mod:`.kubernetes` (an Indexed Job); a Ray launcher would be one more.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from translator.launch.command import SmokePlan
from translator.launch.progress import Progress


@dataclass(frozen=True)
class Built:
    """What a launch would write and run, built without writing anything."""

    files: dict[str, str]
    """File name (inside the work folder) -> text: the sbatch script, the manifest."""
    submit: list[str]
    """The command that starts it (an argument list, never a shell string)."""
    ranks: list[str]
    """The command each node runs (torchrun and the rank's worker)."""
    variables: dict[str, str]
    """What the ranks' environment sets beside the one they start in."""


@dataclass(frozen=True)
class Ran:
    """A launch that has ended."""

    stopped: str | None
    """``timeout`` or ``interrupted`` when batchspec stopped it, else None."""
    log_tail: list[str]
    """The last lines the ranks printed."""
    job: str | None = None
    """The scheduler's name for it (a Slurm job id, a Kubernetes Job), None when run here."""


class Launcher(Protocol):
    """One way to start a smoke run's ranks."""

    @property
    def name(self) -> str:
        """``local``, ``slurm``, ``k8s``: the value of ``--launcher``."""

    @property
    def remote(self) -> bool:
        """The ranks run on other machines (their device defaults to a GPU; this machine's
        cores say nothing of their speed)."""

    def check(self) -> None:
        """Refuse, before anything is written, when this machine cannot launch (no sbatch)."""

    def build(self, plan: SmokePlan, variables: dict[str, str]) -> Built:
        """What would be written and run for ``plan``, its ranks given ``variables`` beside
        the environment they start in; unsafe values are refused here, before anything is
        written."""

    def launch(self, plan: SmokePlan, built: Built, timeout: float | None, say: Progress) -> Ran:
        """Write what :meth:`build` gave, submit it, follow it to its end (cancelling it on
        ``timeout`` or Ctrl-C) and return how it ended. ``say`` is the progress."""
