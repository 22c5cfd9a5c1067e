"""Megatron-Bridge and NeMo: YAML configs of three generations of NVIDIA's keys, all counted by
megatron-core's micro-batch calculator (``global / (micro × DP)`` micro-batches per step, DP =
``world / (TP × PP × CP)``; accumulation is never a key).

- **Megatron-Bridge** (``ConfigContainer``): ``train.global_batch_size``,
  ``train.micro_batch_size``, ``model.tensor_model_parallel_size`` ... A YAML override file (or
  a launch's ``key=value`` overrides, :mod:`.program`) is applied over a Python recipe, so a key
  it does not set is the recipe's: the value the recipe's function sets where
  :mod:`.recipe_values` (read from Megatron-Bridge's source) holds it, else unknown, never a
  default.
- **NeMo 2** (a NeMo-Run recipe's tree): ``data.global_batch_size``, ``data.micro_batch_size``,
  ``trainer.strategy.tensor_model_parallel_size`` ..., the world ``trainer.devices ×
  trainer.num_nodes``, ``trainer.accumulate_grad_batches`` kept at 1; also a recipe's values.
- **NeMo 1** (``megatron_gpt_config.yaml``, a whole config): ``model.global_batch_size``,
  ``model.micro_batch_size``, ``model.tensor_model_parallel_size`` (default 1) ..., the world
  from ``trainer``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from translator.frameworks.megatron_bridge.recipe_values import RECIPES, SOURCE
from translator.frameworks.shared import loss, mcore_schedule
from translator.frameworks.shared.sources import list_source
from translator.reading import Launch, Note, Reading, Source, Value, invalid_value, typo_findings
from translator.spec import BatchSpec
from translator.words import parsing
from translator.words.errors import InputError
from translator.words.findings import Finding, counted, finding

NAME = "megatron-bridge"

#: Spec fields of the parallel sizes every generation has.
SIZES = ("tensor_parallel_size", "pipeline_parallel_size", "context_parallel_size")
#: Spec fields whose null means "none" (the ConfigContainer's default).
OPTIONAL = ("virtual_pipeline_stages", "microbatch_group_size_per_vp_stage")


@dataclass(frozen=True)
class Generation:
    """One generation of NVIDIA's keys for the same megatron-core batch."""

    name: str
    """How messages call it (``Megatron-Bridge``, ``NeMo 2``, ``NeMo 1``)."""
    fields: dict[str, str]
    """Key -> spec field, the global and micro batch first."""
    rampup: str
    """Its ramp-up key (``[start, increment, samples]``)."""
    recipe: bool
    """Whether a key the file does not set is a Python recipe's (unknown); else the parallel
    sizes default to 1, as NeMo 1's model reads them."""
    world: tuple[str, str] | None = None
    """Its world keys (processes per node, nodes), when it has them."""

    def key(self, field: str) -> str:
        """The generation's key for a spec field."""
        return next(k for k, f in self.fields.items() if f == field)


def _megatron_keys(block: str, batch: str) -> dict[str, str]:
    """The keys of one generation: the batch pair in ``batch``, the sizes in ``block``."""
    return {
        f"{batch}.global_batch_size": "global_batch_size",
        f"{batch}.micro_batch_size": "micro_batch_size",
        f"{block}.tensor_model_parallel_size": "tensor_parallel_size",
        f"{block}.pipeline_model_parallel_size": "pipeline_parallel_size",
        f"{block}.context_parallel_size": "context_parallel_size",
        f"{block}.virtual_pipeline_model_parallel_size": "virtual_pipeline_stages",
        f"{block}.expert_model_parallel_size": "expert_parallel_size",
    }


TRAINER = ("trainer.devices", "trainer.num_nodes")
BRIDGE = Generation(
    "Megatron-Bridge",
    _megatron_keys("model", "train")
    | {
        "model.microbatch_group_size_per_vp_stage": "microbatch_group_size_per_vp_stage",
        "dataset.seq_length": "sequence_length",
    },
    "train.rampup_batch_size",
    recipe=True,
)
NEMO2 = Generation(
    "NeMo 2",
    _megatron_keys("trainer.strategy", "data") | {"data.seq_length": "sequence_length"},
    "data.rampup_batch_size",
    recipe=True,
    world=TRAINER,
)
NEMO1 = Generation(
    "NeMo 1",
    _megatron_keys("model", "model") | {"model.encoder_seq_length": "sequence_length"},
    "model.rampup_batch_size",
    recipe=False,
    world=TRAINER,
)
GENERATIONS = (BRIDGE, NEMO2, NEMO1)

