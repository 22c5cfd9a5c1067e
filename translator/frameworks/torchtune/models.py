"""The model a torchtune config builds, read without torch: ``model._component_`` names a
model builder of torchtune's (``torchtune.models.llama3_2.llama3_2_1b``: its sizes are fixed in
torchtune's source, copied here in :data:`BUILDERS`), or a family's component builder with the
sizes written as its arguments (``torchtune.models.llama3.llama3`` with ``vocab_size``,
``num_layers``...). A LoRA or QLoRA builder (``lora_``, ``qlora_``) builds its base's shape
with adapters beside it; the shape is the base's. Anything else is unknown, saying why.
"""

from __future__ import annotations

from pathlib import Path

from translator.model.memory import Model
from translator.model.named_model import NamedModel, resolve
from translator.reading import Reading

#: Each family's component builder (``torchtune.models.FAMILY.FAMILY``) -> the defaults of its
#: arguments beyond the sizes (Gemma's builders tie the head with no argument to say so).
FAMILIES: dict[str, dict] = {
    "llama2": {},
    "llama3": {},
    "llama3_1": {},
    "llama3_2": {"tie_word_embeddings": True},
    "mistral": {},
    "phi3": {},
    "qwen2": {"q_proj_bias": True},
    "qwen3": {"q_proj_bias": True},
    "gemma": {"tie_word_embeddings": True},
    "gemma2": {"tie_word_embeddings": True},
}
#: Families whose layers norm before and after attention and the MLP (four norms).
SANDWICH = frozenset({"gemma2"})
#: Families whose component computes a missing ``intermediate_dim`` from ``embed_dim``
#: (``scale_hidden_dim_for_mlp``).
SCALED_MLP = frozenset({"llama2", "llama3", "llama3_1", "llama3_2"})
#: The sizes a component builder takes, in the order of :data:`BUILDERS`' rows.
SIZES = ("vocab_size", "num_layers", "num_heads", "num_kv_heads", "embed_dim", "intermediate_dim")
TIED = {"tie_word_embeddings": True}
QWEN3 = {"q_proj_bias": False, "q_norm": True}
#: torchtune's model builders (torchtune main's ``_model_builders.py``; ``_base`` and
#: ``_instruct`` twins share a row) -> (family, sizes, other arguments).
BUILDERS: dict[str, tuple] = {
    "gemma_2b": ("gemma", 256000, 18, 8, 1, 2048, 16384, {}),
    "gemma_7b": ("gemma", 256000, 28, 16, 16, 3072, 24576, {"head_dim": 256}),
    "gemma2_2b": ("gemma2", 256000, 26, 8, 4, 2304, 9216, {"head_dim": 256}),
    "gemma2_9b": ("gemma2", 256000, 42, 16, 8, 3584, 14336, {"head_dim": 256}),
    "gemma2_27b": ("gemma2", 256000, 46, 32, 16, 4608, 36864, {"head_dim": 128}),
    "llama2_7b": ("llama2", 32000, 32, 32, 32, 4096, None, {}),
    "llama2_13b": ("llama2", 32000, 40, 40, 40, 5120, 13824, {}),
    "llama2_70b": ("llama2", 32000, 80, 64, 8, 8192, 28672, {}),
    "llama3_8b": ("llama3", 128256, 32, 32, 8, 4096, 14336, {}),
    "llama3_70b": ("llama3", 128256, 80, 64, 8, 8192, 28672, {}),
    "llama3_1_8b": ("llama3_1", 128256, 32, 32, 8, 4096, 14336, {}),
    "llama3_1_70b": ("llama3_1", 128256, 80, 64, 8, 8192, 28672, {}),
    "llama3_1_405b": ("llama3_1", 128256, 126, 128, 8, 16384, 53248, {}),
    "llama3_2_1b": ("llama3_2", 128256, 16, 32, 8, 2048, 8192, {}),
    "llama3_2_3b": ("llama3_2", 128256, 28, 24, 8, 3072, 8192, {}),
    "mistral_7b": ("mistral", 32000, 32, 32, 8, 4096, 14336, {}),
    "phi3_mini": ("phi3", 32064, 32, 32, 32, 3072, 8192, {}),
    "phi4_14b": ("phi3", 100352, 40, 40, 10, 5120, 17920, {}),
    "qwen2_7b": ("qwen2", 152064, 28, 28, 4, 3584, 18944, {}),
    "qwen2_0_5b": ("qwen2", 151936, 24, 14, 2, 896, 4864, TIED),
    "qwen2_1_5b": ("qwen2", 151936, 28, 12, 2, 1536, 8960, TIED),
    "qwen2_5_0_5b": ("qwen2", 151936, 24, 14, 2, 896, 4864, TIED),
    "qwen2_5_1_5b": ("qwen2", 151936, 28, 12, 2, 1536, 8960, TIED),
    "qwen2_5_3b": ("qwen2", 151936, 36, 16, 2, 2048, 11008, TIED),
    "qwen2_5_7b": ("qwen2", 152064, 28, 28, 4, 3584, 18944, {}),
    "qwen2_5_14b": ("qwen2", 152064, 48, 40, 8, 5120, 13824, {}),
    "qwen2_5_32b": ("qwen2", 152064, 64, 40, 8, 5120, 27648, {}),
    "qwen2_5_72b": ("qwen2", 152064, 80, 64, 8, 8192, 29568, {}),
    "qwen3_0_6b": ("qwen3", 151936, 28, 16, 8, 1024, 3072, QWEN3 | TIED | {"head_dim": 128}),
    "qwen3_1_7b": ("qwen3", 151936, 28, 16, 8, 2048, 6144, QWEN3 | TIED),
    "qwen3_4b": ("qwen3", 151936, 36, 32, 8, 2560, 9728, QWEN3 | TIED | {"head_dim": 128}),
    "qwen3_8b": ("qwen3", 151936, 36, 32, 8, 4096, 12288, QWEN3),
    "qwen3_14b": ("qwen3", 151936, 40, 40, 8, 5120, 17408, QWEN3),
    "qwen3_32b": ("qwen3", 151936, 64, 64, 8, 5120, 25600, QWEN3 | {"head_dim": 128}),
}
#: Builders that are another's under a new name (``llama3_3_70b = llama3_1_70b``).
ALIASES = {"llama3_3_70b": "llama3_1_70b"}
#: The prefixes of a builder with adapters (its base's shape).
ADAPTERS = ("lora_", "qlora_")


