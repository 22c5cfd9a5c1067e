"""``render --into``: a spec's batch written into configs the user already has, as ``update``
writes it (every other byte kept, the result read back as the spec), not a new file.

One file takes the spec for its own framework; a folder takes it in each of its files that a
framework asked for claims. A file of another framework than the one asked for is refused
naming both: its keys mean other things.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from translator.edit.update import Updated, move_launch, update
from translator.inspection import inspect_reading, read_file, refuse_a_spec
from translator.job.detection import claimant
from translator.job.foreign import refuse_foreign
from translator.plugin.contract import Framework
from translator.reading import Launch
from translator.render import require_decided
from translator.spec import BatchSpec
from translator.words.errors import BatchspecError, ConfigError, InputError
from translator.words.files import read_text, write_files
from translator.words.findings import has_errors


@dataclass(frozen=True)
class Into:
    """One existing config the spec was written into."""

    path: str
    """The file."""
    framework: str
    """The framework whose config it is."""
    updated: Updated
    """Its new text and changes (and the other files of its job that change with it)."""


def render_into(spec: BatchSpec, framework: Framework, path: str) -> Into:
    """``spec`` written into ``path``, ``framework``'s config (nothing is written here);
    refused (exit 2) when the file is another framework's, (exit 1) when the framework cannot
    take the spec or the file cannot be edited to give it."""
    require_decided(spec)
    found, reading = read_file(path)
    if found.name != framework.name:
        raise InputError(
            f"{path}: is {found.name}'s config, not {framework.name}'s: give --to "
            f"{found.name} to write into it, or --out to write a new {framework.name} file"
        )
    findings = framework.check(spec)
    if has_errors(findings):
        raise ConfigError([f for f in findings if f.severity == "error"])
    old = inspect_reading(framework, reading, Launch.of(spec))
    if framework.launch_edits is not None:  # a launcher's config: its world alone
        moved = move_launch(
            framework, old, world=spec.world, nodes=spec.nodes, gpus_per_node=spec.gpus_per_node
        )
        return Into(path, framework.name, moved)
    return Into(path, framework.name, update(framework, old, spec))


def render_into_folder(
    spec: BatchSpec, frameworks: list[Framework], folder: str, strict: bool = False
) -> tuple[list[Into], dict[str, str]]:
    """``spec`` written into each file of ``folder`` (not its subfolders) that one of
    ``frameworks`` claims; and for each framework with no such file, or whose file refused
    it, why (name -> reason). Nothing written at all, or ``strict`` and anything refused: the
    first refusal is raised instead."""
    require_decided(spec)
    wanted = {f.name: f for f in frameworks}
    done: list[Into] = []
    errors: dict[str, BatchspecError] = {}
    for path in sorted(p for p in Path(folder).iterdir() if p.is_file()):
        try:
            text = read_text(path)
            refuse_a_spec(str(path), text)
            refuse_foreign(str(path), text)
            owner = claimant(str(path), text)
        except InputError:
            continue  # not a framework's config batchspec reads (a spec among them)
        if owner is None or owner.name not in wanted:
            continue
        try:
            done.append(render_into(spec, owner, str(path)))
        except BatchspecError as exc:
            errors.setdefault(owner.name, exc)
    for name in wanted:
        if name not in errors and not any(d.framework == name for d in done):
            errors[name] = InputError(f"no {name} config in {folder} to write into")
    if errors and (strict or not done):
        raise next(iter(errors.values()))
    return done, {name: str(exc) for name, exc in errors.items()}


def write_into(
    spec: BatchSpec, frameworks: list[Framework], into: str, strict: bool = False
) -> tuple[list[Into], dict[str, str]]:
    """``spec``'s batch keys written into existing configs (``render --into``): ``into`` a
    file, the one framework's, or a folder, each of its files one of ``frameworks`` claims;
    every file or none. Returns what was written and why each framework left was not. Two
    configs that would write one file differently refuse it all; a symlink in the folder that
    leads out of it is refused, as ``render --out`` refuses it."""
    folder = Path(into).is_dir()
    if folder:
        done, refused = render_into_folder(spec, frameworks, into, strict)
    elif len(frameworks) != 1:
        raise InputError(
            f"--into {into} is one file, and --to gives {len(frameworks)} frameworks "
            f"({', '.join(f.name for f in frameworks)}): give --into a folder"
        )
    else:
        done, refused = [render_into(spec, frameworks[0], into)], {}
    texts: dict[str, tuple[Path, str]] = {}
    for d in done:
        pairs = [(d.path, d.updated.text)] if d.updated.changes else []
        for path, text in [*pairs, *((o.path, o.text) for o in d.updated.others)]:
            seen = texts.setdefault(os.path.realpath(path), (Path(path), text))
            if seen[1] != text:
                raise InputError(f"{path}: two configs of --into would write it differently")
    write_files(list(texts.values()), force=True, within=into if folder else None)
    return done, refused