#: Megatron-Bridge's switches beside its batch keys.
DECREASE = "train.decrease_batch_size_if_needed"
SCHEDULE = "train.step_batch_size_schedule"
ACCUMULATE = "trainer.accumulate_grad_batches"
#: The ConfigContainer's distributed-optimizer switch (the smoke engine runs it on GPUs only).
OPTIMIZER = "ddp.use_distributed_optimizer"
#: The ConfigContainer's per-token loss switch: the model provider's ``calculate_per_token_loss``
#: (megatron-core's TransformerConfig field, which Bridge's GPTModelProvider inherits), true:
#: the step's loss is divided by all its tokens, false: each micro-batch's by its own.
PER_TOKEN_LOSS = "model.calculate_per_token_loss"
#: NeMo 2's model-config sizes, which its strategy overwrites (set_model_parallel_attributes).
OVERWRITTEN = {
    f"model.config.{name}": f"trainer.strategy.{name}"
    for name in (
        "tensor_model_parallel_size",
        "pipeline_model_parallel_size",
        "context_parallel_size",
    )
}
#: The recipe a NeMo 2 ``nemo llm`` launch runs (``--factory``), as its reading holds it.
FACTORY = "--factory"
#: Every key read, in any generation.
KEYS = tuple(
    dict.fromkeys(
        [k for g in GENERATIONS for k in (*g.fields, g.rampup)]
        + [*TRAINER, ACCUMULATE, DECREASE, SCHEDULE, OPTIMIZER, PER_TOKEN_LOSS, *OVERWRITTEN]
    )
)
#: megatron-core's TransformerConfig fields that make a GPT's shape, all of which an override
#: file that names no recipe must write (:mod:`.models`).
MCORE_SHAPE = (
    "num_layers",
    "hidden_size",
    "num_attention_heads",
    "num_query_groups",
    "ffn_hidden_size",
    "kv_channels",
    "vocab_size",
    "gated_linear_unit",
    "normalization",
    "add_bias_linear",
    "add_qkv_bias",
    "qk_layernorm",
    "share_embeddings_and_output_weights",
    "position_embedding_type",
)
#: The model's shape: those fields under ``model`` (Megatron-Bridge's GPTModelProvider, NeMo 1's
#: model block, which adds its own switches), read by :mod:`.models`.
SHAPE = (
    *MCORE_SHAPE,
    "seq_length",
    "num_moe_experts",
    # NeMo 1's
    "activation",
    "bias",
    "max_position_embeddings",
    "make_vocab_size_divisible_by",
    "tokenizer.library",
    "tokenizer.type",
    "hyena",
)
#: The tokenizer switch of a Megatron-Bridge config: true, the model's vocabulary is the
#: tokenizer's whatever the recipe set.
TOKENIZER_VOCAB = "tokenizer.use_tokenizer_vocab_size"
#: Every key read: the batch's and the model's.
READ = KEYS + tuple(f"model.{k}" for k in SHAPE) + (TOKENIZER_VOCAB,)
#: Keys of a batch block that look like its batch keys but are real (no typo finding).
LOOKALIKES = {"eval_global_batch_size", "eval_micro_batch_size", "rampup_batch_size"}


def generation_of(keys) -> Generation:
    """The generation that keys (dotted, as a file or its overrides set them) are written in:
    ``train.*`` is Megatron-Bridge's, ``data.*`` / ``trainer.strategy.*`` (or a ``nemo llm``
    recipe) NeMo 2's, a batch under ``model`` NeMo 1's; parallel sizes alone are
    Megatron-Bridge's."""
    keys = list(keys)
    if FACTORY in keys:
        return NEMO2
    if any(k.startswith("train.") for k in keys):
        return BRIDGE
    if any(k.startswith(("data.", "trainer.strategy.")) for k in keys):
        return NEMO2
    if any(k in ("model.global_batch_size", "model.micro_batch_size") for k in keys):
        return NEMO1
    return BRIDGE


def generation(reading: Reading) -> Generation:
    """The generation of a reading's keys."""
    return generation_of(reading.values)


