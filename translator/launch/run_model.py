"""The model a run builds: the job's own (:mod:`translator.model.named_model`), its depth cut to
``--layers``, or the stand-in built in code (``--model tiny|125m``), chosen before anything is
written or started.

``smoke``, ``tune`` and ``estimate`` build the job's model by default. A job that names none
runs the stand-in in ``smoke``, which says so first; ``tune`` and ``estimate`` refuse it, naming
what to give, since a toy's micro-batch edge says nothing about the job's. A model named but not
found, one whose code lives in its repository, one transformers cannot build as a causal LM, and
one whose bf16 copy per rank overflows this machine's memory are each refused in one line,
nothing started, nothing downloaded."""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from translator.model import memory
from translator.model.named_model import NamedModel, config_json
from translator.rank.engines import engine
from translator.words.errors import InputError

if TYPE_CHECKING:
    from translator.inspection import FileRead

#: What a run is told to give when it has no model of the job's.
GIVE = "give --model-config PATH (the model's config.json or its folder), or --model tiny for "
#: What an estimate is told to give instead.
GIVE_ESTIMATE = (
    "give --model-config PATH (the model's config.json or its folder), or --model PRESET "
    f"({', '.join(memory.PRESETS)}) or --model PATH.json"
)
#: The engine option of an engine whose ranks build the job's model from its config.json.
BUILDS = "model_config"
#: The engine option of an engine whose ranks build the job's model from its shape.
SHAPED = "model_shape"
#: Keys that hold a Hugging Face config's depth.
DEPTH_KEYS = ("num_hidden_layers", "n_layer", "num_layers")


@dataclass(frozen=True)
class RunModel:
    """The model a run builds, and what it reports about it."""

    shape: memory.Model
    """Its shape, as built (depth cut to ``--layers``): what the estimates count."""
    config: dict | None = None
    """What the ranks build from (depth cut): the ``config.json`` of ``from_config``, or for an
    engine that builds a shape, the fields of :attr:`shape`; None: the stand-in."""
    named: NamedModel | None = None
    """The job's model as resolved; None when the job names none or the stand-in is asked."""
    stand_in: str = "tiny"
    """The stand-in's name (``tiny``, ``125m``), built when ``config`` is None."""
    said: str | None = None
    """Why the stand-in runs although it was not asked for (said first); None otherwise."""
    layers: int | None = None
    """``--layers``: the depth it was cut to; None: the job's own."""
    file: str = "model/config.json"
    """Where in the work folder the ranks read ``config``."""

    @property
    def sixteen_bit(self) -> bool:
        """Whether the ranks build it in bf16 or fp16: its ``config.json`` says so (``dtype``,
        ``torch_dtype``), which ``from_config`` honours (a parity run aside: it builds fp32)."""
        said = (self.config or {}).get("dtype") or (self.config or {}).get("torch_dtype")
        return said in ("bfloat16", "float16")

    @property
    def source(self) -> str:
        if self.named is not None:
            return str(self.named.source)
        return f"--model {self.stand_in}, built in code"

    @property
    def architecture(self) -> str:
        if self.named is not None:
            return str(self.named.architecture)
        return f"GPT ({self.stand_in} stand-in)"

    def output(self, parameters: int | None) -> dict:
        """``--json``'s ``model``: where it came from, what it is, its parameters as the ranks
        counted them on the built model (None when they did not say)."""
        return {
            "source": self.source,
            "architecture": self.architecture,
            "parameters": parameters,
            "estimated_parameters": self.shape.parameters,
            "layers": self.layers,
            "stand_in": self.named is None,
            "said": self.said,
        }


def line(model: dict) -> str:
    """``model: LlamaForCausalLM, 156,480 parameters (from PATH)``: the first line of a report,
    from its ``--json`` ``model`` (:meth:`RunModel.output`)."""
    counted = model["parameters"]
    what = f"{counted:,} parameters" if counted else "parameters not reported"
    layers = model["layers"]
    cut = f", cut to {layers} layer{'s' if layers != 1 else ''}" if layers else ""
    head = f"model: {model['architecture']}, {what}{cut} (from {model['source']})"
    return f"{head}; {model['said']}" if model["said"] else head


