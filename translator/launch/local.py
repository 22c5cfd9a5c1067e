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

    def build(self, plan: SmokePlan, variables: dict[str, str] | None = None) -> Built:
        return Built({}, command.local_command(plan), command.local_command(plan))

    def launch(
        self, plan: SmokePlan, variables: dict[str, str], timeout: float | None, say: Progress
    ) -> Ran:
        env = dict(os.environ) | variables
        with say.steps(plan.steps) as on_line:
            outcome = runner.run(command.local_command(plan), env, timeout, on_line)
        return Ran(outcome.stopped, outcome.log_tail)