# Claiming a file --------------------------------------------------------------------------

_BATCH = {"global_batch_size", "micro_batch_size"}
_PARALLEL = {"tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size"}
#: ConfigContainer blocks that a Bridge override file carries beside ``train``.
_CONTAINER = {"model", "dataset", "scheduler", "ddp", "dist", "rng", "checkpoint", "logger"}
#: Top-level keys of other YAML configs with a ``train:`` block (litgpt's).
_NOT_CONTAINER = {"devices", "num_nodes", "out_dir", "model_name", "precision"}
_MARK = re.compile(r"^[ \t]+(micro_batch_size|global_batch_size|\w+_model_parallel_size)\s*:", re.M)


def claims(text: str) -> bool:
    """A mapping of NVIDIA's blocks: ``train`` with a batch key beside ConfigContainer blocks
    (Megatron-Bridge), ``data`` with one beside ``trainer`` (NeMo 2), ``model`` with one beside
    ``trainer`` (NeMo 1), or ``model`` with parallel sizes and no ``trainer`` (Bridge)."""
    if _MARK.search(text) is None:
        return False
    try:
        data = parsing.load_yaml(text, "-").data
    except InputError:
        return False
    if not isinstance(data, dict):
        return False

    def block(name: str) -> dict:
        value = data.get(name)
        return value if isinstance(value, dict) else {}

    train, model, nemo_data, trainer = (
        block("train"),
        block("model"),
        block("data"),
        block("trainer"),
    )
    if _BATCH & train.keys():
        return bool(_CONTAINER & data.keys()) and not _NOT_CONTAINER & data.keys()
    if trainer and (_BATCH & nemo_data.keys() or _BATCH & model.keys()):
        return True
    return bool(_PARALLEL & model.keys()) and not trainer and not _NOT_CONTAINER & data.keys()


def holds_batch(text: str) -> bool:
    return _MARK.search(text) is not None and "batch_size" in text


# Reading ----------------------------------------------------------------------------------


def read(text: str, where: str) -> Reading:
    doc = parsing.load_mapping(text, where, "a Megatron-Bridge or NeMo config")
    reading = Reading(where, NAME, text)
    for key in READ:
        found = _at(doc, key)
        if found is not None:
            reading.values[key] = found
    gen = generation(reading)
    reading.findings += _typos(doc, gen, where)
    reading.findings += [_duplicate(d, where) for d in doc.duplicates]
    if gen.world is not None:
        trainer_world(reading, gen)
    return reading


def _at(doc: parsing.Document, key: str) -> Value | None:
    """The value of a dotted key, through nested mappings, with its line and span."""
    holder = doc.data
    *blocks, last = key.split(".")
    for name in blocks:
        holder = holder.get(name) if isinstance(holder, dict) else None
    if not isinstance(holder, dict) or last not in holder:
        return None
    line, span = doc.positions.get(key, (0, None))
    value = holder[last]
    if isinstance(value, str) and value.startswith("${"):
        return _interpolated(doc, key, value, line)
    return Value(value, line, span)


def _interpolated(doc: parsing.Document, key: str, value: str, line: int) -> Value:
    """An OmegaConf interpolation: ``${other.key}`` is that key's value (written there, so not
    editable here); anything else (a resolver, a relative path) is unknown."""
    target = value[2:-1]
    if target.startswith("."):  # relative: a key of the same block (``${.encoder_seq_length}``)
        target = key.rpartition(".")[0] + target
    if value.endswith("}") and re.fullmatch(r"[A-Za-z_][\w.]*", target) and target != key:
        found = _at(doc, target)
        if found is not None and found.why_unknown is None:
            return Value(found.value, line, None)
    return Value(
        None, line, None, f"{value} (an OmegaConf interpolation batchspec does not resolve)"
    )


def _typos(doc: parsing.Document, gen: Generation, where: str) -> list[Finding]:
    """Keys of the batch and parallel blocks that look like misspelt batch keys."""
    blocks = {k.rpartition(".")[0] for k in gen.fields}
    lines = {}
    for block in blocks:
        holder: object = doc.data
        for name in block.split("."):
            holder = holder.get(name) if isinstance(holder, dict) else None
        if isinstance(holder, dict):
            for k in holder:
                if str(k) not in LOOKALIKES:
                    key = f"{block}.{k}"
                    lines[key] = doc.positions.get(key, (None,))[0]
    return typo_findings(
        lines,
        list(gen.fields),
        set(KEYS),
        where,
        f"which {gen.name}'s config does not have (it refuses or ignores it)",
        cutoff=0.9,
    )


