"""torchtune: a recipe config (``tune run full_finetune_distributed --config x.yaml``) with
``batch_size`` per data-parallel rank and ``gradient_accumulation_steps``, and no global batch
key at all, so nothing in torchtune checks the batch: each optimizer step trains ``batch_size
× data-parallel × gradient_accumulation_steps`` samples. The data-parallel size is ``world //
tensor_parallel_dim`` in torchtune 0.6.1 and ``data_parallel_replicate_dim ×
data_parallel_shard_dim`` on main (:mod:`.generation`). No pipeline parallelism.
"""

from __future__ import annotations

import re

from translator.batch import solve
from translator.frameworks.shared import loss, yaml_insert
from translator.frameworks.torchtune import generation
from translator.model.memory import STATES, Setting, Settings
from translator.reading import Launch, Reading, Value, invalid_value, typo_findings, values_at
from translator.spec import BatchSpec
from translator.words import parsing
from translator.words.errors import InputError
from translator.words.findings import Finding, finding

NAME = "torchtune"

#: torchtune key -> spec field.
KEYS = {
    "batch_size": "micro_batch_size",
    "gradient_accumulation_steps": "gradient_accumulation_steps",
    "tensor_parallel_dim": "tensor_parallel_size",
    "context_parallel_dim": "context_parallel_size",
}
#: Where a job's reading keeps the recipe ``tune run`` starts (not a config key).
RECIPE = "tune run recipe"
#: Keys the recipe reads as ``cfg.KEY``, without a default.
REQUIRED = ("batch_size", "gradient_accumulation_steps")
#: Main's data-parallel dims (``ParallelDims``).
DP_KEYS = ("data_parallel_shard_dim", "data_parallel_replicate_dim")
#: The recipe's FSDP2 switch it hands ``fully_shard`` as ``reshard_after_forward``.
RESHARD = "fsdp_reshard_after_forward"
#: Read too, for what they say about the batch or memory.
OTHER_KEYS = (
    *DP_KEYS,
    "optimizer_in_bwd",
    "tensor_parallel_plan",
    "dataset.packed",
    "tokenizer.max_seq_len",
    "max_steps_per_epoch",
    "enable_activation_checkpointing",
    "fsdp_cpu_offload",
    RESHARD,
)
#: Real torchtune keys that look like batch keys.
LOOKALIKES = {"batch_size_val", "tensor_parallel_plan", "context_parallel_rotate_method"}
#: The recipe's words when it refuses.
TP_PLAN = "Tensor Parallel plan needs to be provided when tensor parallel is enabled."
#: torch's ``fully_shard`` when ``reshard_after_forward`` is None.
RESHARD_REFUSED = (
    "torch's fully_shard refuses None (reshard_after_forward should be a bool or an int "
    "representing the group size to reshard to, not None)"
)
IN_BWD = (
    "Gradient accumulation is not supported with optimizer in bwd. Please set "
    "gradient_accumulation_steps=1, or optimizer_in_bwd=False."
)


def context(spec: BatchSpec) -> dict:
    return {"spec": spec}


def read(text: str, where: str) -> Reading:
    """A torchtune recipe config: its batch keys, with their lines and spans."""
    doc = parsing.load_yaml(text, where)
    if not isinstance(doc.data, dict):
        raise InputError(
            f"{where}: a torchtune config must be a YAML mapping, not {type(doc.data).__name__}"
        )
    reading = Reading(where, NAME, text)
    reading.values = {
        k: _resolved(v, doc.data) for k, v in values_at(doc, [*KEYS, *OTHER_KEYS]).items()
    }
    keys = {str(k): doc.positions.get(str(k), (None,))[0] for k in doc.data}
    reading.findings += typo_findings(
        keys, [*KEYS, *DP_KEYS], LOOKALIKES, where, "so the recipe never reads it"
    )
    reading.findings += [
        finding(
            "yaml-duplicate-batch-key" if d.path in KEYS and not d.same else "yaml-duplicate-key",
            f"{d.path} is set twice (lines {d.first} and {d.again}); OmegaConf keeps the last one",
            hint=f"delete line {d.first} or line {d.again}",
            where=f"{where}:{d.again}",
        )
        for d in doc.duplicates
    ]
    return reading


_INTERPOLATION = re.compile(r"^\$\{([^}]*)\}$")


