"""The Hugging Face Trainer (and TRL, which keeps its batch keys): TrainingArguments as a YAML
or JSON file, the ``HfArgumentParser`` / ``trl ... --config`` style.

``per_device_train_batch_size`` rows per process and micro-step (default 8),
``gradient_accumulation_steps`` micro-steps per optimizer step (default 1); the world comes from
the launcher (torchrun, ``accelerate launch``, ``deepspeed``), and the data-parallel size is
``world / (tp × cp × sp)`` from ``parallelism_config``, or ``world / N`` under DeepSpeed AutoTP
(``tensor_parallel.autotp_size`` N in the JSON it names). The traps each get a finding:
``python train.py`` on N GPUs is DataParallel, ``accelerator_config.split_batches`` makes the
per-device value the whole micro-step's, ``auto_find_batch_size`` shrinks the global batch on
each out-of-memory, and the DeepSpeed JSON it names is checked the way the Trainer does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from translator.frameworks.shared import hf_deepspeed, loss, yaml_insert
from translator.reading import Launch, Reading, invalid_value, typo_findings, values_at
from translator.spec import BatchSpec
from translator.words import parsing
from translator.words.errors import InputError
from translator.words.findings import Finding, finding

if TYPE_CHECKING:
    from translator.model.memory import Settings
    from translator.words.findings import Severity

NAME = "hf"
#: Codes of the HF Trainer's counting, registered by every framework built on it.
CODES: dict[str, tuple[Severity, str]] = {
    "hf-split-batches": (
        "warning",
        "accelerate's split_batches: per_device_train_batch_size is the whole "
        "micro-step's batch, split over the processes",
    ),
    "hf-split-not-divisible": (
        "error",
        "split_batches: the batch does not split over the data-parallel processes",
    ),
    "hf-auto-find-batch-size": (
        "warning",
        "auto_find_batch_size shrinks the global batch on each out-of-memory",
    ),
    "hf-dataparallel": (
        "info",
        "plain `python train.py` on several GPUs is DataParallel: N × the batch",
    ),
    "hf-no-pipeline": ("error", "the HF Trainer has no pipeline parallelism"),
    "hf-parallel-elsewhere": (
        "error",
        "TP/CP sizes are not TrainingArguments keys: the model and accelerate set them",
    ),
    "hf-deepspeed-launcher-unused": (
        "warning",
        "the Trainer's own DeepSpeed config wins over the one its launcher hands it",
    ),
    "hf-deepspeed-fixes": (
        "warning",
        "a batch value the job leaves to the program is fixed by its DeepSpeed config",
    ),
    "hf-flag-value-unset": (
        "warning",
        "a flag's value is a variable nothing sets: read as run, argparse stops",
    ),
    "hf-deepspeed-mismatch": (
        "error",
        "the DeepSpeed JSON disagrees with the TrainingArguments the Trainer fills it from",
    ),
}
#: TrainingArguments key -> spec field.
KEYS = {
    "per_device_train_batch_size": "micro_batch_size",
    "gradient_accumulation_steps": "gradient_accumulation_steps",
}
#: Sequence length keys: TRL's SFTConfig ``max_length`` (older ``max_seq_length``),
#: LLaMA-Factory's ``cutoff_len``.
SEQUENCE_KEYS = ("max_length", "max_seq_length", "cutoff_len")
#: TrainingArguments' own defaults for the batch keys.
DEFAULTS = {"per_device_train_batch_size": 8, "gradient_accumulation_steps": 1}
#: Real TrainingArguments fields that look like batch keys (checked against transformers'
#: own field list in tests/frameworks/hf/test_crosscheck_hf.py).
LOOKALIKES = {
    "per_device_eval_batch_size",
    "eval_accumulation_steps",
    "auto_find_batch_size",
    "eval_do_concat_batches",
    "batch_eval_metrics",
}
#: ``parallelism_config`` sizes that share one batch (the ranks of such a group count once).
SHARING = ("tp_size", "cp_size", "sp_size")
#: Keys read for the memory estimate (:func:`memory_settings`) only.
MEMORY_KEYS = ("fsdp", "fsdp_config", "gradient_checkpointing")
#: Count keys whose null is their default: accelerate's ``ParallelismConfig`` types each size
#: ``Optional[int]`` and makes a None 1 (``per_device_train_batch_size`` and
#: ``gradient_accumulation_steps`` are plain ``int`` fields: null is an error).
NULLABLE = frozenset(f"parallelism_config.{k}" for k in SHARING)


def claims(text: str) -> bool:
    """TrainingArguments: its per-device keys, or the model key HF's example scripts take."""
    return "per_device_" in text or "model_name_or_path:" in text