def _duplicate(dup: parsing.Duplicate, where: str) -> Finding:
    """A key set twice: the YAML loader keeps the later one and says nothing."""
    batch = dup.path in KEYS and not dup.same
    return finding(
        "yaml-duplicate-batch-key" if batch else "yaml-duplicate-key",
        f"{parsing.brief(dup.path, quote='')} is set twice (lines {dup.first} and {dup.again}); "
        "the YAML loader keeps the last one and says nothing",
        hint=f"delete line {dup.first} or line {dup.again}",
        where=f"{where}:{dup.again}",
    )


def trainer_world(reading: Reading, gen: Generation) -> None:
    """NeMo's world: ``trainer.devices × trainer.num_nodes`` (Lightning's, checked against the
    launcher's; one node when ``num_nodes`` is not set); unknown when either is not a count
    (``auto``, ``-1``)."""
    per_node_key, nodes_key = gen.world or TRAINER
    per_node, nodes = reading.values.get(per_node_key), reading.values.get(nodes_key)
    if per_node is None:
        return
    reading.launcher = "trainer"
    reading.launch_keys = {"per_node": per_node_key} | ({"nodes": nodes_key} if nodes else {})
    devices, count = per_node.count, 1 if nodes is None else nodes.count
    reading.launch_counts = {
        k: v for k, v in (("per_node", devices), ("nodes", count)) if v is not None
    }
    if devices is not None and count is not None:
        reading.world_size = devices * count
        return
    key, bad = (per_node_key, per_node) if devices is None else (nodes_key, nodes)
    assert bad is not None  # a missing num_nodes counts as one node
    shown = bad.why_unknown or parsing.brief(bad.value)
    reading.world_unknown = Note(bad.line, f"{key} is {shown}, not a number of processes")


# Interpreting -----------------------------------------------------------------------------


def interpret(reading: Reading, launch: Launch) -> tuple[dict, list[Finding]]:
    """Spec values as megatron-core's calculator takes them from the file (or the job)."""
    findings = list(reading.findings)
    gen = generation(reading)
    values: dict = {}
    absent = []
    for key, field in gen.fields.items():
        v = reading.values.get(key)
        if v is None:
            if field in ("global_batch_size", "micro_batch_size") or (
                gen.recipe and field in SIZES
            ):
                absent.append(key)
            continue
        if v.why_unknown is not None:
            values[field] = None
            findings.append(_unknown(key, v, reading))
        elif v.value is None and field in ("global_batch_size", *OPTIONAL):
            continue  # the dataclass default: micro × DP; no virtual stages
        elif not v.is_count:
            findings.append(invalid_value(key, v, v.file or reading.path))
        else:
            values[field] = v.value
    findings += _blank_world(reading, gen)
    taken = _from_recipe(reading, gen, values, launch)
    findings += _recipe_note(reading, taken)
    findings += _absent(reading, gen, [k for k in absent if k not in taken], values, launch)
    findings += _generation_note(reading, gen)
    findings += _overwritten(reading, gen)
    findings += _accumulation(reading)
    findings += _rampup(reading, gen)
    findings += _switches(reading, values, launch)
    written = reading.values.get(gen.key("global_batch_size"))
    if written is not None and written.value is None and written.why_unknown is None:
        if "micro_batch_size" in values:
            values["gradient_accumulation_steps"] = 1
            findings.append(
                finding(
                    "megatron-bridge-global-default",
                    f"{gen.key('global_batch_size')} is null: megatron-core uses micro × "
                    "data-parallel, one micro-batch per step (no accumulation)",
                    hint=f"write {gen.key('global_batch_size')} explicitly",
                    where=reading.where(gen.key("global_batch_size")),
                )
            )
    return values, findings


#: Lightning's ``Trainer`` (which NeMo hands ``trainer:``) on a None devices / num_nodes:
#: key -> what it takes, its words.
LIGHTNING_REFUSES = {
    "trainer.devices": (
        "a positive integer or auto",
        "Device IDs (GPU/TPU) must be an int, a string, a sequence of ints, but you passed None",
    ),
    "trainer.num_nodes": (
        "a positive integer",
        "`num_nodes` must be a positive integer, but got None.",
    ),
}


