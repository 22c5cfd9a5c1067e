"""The contract a framework meets: one typed value, built in or plugged in.

A framework is a :class:`Framework`. What every framework has is a required field; each ability
only some have (its own validator, a smoke engine, a launcher config that sizes other files'
world, a place to insert a key the file lacks...) is a field whose default is ``None`` or empty,
so the core asks ``framework.verdict is None``, never ``hasattr``.

A plugin may also be a plain module with the upper-case attributes of batchspec's first plugin
contract (``NAME``, ``TEMPLATE``, ``read``...): :func:`from_module` adapts it.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterable, Mapping
from dataclasses import MISSING, dataclass, field, fields
from types import ModuleType
from typing import TYPE_CHECKING

# A framework contributes its launchers as the shell's own definitions are written (the shell
# reads them; it stands below this floor, so the type lives there).
from translator.shell.launchers import LauncherDefinition

if TYPE_CHECKING:
    from translator.batch.node_lines import NodeLines
    from translator.model.memory import Settings
    from translator.model.model_split import SplitRules
    from translator.model.named_model import NamedModel
    from translator.plugin.inspection import Inspection
    from translator.reading import Call, Launch, Reading
    from translator.spec import BatchSpec
    from translator.words.findings import Finding, Severity


@dataclass(frozen=True)
class Engine:
    """How ``smoke`` and ``tune`` run a framework's real code path."""

    module: str
    """Module path with ``run(ctx: RunContext) -> RankResult`` (the rank's work, counting
    through the harness) and ``refuse(spec, device) -> str | None`` (why it cannot run a
    layout, asked before any process starts)."""
    requires: tuple[str, ...] = ()
    """Python packages the ranks import (``deepspeed``); a missing one is named before launch."""
    extra: str | None = None
    """The batchspec extra that installs them (``pip install 'batchspec[EXTRA]'``)."""
    zero_requires: tuple[str, ...] = ()
    """Python packages its ranks import beyond ``requires`` when the job trains under ZeRO (the
    HF Trainer's DeepSpeed); a missing one is named before launch."""
    zero_extra: str | None = None
    """The batchspec extra that installs ``zero_requires``."""
    options: frozenset[str] = frozenset()
    """Engine options it honours beyond the common ones: ``recompute`` (activation
    recomputation), ``zero_stages`` (tune's ZeRO-stage variants), ``parity`` (it runs
    ``smoke --parity``: the samples, optimizer and record of :mod:`translator.rank.parity_rank`),
    ``model_config`` (its ranks build the job's model from its ``config.json``, given as
    ``RunContext.model_config``; without it they build the stand-in), ``model_shape`` (its
    ranks build the job's model from its shape, :class:`translator.model.memory.Model` written as
    JSON, given the same way: Megatron's flags, a Megatron-Bridge recipe or model block, a
    torchtune builder, a litgpt config, a torchtitan flavor, a nanotron ``model_config`` or a
    Llama-style config.json; such an engine may refuse a shape its model code cannot build with
    ``refuse_shape``, :mod:`translator.rank.engines`)."""
    environment: Mapping[str, str] = field(default_factory=dict)
    """Environment variables its ranks need (offline switches, telemetry off)."""


