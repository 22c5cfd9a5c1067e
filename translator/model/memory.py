"""Memory per GPU before any launch: model states, activations, logits and a fixed overhead.

- Model states: bytes per parameter for weights, gradients and optimizer state (mixed
  precision: 2 + 4 + 12, Megatron's 18; fp32: 4 + 4 + 8), each divided by the data-parallel
  ranks where the ZeRO stage shards it (optimizer from stage 1, gradients from 2, weights at 3;
  Megatron's distributed optimizer is stage 1: megatron-core shards its fp32 main weights and
  Adam states, not its gradient buffer, which is Megatron's own ``6 + 12/DP``), over the
  parameters of the most loaded rank (its share of the layers over TP and PP, and the embedding
  on the first stage). A part offloaded to CPU memory takes nothing on the GPU (DeepSpeed's own
  estimators: ZeRO-Offload's optimizer keeps its states and gradients on the CPU).
- Under DeepSpeed's ZeRO optimizer (:attr:`RunSettings.zero_optimizer`), its gradients and
  ZeRO-3's gathered largest layer as it keeps them and its estimators count them
  (:func:`zero_gradients`, :func:`gathered`), and the CPU memory of a node as they give it
  (:func:`host_memory`): 2Ψ + 2Ψ + 12Ψ/N at stage 1, 2Ψ + 18Ψ/N at 2, 18Ψ/N + 4 × the
  largest layer at 3.
- Activations per layer after Korthikanti et al. 2022 (arXiv:2205.05198, Table 2), generalised
  to the model's MLP width, gated MLPs and grouped-query attention: ``s·b·h·(10 + split/t)``
  16-bit bytes, where ``split`` holds what TP divides (Q, K, V, the projection input and the
  MLP's F-sized tensors); ``+ 5·a·s/(h·t)`` for eager attention's s² scores (not with flash
  attention or selective recompute); the rest ``/ t`` too under sequence parallelism; ``2·s·b·h``
  per layer plus one layer's working set under full recompute. Context parallelism divides
  ``s``. fp32 activations take twice the bytes.
- The pipeline in-flight factor: the first stage holds ``min(p, m)`` micro-batches of its
  ``L / p`` layers with 1F1B, ``L·(1 + (p − 1)/(p·v))`` layers with ``v`` virtual stages
  (Megatron's ``report_theoretical_memory``).
- Logits on the last stage: ``s·b·V/t`` in the activation dtype plus an fp32 copy for the loss.
- A fixed overhead (CUDA context, NCCL, the allocator's slack): 1 GiB unless told.

Pure arithmetic: no framework, nothing downloaded. Models come from :data:`PRESETS` or a local
Hugging Face ``config.json`` (:func:`read_hf_config`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from translator.words import parsing
from translator.words.errors import InputError
from translator.words.files import read_text

if TYPE_CHECKING:
    from translator.spec import BatchSpec

GIB = 1024**3


@dataclass(frozen=True)
class Model:
    """A decoder-only transformer's shape."""

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    """Key/value heads (fewer than ``heads`` with grouped-query attention)."""
    ffn: int
    """The MLP's inner width F."""
    vocab: int
    gated: bool = False
    """SwiGLU-style MLP (three matrices; gate, up and activation outputs stored)."""
    tied: bool = True
    """The output head shares the embedding's weights."""
    positions: int = 0
    """Rows of a learned position embedding (0 for rotary)."""
    biases: bool = True
    """GPT-style: LayerNorms with a bias and biases in every linear layer; Llama-style models
    have RMSNorm weights only and no biases."""
    head_dim: int = 0
    """Width of one attention head when the config sets it apart from ``hidden / heads``
    (Gemma 2, Qwen 3); 0: ``hidden / heads``."""
    qkv_bias: bool = False
    """Biases on the query, key and value projections of a model with no other biases (Qwen 2;
    ``attention_bias`` of the Llama family)."""
    out_bias: bool = False
    """A bias on the attention's output projection of a model with no other biases
    (``attention_bias`` of Llama, Gemma, Qwen 3; Seed-OSS's ``attention_out_bias``)."""
    mlp_bias: bool = False
    """Biases on the MLP's projections of a model with no other biases (``mlp_bias`` of Llama,
    Granite, SmolLM3)."""
    qk_norm: bool = False
    """A norm of one head's width on the queries and on the keys (Qwen 3, Gemma 3; Megatron's
    ``--qk-layernorm``, a LayerNorm with its bias in a model with biases)."""
    layer_norms: int = 2
    """Norms per layer: 2, or 4 with norms after attention and after the MLP too (Gemma 2, 3),
    or 1 where attention and the MLP share one (phi-2)."""
    head_bias: bool = False
    """A bias on the output head (phi-2)."""

    @property
    def layer_parameters(self) -> int:
        h, d = self.hidden, self.head_dim or self.hidden // self.heads
        q, kv = self.heads * d, self.kv_heads * d
        attention = 2 * h * q + 2 * h * kv
        mlp = (3 if self.gated else 2) * h * self.ffn
        per_norm = 2 if self.biases else 1  # a LayerNorm's bias beside its weight
        norms = (self.layer_norms * h + (2 * d if self.qk_norm else 0)) * per_norm
        return attention + mlp + norms + self.layer_biases

    @property
    def layer_biases(self) -> int:
        """The biases of one layer's projections; a gated MLP's input projection has two
        outputs of the MLP's width (gate and up: megatron-core's ``linear_fc1``)."""
        h, d = self.hidden, self.head_dim or self.hidden // self.heads
        q, kv = self.heads * d, self.kv_heads * d
        mlp = (2 if self.gated else 1) * self.ffn + h
        if self.biases:
            return q + 2 * kv + h + mlp
        return (q + 2 * kv) * self.qkv_bias + h * self.out_bias + mlp * self.mlp_bias

    @property
    def largest_layer(self) -> int:
        """The parameters of its largest module (its own, not its children's, as DeepSpeed's
        ``model_to_params`` finds it): the embedding at any real vocabulary, else a layer's
        widest projection."""
        h = self.hidden
        return max(self.vocab * h, self.positions * h, h * self.ffn)

    @property
    def parameters(self) -> int:
        embedding = self.vocab * self.hidden * (1 if self.tied else 2)
        final_norm = self.hidden * (2 if self.biases else 1)
        return (
            self.layers * self.layer_parameters
            + embedding
            + final_norm
            + self.positions * self.hidden
            + (self.vocab if self.head_bias else 0)
        )