def _blank_world(reading: Reading, gen: Generation) -> list[Finding]:
    """A blank ``trainer.devices`` or ``trainer.num_nodes``: NeMo passes it to Lightning's
    ``Trainer`` as None, which refuses it (its default applies only to a missing key)."""
    out = []
    for key in gen.world or ():
        v = reading.values.get(key)
        if v is not None and v.value is None and v.why_unknown is None:
            wants, words = LIGHTNING_REFUSES[key]
            wants += f"; Lightning's Trainer refuses None ({words})"
            out.append(invalid_value(key, v, v.file or reading.path, wants=wants))
    return out


def _unknown(key: str, v: Value, reading: Reading) -> Finding:
    return finding(
        "unknown-value",
        f"{key} is {v.why_unknown}, unknown until the script runs",
        hint=f"write {key} as a literal, or set the variable in the script",
        where=reading.where(key),
    )


def _given(launch: Launch) -> dict[str, int | None]:
    """The parallel sizes the command line gives (``--tp``), which win over the job's recipe."""
    return {field: getattr(launch, field) for field in SIZES}


def _recipe_name(reading: Reading) -> str | None:
    """The Megatron-Bridge recipe a launch runs (``--recipe NAME``), when it is written."""
    recipe = reading.values.get("--recipe")
    return recipe.value if recipe is not None and isinstance(recipe.value, str) else None


def _from_recipe(reading: Reading, gen: Generation, values: dict, launch: Launch) -> dict[str, int]:
    """The values a Megatron-Bridge launch leaves to a recipe whose function sets them
    (:mod:`.recipe_values`), in ``values`` and listed as the recipe's: key -> value. Neither the
    job's keys nor the command line's sizes are replaced."""
    name = _recipe_name(reading)
    if gen is not BRIDGE or name not in RECIPES:
        return {}
    given = _given(launch)
    taken = {
        key: value
        for key, value in RECIPES[name].items()
        if key in gen.fields and key not in reading.values and given.get(gen.fields[key]) is None
    }
    for key, value in taken.items():
        values[gen.fields[key]] = value
        list_source(reading, Source(gen.fields[key], value, f"the recipe {name} ({_version()})"))
    return taken


def _version() -> str:
    """The Megatron-Bridge commit the recipe table was read from, short (``Megatron-Bridge
    067f987``)."""
    return f"Megatron-Bridge {SOURCE.rpartition('@')[2][:7]}"


def _recipe_note(reading: Reading, taken: dict[str, int]) -> list[Finding]:
    """The values taken from the recipe's function: that Megatron-Bridge commit's."""
    if not taken:
        return []
    shown = ", ".join(f"{key} = {value}" for key, value in taken.items())
    one = len(taken) == 1
    return [
        finding(
            "megatron-bridge-recipe-table",
            f"{shown} {'is' if one else 'are'} the recipe {_recipe_name(reading)}'s: its function "
            f"sets {'it' if one else 'them'} in {_version()} ({SOURCE}); a job that runs another "
            "Megatron-Bridge version may get other values",
            hint=f"add {' '.join(f'{k}={v}' for k, v in taken.items())} to the launch's overrides "
            f"to keep {'it' if one else 'them'} whatever the version",
            where=reading.path,
        )
    ]


def _absent(
    reading: Reading, gen: Generation, absent: list[str], values: dict, launch: Launch
) -> list[Finding]:
    """Keys the file (or the job's overrides) leaves to the Python recipe and the recipe table
    does not give: unknown, unless the command line gives the size (``--tp``); NeMo 1's missing
    batch keys are missing."""
    given = _given(launch)
    left = [k for k in absent if given.get(gen.fields[k]) is None]
    if not gen.recipe or not left:
        return []
    for key in left:
        values[gen.fields[key]] = None
    recipe = reading.values.get("--recipe") or reading.values.get(FACTORY)
    whose = f"the recipe {recipe.value}" if recipe is not None and recipe.value else "the recipe"
    return [
        finding(
            "megatron-bridge-recipe-value",
            f"{', '.join(left)} {'is' if len(left) == 1 else 'are'} not set here: {gen.name} "
            f"takes {'it' if len(left) == 1 else 'them'} from {whose} (Python), so "
            f"{'it is' if len(left) == 1 else 'they are'} unknown, not a default",
            hint=f"write {', '.join(left)} in the file or the launch's overrides (or give "
            "--tp, --pp and --cp for the parallel sizes)",
            where=reading.path,
        )
    ]