def _resolved(v: Value, data: dict) -> Value:
    """An OmegaConf interpolation as the recipe sees it: ``${key}`` of another key of the file
    is that key's value (written elsewhere, so ``update`` leaves it); any other (``${oc.env:X}``)
    is unknown until the recipe runs."""
    found = _INTERPOLATION.match(v.value) if isinstance(v.value, str) else None
    if found is None:
        return v
    target: object = data
    for part in found.group(1).split("."):
        target = target.get(part) if isinstance(target, dict) else None
    if isinstance(target, int | bool):
        return Value(target, v.line, None, None)
    return Value(
        None, v.line, None, f"{v.value}, an OmegaConf interpolation resolved when the recipe runs"
    )


def interpret(reading: Reading, launch: Launch) -> tuple[dict, list[Finding]]:
    """Spec values as the recipe counts them on ``launch`` (see :mod:`.generation`)."""
    findings: list[Finding] = []
    values: dict = {}
    counts: dict[str, int] = {}
    newer = [k for k in generation.NEWER_KEYS if k in reading.values]
    parallel_dims, decides = generation.counts_parallel_dims(newer)
    counted = (*REQUIRED, "tensor_parallel_dim", *(generation.NEWER_KEYS if parallel_dims else ()))
    for key in counted:
        v = reading.values.get(key)
        if v is None:
            continue
        if v.why_unknown is not None:
            if key == "tensor_parallel_dim" and _ignores_tensor_parallel(reading, parallel_dims):
                continue  # whatever it is, the recipe does not read it
            values[KEYS.get(key, "data_parallel_size")] = None
            findings.append(_unknown(reading, key, v))
        elif key == "data_parallel_shard_dim" and v.value == -1:
            continue
        elif v.count is None:
            findings.append(invalid_value(key, v, reading.path))
        else:
            counts[key] = v.count
    findings += _blank_reshard(reading)
    absent = [key for key in REQUIRED if key not in reading.values]
    if len(absent) == len(REQUIRED):
        findings.append(_no_batch_keys(reading))
        unknown = {field: None for field in ("micro_batch_size", "gradient_accumulation_steps")}
        return unknown, reading.findings + findings
    findings += [_missing(reading, key) for key in absent]
    if any(f.severity == "error" for f in findings) or None in values.values():
        return values, reading.findings + findings
    micro, accumulation = counts["batch_size"], counts["gradient_accumulation_steps"]
    values |= {"micro_batch_size": micro, "gradient_accumulation_steps": accumulation}
    tp = counts.get("tensor_parallel_dim", 1)
    if tp > 1 and _ignores_tensor_parallel(reading, parallel_dims):
        findings.append(_tp_ignored(reading, tp, parallel_dims, decides))
        tp = 1
    values["tensor_parallel_size"] = tp
    if parallel_dims:
        values["context_parallel_size"] = counts.get("context_parallel_dim", 1)
        findings += _mesh(reading, values, counts, launch.world_size)
    else:
        if newer:
            findings.append(_ignored(reading, newer, decides))
        findings += _tensor_world(reading, tp, launch.world_size)
    findings += _refusals(reading, tp, micro, accumulation)
    if not any(f.severity == "error" for f in findings):
        findings.append(_batch(reading, micro, accumulation, parallel_dims, decides))
        findings += _tail(reading, accumulation, parallel_dims, decides)
        findings += _packed(reading, values)
    return values, reading.findings + findings


def _ignores_tensor_parallel(reading: Reading, parallel_dims: bool) -> bool:
    """Whether the job's recipe is a built-in one that never reads ``tensor_parallel_dim``."""
    recipe = reading.values.get(RECIPE)
    name = recipe.value if recipe is not None else None
    return name in generation.DISTRIBUTED and name not in generation.TENSOR_PARALLEL[parallel_dims]


def _tp_ignored(reading: Reading, tp: int, parallel_dims: bool, decides: str) -> Finding:
    recipe = reading.values[RECIPE].value
    readers = ", ".join(generation.TENSOR_PARALLEL[parallel_dims])
    return finding(
        "torchtune-tp-ignored",
        f"tensor_parallel_dim {tp}: {recipe} in {decides} does not read it (only {readers} "
        "do), so it shards over every rank, and each rank trains its own batch_size",
        hint="delete tensor_parallel_dim (the batch counts every rank), or run "
        "full_finetune_distributed",
        where=reading.where("tensor_parallel_dim"),
    )