PRESETS = {
    # The smoke engines' models (translator.rank.model): GPT-style, tied head, learned positions.
    "tiny": Model("tiny", 2, 64, 4, 4, 256, 512, positions=64),
    "125m": Model("125m", 12, 768, 12, 12, 3072, 50304, positions=1024),
    # Llama 3 shapes (their published config.json files): GQA with 8 KV heads, SwiGLU.
    "llama3-1b": Model("llama3-1b", 16, 2048, 32, 8, 8192, 128256, gated=True, biases=False),
    "llama3-8b": Model(
        "llama3-8b", 32, 4096, 32, 8, 14336, 128256, gated=True, tied=False, biases=False
    ),
    "llama3-70b": Model(
        "llama3-70b", 80, 8192, 64, 8, 28672, 128256, gated=True, tied=False, biases=False
    ),
}


def model_named(name: str, sequence_length: int | None = None) -> Model:
    """A preset, or a Hugging Face ``config.json`` path; a preset with learned positions gets
    as many rows as the sequence (as the smoke models are built)."""
    if name in PRESETS:
        model = PRESETS[name]
        if model.positions and sequence_length:
            model = replace(model, positions=sequence_length)
        return model
    try:
        folder, exists = Path(name).is_dir(), Path(name).exists()
    except OSError as exc:  # no file can have that name (too long)
        shown = parsing.brief(name, quote="'")
        raise InputError(f"--model {shown}: not a preset nor a file ({exc.strerror})") from None
    if folder:  # a checkpoint's folder: its config.json, as --model-config takes it
        if not (Path(name) / "config.json").is_file():
            raise InputError(f"--model {name}: a folder with no config.json")
        return read_hf_config(str(Path(name) / "config.json"))
    if name.endswith(".json") or exists:
        return read_hf_config(name)
    raise InputError(f"--model {name!r}: not a preset ({', '.join(PRESETS)}) nor a config.json")


def read_hf_config(path: str) -> Model:
    """A model from a local Hugging Face ``config.json`` (Llama/Mistral/Qwen keys, or GPT-2's)."""
    return hf_shape(hf_config_data(path), path, Path(path).name)