def holds_batch(text: str) -> bool:
    return any(key in text for key in KEYS)


def context(spec: BatchSpec) -> dict:
    return {"spec": spec}


def read(text: str, where: str) -> Reading:
    """A TrainingArguments YAML or JSON: the batch keys, the traps, and the DeepSpeed JSON
    (relative to the file)."""
    return read_as(NAME, text, where, None)


def read_as(name: str, text: str, where: str, bases, extra: tuple[str, ...] = ()) -> Reading:
    """``read`` for a framework built on TrainingArguments (``name``), its DeepSpeed JSON
    looked for in ``bases`` (default: the file's folder), with its own ``extra`` keys."""
    doc = parsing.load_mapping(text, where, "TrainingArguments")
    config = doc.data
    assert isinstance(config, dict)  # load_mapping refuses anything else
    reading = Reading(where, name, text)
    reading.values |= values_at(
        doc,
        (
            *KEYS,
            *SEQUENCE_KEYS,
            *extra,
            "auto_find_batch_size",
            "deepspeed",
            "accelerator_config.split_batches",
            "dataloader_drop_last",
            *(f"parallelism_config.{k}" for k in (*SHARING, "dp_shard_size", "dp_replicate_size")),
            *MEMORY_KEYS,
        ),
    )
    lines = {key: doc.positions.get(key, (0,))[0] for key in config}
    reading.findings += typo_findings(
        lines,
        list(KEYS),
        LOOKALIKES,
        where,
        "so TrainingArguments refuses it (or a script that allows extra keys ignores it)",
    )
    if "deepspeed" in config:
        hf_deepspeed.read_partner(reading, config["deepspeed"], bases)
    return reading


def _count(reading: Reading, key: str, findings: list[Finding], default=None):
    """A count key's value: ``default`` when it is absent, or null where its dataclass field is
    ``Optional`` (:data:`NULLABLE`); else an error unless it is a positive integer."""
    v = reading.values.get(key)
    if v is None or (v.value is None and key in NULLABLE):
        return default
    if not v.is_count:
        findings.append(invalid_value(key, v, reading.path))
        return None
    return v.value


def interpret(reading: Reading, launch: Launch) -> tuple[dict, list[Finding]]:
    """Spec values as the Trainer runs them on ``launch``: per process ``per_device`` rows ×
    accumulation, over ``world / (tp × cp × sp)`` data-parallel ranks."""
    partners, launched = hf_deepspeed.of_launch(reading, launch)
    findings = list(reading.findings) + launched
    values: dict = {}
    # A job's value it does not fix is unknown; a file's null is a value (an error: the fields
    # are ``int``, and the Trainer multiplies the None)
    unknown = [k for k in KEYS if k in reading.values and reading.values[k].why_unknown is not None]
    # ... unless the DeepSpeed config the Trainer checks it against sets it: the Trainer
    # refuses any other value, so the job runs with that one or not at all
    fixed = hf_deepspeed.fixed_by(reading, partners, unknown)
    findings += fixed.findings
    unknown = [k for k in unknown if k not in fixed.counts]
    if unknown:
        return _unknown(reading, unknown, partners, findings, fixed.counts)
    per_device = fixed.counts.get("per_device_train_batch_size") or _count(
        reading, "per_device_train_batch_size", findings, DEFAULTS["per_device_train_batch_size"]
    )
    accumulation = fixed.counts.get("gradient_accumulation_steps") or _count(
        reading, "gradient_accumulation_steps", findings, DEFAULTS["gradient_accumulation_steps"]
    )
    sharing = {k: _count(reading, f"parallelism_config.{k}", findings, 1) for k in SHARING}
    if None in sharing.values() or None in (per_device, accumulation):
        return values, findings
    # The file's own parallelism_config goes to the Accelerator; without one, accelerate
    # launch's (the launch) applies.
    if any(f"parallelism_config.{k}" in reading.values for k in SHARING):
        values["tensor_parallel_size"] = sharing["tp_size"]
        values["context_parallel_size"] = sharing["cp_size"] * sharing["sp_size"]
    sizes, wrong = hf_deepspeed.autotp(partners)  # DeepSpeed AutoTP, from its JSON
    values |= sizes
    findings += wrong
    for key in SEQUENCE_KEYS:
        if reading.count(key):
            values["sequence_length"] = reading.count(key)
    split = reading.values.get("accelerator_config.split_batches")
    if split is not None and split.value is True:
        findings += _split_batches(reading, per_device, accumulation, launch, values)
    else:
        values["micro_batch_size"] = per_device
        values["gradient_accumulation_steps"] = accumulation
    # DataParallel is what a plain `python train.py` does; a known world is a launcher's.
    alone = reading.framework == NAME and reading.launcher is None and launch.world_size is None
    findings += _traps(reading, per_device, dataparallel=alone)
    for partner in partners:
        findings += partner.findings + hf_deepspeed.pair(
            reading, partner, values, launch.world_size, "hf-deepspeed-mismatch"
        )
    return values, findings