def _unknown(reading: Reading, key: str, v: Value) -> Finding:
    return finding(
        "unknown-value",
        f"{key} is {v.why_unknown}",
        hint=f"write {key} in the config, or override it with a literal ({key}=N)",
        where=reading.where(key),
    )


def _missing(reading: Reading, key: str) -> Finding:
    return finding(
        "torchtune-missing-key",
        f"{key} is not set, and the recipe reads it as cfg.{key} with no default "
        "(OmegaConf: Missing key)",
        hint=f"add {key}: N to the config (or {key}=N to the tune run line)",
        where=reading.path,
    )


def _no_batch_keys(reading: Reading) -> Finding:
    """A config without either batch key: not a finetune recipe's (the async GRPO recipe nests
    its batch under ``training:``), so its batch is not read."""
    return finding(
        "torchtune-no-batch-keys",
        "neither batch_size nor gradient_accumulation_steps is set at the top level, where the "
        "finetune recipes read them: this config's recipe keeps its batch elsewhere, which "
        "batchspec does not read",
        hint="for a finetune recipe, add batch_size and gradient_accumulation_steps",
        where=reading.path,
    )


def _ignored(reading: Reading, newer: list[str], decides: str) -> Finding:
    """Main's keys under torchtune 0.6.1, which never reads them."""
    meant = ", ".join(f"{k} {reading.values[k].value}" for k in newer)
    return finding(
        "torchtune-unreleased-keys",
        f"{meant}: keys of torchtune's main branch (ParallelDims), which {decides} does not "
        "read: it shards over world // tensor_parallel_dim data-parallel ranks, with no context "
        "parallelism",
        hint="delete them for torchtune 0.6.1 (or run torchtune main, which reads them)",
        where=reading.where(newer[0]),
    )


def _tensor_world(reading: Reading, tp: int, world: int | None) -> list[Finding]:
    if world is None or world % tp == 0:
        return []
    return [
        finding(
            "world-not-divisible",
            f"world_size {world} must be divisible by tensor_parallel_dim {tp} (the recipe's "
            "words)",
            hint=f"launch a multiple of {tp} processes",
            where=reading.where("tensor_parallel_dim"),
        )
    ]