def hf_config_data(path: str) -> dict:
    """What a ``config.json`` holds, read as every input is (a regular file of at most 4 MiB
    of UTF-8) and parsed safely (no deep nesting, no lone surrogate, no integer of a thousand
    digits)."""
    try:
        text = read_text(path)
    except InputError as exc:
        raise InputError(f"{path}: cannot read it ({_said(exc, path)})") from None
    try:
        data = parsing.load_json(text, path).data
    except InputError as exc:
        raise InputError(f"{path}: not a JSON config.json ({_said(exc, path)})") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: a config.json is a JSON object, not {type(data).__name__}")
    return data


def _said(exc: InputError, path: str) -> str:
    """What an error about ``path`` says of it, without the path (and line) it starts with."""
    return re.sub(rf"^{re.escape(path)}(?::\d+)?: (?:cannot read: )?", "", str(exc))


#: The keys that give a mixture of experts' expert count: transformers' configs (Qwen-MoE,
#: Mixtral, DeepSeek, OLMoE), megatron-core's and NeMo's ``num_moe_experts``, litgpt's.
EXPERT_KEYS = (
    "num_experts",
    "num_local_experts",
    "n_routed_experts",
    "moe_num_experts",
    "num_moe_experts",
    "n_expert",
)


def experts_in(data: dict) -> str | None:
    """``key N`` where ``data`` describes a mixture of experts (one of :data:`EXPERT_KEYS`
    above 1); None for a dense model."""
    for key in EXPERT_KEYS:
        value = data.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 1:
            return f"{key} {value}"
    return None


def not_counted_moe(where: str, experts: str) -> str:
    """Why a mixture of experts has no count: counted as its dense twin it would be several
    times too small (a Mixtral 8x7B as a 7B)."""
    return (
        f"{where}: a mixture of experts ({experts}), which batchspec does not count (its "
        "experts, router and expert-parallel split); give --model-config with a dense model's "
        "config.json, or --model tiny"
    )


class MixtureOfExperts(InputError):
    """A config of a mixture of experts: no count, but its layers and heads (:attr:`dense`)
    still split as a dense model's do."""

    def __init__(self, message: str, dense: Model):
        super().__init__(message)
        self.dense = dense


def hf_shape(data: dict, where: str, name: str) -> Model:
    """A model from a config's Hugging Face keys (a ``config.json``, or nanotron's
    ``model_config``); ``where`` names it in errors. A mixture of experts is refused
    (:class:`MixtureOfExperts`)."""
    outer = _model_type(data, where)
    data = data.get("text_config", data) if isinstance(data.get("text_config"), dict) else data
    experts = experts_in(data)
    if experts is not None:  # its attention still splits as a dense model's: keep that part
        dense = _dense_shape(data | {"tie_word_embeddings": True}, where, name)
        raise MixtureOfExperts(not_counted_moe(where, experts), dense)
    if "auto_map" in data and outer not in COUNTED:
        # transformers builds its own class for a model type it has and ignores auto_map
        # there (Phi-3's config.json names its repository's code too); for any other type
        # auto_map is the code that would run.
        raise InputError(
            f"{where}: its model's code lives in its repository (auto_map); batchspec runs no "
            "remote code: give --model-config with a config of an architecture transformers has"
        )
    if outer is not None and outer not in COUNTED:
        raise InputError(
            f"{where}: model_type {outer!r} is not an architecture batchspec counts (its count "
            "is checked against what transformers builds for Llama, Mistral, Qwen 2 and 3, "
            "Gemma 1 to 3, Phi-3, Granite, GLM, SmolLM3 and GPT-2 shapes); give --model-config "
            "with the config.json of one of those, or --model tiny"
        )
    return _dense_shape(data, where, name)


def _model_type(data: dict, where: str) -> str | None:
    """The config's ``model_type``: a name, or not given."""
    kind = data.get("model_type")
    if kind is not None and not isinstance(kind, str):
        raise InputError(f"{where}: model_type is {parsing.brief(kind)}, not a name")
    return kind


#: The largest size a config may give (layers, width, heads, vocabulary): far past any model,
#: small enough that what is computed from it stays a float.
MAX_SIZE = 1 << 40


