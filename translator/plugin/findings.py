"""The finding and the error every framework's reader may raise: a file the job names that is
not where it was looked for (a warning: its values are unknown), and a request ``update``
cannot carry out (exit 1)."""

from __future__ import annotations

from translator.words.errors import ConfigError
from translator.words.findings import Finding, finding


def not_found(name: str, looked: str, where: str) -> Finding:
    """The warning for a file the job names that is not where it was looked for."""
    return finding(
        "job-file-not-found",
        f"{name} is not found (looked for {looked}); the values it would set are unknown",
        hint="run batchspec from the folder the job runs in, or give --run-dir",
        where=where,
    )


def cannot_edit(where: str, message: str) -> ConfigError:
    """The error for a request update cannot carry out (exit 1): the file reads, but what it
    would have to change is not a literal update can edit."""
    return ConfigError([finding("update-not-editable", message, where=where)])
