"""The one error hierarchy. Each error knows the exit code the command line gives it.

Exit codes (docs/architecture.md, "The command line"): 1 the configuration is wrong; 2 the input
cannot be used.
Only ``translator.cli`` turns these into exit codes; everything else just raises.
"""

from __future__ import annotations

from translator.words.findings import Finding


class BatchspecError(Exception):
    """Base of every error a user can cause; never shown with a traceback."""

    exit_code = 2


class InputError(BatchspecError):
    """The input cannot be used: unreadable, malformed, a bad flag, not enough to go on."""

    exit_code = 2


class NotAJob(InputError):
    """A launch script that launches no training program a framework reads."""

    def __init__(self, message: str, world_size: int | None = None):
        super().__init__(message)
        self.world_size = world_size
        """The processes the launch starts, when its launcher and the system fix that number
        whatever the program is (``torchrun --nnodes 2 --nproc_per_node 8 my_train.py``)."""


class ConfigError(BatchspecError):
    """The input reads, but the configuration it describes is wrong.

    Carries the error finding(s) so that ``--json`` can report them with their codes.
    """

    exit_code = 1

    def __init__(self, findings: list[Finding]):
        self.findings = findings
        super().__init__(
            "; ".join(
                (f"{f.where}: " if f.where else "")
                + f.message
                + (f" (fix: {f.hint})" if f.hint else "")
                for f in findings
            )
        )


class RenderError(BatchspecError):
    """A template failed, or its output did not read back as the spec it came from.

    Either is a bug in batchspec, not in the user's input, but it must still fail loudly.
    """

    exit_code = 1