def _generation_note(reading: Reading, gen: Generation) -> list[Finding]:
    """Which generation the file is; for a NeMo one, the Megatron-Bridge keys it maps to."""
    if gen is BRIDGE:
        return []
    pairs = [
        f"{key} → {BRIDGE.key(field)}"
        for key, field in gen.fields.items()
        if key in reading.values and field != "sequence_length" and key != BRIDGE.key(field)
    ]
    retired = (
        "NeMo 2's LLM collection is being replaced by Megatron-Bridge"
        if gen is NEMO2
        else "NeMo 1's Megatron models were removed in NeMo 2"
    )
    return [
        finding(
            "megatron-bridge-generation",
            f"{gen.name} keys ({retired}); the same megatron-core calculator counts the batch",
            hint="in Megatron-Bridge the keys are " + (", ".join(pairs) or "train.*, model.*"),
            where=reading.path,
        )
    ]


def _overwritten(reading: Reading, gen: Generation) -> list[Finding]:
    """NeMo 2's strategy copies its own parallel sizes over the model config's."""
    if gen is not NEMO2:
        return []
    return [
        finding(
            "megatron-bridge-nemo-overwritten",
            f"{key} is {parsing.brief(reading.values[key].value)}, but NeMo 2's MegatronStrategy "
            f"copies its own sizes over the model config's (set_model_parallel_attributes): "
            f"{strategy} decides",
            hint=f"set {strategy} instead",
            where=reading.where(key),
        )
        for key, strategy in OVERWRITTEN.items()
        if key in reading.values
    ]


def _accumulation(reading: Reading) -> list[Finding]:
    """NeMo's Lightning accumulation must stay 1: Megatron accumulates the micro-batches."""
    v = reading.values.get(ACCUMULATE)
    if v is None or v.value == 1 or v.why_unknown is not None:
        return []
    return [
        finding(
            "megatron-bridge-accumulation",
            f"{ACCUMULATE} is {parsing.brief(v.value)}: megatron-core already runs global / "
            "(micro × data-parallel) micro-batches per step; NeMo 1 refuses any other value "
            "(trainer.accumulate_grad_batches must equal 1), and NeMo 2's strategy zeroes the "
            "gradients at every Lightning step, so the earlier micro-batches' gradients are lost",
            hint=f"set {ACCUMULATE}: 1 and raise the global batch instead",
            where=reading.where(ACCUMULATE),
        )
    ]


def _rampup(reading: Reading, gen: Generation) -> list[Finding]:
    """A ramp-up: the batch is not the written one for the first samples."""
    v = reading.values.get(gen.rampup)
    if v is None or v.value is None:
        return []
    return [
        finding(
            "megatron-bridge-rampup",
            f"{gen.rampup} {parsing.brief(v.value)}: megatron-core's calculator starts at the "
            "ramp-up's first global batch and grows it to the written one over the ramp-up "
            "samples, so the first steps run a smaller batch (Megatron-LM deprecates it for "
            "step_batch_size_schedule, which Megatron-Bridge does not pass on)",
            hint=f"drop {gen.rampup} for a constant global batch",
            where=reading.where(gen.rampup),
        )
    ]