@dataclass(frozen=True)
class Framework:
    """Everything batchspec knows of one framework."""

    name: str
    """Registry name (``--framework``, ``--to``)."""
    template: str
    """Absolute path of its Jinja template."""
    filename: str
    """The file ``render`` writes."""
    extensions: tuple[str, ...]
    """File extensions it claims (``.json``); when several frameworks claim one, the content
    decides, in registry order."""
    claims: Callable[[str], bool]
    """Whether a file whose extension says nothing is this framework's, by its content."""
    holds_batch: Callable[[str], bool]
    """Whether a file of this framework sets any batch value at all."""
    context: Callable[[BatchSpec], dict]
    """The values its template needs."""
    read: Callable[[str, str], Reading]
    """``read(text, path)``: each batch value in a file, with its line and span."""
    interpret: Callable[[Reading, Launch], tuple[dict, list[Finding]]]
    """``(spec values, findings)``: the values as the framework completes them on a launch."""
    check: Callable[[BatchSpec], list[Finding]]
    """The framework's quirks for a spec (findings)."""
    edits: Callable[[Reading, BatchSpec], dict]
    """What ``update`` changes in a file: key -> new value (``None`` removes it)."""
    claim_order: int = 100
    """Where it stands when several frameworks could claim a file by content: lower first (a
    LLaMA-Factory YAML holds the HF Trainer's keys too, so it is asked before the HF Trainer).
    Plugins keep the default and come after the built-in frameworks."""
    codes: Mapping[str, tuple[Severity, str]] = field(default_factory=dict)
    """Its own finding codes: code -> (severity, what it is about); registered on load."""
    rewrites: frozenset[str] = frozenset()
    """Error codes of an old file that ``update`` rewrites away (any other error is refused)."""
    explains: frozenset[str] = frozenset()
    """Codes that already say why a file's batch cannot be solved (no "missing value" then)."""
    insertion: Callable[[Reading, str], tuple[int, int]] | None = None
    """Where ``update`` writes a key the file lacks: the span to replace; None: it cannot."""
    inserted: Callable[[Reading, str, object], str] | None = None
    """What ``update`` writes there for ``key`` and its new value (one or more lines, no final
    line end: a nested key indented under its block); None: ``key: value``."""
    launch_of: Callable[[Reading], Launch] | None = None
    """For a launcher's config (accelerate's): the world, parallel sizes and accumulation it
    gives the other files of the job."""
    launch_edits: Callable[[Reading, Launch], dict] | None = None
    """For a launcher's config: what ``update`` changes for a new world and its nodes alone
    (key -> new value), the file holding no batch to re-solve."""
    node_lines: Callable[[int, int], NodeLines] | None = None
    """Its own launcher's terms for N nodes × G processes each (``deepspeed --num_nodes N
    --num_gpus G`` and the hostfile it needs), for ``plan``; None: it launches as torchrun."""
    requires: tuple[str, ...] = ()
    """The Python packages ``verdict`` imports (the framework's own and torch)."""
    extra: str | None = None
    """The batchspec extra that installs the framework (``pip install 'batchspec[EXTRA]'``)."""
    verdict: Callable[[Inspection, int], str] | None = None
    """Its own validator on a file at a world size (``validate --with-framework``): a sentence
    when it accepts; its exception when it refuses; ``NotEnoughKnown`` when it cannot be asked."""
    engine: Engine | None = None
    """How ``smoke`` and ``tune`` run it; None: no smoke engine."""
    partner_files: Callable[[Reading], dict[str, str]] | None = None
    """Files read with a config that its engine runs too (the DeepSpeed JSON an HF config
    names): work-folder name -> text."""
    program: Callable[[Call], Reading | None] | None = None
    """Its launch-program reading: for one command of a launch script, the reading of its
    program's arguments (and the files they name) when the program is this framework's, else
    ``None``. The world is the launcher's unless the reading sets its own."""
    job_config: Callable[[Reading], str] | None = None
    """For a job read from a launch script: the config its engine runs (the TrainingArguments
    the flags give, as a YAML); None: the engine takes the job's own file."""
    commands: tuple[str, ...] = ()
    """Its command-line tools that a launch line may run (``llamafactory-cli``), so the
    script reader knows them for programs."""
    launchers: tuple[LauncherDefinition, ...] = ()
    """The launchers it brings (DeepSpeed's runner, ``accelerate launch``): what their options
    mean for the world, so that a job started by one is sized as it runs, whichever
    framework's program it starts. The generic ones (torchrun, srun, mpirun) are the shell's."""
    split_rules: Callable[[Reading, dict], SplitRules | None] | None = None
    """How it splits a model's heads and layers over tensor- and pipeline-parallel ranks, for
    a reading and the spec values it gives (None where it has no rule of its own, as for a
    layout without tensor or pipeline parallelism)."""
    loss_normalisation: Callable[[Reading | None, BatchSpec | None], list[Finding]] | None = None
    """Why its loss of one global batch may depend on the split (a per-micro-batch
    normalisation: the flag or release that fixes it), for a file (``None``: the config its
    engine renders for a spec) on its spec: ``loss-normalisation`` findings, shown by
    ``inspect`` and named when ``smoke --parity`` fails."""
    memory_settings: Callable[[Reading], Settings] | None = None
    """What one of its files says about how it trains as far as memory goes (ZeRO stage,
    offload, sequence parallelism, recomputation), for ``estimate``; None: nothing, so the
    estimate takes its flags and their defaults."""
    named_model: Callable[[Reading], NamedModel | None] | None = None
    """The model one of its readings names, its own way (a recipe, a model block, a torchtune
    builder, a litgpt ``model_name``), resolved or unknown with why; None: the general reading,
    :func:`translator.model.named_model.resolve`, does (a Hub name, a ``config.json``, Megatron's
    flags; a framework whose configs name their model in a mapping of their own passes it its
    reader of that mapping)."""
    model_context: Callable[[BatchSpec, NamedModel | None], tuple[dict, list[Finding]]] | None = (
        None
    )
    """For a file ``convert`` writes: the values its template needs to name the model the source
    trains (``None``: the source names none, as a spec does), and findings saying what it
    names, or why it names none and which to pick. None: its file holds the batch only, and
    ``convert`` says that the model is set elsewhere."""


