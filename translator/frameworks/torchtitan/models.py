"""The model a torchtitan job trains, read without torchtitan: its llama3 flavors and 0.3.0's
config functions, as shapes read from torchtitan's sources (0.2.2's ``llama3_args``, 0.3.0's
``llama3_configs``), named by a TOML job file's ``[model]`` (≤ 0.2.2, its defaults where the
file leaves them out), by ``--model.name``/``--model.flavor`` flags, or by
``--module``/``--config``. Anything else it names is unknown, saying why."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass

from translator.model.memory import Model
from translator.model.named_model import NamedModel
from translator.reading import Reading
from translator.words.files import suffix_of
from translator.words.parsing import load_toml


@dataclass(frozen=True)
class Flavor:
    """A torchtitan llama3 flavor's arguments, as its model code takes them."""

    dim: int
    """The model width."""
    n_layers: int
    """Transformer blocks."""
    n_heads: int
    """Attention heads."""
    n_kv_heads: int | None
    """Key/value heads; None: ``n_heads``."""
    vocab_size: int
    """Vocabulary size."""
    multiple_of: int
    """The FFN width is rounded up to a multiple of this."""
    ffn_dim_multiplier: float | None
    """Scales the FFN width before rounding; None: 1."""
    tied: bool = False
    """The output head shares the embedding's weights (0.3.0's 1B and 3B)."""


def ffn_hidden_dim(dim: int, multiple_of: int, ffn_dim_multiplier: float | None = None) -> int:
    """torchtitan's SwiGLU width (``compute_ffn_hidden_dim``, ``FeedForward`` before 0.3.0):
    two thirds of 4 × dim, scaled, rounded up to ``multiple_of``."""
    hidden = int(2 * 4 * dim / 3)
    if ffn_dim_multiplier is not None:
        hidden = int(ffn_dim_multiplier * hidden)
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)


def flavor_shape(name: str, flavor: Flavor) -> Model:
    """The shape of a llama3 flavor: SwiGLU, RMSNorm, rotary, no biases."""
    return Model(
        name=name,
        layers=flavor.n_layers,
        hidden=flavor.dim,
        heads=flavor.n_heads,
        kv_heads=flavor.n_kv_heads or flavor.n_heads,
        ffn=ffn_hidden_dim(flavor.dim, flavor.multiple_of, flavor.ffn_dim_multiplier),
        vocab=flavor.vocab_size,
        gated=True,
        tied=flavor.tied,
        biases=False,
    )


_DEBUG = Flavor(256, 6, 16, None, 2048, 256, None)

_8B = Flavor(4096, 32, 32, 8, 128256, 1024, 1.3)

#: torchtitan's llama3 flavors, both generations (0.2.2's attention variants share a shape).
LLAMA3 = {
    "debugmodel": _DEBUG,
    "debugmodel_flex_attn": _DEBUG,
    "debugmodel_varlen_attn": _DEBUG,
    "1B": Flavor(2048, 16, 32, 8, 128256, 1024, 1.5, tied=True),
    "3B": Flavor(3072, 28, 24, 8, 128256, 1024, 1.0, tied=True),
    "8B": _8B,
    "8B_flex": _8B,
    "8B_varlen": _8B,
    "70B": Flavor(8192, 80, 64, 8, 128256, 4096, 1.3),
    "405B": Flavor(16384, 126, 128, 8, 128256, 4096, 1.2),
}

#: torchtitan ≤ 0.2.2's ``[model]`` defaults: a job file without them trains this.
DEFAULT_MODEL = ("llama3", "debugmodel")

#: torchtitan 0.3.0's llama3 config functions (``--config``) -> the flavor they build; the
#: float8/MXFP8/NVFP4 ones convert its linear layers and keep their parameters. Not here:
#: ``llama3_debugmodel_float8_emulate_lora``, whose LoRA adapters add parameters.
LLAMA3_CONFIGS = {
    "llama3_debugmodel": "debugmodel",
    "llama3_debugmodel_varlen_attn": "debugmodel",
    "llama3_debugmodel_dist_gemm": "debugmodel",
    "llama3_debugmodel_float8": "debugmodel",
    "llama3_debugmodel_nvfp4": "debugmodel",
    "llama3_debugmodel_first_85_pct_layers_nvfp4": "debugmodel",
    "llama3_debugmodel_ce_loss": "debugmodel",
    "sft_debugmodel": "debugmodel",
    "llama3_8b": "8B",
    "llama3_8b_first_85_pct_layers_nvfp4": "8B",
    "llama3_8b_mxfp8": "8B",
    "llama3_70b": "70B",
    "llama3_405b": "405B",
}


def torchtitan_model(name: str, flavor: str) -> tuple[Model | None, str]:
    """``(shape, architecture)`` of torchtitan's ``name`` model's ``flavor``; the shape is None
    (the text then says why) for one batchspec does not know."""
    if name == "llama3" and flavor in LLAMA3:
        return flavor_shape(f"{name}-{flavor}", LLAMA3[flavor]), f"{name} {flavor}"
    return None, f"{name} {flavor} is not a torchtitan flavor batchspec knows (llama3's are)"