def _unknown(
    reading: Reading,
    unknown: list[str],
    partners: list[Reading],
    findings: list[Finding],
    fixed: dict[str, int],
) -> tuple[dict, list[Finding]]:
    """A batch key the job leaves unknown (a flag it does not pass, a variable it does not
    set): that field is unknown, the rest as read (or as the DeepSpeed config ``fixed`` it)."""
    values: dict = {}
    for key, field in KEYS.items():
        v = reading.values.get(key)
        if key in unknown and v is not None:
            values[field] = None
            findings.append(
                finding(
                    "unknown-value",
                    f"{key} is {v.why_unknown}",
                    hint=f"pass --{key} with a literal value",
                    where=reading.where(key),
                )
            )
        else:
            values[field] = fixed.get(key) or reading.count(key) or DEFAULTS[key]
    for partner in partners:
        findings += partner.findings
    return values, findings


def _split_batches(
    reading: Reading, per_device: int, accumulation: int, launch: Launch, values: dict
) -> list[Finding]:
    """``split_batches``: accelerate splits each ``per_device`` batch over the processes."""
    where = reading.where("accelerator_config.split_batches")
    values["gradient_accumulation_steps"] = accumulation
    world = launch.world_size
    model = values.get("tensor_parallel_size", launch.tensor_parallel_size or 1) * values.get(
        "context_parallel_size", launch.context_parallel_size or 1
    )
    out = [
        finding(
            "hf-split-batches",
            f"accelerator_config.split_batches: per_device_train_batch_size {per_device} is the "
            "batch of a whole micro-step, split over the data-parallel processes, so the global "
            f"batch is {per_device} × accumulation {accumulation} = {per_device * accumulation} on "
            "any world size (the Trainer's logged total still multiplies by the world)",
            where=where,
        )
    ]
    if world is not None and world % model == 0:
        dp = world // model
        if per_device % dp:
            out.append(
                finding(
                    "hf-split-not-divisible",
                    f"split_batches: per_device_train_batch_size {per_device} does not split over "
                    f"{dp} data-parallel processes (accelerate refuses it)",
                    hint=f"use a multiple of {dp}",
                    where=where,
                )
            )
        else:
            values["micro_batch_size"] = per_device // dp
    return out


def _traps(reading: Reading, per_device: int, dataparallel: bool) -> list[Finding]:
    out = []
    auto = reading.values.get("auto_find_batch_size")
    if auto is not None and auto.value is True:
        out.append(
            finding(
                "hf-auto-find-batch-size",
                "auto_find_batch_size: on each out-of-memory the Trainer retries with 0.9 × "
                "per_device_train_batch_size and leaves gradient_accumulation_steps alone, so the "
                "global batch shrinks silently",
                hint="set it to false and choose the micro-batch with batchspec (the accumulation "
                "that keeps the global batch follows)",
                where=reading.where("auto_find_batch_size"),
            )
        )
    if not dataparallel:
        return out
    out.append(
        finding(
            "hf-dataparallel",
            "the world comes from the launcher (torchrun, accelerate launch, deepspeed); started "
            "as `python train.py` on a machine with N visible GPUs the Trainer uses DataParallel "
            f"and each step takes {per_device} × N × accumulation samples",
            hint="launch with torchrun or accelerate launch, or set CUDA_VISIBLE_DEVICES",
            where=reading.where("per_device_train_batch_size"),
        )
    )
    return out