def from_mapping(data: dict, where: str, near: Path) -> NamedModel | None:
    """The model a torchtune config's ``model:`` builds; None when it has no builder."""
    section = data.get("model")
    if not isinstance(section, dict) or not isinstance(section.get("_component_"), str):
        return None
    component = section["_component_"]
    named = f"{where}: model._component_ {component}"
    name = component.rsplit(".", 1)[-1]
    base = name.removeprefix(ADAPTERS[0]).removeprefix(ADAPTERS[1])
    if base in FAMILIES:
        args = {k: v for k, v in section.items() if k != "_component_"}
        return _shaped(named, base, args, f"{where}: model ({component} with its arguments)")
    key = ALIASES.get(base, base)
    row = BUILDERS.get(key) or BUILDERS.get(key.removesuffix("_base").removesuffix("_instruct"))
    if row is None:
        return NamedModel(
            named,
            None,
            None,
            None,
            f"{name} is not a torchtune model builder batchspec knows (it knows the builders of "
            f"{', '.join(FAMILIES)}); give --model-config",
        )
    family, *sizes, given = row
    args = dict(zip(SIZES, sizes, strict=True)) | given
    return _shaped(named, family, args, f"torchtune's {base}", architecture=base)


def _shaped(
    named: str, family: str, args: dict, source: str, architecture: str | None = None
) -> NamedModel:
    """The shape ``family``'s component builder makes of ``args``; unknown when a size is
    missing or not a count."""
    given = FAMILIES[family] | args
    if given.get("intermediate_dim") is None and family in SCALED_MLP:
        given["intermediate_dim"] = scaled_mlp(given.get("embed_dim"))
    sizes: dict[str, int] = {k: given.get(k) for k in SIZES}  # type: ignore[misc]
    wrong = [k for k, v in sizes.items() if not isinstance(v, int) or isinstance(v, bool) or v < 1]
    if wrong:
        why = f"model.{', model.'.join(wrong)} not given as a positive integer; give --model-config"
        return NamedModel(named, None, None, None, why)
    heads, hidden = sizes["num_heads"], sizes["embed_dim"]
    head_dim = given.get("head_dim") or hidden // heads
    model = Model(
        name=architecture or family,
        layers=sizes["num_layers"],
        hidden=hidden,
        heads=heads,
        kv_heads=sizes["num_kv_heads"],
        ffn=sizes["intermediate_dim"],
        vocab=sizes["vocab_size"],
        gated=True,
        tied=bool(given.get("tie_word_embeddings", False)),
        biases=False,
        head_dim=0 if head_dim * heads == hidden else head_dim,
        qkv_bias=bool(given.get("q_proj_bias", False)),
        qk_norm=bool(given.get("q_norm", False)),
        layer_norms=4 if family in SANDWICH else 2,
    )
    return NamedModel(named, source, architecture or f"{family} (torchtune)", model)


def scaled_mlp(embed_dim: object, multiple_of: int = 256) -> int | None:
    """torchtune's ``scale_hidden_dim_for_mlp``: two thirds of 4 × ``embed_dim``, rounded up to
    a multiple of 256 (Llama 2 7B: 11008)."""
    if not isinstance(embed_dim, int) or isinstance(embed_dim, bool):
        return None
    hidden = int(2 * 4 * embed_dim / 3)
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)


def named_model(reading: Reading) -> NamedModel | None:
    """The model a torchtune reading names: its config's own way (:func:`from_mapping`, a job's
    config with the command line's overrides), else the general reading."""
    return resolve(reading, own=from_mapping)