def _switches(reading: Reading, values: dict, launch: Launch) -> list[Finding]:
    """``decrease_batch_size_if_needed`` (which rounds the global batch down) and
    ``step_batch_size_schedule`` (which Megatron-Bridge does not pass on)."""
    out = []
    if reading.values.get(SCHEDULE) is not None and reading.values[SCHEDULE].value:
        out.append(
            finding(
                "megatron-bridge-schedule-unused",
                f"{SCHEDULE} is set, but Megatron-Bridge's initialize passes only the global and "
                "micro batch, rampup_batch_size and decrease_batch_size_if_needed to megatron-"
                "core's calculator: the schedule is not applied",
                hint=f"drop {SCHEDULE}; the global batch is {BRIDGE.key('global_batch_size')}",
                where=reading.where(SCHEDULE),
            )
        )
    decrease = reading.values.get(DECREASE)
    if decrease is None or decrease.value is not True:
        return out
    rounded = _rounded(values, launch)
    where = reading.where(DECREASE)
    if rounded is None or rounded[0] == values.get("global_batch_size"):
        out.append(
            finding(
                "megatron-bridge-decrease-batch",
                f"{DECREASE} is true: where global does not divide by micro × data-parallel "
                "(another world), megatron-core rounds it down instead of failing, and logs it",
                hint=f"set {DECREASE}: false so that a wrong world fails at the start",
                where=where,
            )
        )
        return out
    written, step = values["global_batch_size"], rounded[1]
    if rounded[0] == 0:  # the calculator's "at least 1" assertion refuses it: keep the error
        return out
    values["global_batch_size"] = rounded[0]
    out.append(
        finding(
            "megatron-bridge-rounds-down",
            f"{DECREASE} is true: global {written} does not divide by micro × data-parallel = "
            f"{step}, so megatron-core silently runs {rounded[0]} samples per step "
            f"({counted(rounded[0] // step, 'micro-batch', 'micro-batches')}), not {written}",
            hint=f"set the global batch to {rounded[0]} or {rounded[0] + step}, and "
            f"{DECREASE}: false",
            where=where,
        )
    )
    return out


def _rounded(values: dict, launch: Launch) -> tuple[int, int] | None:
    """``(the global batch megatron-core runs, micro × DP)`` under decrease_batch_size_if_needed,
    when every size is known."""
    world, glob, micro = (
        launch.world_size,
        values.get("global_batch_size"),
        values.get("micro_batch_size"),
    )
    sizes = [values.get(f, getattr(launch, f) or 1) for f in SIZES]
    if None in (world, glob, micro, *sizes):
        return None
    model = sizes[0] * sizes[1] * sizes[2]
    if world % model:
        return None
    step = micro * (world // model)
    return glob // step * step, step


# The spec's side --------------------------------------------------------------------------


def check(spec: BatchSpec) -> list[Finding]:
    """The implied accumulation, and what megatron-core's interleaved schedule refuses."""
    m = spec.accumulation
    return [
        finding(
            "megatron-bridge-accumulation-implied",
            f"no accumulation key: megatron-core runs global {spec.global_batch} / (micro "
            f"{spec.micro} × DP {spec.data_parallel}) = {counted(m, 'micro-batch', 'micro-batches')} "
            f"per step, and checks that it divides only when the job starts (world {spec.world})",
            hint="keep any wrapper's own accumulation at 1 (NeMo's trainer.accumulate_grad_batches)",
        )
    ] + mcore_schedule.findings(spec)


def context(spec: BatchSpec) -> dict:
    return {"spec": spec}


def edits(reading: Reading, spec: BatchSpec) -> dict[str, int | None]:
    """New values for the batch keys and the parallel sizes of the file's generation (a size
    it does not set is written only when it is not 1)."""
    gen = generation(reading)
    out: dict[str, int | None] = {
        gen.key("global_batch_size"): spec.global_batch_size,
        gen.key("micro_batch_size"): spec.micro_batch_size,
    }
    for field in SIZES:
        key, value = gen.key(field), getattr(spec, field)
        if key in reading.values or value != 1:
            out[key] = value
    return out


def insertion(reading: Reading, key: str) -> tuple[int, int]:
    """A key the file lacks sits in a nested block, which ``update`` cannot write: refused."""
    block, _, name = key.rpartition(".")
    raise InputError(
        f"{reading.path}: {key} is not in the file; add {name} under {block}: by hand, then update"
    )


def loss_normalisation(reading: Reading | None, spec: BatchSpec | None) -> list[Finding]:
    """Bridge's ``model.calculate_per_token_loss`` is megatron-core's switch (default false:
    each micro-batch's loss over its own tokens); NeMo's generations keep it elsewhere."""
    if reading is not None:
        v = reading.values.get(PER_TOKEN_LOSS)
        if generation(reading) is not BRIDGE or (v is not None and v.value is True):
            return []
    return loss.per_micro_batch(
        spec,
        f"with {PER_TOKEN_LOSS} false (its default), megatron-core divides each micro-batch's "
        "loss by its own tokens and averages the micro-batches",
        f"set {PER_TOKEN_LOSS}: true",
        reading.where(PER_TOKEN_LOSS) if reading is not None else "megatron-bridge",
    )