#: Upper-case attributes of a plugin module -> field.
_MODULE_FIELDS = {
    "NAME": "name",
    "TEMPLATE": "template",
    "FILENAME": "filename",
    "EXTENSIONS": "extensions",
    "LAUNCHERS": "launchers",
}
#: The functions a module may hold under their field's own name.
_MODULE_FUNCTIONS = (
    "claims",
    "holds_batch",
    "context",
    "read",
    "interpret",
    "check",
    "edits",
    "insertion",
    "inserted",
    "launch_of",
    "launch_edits",
    "node_lines",
    "verdict",
    "program",
    "memory_settings",
    "named_model",
    "split_rules",
    "loss_normalisation",
    "model_context",
)


def from_module(module: ModuleType | object, **given) -> Framework:
    """A :class:`Framework` from a module: its functions named as the fields are
    (``read``, ``interpret``...), a plugin's upper-case constants (``NAME``, ``TEMPLATE``...),
    then ``given`` fields on top. ``ValueError`` names what is missing."""
    values = {f: getattr(module, a) for a, f in _MODULE_FIELDS.items() if hasattr(module, a)}
    values |= {f: getattr(module, f) for f in _MODULE_FUNCTIONS if hasattr(module, f)}
    engine = getattr(module, "ENGINE", None)
    if isinstance(engine, str):
        values["engine"] = Engine(engine)
    values |= given
    missing = [
        next((a for a, f in _MODULE_FIELDS.items() if f == name), name)
        for name in _REQUIRED
        if name not in values
    ]
    if missing:
        raise ValueError(f"lacks {', '.join(sorted(missing))}")
    values["extensions"] = tuple(values["extensions"])
    values["launchers"] = tuple(values.get("launchers", ()))
    return Framework(**values)


#: The fields without a default.
_REQUIRED = tuple(
    f.name for f in fields(Framework) if f.default is MISSING and f.default_factory is MISSING
)


def missing(packages: Iterable[str]) -> list[str]:
    """Those of ``packages`` (an Engine's or a Framework's ``requires``) not installed here."""
    return [p for p in packages if not _installed(p)]


def _installed(package: str) -> bool:
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):  # a parent package that is missing
        return False


class NotEnoughKnown(Exception):
    """Raised by a ``verdict``: too little is known to ask the framework, or the file is not for
    it alone."""
