"""The other files a job's update moves with it, each edited by its own framework.

A job's values come from several files: the config its program reads (a TrainingArguments
YAML, an Axolotl YAML, Megatron-DeepSpeed's JSON), the DeepSpeed JSON the Trainer fills and
checks (a partner), and the launcher's own config (accelerate's ``--config_file``, whose
``num_processes`` is the world). The job's framework says what a value read from another file
becomes; that file's own reader says where it stands; a partner and the launcher's config
are re-solved by their own framework's edits. Nothing is written here: ``update`` reads the
whole job back from the new texts first.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from translator.edit.text_edits import Change, edit_text
from translator.job.detection import claimant
from translator.plugin.contract import Framework
from translator.plugin.findings import cannot_edit
from translator.reading import Launch, Reading
from translator.spec import BatchSpec
from translator.words.errors import ConfigError, InputError
from translator.words.files import is_given, read_text


@dataclass(frozen=True)
class Other:
    """Another file of the job and what the update makes of it."""

    path: str
    """The file, as the job's reading names it."""
    text: str
    """Its new text."""
    changes: list[Change]
    """Each key changed (at least one)."""

    def as_dict(self, with_text: bool) -> dict:
        return {
            "path": self.path,
            "changes": [c.as_dict() for c in self.changes],
            **({"text": self.text} if with_text else {}),
        }


def other_files(
    framework: Framework,
    reading: Reading,
    spec: BatchSpec,
    elsewhere: dict[str, dict[str, object]],
) -> list[Other]:
    """The other files of ``reading``'s job that change for ``spec``: those holding the values
    in ``elsewhere`` (file -> the job framework's key -> new value), its partners (a DeepSpeed
    JSON), its launcher's config and the DeepSpeed JSON that config names; each file once, in
    that order."""
    from translator.plugin.registry import get

    wanted: dict[str, tuple[Framework, Reading, dict]] = {}
    for path, keys in elsewhere.items():
        own, file_reading = _read_holding(path, keys, framework)
        _want(wanted, own, file_reading, keys)
    config = reading.launcher_config
    # the job's partners, and the DeepSpeed JSON accelerate's config hands the program
    for partner in [*reading.partners, *(config.partners if config is not None else [])]:
        if _is_file(partner.path):  # not an inline block of a config
            own = get(partner.framework)
            _want(wanted, own, partner, own.edits(partner, spec))
    if config is not None:
        own = get(config.framework)
        keys = own.edits(config, spec)
        if "total" in reading.launch_keys and own.launch_edits is not None:
            # The launch line's own flags give the world over the file's: those are edited.
            keys = {k: v for k, v in keys.items() if k not in own.launch_edits(config, Launch())}
        _want(wanted, own, config, keys)
    out = []
    for own, file_reading, keys in wanted.values():
        text, changes = edit_text(own, file_reading, keys)
        if changes:
            out.append(Other(file_reading.path, text, changes))
            if file_reading is config:
                _check_launch(own, text, config.path)
    return out


def _check_launch(framework: Framework, text: str, path: str) -> None:
    """The launcher's config as it would read: the job takes only its launch from it, so its
    own errors (accelerate's parallel sizes that no longer multiply to the world) are asked
    of it alone."""
    _, findings = framework.interpret(framework.read(text, path), Launch())
    errors = [f for f in findings if f.severity == "error"]
    if errors:
        raise ConfigError(errors)


def _want(
    wanted: dict[str, tuple[Framework, Reading, dict]],
    framework: Framework,
    reading: Reading,
    keys: dict,
) -> None:
    """Add ``keys`` to the edits of ``reading``'s file (one entry per real file)."""
    real = os.path.realpath(reading.path)
    if real in wanted:
        wanted[real][2].update(keys)
    else:
        wanted[real] = (framework, reading, dict(keys))


def _read_holding(path: str, keys: dict, job: Framework) -> tuple[Framework, Reading]:
    """``path`` read by the framework whose reader finds ``keys`` in it: the one that claims
    it, else the job's own (a TrainingArguments YAML); refused when neither does."""
    text = read_text(path)
    found = claimant(path, text)
    for framework in [job] if found is None or found.name == job.name else [found, job]:
        try:
            reading = framework.read(text, path)
        except InputError:
            continue
        if all(k in reading.values for k in keys):
            return framework, reading
    raise cannot_edit(
        path, f"update cannot find {', '.join(keys)} in {path} to change it; edit it by hand"
    )


def _is_file(path: str) -> bool:
    """Whether ``path`` is a file of the job: one here, or one its definition holds."""
    try:
        return Path(path).is_file() or is_given(path)
    except (OSError, ValueError):  # a name too long, a NUL byte: no such file
        return False