def torchtitan_config(module: str, function: str) -> tuple[Model | None, str]:
    """``(shape, architecture)`` of torchtitan 0.3.0's ``--module``/``--config``; None (the
    text says why) for a config function batchspec does not know."""
    flavor = (
        LLAMA3_CONFIGS.get(function) if module in ("llama3", "torchtitan.models.llama3") else None
    )
    if flavor is None:
        return None, (
            f"--module {module} --config {function} is a Python function batchspec does not run "
            "and whose model it does not know"
        )
    model, architecture = torchtitan_model("llama3", flavor)
    return model, f"{architecture} ({function})"


#: torchtitan's keys for the model a TOML job file or a launch's flags name.
TORCHTITAN_MODEL = ("model.name", "model.flavor")

#: The flag that names torchtitan ≤ 0.2.2's TOML job file (its ``[model]`` defaults apply).
TORCHTITAN_TOML = "job.config_file"


def named_model(reading: Reading) -> NamedModel | None:
    """The model a torchtitan reading, or a file it names, says: a TOML job file's ``[model]``,
    its ``--model.*`` flags or 0.3.0's ``--module``/``--config``; None when none of them does
    (a Hugging Face name then, as any framework's)."""
    for config in [reading, *reading.partners]:
        found = _from_toml(config) or _from_values(config)
        if found is not None:
            return found
    return None


def _from_toml(reading: Reading) -> NamedModel | None:
    """A TOML job file's ``[model]`` name and flavor (≤ 0.2.2's defaults where the file leaves
    them out: its ``JobConfig`` trains ``llama3`` ``debugmodel``)."""
    if suffix_of(reading.path) != ".toml":
        return None
    try:
        data = load_toml(reading.text)
    except tomllib.TOMLDecodeError:
        return None
    if not any(isinstance(data.get(t), dict) for t in ("training", "parallelism", "model")):
        return None
    model = data.get("model")
    model = model if isinstance(model, dict) else {}
    name, flavor = (model.get(k, d) for k, d in zip(("name", "flavor"), DEFAULT_MODEL))
    where = f"{reading.path}: [model]"
    tokenizer = "tokenizer_path" in model and "hf_assets_path" not in model
    return _flavor(str(name), str(flavor), where, "name" not in model, tokenizer)


def _flavor(name: str, flavor: str, where: str, default: bool, tokenizer: bool) -> NamedModel:
    """torchtitan's ``name`` model's ``flavor``, named at ``where`` (``default``: the job
    leaves it to torchtitan's defaults; ``tokenizer``: 0.1's ``tokenizer_path`` without 0.2's
    ``hf_assets_path``, whose vocabulary replaced the flavor's)."""
    shape, architecture = torchtitan_model(name, flavor)
    named = f"{where} {name} {flavor}" + (" (torchtitan's default)" if default else "")
    if shape is not None and tokenizer:
        why = (
            "torchtitan 0.1 sizes the vocabulary from the tokenizer (tokenizer_path), which "
            "batchspec does not read; give --model-config"
        )
        return NamedModel(named, None, None, None, why)
    if shape is None:
        return NamedModel(named, None, None, None, f"{architecture}; give --model-config")
    return NamedModel(named, f"torchtitan's {name} {flavor}", architecture, shape)


def _from_values(reading: Reading) -> NamedModel | None:
    """The model a launch's values name: ``--model.name``/``--model.flavor`` (or the TOML job
    file's, through ``--job.config_file``), or 0.3.0's ``--module``/``--config``."""
    values = reading.values
    given = {k: values[k] for k in (*TORCHTITAN_MODEL, "module", "config") if k in values}
    where = reading.path
    if "config" in given:
        return _from_config(where, given.get("module"), given["config"])
    if not given and TORCHTITAN_TOML not in values:
        return None
    name, flavor = (
        given[k].value if k in given else d for k, d in zip(TORCHTITAN_MODEL, DEFAULT_MODEL)
    )
    if name is None or flavor is None:
        missing = next(v for v in given.values() if v.value is None)
        return NamedModel(f"{where}: [model]", None, None, None, f"unknown: {missing.why_unknown}")
    files = {v.file for v in given.values() if v.file}
    at = f"{files.pop()}: [model]" if files else f"{where}: [model]"
    tokenizer = "model.tokenizer_path" in values and "model.hf_assets_path" not in values
    return _flavor(str(name), str(flavor), at, not given, tokenizer)


def _from_config(where: str, module, function) -> NamedModel:
    """0.3.0's ``--module M --config F`` (``module``, ``function``: their values)."""
    named = f"{where}: --module {_shown(module)} --config {_shown(function)}"
    if module is None or not all(isinstance(v.value, str) for v in (module, function)):
        why = "unknown: " + ", ".join(
            f"{v.why_unknown or v.value}" for v in (module, function) if v is not None
        )
        return NamedModel(named, None, None, None, f"{why}; give --model-config")
    shape, architecture = torchtitan_config(str(module.value), str(function.value))
    if shape is None:
        return NamedModel(named, None, None, None, f"{architecture}; give --model-config")
    return NamedModel(named, f"torchtitan's {architecture}", architecture, shape)


def _shown(value) -> str:
    return "?" if value is None or value.value is None else str(value.value)