def _mesh(reading: Reading, values: dict, counts: dict, world: int | None) -> list[Finding]:
    """``ParallelDims._validate``: replicate × shard × tp × cp must be the world (shard -1 is
    inferred as world // (replicate × tp × cp)). Without a world, explicit dims give it."""
    replicate = counts.get("data_parallel_replicate_dim", 1)
    model = values["tensor_parallel_size"] * values["context_parallel_size"]
    shard = counts.get("data_parallel_shard_dim")
    if world is None:
        if shard is not None:
            values["world_size"] = replicate * shard * model
        return []
    if shard is None:
        shard = max(world // (replicate * model), 0)
    if replicate * shard * model == world and shard >= 1:
        return []
    return [
        finding(
            "torchtune-mesh",
            f"Invalid parallel dims: dp_replicate({replicate}) * dp_shard({shard}) * "
            f"tp({values['tensor_parallel_size']}) * cp({values['context_parallel_size']}) != "
            f"WORLD_SIZE({world}) (torchtune's ParallelDims)",
            hint=f"launch {replicate * max(shard, 1) * model} processes, or set "
            "data_parallel_shard_dim: -1 to infer it",
            where=reading.where(next((k for k in DP_KEYS if k in counts), "tensor_parallel_dim")),
        )
    ]


def _blank_reshard(reading: Reading) -> list[Finding]:
    """A blank ``fsdp_reshard_after_forward``: the recipe's ``cfg.get(key, True)`` gives None
    for it (the default is for a missing key), which torch's ``fully_shard`` refuses."""
    v = reading.values.get(RESHARD)
    if v is None or v.value is not None or v.why_unknown is not None:
        return []
    return [invalid_value(RESHARD, v, reading.path, wants=f"true or false: {RESHARD_REFUSED}")]


def _refusals(reading: Reading, tp: int, micro: int, accumulation: int) -> list[Finding]:
    out = []
    bwd = reading.values.get("optimizer_in_bwd")
    if bwd is not None and bwd.value is True and accumulation > 1:
        out.append(
            finding(
                "torchtune-optimizer-in-bwd",
                f"optimizer_in_bwd with gradient_accumulation_steps {accumulation}: {IN_BWD}",
                hint=f"set gradient_accumulation_steps: 1 and batch_size: {micro * accumulation} "
                "(the same global batch), or optimizer_in_bwd: false",
                where=reading.where("optimizer_in_bwd"),
            )
        )
    plan = reading.values.get("tensor_parallel_plan")
    if tp > 1 and (plan is None or plan.value is None):
        out.append(
            finding(
                "torchtune-tp-plan",
                f"tensor_parallel_dim {tp} without a tensor_parallel_plan: {TP_PLAN}",
                hint="add tensor_parallel_plan: {_component_: "
                "torchtune.models.llama3.base_llama_tp_plan} (or your model's plan)",
                where=reading.where("tensor_parallel_dim"),
            )
        )
    return out


def _batch(
    reading: Reading, micro: int, accumulation: int, parallel_dims: bool, decides: str
) -> Finding:
    dp = (
        "data_parallel_replicate_dim × data_parallel_shard_dim"
        if parallel_dims
        else "world // tensor_parallel_dim"
    )
    return finding(
        "torchtune-batch",
        f"torchtune has no global batch key and checks none: each optimizer step trains "
        f"batch_size {micro} × gradient_accumulation_steps {accumulation} on each of {dp} "
        f"data-parallel ranks (as {decides} counts)",
        where=reading.where("batch_size"),
    )


def _tail(reading: Reading, accumulation: int, parallel_dims: bool, decides: str) -> list[Finding]:
    """0.6.1's loop runs every micro-batch of an epoch and steps after each full window, so
    the ones after the last full window are backpropagated, and their gradients (not zeroed at
    the epoch's end) join the next epoch's first step. Main's loop stops after the full
    windows instead (the tail is not trained, every step exact)."""
    if accumulation == 1 or parallel_dims:
        return []
    return [
        finding(
            "torchtune-epoch-tail",
            f"when a rank's micro-batches per epoch are not a multiple of {accumulation}, {decides} "
            "still backpropagates the last ones and does not zero their gradients, so they join "
            "the next epoch's first step, which trains more than the global batch",
            hint=f"make each rank's micro-batches per epoch a multiple of {accumulation} (samples "
            "per epoch a multiple of the global batch), or set max_steps_per_epoch to at most the "
            "full windows of an epoch (the loop then stops right after a step)",
            where=reading.where("gradient_accumulation_steps"),
        )
    ]


def _packed(reading: Reading, values: dict) -> list[Finding]:
    packed = reading.values.get("dataset.packed")
    if packed is None or packed.value is not True:
        return []
    if reading.count("tokenizer.max_seq_len"):
        values["sequence_length"] = reading.count("tokenizer.max_seq_len")
    return [
        finding(
            "torchtune-packed",
            "dataset.packed is true: each row packs several samples up to tokenizer.max_seq_len "
            "tokens, so rows (and tokens) per step are fixed while samples vary",
            where=reading.where("dataset.packed"),
        )
    ]


def check(spec: BatchSpec) -> list[Finding]:
    """What torchtune cannot run: pipeline parallelism (none), context parallelism (none in
    0.6.1, the release this renders for unless a newer torchtune is installed)."""
    out = []
    if spec.pipeline_parallel_size > 1:
        out.append(
            finding(
                "torchtune-no-pipeline",
                f"torchtune's recipes have no pipeline parallelism, but the layout has pipeline "
                f"{spec.pipeline_parallel_size}",
                hint="use pipeline parallel size 1 for torchtune: "
                + _keeps(spec, spec.data_parallel * spec.pipeline_parallel_size),
            )
        )
    parallel_dims, decides = generation.counts_parallel_dims([])
    if spec.context_parallel_size > 1 and not parallel_dims:
        out.append(
            finding(
                "torchtune-no-context-parallel",
                f"{decides} has no context parallelism (context_parallel_dim is main's, never "
                f"released), but the layout has context {spec.context_parallel_size}",
                hint="use context parallel size 1 for torchtune: "
                + _keeps(spec, spec.data_parallel * spec.context_parallel_size),
            )
        )
    return out


def _keeps(spec: BatchSpec, dp: int) -> str:
    """What the batch becomes on ``dp`` data-parallel ranks."""
    g, micro = spec.global_batch, spec.micro
    if g % (micro * dp) == 0:
        return f"data-parallel {dp}, and accumulation {g // (micro * dp)} keeps global {g}"
    return f"data-parallel {dp}, where " + solve.alternatives(
        g, {"micro": micro, "DP": dp}, False, spec.tensor_parallel_size
    )


def edits(reading: Reading, spec: BatchSpec) -> dict[str, int | None]:
    """New values for the batch keys; parallel dims are written when the file has them or they
    are no longer 1, and an explicit shard dim is re-inferred (-1)."""
    out: dict[str, int | None] = {
        "batch_size": spec.micro_batch_size,
        "gradient_accumulation_steps": spec.gradient_accumulation_steps,
    }
    for key, field in (("tensor_parallel_dim", "tensor_parallel_size"),):
        if key in reading.values or getattr(spec, field) != 1:
            out[key] = getattr(spec, field)
    if "context_parallel_dim" in reading.values or spec.context_parallel_size != 1:
        out["context_parallel_dim"] = spec.context_parallel_size
    shard = reading.values.get("data_parallel_shard_dim")
    if shard is not None and shard.value != -1:
        out["data_parallel_shard_dim"] = -1
    return out


# Recognising a file -------------------------------------------------------------

_COMPONENT = re.compile(r"^\s*_component_\s*:", re.M)
_TOP = re.compile(r"^(batch_size|gradient_accumulation_steps|tensor_parallel_dim)\s*:", re.M)


def claims(text: str) -> bool:
    """torchtune's ``_component_`` blocks, or its batch keys without Axolotl's."""
    if _COMPONENT.search(text):
        return True
    found = set(_TOP.findall(text))
    return {"batch_size", "gradient_accumulation_steps"} <= found and "micro_batch_size" not in text


def holds_batch(text: str) -> bool:
    return _TOP.search(text) is not None


def insertion(reading: Reading, key: str) -> tuple[int, int]:
    """Where ``update`` writes a key the config lacks: after ``batch_size``."""
    return yaml_insert.after_key(reading, key, "batch_size")


def memory_settings(reading: Reading) -> Settings:
    """The distributed recipes shard with FSDP2 over the data-parallel ranks (resharding after
    forward unless ``fsdp_reshard_after_forward: false``), offload to the CPU with
    ``fsdp_cpu_offload``, and checkpoint activations with ``enable_activation_checkpointing``
    (all off by default but the sharding)."""
    reshard = reading.values.get(RESHARD)
    stage = 2 if reshard is not None and reshard.value is False else 3
    given = [Setting("zero_stage", stage, f"{reading.path} (the distributed recipes' FSDP2)")]
    for key, setting in (
        ("fsdp_cpu_offload", Setting("offload", frozenset(STATES), "")),
        ("enable_activation_checkpointing", Setting("recompute", "full", "")),
    ):
        v = reading.values.get(key)
        if v is not None and v.value is True:
            given.append(Setting(setting.field, setting.value, f"{reading.where(key)} {key}"))
    return Settings(tuple(given))


#: The torchtune release whose full_finetune_distributed counts a micro-batch's labels before
#: the shift drops the first (a text-completion dataset labels the BOS, which no loss predicts).
COUNTS_BEFORE_SHIFT = (0, 6, 1)


def loss_normalisation(reading: Reading | None, spec: BatchSpec | None) -> list[Finding]:
    """torchtune 0.6.1 weighs each micro-batch by labels / (labels − rows) with a
    text-completion dataset: its recipe counts the BOS label its loss never predicts."""
    found = loss.version("torchtune")
    if reading is None or "text_completion_dataset" not in reading.text:
        return []
    if found is not None and found > COUNTS_BEFORE_SHIFT:
        return []
    return loss.per_micro_batch(
        spec,
        "torchtune 0.6.1's recipe counts a micro-batch's labels before the shift, so a "
        "text-completion dataset's BOS label, which its loss never predicts, weighs each "
        "micro-batch by labels / (labels − rows)",
        "use a torchtune release after 0.6.1 (it shifts the labels in the dataset), or an "
        "instruct dataset that masks the BOS",
        reading.path,
    )