def check(spec: BatchSpec) -> list[Finding]:
    if spec.pipeline_parallel_size > 1:
        return [
            finding(
                "hf-no-pipeline",
                f"the HF Trainer has no pipeline parallelism, but the spec asks for pipeline "
                f"{spec.pipeline_parallel_size}",
                hint="render this spec for Megatron or DeepSpeed, or use pipeline_parallel_size 1",
            )
        ]
    autotp = spec.deepspeed_autotp  # the DeepSpeed JSON the file names carries it
    if (spec.tensor_parallel_size > 1 and not autotp) or spec.context_parallel_size > 1:
        return [
            finding(
                "hf-parallel-elsewhere",
                f"tensor {spec.tensor_parallel_size} / context {spec.context_parallel_size}: the HF "
                "Trainer takes these from the model (from_pretrained(tp_plan=...)) and accelerate's "
                "parallelism_config, which a TrainingArguments file cannot carry (HfArgumentParser "
                "leaves parallelism_config a plain dict)",
                hint="render the batch keys for TP/CP 1 and set the sizes in the accelerate config",
            )
        ]
    return []


def edits(reading: Reading, spec: BatchSpec) -> dict[str, int | None]:
    split = reading.values.get("accelerator_config.split_batches")
    if split is not None and split.value is True:
        raise InputError(
            f"{reading.path}: update does not rewrite a split_batches config; set "
            f"per_device_train_batch_size to {spec.global_batch // spec.accumulation} by hand"
        )
    return {
        "per_device_train_batch_size": spec.micro_batch_size,
        "gradient_accumulation_steps": spec.gradient_accumulation_steps,
    }


def insertion(reading: Reading, key: str) -> tuple[int, int]:
    """Where ``update`` writes a key the YAML lacks (the Trainer's default was in force)."""
    if reading.launcher is not None:
        raise InputError(f"{reading.path}: the job does not pass --{key}; add it by hand")
    if reading.text.lstrip().startswith("{"):
        raise InputError(f"{reading.path}: {key} is not in the file; add it by hand")
    return yaml_insert.after_key(reading, key, "per_device_train_batch_size")


def memory_settings(reading: Reading) -> Settings:
    """What the Trainer's arguments say about memory: the sharding (:func:`sharding`) and
    ``gradient_checkpointing`` (each layer recomputed from its input)."""
    from translator.model.memory import Setting, Settings

    out = sharding(reading)
    v = reading.values.get("gradient_checkpointing")
    if v is not None and v.value is True:
        where = f"{reading.where('gradient_checkpointing')} gradient_checkpointing"
        out += Settings((Setting("recompute", "full", where),))
    return out


def sharding(reading: Reading) -> Settings:
    """The ZeRO stage and offload of the DeepSpeed JSON the arguments name, or of their FSDP
    (``fsdp`` with ``fsdp_config``, as transformers sets up accelerate's plugin)."""
    from translator.frameworks.deepspeed import config_json as deepspeed_json
    from translator.frameworks.shared import fsdp
    from translator.model.memory import Settings

    out = Settings()
    for partner in reading.partners:
        out += deepspeed_json.memory_settings(partner)
    on = reading.values.get("fsdp")
    if on is None or not on.value:  # transformers: no FSDP without a true ``fsdp``
        return out
    raw = reading.values.get("fsdp_config")
    if raw is not None and isinstance(raw.value, str):
        out += Settings(
            unused=(f"{reading.where('fsdp_config')} fsdp_config {raw.value} is not read",)
        )
    config = fsdp.config_of(raw.value if raw is not None else None)
    version = 1 if str(config.get("version", 2)) == "1" else 2
    fsdp.legacy(on.value, config, version)
    offload = str(config.get("cpu_offload")).lower() == "true"
    return out + fsdp.settings(config, version, offload, f"{reading.where('fsdp')} fsdp")


#: The transformers release whose Trainer divides the step's loss by all its tokens (before it,
#: each micro-batch's by its own).
FIXED_IN = (4, 46)


def loss_normalisation(reading: Reading | None, spec: BatchSpec | None) -> list[Finding]:
    """The Trainer before transformers 4.46 normalised each micro-batch's loss on its own under
    accumulation; named when the transformers installed here is older (none: not known)."""
    found = loss.version("transformers")
    if found is None or found >= FIXED_IN or (spec is not None and spec.accumulation == 1):
        return []
    shown = ".".join(map(str, found))
    return loss.per_micro_batch(
        spec,
        f"the HF Trainer of transformers {shown} (before 4.46) divides each micro-batch's loss "
        "by its own tokens under gradient accumulation",
        "use transformers 4.46 or later (the step's loss over all its tokens)",
        reading.path if reading is not None else "hf",
    )