def choose(
    path: str,
    named: NamedModel | None,
    framework: str,
    command: str,
    stand_in: str | None,
    layers: int | None = None,
    model_config: str | None = None,
    ranks_here: int | None = None,
    sequence_length: int | None = None,
) -> RunModel:
    """The model ``command`` (``smoke``, ``tune``, ``estimate``) builds for ``path`` on the
    ``framework`` engine: ``named`` is what the file names (resolved without
    ``model_config``), ``stand_in`` the ``--model`` asked for, ``ranks_here`` the ranks this
    machine's memory holds (None: they run elsewhere)."""
    if stand_in is not None:
        if model_config is not None or layers is not None:
            raise InputError(
                f"--model {stand_in} is the stand-in built in code: give it without "
                "--model-config and --layers, which are for the job's model"
            )
        return RunModel(memory.model_named(stand_in, sequence_length), stand_in=stand_in)
    if model_config is not None:
        shaped, architecture = config_json(Path(model_config))
        named = NamedModel(f"--model-config {model_config}", model_config, architecture, shaped)
    named = _own(named)
    if named is None:
        if command == "estimate":
            raise InputError(f"{path} names no model: {GIVE_ESTIMATE}")
        if command != "smoke":
            raise InputError(f"{path} names no model: {GIVE}the stand-in (nothing was started)")
        return RunModel(
            memory.model_named("tiny", sequence_length),
            said=f"{path} names no model: the tiny stand-in runs ({GIVE}the stand-in)",
        )
    if command == "estimate":
        if named.model is None:
            raise InputError(f"{named.named}: {named.why}; or a preset as --model")
        return RunModel(_cut(named.model, layers, named.named), named=named, layers=layers)
    options = engine(framework).options
    builds = BUILDS in options or SHAPED in options
    if builds and named.model is None:
        raise InputError(f"{named.named}: {named.why}; or --model tiny for the stand-in")
    if SHAPED in options and named.model is not None:
        shape = _cut(named.model, layers, named.named)
        if ranks_here:
            check_host_memory(shape, ranks_here, named.named)
        as_json = dataclasses.asdict(shape)
        return RunModel(shape, as_json, named, layers=layers, file="model/shape.json")
    config = hf_config(named) if builds else None
    if config is None:
        what = named.architecture or named.named
        why = f"the {framework} engine does not build the job's model ({what}) yet"
        if command != "smoke":
            raise InputError(
                f"{path}: {why}; tune the stand-in with --model tiny, or choose an engine that "
                "builds it with --framework (nothing was started)"
            )
        tiny = memory.model_named("tiny", sequence_length)
        return RunModel(tiny, said=f"{why}: the tiny stand-in runs")
    assert named.model is not None  # a config.json that resolved
    shape = _cut(named.model, layers, named.named)
    check_buildable(config, str(_config_file(named)))
    if ranks_here:
        check_host_memory(shape, ranks_here, named.named)
    return RunModel(shape, _cut_config(config, layers), named, layers=layers)


def hf_config(named: NamedModel) -> dict | None:
    """The ``config.json`` the model was resolved from, read; None when its shape came from
    elsewhere (Megatron's flags, a torchtune builder, a torchtitan flavor)."""
    found = _config_file(named)
    if found is None:
        return None
    data = json.loads(found.read_text(encoding="utf-8"))  # read once already by the resolver
    return data if isinstance(data, dict) else None


def _config_file(named: NamedModel) -> Path | None:
    if named.source is None:
        return None
    path = Path(named.source)
    path = path / "config.json" if path.is_dir() else path
    return path if path.suffix == ".json" and path.is_file() else None


def check_buildable(config: dict, where: str) -> None:
    """Refuse a config that transformers cannot build as a causal language model here (or at
    all, where transformers is not installed)."""
    import importlib.util

    if importlib.util.find_spec("transformers") is None:
        raise InputError(
            f"{where}: the ranks build it with transformers, which is not installed here: "
            "pip install transformers, or --model tiny for the stand-in (nothing was started)"
        )
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    kind = config.get("model_type")
    if kind not in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        raise InputError(
            f"{where}: model_type {kind!r} is not a causal language model the installed "
            f"transformers builds; {GIVE}the stand-in (nothing was started)"
        )


def check_host_memory(shape: memory.Model, ranks: int, named: str) -> None:
    """Refuse a model whose bf16 copy on each of ``ranks`` ranks exceeds this machine's memory
    (every rank builds the whole model on the host before it shards or moves it)."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    need = 2 * shape.parameters * ranks
    if need > total:
        gib = memory.GIB
        raise InputError(
            f"{named}: {shape.parameters:,} parameters in bf16 × {ranks} rank(s) is "
            f"{need / gib:.1f} GiB, more than this machine's {total / gib:.1f} GiB; give "
            "--layers N (the same architecture, fewer layers), fewer ranks, or --model tiny "
            "(nothing was started)"
        )


def _cut(shape: memory.Model, layers: int | None, named: str) -> memory.Model:
    if layers is None:
        return shape
    if layers > shape.layers:
        raise InputError(f"--layers {layers}: {named} has {shape.layers} layers; give at most that")
    return replace(shape, layers=layers)


def _cut_config(config: dict, layers: int | None) -> dict:
    """``config`` with its depth (and any per-layer list) cut to ``layers``."""
    if layers is None:
        return config
    inner = config.get("text_config") if isinstance(config.get("text_config"), dict) else None
    cut = dict(inner if inner is not None else config)
    for key in DEPTH_KEYS:
        if key in cut:
            cut[key] = layers
    if isinstance(cut.get("layer_types"), list):
        cut["layer_types"] = cut["layer_types"][:layers]
    return config | {"text_config": cut} if inner is not None else cut


def named_in(read: FileRead, model_config: str | None) -> NamedModel | None:
    """The model the file ``read`` names (a spec names none, nor a file that leaves it to what
    runs it), resolved without ``model_config`` (which :func:`choose` reads itself)."""
    if model_config is not None or read.framework is None or read.reading is None:
        return None
    from translator.inspection import named_model

    return _own(named_model(read.framework, read.reading))


def _own(named: NamedModel | None) -> NamedModel | None:
    """``named``, unless it says the job names no model of its own (run as one naming none)."""
    return named if named is not None and named.names else None
