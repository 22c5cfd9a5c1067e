"""What a reader finds in a framework's config file: each batch value with where it came from.

A :class:`Value` remembers the line and, when the value was written literally, the exact
character span of that literal, so ``update`` can change it and nothing else.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from translator.shell.notes import Note, Use
from translator.words.files import is_given
from translator.words.findings import Finding

if TYPE_CHECKING:
    from translator.shell.launchers import Sizes, Split
    from translator.shell.values import Script, Word
    from translator.spec import BatchSpec

#: Largest count a config may hold; larger is a typo (10**60), not a cluster.
MAX_COUNT = 1 << 40


@dataclass(frozen=True)
class Value:
    """One value read from a file."""

    value: object
    """As read: an int when it is one; ``"auto"``; ``None`` when it cannot be known."""
    line: int | None = None
    """1-based line where it is set (for a bash flag: where the flag is)."""
    span: tuple[int, int] | None = None
    """Character offsets ``[start, end)`` of the literal in the text, when it is a literal."""
    why_unknown: str | None = None
    """For ``None`` values: what stood there (``$1``, an unknown variable...)."""
    file: str | None = None
    """The file it was read from when that is not the reading's own (a job's YAML); its
    ``line`` and ``span`` are then in that file."""

    @classmethod
    def of_word(cls, word: Word) -> Value:
        """A shell word as a value: an int when it is one, else its text (``None`` when not
        known), with its line and literal span."""
        if word.text is None:
            return cls(None, word.line, None, word.why_unknown)
        try:
            return cls(int(word.text), word.line, word.span)
        except ValueError:
            return cls(word.text, word.line, word.span)

    @property
    def count(self) -> int | None:
        """The value when it is a usable positive integer (bools are not counts), else ``None``."""
        v = self.value
        if isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= MAX_COUNT:
            return v
        return None

    @property
    def is_count(self) -> bool:
        """A usable positive integer (bools are not counts)."""
        return self.count is not None


@dataclass(frozen=True)
class Held:
    """A file a job definition holds in its own text (a ConfigMap's key, mounted in a
    container): the launch reads it at its path there, batchspec from the definition."""

    path: str
    """The name it is read under: the definition's path, the ConfigMap and the file's name
    (``job.yaml[acc]/config.yaml``)."""
    text: str
    """Its text, each line on the line of the definition that writes it (the lines above it
    empty), so that what is read from it points into the definition; as it reads, where the
    definition writes it otherwise (its lines are then its own)."""
    what: str
    """What holds it, for messages (``ConfigMap acc's config.yaml``)."""
    first: int
    """The 0-based line of the definition its text starts on."""
    lines: int
    """How many lines of the definition hold it."""
    indent: int | None
    """The columns those lines are indented by, where each is written as its text reads (a
    literal block, ``|``); ``None``: written otherwise (quoted, folded), so not edited."""


@dataclass(frozen=True)
class Definition:
    """A scheduler's job definition, as the system runs it: its kind and the nodes and GPUs
    it gives the job."""

    kind: str
    """As its users say it (``Kubernetes PyTorchJob``, ``SkyPilot task``, ``dstack task``)."""
    name: str | None
    """The container, replicated job or task whose command was read."""
    nodes: int | None
    """Nodes (pods, machines) the system starts the command on; ``None``: not fixed."""
    gpus_per_node: int | None
    """GPUs each node gets; ``None``: not fixed."""
    nodes_unknown: str | None = None
    """Why the nodes are not fixed (a placeholder, an elastic range)."""
    gpus_unknown: str | None = None
    """Why the GPUs per node are not fixed."""
    literals: Mapping[str, tuple[str, Value, int]] = field(default_factory=dict)
    """Role (``nodes``, ``gpus_per_node``) -> (the key as written, ``num_nodes``; its value
    with its line and span; what the definition adds to it, a PyTorchJob's Master beside its
    Workers' replicas), where the definition writes it as one literal (``update`` edits it
    there)."""
    copies: tuple[tuple[int, int, int | None], ...] = ()
    """Spans of the definition that other pods repeat (start, end, where the copy starts;
    ``None``: written otherwise), so ``update`` edits the copies with what was read."""
    others: tuple[str, ...] = ()
    """The other training jobs the file defines, not read (``PyTorchJob b (line 47)``)."""
    held: tuple[Held, ...] = ()
    """The files the definition holds that the command read sees (its ConfigMaps' keys)."""

    def as_dict(self) -> dict:
        return {
            "kind": self.kind,
            "name": self.name,
            "nodes": self.nodes,
            "gpus_per_node": self.gpus_per_node,
            "gpus": None
            if self.nodes is None or self.gpus_per_node is None
            else self.nodes * self.gpus_per_node,
            "nodes_unknown": None if self.nodes is not None else self.nodes_unknown,
            "gpus_unknown": None if self.gpus_per_node is not None else self.gpus_unknown,
        }


@dataclass
class Reading:
    """Everything a reader took from one file."""

    path: str
    """The file, as the user named it."""
    framework: str
    """Backend name that read it."""
    text: str
    """The file's text (``update`` edits it)."""
    values: dict[str, Value] = field(default_factory=dict)
    """Framework key (as written in the file) -> value."""
    findings: list[Finding] = field(default_factory=list)
    """What the reader noticed on the way (typos, unknowns, removed blocks)."""
    world_size: int | None = None
    """World size the file itself launches (a torchrun line), when it says."""
    world_unknown: Note | None = None
    """Why the file's own launch gives no world size (``line 9: torchrun starts an unknown
    number of processes: --nproc_per_node is $(nvidia-smi ...)``)."""
    launcher: str | None = None
    """The launcher that starts the program (``torchrun``, ``deepspeed``, ``srun``...), when a
    launch line does (for messages about that line)."""
    launch_keys: dict[str, str] = field(default_factory=dict)
    """The launcher's sizing words among ``values``: role (``per_node``, ``nodes``,
    ``total``) -> key (``--nproc_per_node``, ``--num_nodes``, ``#SBATCH SLURM_NNODES``...)."""
    launch_counts: dict[str, int] = field(default_factory=dict)
    """Role -> count, from the launcher's words or its own defaults."""
    launch_at: int | None = None
    """Where ``update`` adds a sizing flag the launch line lacks (``--nnodes 2``): the offset
    just after the launcher's name (``torchrun``, ``accelerate launch``); ``None`` when that
    name is not a literal of the file."""
    notes: list[Note] = field(default_factory=list)
    """What the reader did not follow (``line 3: source env.sh is not read``)."""
    opaque: list[str] = field(default_factory=list)
    """Unknown words that may hold more settings (``line 9: $EXTRA_ARGS (not set in the
    script)``): a setting not seen may still be there, so its default is not assumed."""
    partners: list[Reading] = field(default_factory=list)
    """Files this one points to and that were read with it (Axolotl's ``deepspeed:`` JSON)."""
    uses: dict[tuple[int, int], list[Use]] = field(default_factory=dict)
    """For a literal that feeds several words (a launch script's variable): each use, such as
    ``--seq-length`` on line 12; ``update`` refuses to edit a literal that has other uses."""
    launch: Launch | None = None
    """What the job's launcher gives the program beside its world (the parallel sizes and
    accumulation override of accelerate's config file), when a job was read."""
    sources: list[Source] = field(default_factory=list)
    """Where each batch value of a job comes from, and which source won where several set it."""
    arguments: list[Word] = field(default_factory=list)
    """The program's arguments as the job runs it (a job's reading; empty for a config)."""
    definition: Definition | None = None
    """The scheduler's job definition the job was read from (a Kubernetes manifest, a
    SkyPilot or dstack task), when it was."""
    model_settings: tuple[str, dict] | None = None
    """For a job: the config its program runs as far as it names the model (torchtune's
    ``model``, litgpt's ``model_name``, ``model_config``, ``checkpoint_dir``), the command
    line's overrides applied, and where it is (the config's path); None for a config file,
    whose own text names its model."""
    launcher_config: Reading | None = None
    """The launcher's own config file the job runs with (accelerate's ``--config_file``), read
    by its framework, so that ``update`` moves it with the job."""
    slurm: str | None = None
    """Where a job shows that Slurm runs it (``job.sh:2``: its first ``#SBATCH`` line, or the
    ``srun`` that starts its launcher), so that a job converted from it keeps the scheduler;
    ``None`` for a config, or a job nothing says Slurm runs."""

    def where(self, key: str) -> str:
        """``path:line`` of a key, or just ``path``."""
        v = self.values.get(key)
        path = v.file if v is not None and v.file else self.path
        return f"{path}:{v.line}" if v is not None and v.line else path

    def count(self, key: str) -> int | None:
        """The key's value when it is a usable count, else ``None``."""
        v = self.values.get(key)
        return None if v is None else v.count

    def take(self, values: Mapping[str, Value], found: str, fields: Mapping[str, str]) -> None:
        """The ``values`` of another file a job names (``found``: its path), each marked as
        that file's, so ``update`` edits none of them here; their spans index that file's text,
        not this one's, so none is kept. Keys that are spec ``fields`` (key -> field) are
        listed in ``sources``."""
        for key, v in values.items():
            self.values[key] = Value(v.value, v.line, None, v.why_unknown, found)
            if key in fields:
                self.sources.append(Source(fields[key], v.value, f"{found}:{v.line} {key}"))

    def set_later(
        self,
        key: str,
        value: Value,
        field: str | None,
        where: str,
        why: str,
        why_again: str | None = None,
    ) -> None:
        """Set ``key`` to ``value`` over what was set before, as a framework that reads its
        sources in order does (the later wins). When the key gives a spec ``field``, the
        ``sources`` say so: the field's earlier winners now lose, with ``why`` (the framework's
        rule), or ``why_again`` where the earlier value came from the same command line rather
        than a file; ``where`` wins."""
        before = self.values.get(key)
        self.values[key] = value
        if field is None:
            return
        if before is not None:
            rule = why_again if why_again is not None and not before.file else why
            lost = [s for s in self.sources if s.name == field and s.won]
            self.sources = [s for s in self.sources if not (s.name == field and s.won)]
            self.sources += [Source(s.name, s.value, s.where, False, rule) for s in lost]
        self.sources.append(Source(field, value.value, where))


@dataclass(frozen=True)
class Source:
    """Where one batch value of a job was set."""

    name: str
    """The spec field (``micro_batch_size``, ``world_size``...)."""
    value: object
    """The value this source gives."""
    where: str
    """``file:line`` and the key or flag (``train.sh:12 --per_device_train_batch_size``)."""
    won: bool = True
    """Whether the framework uses this one (others set the same field and lost)."""
    why: str | None = None
    """For one of several: the framework's rule that decides between them."""

    def as_dict(self) -> dict:
        return {
            "field": self.name,
            "value": self.value,
            "where": self.where,
            "won": self.won,
            "why": self.why,
        }


@dataclass(frozen=True)
class Call:
    """One launch command of a job, split as it runs: launcher → program → arguments, with the
    script it stands in and where the files it names are looked for."""

    path: str
    """The script, as the user named it."""
    text: str
    """The script's text."""
    line: int
    """Line of the command."""
    split: Split
    """The launcher words, the program, its arguments."""
    sizes: Sizes
    """How the launcher sizes the world."""
    environment: Mapping[str, Word]
    """The variables the command's processes see (its own ``X=1`` prefix, the exported ones)."""
    script: Script
    """The whole script (its variables, heredocs, notes)."""
    folders: tuple[Path, ...]
    """Where a relative path the job names is looked for, in order: the folder the job runs
    in (the current one, or ``--run-dir``), then the script's own."""
    mounts: Mapping[str, str] = field(default_factory=dict)
    """Paths where the job runs -> the local files mounted there (a SkyPilot task's
    ``file_mounts``), or the :class:`Held` files of its definition (a ConfigMap's keys)."""

    def locate(self, name: str) -> tuple[Path | None, str]:
        """A file the job names: ``(its path, or None when not found; where it was looked
        for)``; a path under a mount is looked for at its local source, or is the file the
        job's definition holds there (a ConfigMap's key: :class:`Held`)."""
        for remote, local in self.mounts.items():
            if name == remote or name.startswith(remote.rstrip("/") + "/"):
                name = local + name[len(remote) :]
                if is_given(name):  # a file the job's definition holds
                    return Path(name), name
                break
        candidates = [Path(name)] if Path(name).is_absolute() else [f / name for f in self.folders]
        # ``clone/../file`` after ``cd clone`` (a repository the job clones first, not here):
        # where bash finds it once the folder exists, read without it.
        candidates += [n for c in candidates if ".." in c.parts and (n := _lexical(c)) != c]
        looked = ", ".join(str(c) for c in candidates)
        for candidate in candidates:
            copied = self._copied(candidate)
            if copied is not None:
                return copied, f"{looked} (a copy the job made of {copied})"
            try:
                if candidate.is_file():
                    return candidate, looked
            except (OSError, ValueError):  # a name too long, a NUL byte: not there either way
                continue
        return None, looked

    def _copied(self, candidate: Path) -> Path | None:
        """The source of a copy the job made earlier at ``candidate`` (``cp config.yaml
        repo/recipes/config.yaml``), when that source is here."""
        if not self.script.copies:
            return None
        wanted = os.path.normpath(candidate)
        for base in self.folders:
            for target, source in self.script.copies.items():
                if os.path.normpath(base / target) == wanted:
                    found = base / source
                    if found.is_file():
                        return found
        return None

    @property
    def arguments(self) -> list[Word]:
        """The program's arguments."""
        return self.split.arguments

    @property
    def program(self) -> str:
        """The program's name as written (``llava/train/train_mem.py``, ``axolotl.cli.train``,
        ``llamafactory-cli``)."""
        return self.split.name


@dataclass(frozen=True)
class Launch:
    """What the command line says about the launch, beside the file."""

    world_size: int | None = None
    """All processes, when given (``--world-size``, or ``--nnodes`` x ``--nproc-per-node``)."""
    tensor_parallel_size: int | None = None
    """Model-parallel sizes a config file may not hold (a DeepSpeed JSON under Megatron)."""
    pipeline_parallel_size: int | None = None
    context_parallel_size: int | None = None
    gradient_accumulation_steps: int | None = None
    """An accumulation the launcher imposes over the config's (accelerate's DeepSpeed one)."""
    source: str | None = None
    """The launcher config these values come from, when one does (for messages)."""
    launches: tuple[str, ...] = ()
    """For a launcher config read with the files it launches: their paths (for messages)."""
    nodes: int | None = None
    """The nodes the world spreads over, when given (``--nnodes``, or the world over
    ``--gpus-per-node``); ``None``: the job's own, else not known."""
    handed: Reading | None = None
    """A config the launcher hands the program beside its world (accelerate's DeepSpeed
    plugin config), read as that config's framework reads it; the program decides whether its
    own config of that kind wins over it."""

    @classmethod
    def of(cls, spec: BatchSpec) -> Launch:
        """The launch a solved spec describes."""
        return cls(
            spec.world,
            spec.tensor_parallel_size,
            spec.pipeline_parallel_size,
            spec.context_parallel_size,
            nodes=spec.nodes,
        )


def typo_findings(
    keys: Mapping[str, int | None],
    batch_keys: list[str],
    allowed: set[str],
    path: str,
    fate: str = "so it is silently ignored",
    cutoff: float = 0.8,
) -> list[Finding]:
    """Errors for keys that look like misspelt batch keys (``keys``: key -> line); ``fate``
    says what the framework does with an unknown key; ``cutoff`` how alike they must be."""
    from translator.words.findings import finding

    out = []
    known = tuple(batch_keys)
    for key, line in keys.items():
        if key in batch_keys or key in allowed:
            continue
        close = _close_match(key, known, cutoff)
        if close:
            out.append(
                finding(
                    "batch-key-typo",
                    f"'{key}' is not a key the framework reads, {fate}; it "
                    f"looks like a misspelt '{close}'",
                    hint=f"rename '{key}' to '{close}'",
                    where=f"{path}:{line}" if line else path,
                )
            )
    return out


@functools.lru_cache(maxsize=4096)
def _close_match(key: str, batch_keys: tuple[str, ...], cutoff: float) -> str | None:
    """The batch key ``key`` most looks like, if any (remembered: configs repeat their keys)."""
    import difflib

    close = difflib.get_close_matches(key, batch_keys, n=1, cutoff=cutoff)
    return close[0] if close else None


def invalid_value(key: str, value: Value, path: str, wants: str = "a positive integer") -> Finding:
    """The error for a value of the wrong type or range."""
    from translator.words.findings import finding
    from translator.words.parsing import brief

    shown = brief(value.value)
    kind = type(value.value).__name__
    return finding(
        "invalid-value",
        f"{key} is {shown} ({kind}); it must be {wants}",
        hint=f"write {key} as {wants}",
        where=f"{path}:{value.line}" if value.line else path,
    )


def values_at(doc, keys) -> dict[str, Value]:
    """Each key of ``keys`` that the parsed document (``parsing.Document``) sets, with its line
    and span; a dotted key (``zero_optimization.stage``) looks one mapping down."""
    out = {}
    for key in keys:
        block, _, inner = key.rpartition(".")
        holder = doc.data.get(block) if block else doc.data
        if isinstance(holder, dict) and inner in holder:
            line, span = doc.positions.get(key, (0, None))
            out[key] = Value(holder[inner], line, span)
    return out


#: The folders the job runs in while a file of it is read (``--run-dir``, or the folders of
#: its launch script); ``None``: not said, the current folder.
_RUN_FOLDERS: ContextVar[tuple[Path, ...] | None] = ContextVar("run_folders", default=None)


@contextmanager
def running_in(folders: Iterable[Path]) -> Iterator[None]:
    """Read files as run from ``folders`` (first first): the relative paths a config names
    (a ``deepspeed:`` JSON, accelerate's ``deepspeed_config_file``) are opened there, as the
    frameworks open them from the folder the launch runs in."""
    token = _RUN_FOLDERS.set(tuple(folders))
    try:
        yield
    finally:
        _RUN_FOLDERS.reset(token)


def run_folders() -> list[Path]:
    """Where a relative path a config names is opened first: the folders of
    :func:`running_in`, else the current folder."""
    return list(_RUN_FOLDERS.get() or (Path.cwd(),))


def _lexical(path: Path) -> Path:
    """``path`` with each ``folder/..`` removed as text (``os.path.normpath``)."""
    return Path(os.path.normpath(path))
