"""The local launcher: torchrun on this machine, in a process group of its own."""

from __future__ import annotations

import os
from dataclasses import dataclass

from translator.launch import command, runner
from translator.launch.command import SmokePlan
from translator.launch.launcher import Built, Ran
from translator.launch.progress import Progress


@dataclass(frozen=True)
class Local:
    """torchrun here; every node runs the same command when there are several."""

    name: str = "local"
    remote: bool = False

    def check(self) -> None:
        return None

    def build(self, plan: SmokePlan, variables: dict[str, str]) -> Built:
        argv = command.local_command(plan)
        return Built({}, argv, argv, variables)

    def launch(self, plan: SmokePlan, built: Built, timeout: float | None, say: Progress) -> Ran:
        env = dict(os.environ) | built.variables
        with say.steps(plan.steps) as on_line:
            outcome = runner.run(built.ranks, env, timeout, on_line)
        return Ran(outcome.stopped, outcome.log_tail)