def _dense_shape(data: dict, where: str, name: str) -> Model:

    def first(*keys, default=None):
        for key in keys:
            value = data.get(key)
            if value is not None:
                shown = parsing.brief(value, quote="'")
                if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                    raise InputError(f"{where}: {key} is {shown}, not a positive integer")
                if value > MAX_SIZE:
                    raise InputError(
                        f"{where}: {key} is {shown}: larger than any model's (at most {MAX_SIZE})"
                    )
                return value
        if default is None:
            raise InputError(
                f"{where}: no {' or '.join(keys)} (is this a decoder model's config.json?)"
            )
        return default

    hidden = first("hidden_size", "n_embd", "d_model")
    heads = first("num_attention_heads", "n_head")
    gpt2 = "n_embd" in data
    kind = _model_type(data, where)
    head_dim = first("head_dim", default=hidden // heads)
    return Model(
        name=name,
        layers=first("num_hidden_layers", "n_layer"),
        hidden=hidden,
        heads=heads,
        kv_heads=first("num_key_value_heads", default=heads),
        ffn=first("intermediate_size", "n_inner", "ffn_dim", default=4 * hidden),
        vocab=first("vocab_size"),
        gated=not gpt2 and "intermediate_size" in data,
        tied=_tied(data, kind, gpt2, where),
        positions=first("n_positions", default=1024) if gpt2 else 0,
        biases=gpt2,
        head_dim=0 if head_dim * heads == hidden else head_dim,
        **_biases(data, kind),
        qk_norm=kind in QK_NORM,
        layer_norms=4 if kind in SANDWICH_NORMS else 2,
    )


def _biases(data: dict, kind: str | None) -> dict[str, bool]:
    """Which of a layer's projections have biases (:class:`Model`'s ``qkv_bias``, ``out_bias``
    and ``mlp_bias``), as transformers builds the model type from its config: each the config
    key it reads (its config class's default where the config leaves it out), or always."""
    found = {}
    for part, key in LAYER_BIASES.get(kind or "", LLAMA_BIASES).items():
        if isinstance(key, bool):
            found[part] = key
        else:
            found[part] = bool(data.get(key, (kind, key) in BIASED_BY_DEFAULT))
    return found


def _tied(data: dict, kind: object, gpt2: bool, where: str) -> bool:
    """Whether the output head is the embedding: as the config writes it, else as its model
    type's config class defaults (Llama's is untied, GPT-2's and Gemma's tied)."""
    written = data.get("tie_word_embeddings")
    if written is not None:
        return bool(written)
    if gpt2 or kind in TIED_BY_DEFAULT:
        return True
    if kind in COUNTED:
        return False
    raise InputError(
        f"{where}: no tie_word_embeddings and no model_type whose default batchspec knows, so "
        "whether the output head is the embedding is unknown; write tie_word_embeddings "
        "(true or false)"
    )


#: The model types whose analytic count equals the parameters transformers builds from their
#: config (each checked on the meta device by tests/test_named_model.py). Others differ
#: (GPT-NeoX's biases and plain MLP, OLMo 2's full-width q/k norms, Phi-2's shared norm, a
#: multimodal model's vision tower) and are refused rather than miscounted.
COUNTED = frozenset(
    {"llama", "mistral", "ministral3", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text",
     "vaultgemma", "phi3", "granite", "glm", "ernie4_5", "seed_oss", "smollm3", "cwm", "gpt2"}
)  # fmt: skip
#: Of :data:`COUNTED`, the model types whose config class ties the output head to the
#: embedding when a config does not say (transformers' defaults); the others keep their own.
TIED_BY_DEFAULT = frozenset(
    {"gpt2", "gemma", "gemma2", "gemma3_text", "vaultgemma", "smollm3", "ernie4_5"}
)
#: Llama's biases: ``attention_bias`` on the query, key, value and output projections,
#: ``mlp_bias`` on the MLP's (``LlamaAttention``, ``LlamaMLP``).
LLAMA_BIASES: dict[str, str | bool] = {
    "qkv_bias": "attention_bias",
    "out_bias": "attention_bias",
    "mlp_bias": "mlp_bias",
}
#: Where the attention alone reads ``attention_bias`` (Gemma, Qwen 3: their MLPs have none).
ATTENTION_BIASES: dict[str, str | bool] = {
    "qkv_bias": "attention_bias",
    "out_bias": "attention_bias",
}
#: Each counted model type's biases, as its transformers modeling code builds them: the config
#: key a projection's ``bias=`` reads, or True where it always has one; a part left out has none
#: (Mistral's and Phi-3's projections never do). GPT-2 has biases everywhere (``Model.biases``).
LAYER_BIASES: dict[str, dict[str, str | bool]] = {
    "llama": LLAMA_BIASES,
    "granite": LLAMA_BIASES,
    "smollm3": LLAMA_BIASES,
    "qwen3": ATTENTION_BIASES,
    "gemma": ATTENTION_BIASES,
    "gemma2": ATTENTION_BIASES,
    "gemma3_text": ATTENTION_BIASES,
    "vaultgemma": ATTENTION_BIASES,
    "qwen2": {"qkv_bias": True},
    "glm": {"qkv_bias": "attention_bias"},
    "seed_oss": {
        "qkv_bias": "attention_bias",
        "out_bias": "attention_out_bias",
        "mlp_bias": "mlp_bias",
    },
    "ernie4_5": dict.fromkeys(("qkv_bias", "out_bias", "mlp_bias"), "use_bias"),
    "cwm": {"mlp_bias": "mlp_bias"},
    "mistral": {},
    "ministral3": {},
    "phi3": {},
    "gpt2": {},
}
#: The (model type, bias key) pairs whose config class defaults to true: a GLM or Seed-OSS
#: config that leaves ``attention_bias`` out has the biases; every other bias key defaults
#: to false.
BIASED_BY_DEFAULT = frozenset({("glm", "attention_bias"), ("seed_oss", "attention_bias")})
#: Model types with a per-head norm on queries and keys (``q_norm``, ``k_norm``).
QK_NORM = frozenset({"qwen3", "qwen3_moe", "gemma3", "gemma3_text"})
#: Model types with four norms a layer (before and after attention and the MLP).
SANDWICH_NORMS = frozenset({"gemma2", "gemma3", "gemma3_text"})


@dataclass(frozen=True)
class RunSettings:
    """How the model is trained, as far as memory goes."""

    micro_batch_size: int
    sequence_length: int
    data_parallel: int = 1
    tensor: int = 1
    pipeline: int = 1
    context: int = 1
    virtual_stages: int | None = None
    micro_batches: int = 1
    """Micro-batches per optimizer step on a rank (the accumulation)."""
    zero_stage: int = 0
    """0-3; Megatron's distributed optimizer counts as 1."""
    zero_optimizer: bool = False
    """The stage is run by DeepSpeed's ZeRO optimizer, counted as it keeps its states (16-bit
    gradients, ZeRO-3's gathered layer) and as its estimators count them, with their CPU
    memory; False: another sharding counted as its stage (Megatron's distributed optimizer,
    FSDP), or none."""
    ranks_per_node: int = 0
    """Ranks (GPUs) on one node, for the CPU memory a node needs; 0: not known (every rank on
    one node)."""
    offload: frozenset[str] = frozenset()
    """Model-state parts kept off the GPU, in CPU memory or on NVMe (of :data:`STATES`)."""
    gradient_bytes: int = 4
    """Bytes per gradient under bf16: fp32 main gradients (4), or 2 where they are kept and
    reduced in bf16 (Megatron's ``--grad-reduce-in-bf16``); fp32 training keeps 4."""
    precision: str = "bf16"
    """``bf16`` (bf16 weights, fp32 gradients and master weights, Adam), ``fp32``, or ``16-bit``
    (a model built in bf16 or fp16 and trained so: its gradients and Adam's two moments in that
    dtype too, as torch's AdamW keeps them; no fp32 copy)."""
    recompute: str = "none"
    """``none``, ``selective`` (the attention scores) or ``full`` (each layer's input only)."""
    attention: str = "flash"
    """``flash`` (scores never stored: flash attention, SDPA) or ``eager``."""
    sequence_parallel: bool = False
    """Megatron's sequence parallelism: the non-TP activations split over TP too."""
    overhead: int = GIB
    """Bytes no formula covers: CUDA context, NCCL, allocator slack."""


#: The :class:`RunSettings` fields a file may fix (:class:`Setting`).
SETTINGS = ("zero_stage", "offload", "gradient_bytes", "sequence_parallel", "recompute")


@dataclass(frozen=True)
class Setting:
    """One thing a file fixes about how it trains, as the memory model takes it."""

    field: str
    """The :class:`RunSettings` field it sets (of :data:`SETTINGS`)."""
    value: object
    """As the field takes it: a ZeRO stage, a recompute mode, ``True``, or the parts offloaded
    (a frozenset of :data:`STATES` names; several such settings add up)."""
    where: str
    """Where the file sets it: ``file:line`` and the key or flag (``ds.json:19
    zero_optimization.stage``)."""
    engine: str | None = None
    """The engine whose setting it is when that is not the file's own framework's (``deepspeed``
    for the ZeRO stage of a DeepSpeed JSON, whoever names it); None: the file's own."""


@dataclass(frozen=True)
class Settings:
    """What a file says about how it trains, as far as the memory model goes."""

    given: tuple[Setting, ...] = ()
    """The settings it fixes; what it does not fix is the framework's default or a flag's."""
    unused: tuple[str, ...] = ()
    """Settings it holds that the memory model cannot use, each a sentence naming where."""

    def __add__(self, other: Settings) -> Settings:
        return Settings(self.given + other.given, self.unused + other.unused)


def run_of(
    spec: BatchSpec,
    sequence_length: int,
    *,
    precision: str = "bf16",
    recompute: str = "none",
    attention: str = "flash",
    sequence_parallel: bool = False,
    distributed_optimizer: bool = False,
    zero_stage: int | None = None,
    zero_optimizer: bool = False,
    offload: frozenset[str] = frozenset(),
    gradient_bytes: int = 4,
    overhead: int = GIB,
) -> RunSettings:
    """The :class:`RunSettings` of a solved :class:`~translator.spec.BatchSpec` (its ranks per
    node where it says); ``zero_stage``, when given, replaces the spec's and
    ``distributed_optimizer``'s."""
    if zero_stage is None:
        zero_stage = max(spec.zero_stage or 0, 1 if distributed_optimizer else 0)
    return RunSettings(
        micro_batch_size=spec.micro,
        sequence_length=sequence_length,
        data_parallel=spec.data_parallel,
        tensor=spec.tensor_parallel_size,
        pipeline=spec.pipeline_parallel_size,
        context=spec.context_parallel_size,
        virtual_stages=spec.virtual_pipeline_stages,
        micro_batches=spec.accumulation,
        zero_stage=zero_stage,
        zero_optimizer=zero_optimizer,
        ranks_per_node=spec.gpus_per_node or 0,
        offload=offload,
        gradient_bytes=gradient_bytes,
        precision=precision,
        recompute=recompute,
        attention=attention,
        sequence_parallel=sequence_parallel,
        overhead=overhead,
    )


@dataclass(frozen=True)
class Part:
    """One part of an estimate."""

    name: str
    """What it holds (``weights``, ``activations``...)."""
    bytes: int
    """Its bytes."""
    formula: str
    """How they are counted, with the numbers put in."""


@dataclass(frozen=True)
class Estimate:
    """The memory of the most loaded GPU, part by part, and of its node's CPU."""

    parts: list[Part]
    """The GPU's parts; they add up to :attr:`total`."""
    host: Part | None = None
    """The CPU memory one node needs for the model states (:func:`host_memory`); None where
    no engine keeps any there."""

    @property
    def total(self) -> int:
        return sum(p.bytes for p in self.parts)

    def as_dict(self) -> dict:
        host = self.host
        return {
            "total_bytes": self.total,
            "parts": [{"name": p.name, "bytes": p.bytes, "formula": p.formula} for p in self.parts],
            "cpu_bytes_per_node": None if host is None else host.bytes,
            "cpu_formula": None if host is None else host.formula,
        }


def estimate(model: Model, run: RunSettings) -> Estimate:
    """The peak memory of the most loaded GPU, part by part, and the CPU memory of its node."""
    return Estimate(
        model_states(model, run)
        + gathered(model, run)
        + [activations(model, run), logits(model, run), Part("overhead", run.overhead, "fixed")],
        host_memory(model, run),
    )


def shard_parameters(model: Model, run: RunSettings) -> int:
    """Parameters on the most loaded rank: its layers over TP, the embedding (over TP) on the
    first stage, and the untied head and the final norm (whole on every TP rank) as well when
    one stage holds both ends."""
    t, p = run.tensor, run.pipeline
    embedding = model.vocab * model.hidden + model.positions * model.hidden
    head = 0 if model.tied or p > 1 else model.vocab * model.hidden
    final_norm = 0 if p > 1 else model.hidden * (2 if model.biases else 1)
    layers = math.ceil(model.layers / p) * model.layer_parameters // t
    return layers + (embedding + head) // t + final_norm


#: Bytes of a parameter's weight, gradient and optimizer state, by precision (mixed bf16's
#: gradient: :attr:`RunSettings.gradient_bytes`).
STATE_BYTES: dict[str, tuple[int, int | None, int]] = {
    "bf16": (2, None, 12),
    "fp32": (4, 4, 8),
    "16-bit": (2, 2, 4),
}
#: The model states' parts, in the order shown, with the ZeRO stage from which each is sharded.
STATES = {"weights": 3, "gradients": 2, "optimizer": 1}


def model_states(model: Model, run: RunSettings) -> list[Part]:
    # ZeRO, FSDP and Megatron's distributed optimizer shard over every rank that holds the same
    # layers: the context-parallel ranks too (megatron-core's dp_cp group, DeepSpeed's
    # sequence-data-parallel group, FSDP's dp_shard_cp mesh).
    n, stage, shard = run.data_parallel * run.context, run.zero_stage, shard_parameters(model, run)
    group = "DP×CP" if run.context > 1 else "DP"
    mixed = run.precision == "bf16"
    weights, gradients, optimizer = STATE_BYTES[run.precision]
    per = {"weights": weights, "gradients": gradients or run.gradient_bytes, "optimizer": optimizer}
    parts = []
    for name, sharded_from in STATES.items():
        divided = stage >= sharded_from and n > 1
        formula = f"{shard:,} params × {per[name]} B" + (f" / {group} {n}" if divided else "")
        if name == "gradients" and run.zero_optimizer and mixed and stage >= 1:
            parts.append(zero_gradients(shard, run, f"{group} {n}"))
        elif name in run.offload:
            parts.append(Part(name, 0, formula + ", offloaded: not on the GPU"))
        else:
            parts.append(Part(name, shard * per[name] // (n if divided else 1), formula))
    return parts


def zero_gradients(shard: int, run: RunSettings, group: str) -> Part:
    """The gradients DeepSpeed's ZeRO optimizer keeps under mixed precision: 16-bit ones, whole
    on each rank until the step at stage 1 (the ZeRO paper's 2Ψ), where each rank's partition
    is copied to fp32 and the rest freed; partitioned from stage 2, with the step's fp32 copy
    (``estimate_zero2_model_states_mem_needs``' 2 + 4 bytes over the ranks); at stage 3 the 4
    bytes over the ranks that make ``estimate_zero3_model_states_mem_needs``' 18. Offloaded,
    the fp32 partition is in CPU memory (and from stage 2 the whole of them, as the
    estimators count it)."""
    n, params = run.data_parallel * run.context, f"{shard:,} params"
    split = f"{params} × (2 + 4) B / {group} (16-bit, fp32 at the step)"
    if run.zero_stage == 1:
        whole = 2 * shard
        if "gradients" in run.offload or whole >= 6 * shard // n:
            return Part("gradients", whole, f"{params} × 2 B (16-bit, whole until the step)")
        return Part("gradients", 6 * shard // n, split)
    if "gradients" in run.offload:
        return Part("gradients", 0, f"{params}, offloaded: not on the GPU")
    if run.zero_stage == 2:
        return Part("gradients", 6 * shard // n, split)
    return Part("gradients", 4 * shard // n, f"{params} × 4 B / {group} (ZeRO-3's estimator)")


def gathered(model: Model, run: RunSettings) -> list[Part]:
    """ZeRO-3's largest layer, gathered whole: 4 bytes a parameter of it, as DeepSpeed's
    ``estimate_zero3_model_states_mem_needs`` counts it beside the partitions (with offload
    too); none at other stages or under another sharding."""
    if not (run.zero_optimizer and run.zero_stage == 3):
        return []
    largest = model.largest_layer // run.tensor
    return [Part("gathered", 4 * largest, f"4 B × the largest layer's {largest:,} params")]


def host_memory(model: Model, run: RunSettings) -> Part | None:
    """The CPU memory one node needs for the model states: under DeepSpeed's ZeRO optimizer,
    what its estimators say (:func:`zero_host_memory`); under another engine, the parts it
    offloads, for each of the node's ranks; None where nothing is kept there."""
    node = run.ranks_per_node or _ranks(run)
    if run.zero_optimizer and run.zero_stage >= 1:
        counted, formula = zero_host_memory(model, run, node)
        factor = f"× {BUFFER_FACTOR:g} (DeepSpeed's estimator)"
        return Part("cpu", int(counted * BUFFER_FACTOR), f"{formula} {factor}")
    if not run.offload:
        return None
    whole = model_states(model, replace(run, offload=frozenset()))
    kept = [p for p in whole if p.name in run.offload]
    per_rank = sum(p.bytes for p in kept)
    names = " + ".join(p.name for p in kept)
    return Part("cpu", per_rank * node, f"{names} offloaded: {per_rank:,} B × {node} ranks")


#: DeepSpeed's estimators' ``additional_buffer_factor``: the CPU memory they give is 1.5 times
#: what they count.
BUFFER_FACTOR = 1.5
#: Bytes a parameter of each model-state part as ZeRO's estimators count them in CPU memory:
#: 16-bit weights, fp32 gradients, fp32 master weights with Adam's two states.
ZERO_HOST_BYTES = {"weights": 2, "gradients": 4, "optimizer": 12}


def zero_host_memory(model: Model, run: RunSettings, node: int) -> tuple[int, str]:
    """The CPU memory of a node of ``node`` ranks under DeepSpeed's ZeRO, as its estimators
    count it before their buffer factor (``estimate_zero2_model_states_mem_needs`` for stages
    1 and 2, which share its optimizer; ``estimate_zero3_model_states_mem_needs`` with
    ``zero_init``), and how."""
    p, nodes = shard_parameters(model, run), max(1, _ranks(run) // node)
    if run.zero_stage == 3 and run.offload:
        # the node's share of what is offloaded
        per = sum(ZERO_HOST_BYTES[name] for name in run.offload)
        return p * per // nodes, f"{p:,} params × {per} B offloaded / {nodes} node(s)"
    if run.zero_stage == 3:
        # under zero.Init each rank builds its largest layer whole, in fp32
        largest = model.largest_layer // run.tensor
        formula = f"4 B × the largest layer's {largest:,} params × {node} ranks (zero.Init)"
        return 4 * largest * node, formula
    start, fp32 = 4 * p * node, f"{p:,} params × 4 B × {node} ranks (fp32 as each starts)"
    if "optimizer" not in run.offload:
        return start, fp32
    # The optimizer's fp32 gradients and states (16 B) of the node's ranks, or their fp32
    # copies where more. DeepSpeed's estimator takes every GPU of the job and the whole 16 B
    # on each node (the same on one node); this, the node's.
    states = 16 * p // nodes
    return max(states, start), f"max({p:,} params × 16 B offloaded / {nodes} node(s), {fp32})"


def _ranks(run: RunSettings) -> int:
    """Every rank of the run."""
    return run.data_parallel * run.context * run.tensor * run.pipeline


def layer_activation_bytes(model: Model, run: RunSettings) -> float:
    """16-bit bytes one layer stores per sample and token of its sequence slice (the
    coefficient ``c`` of ``s·b·h·c``), before the dtype and recompute adjustments."""
    h, t = model.hidden, run.tensor
    kv = model.kv_heads / model.heads
    mlp = (6 if model.gated else 4) * model.ffn / h
    split = 4 + 4 * kv + mlp  # Q, K, V, the projection input, the MLP's F-sized tensors
    unsplit = 10  # two norms' inputs, attention and MLP inputs, two dropout masks
    scores = 5 * model.heads * (run.sequence_length / run.context) / h
    c = (unsplit / t if run.sequence_parallel else unsplit) + split / t
    if run.attention == "eager" and run.recompute == "none":
        c += scores / t
    return c


def activations(model: Model, run: RunSettings) -> Part:
    s = run.sequence_length // run.context
    b, h, p = run.micro_batch_size, model.hidden, run.pipeline
    width = 2 if run.precision == "fp32" else 1  # fp32 activations take twice the bytes
    c = layer_activation_bytes(model, run)
    per_layer = s * b * h * c * width
    if run.virtual_stages and p > 1:
        layers = model.layers * (1 + (p - 1) / (p * run.virtual_stages))
        inflight = f"L·(1 + (p−1)/(p·v)) = {layers:g} layers"
    else:
        layers = model.layers / p * min(p, run.micro_batches)
        inflight = f"L/p × min(p, m) = {layers:g} layers"
    if run.recompute == "full":
        total = s * b * h * 2 * width * layers + per_layer
        formula = f"2·s·b·h × {inflight} + one layer's {c:.1f}·s·b·h (full recompute)"
    else:
        total = per_layer * layers
        formula = f"s·b·h·{c:.1f} × {inflight}"
    return Part("activations", int(total), formula + f", s={s} b={b} h={h}")


def logits(model: Model, run: RunSettings) -> Part:
    s, b, t = run.sequence_length // run.context, run.micro_batch_size, run.tensor
    width = 4 if run.precision == "fp32" else 2
    return Part("logits", s * b * model.vocab * (width + 4) // t, f"s·b·V·({width} + 4 fp32) / t")


def largest_fitting(
    model: Model, run: RunSettings, candidates: list[int], capacity: int
) -> int | None:
    """The largest micro-batch among ``candidates`` whose estimate fits ``capacity`` bytes."""
    fitting = [
        b for b in candidates if estimate(model, replace(run, micro_batch_size=b)).total <= capacity
    ]
    return max(fitting, default=None)
