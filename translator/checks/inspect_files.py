"""Inspecting several files at once (``inspect``, ``validate``): each readable file inspected,
those of one job together; each file that cannot be used kept with its error, in the shape of
an inspection's output, so one unusable file does not hide the others."""

from __future__ import annotations

from collections.abc import Sequence

from translator.batch.spec_file import spec_values
from translator.inspection import inspect_together, is_batch_config, read_file
from translator.job.definitions import system_of
from translator.job.foreign import ForeignConfig
from translator.job.script import RunAs, is_job
from translator.plugin.inspection import Inspection
from translator.reading import Launch
from translator.spec import OUTPUT_KEYS
from translator.words.errors import InputError, NotAJob
from translator.words.files import read_text


def inspect_files(
    files: Sequence[str],
    framework: str | None,
    launch: Launch,
    skip_others: bool = False,
    run_as: RunAs | None = None,
) -> tuple[list[Inspection], list[dict]]:
    """``(inspections, unusable)``: each readable file inspected; each unusable one as
    :func:`unusable_output`. One file alone that cannot be used raises its error. The files are
    one job (a launcher's config among them gives the others its world), except with
    ``skip_others`` (a repository's files, as the pre-commit hook hands them): then each is
    inspected with only the files it names itself, files that are neither configs with batch
    settings nor jobs that launch a training program are passed over, and so are batchspec's
    own specs."""
    loaded, unusable = [], []
    for path in files:
        try:
            if skip_others and not _worth_reading(path, framework):
                continue
            loaded.append(read_file(path, framework, run_as))
        except InputError as exc:
            if skip_others and isinstance(exc, NotAJob):
                continue
            if len(files) == 1:
                raise
            named = exc.framework if isinstance(exc, ForeignConfig) else None
            unusable.append(unusable_output(path, str(exc), named))
    if skip_others:
        return [i for one in loaded for i in inspect_together([one], launch)], unusable
    return inspect_together(loaded, launch), unusable


def _worth_reading(path: str, framework: str | None) -> bool:
    """A job, a job definition, or a config with batch settings (a batchspec spec is not,
    unless a framework was asked for)."""
    text = read_text(path)
    if not is_job(path, text) and system_of(path, text) is None:
        if not is_batch_config(path, text, framework):
            return False
    return framework is not None or spec_values(text, path) is None


def unusable_output(path: str, error: str, framework: str | None = None) -> dict:
    """A file that could not be used, in the shape of an inspection's output: every batch key
    null, no sources, no findings, and the error."""
    return (
        {"file": path, "framework": framework}
        | {key: None for key in OUTPUT_KEYS}
        | {"sources": [], "findings": [], "error": error}
    )
