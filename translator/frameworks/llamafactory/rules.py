"""LLaMA-Factory: ``llamafactory-cli train config.yaml``, a YAML of the HF Trainer's keys
(its TrainingArguments subclass Seq2SeqTrainingArguments), so the batch counts as the HF
Trainer's: ``per_device_train_batch_size × gradient_accumulation_steps × NNODES ×
NPROC_PER_NODE`` (the launcher's torchrun sizes; give them as ``--nnodes`` and
``--nproc-per-node``). Its ``deepspeed:`` path is relative to where ``llamafactory-cli`` runs
(the repository root in its examples), so it is looked for there, then beside the YAML and in
the folders above. LLaMA-Factory refuses to run undistributed, so plain ``python`` with
DataParallel cannot happen. Its two Megatron paths (``USE_MCA=1``, ``USE_MEGATRON_BRIDGE=1``)
count alike except with expert parallelism, where only the Bridge path divides the global
batch by EP; the variable that picks the path is not in the YAML (see :func:`interpret`).
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from translator.frameworks.shared import hf_trainer as hf
from translator.model.memory import Setting, Settings
from translator.reading import Launch, Reading, run_folders
from translator.words.findings import Finding, counted, finding

NAME = "llamafactory"
#: The variables that pick a Megatron path, as a job's environment gives them (a reading of a
#: job holds the one set, so the count does not have to name both).
PATHS = ("USE_MCA", "USE_MEGATRON_BRIDGE")
#: The Megatron keys of its mcore_adapter / Megatron-Bridge path -> spec field.
MCORE = {
    "tensor_model_parallel_size": "tensor_parallel_size",
    "pipeline_model_parallel_size": "pipeline_parallel_size",
    "context_parallel_size": "context_parallel_size",
    "expert_model_parallel_size": "expert_parallel_size",
}

#: The key that turns off the gradient checkpointing LLaMA-Factory turns on for training
#: (``prepare_model_for_training``).
CHECKPOINTING = "disable_gradient_checkpointing"


#: A top-level key of LLaMA-Factory's own that the HF Trainer does not have: its examples all
#: carry ``stage:`` and ``finetuning_type:``, and a rendered file carries ``stage: sft``.
_OWN_KEY = re.compile(r"^(stage|finetuning_type)\s*:", re.M)


def claims(text: str) -> bool:
    """LLaMA-Factory's own keys beside the HF ones."""
    return _OWN_KEY.search(text) is not None


def read(text: str, where: str) -> Reading:
    here = Path(where).resolve().parent if where != "-" else Path.cwd()
    reading = hf.read_as(
        NAME,
        text,
        where,
        [*run_folders(), here, *here.parents],
        extra=(*MCORE, "ray_num_workers", CHECKPOINTING),
    )
    if reading.count("ray_num_workers"):  # Ray starts one training worker per GPU
        reading.world_size = reading.count("ray_num_workers")
    return reading


def check(spec) -> list[Finding]:
    """Nothing LLaMA-Factory refuses: model parallelism goes through its Megatron path (the
    template writes those keys)."""
    return []


def interpret(reading: Reading, launch: Launch) -> tuple[dict, list[Finding]]:
    """The HF Trainer's counting, except on the Megatron path (a file with Megatron's
    ``*_model_parallel_size`` keys). Which Megatron path runs is an environment variable the
    file does not show, and with expert parallelism the two count differently:

    - ``USE_MCA=1`` (mcore_adapter, the path of released LLaMA-Factory): ``per_device`` ×
      accumulation on each of ``world / (TP × PP × CP)`` data-parallel ranks (its trainer pulls
      ``gradient_accumulation_steps`` micro-batches per step; EP does not enter);
    - ``USE_MEGATRON_BRIDGE=1`` (``_compute_train_schedule``): a global batch of ``per_device ×
      accumulation × world / (TP × PP × CP × EP)``, from which Megatron derives its own
      accumulation.

    With EP 1 they agree; with EP > 1 the global batch is unknown and both numbers are named."""
    values, findings = hf.interpret(reading, launch)
    sizes = {
        field: reading.count(key) or 1 for key, field in MCORE.items() if key in reading.values
    }
    if not sizes or "micro_batch_size" not in values:
        return values, findings
    values |= sizes
    micro, accumulation = values["micro_batch_size"], values["gradient_accumulation_steps"]
    model = math.prod(
        sizes.get(f, 1)
        for f in ("tensor_parallel_size", "pipeline_parallel_size", "context_parallel_size")
    )
    experts = sizes.get("expert_parallel_size", 1)
    where = reading.where(next(k for k in MCORE if k in reading.values))
    world = launch.world_size
    if world is not None and world % (model * experts):
        findings.append(
            finding(
                "world-not-divisible",
                f"world size {world} does not divide by tensor × pipeline × context × expert "
                f"= {model * experts} (LLaMA-Factory refuses it)",
                where=where,
            )
        )
        return values, findings
    if experts == 1:
        findings.append(
            finding(
                "llamafactory-megatron-batch",
                f"Megatron path: per_device {micro} × accumulation {accumulation} on each of "
                f"world / {model} (tensor × pipeline × context) data-parallel ranks, on both of "
                "LLaMA-Factory's Megatron paths (USE_MCA, USE_MEGATRON_BRIDGE)",
                where=where,
            )
        )
        return values, findings
    if PATHS[0] in reading.values:  # a job whose environment says: USE_MCA wins
        findings.append(
            finding(
                "llamafactory-megatron-batch",
                f"USE_MCA=1 (mcore_adapter): per_device {micro} × accumulation {accumulation} on "
                f"each of world / {model} (tensor × pipeline × context) data-parallel ranks; "
                f"expert parallel {experts} does not enter",
                where=where,
            )
        )
        return values, findings
    if PATHS[1] in reading.values:
        return _bridge(values, findings, micro * accumulation, world, model, experts, where)
    mca = "?" if world is None else micro * accumulation * (world // model)
    bridge = "?" if world is None else max(micro * accumulation * world // (model * experts), micro)
    values["global_batch_size"] = values["gradient_accumulation_steps"] = None
    findings.append(
        finding(
            "llamafactory-megatron-paths",
            f"expert parallel {experts}: LLaMA-Factory's two Megatron paths count differently and "
            f"the file does not say which runs: USE_MCA=1 (mcore_adapter) takes per_device {micro} "
            f"× accumulation {accumulation} × data-parallel ranks = {mca} samples per step; "
            f"USE_MEGATRON_BRIDGE=1 sets the global batch to {micro} × {accumulation} × world / "
            f"(tensor × pipeline × context × expert = {model * experts}) = {bridge}",
            hint="set expert_model_parallel_size to 1, or know which of the two variables your "
            "launch sets",
            where=where,
        )
    )
    return values, findings


def _bridge(
    values: dict,
    findings: list[Finding],
    per_rank: int,
    world: int | None,
    model: int,
    experts: int,
    where: str,
) -> tuple[dict, list[Finding]]:
    """``USE_MEGATRON_BRIDGE=1`` (``_compute_train_schedule``): a global batch of ``micro ×
    accumulation × world // (TP × PP × CP × EP)`` (at least the micro-batch), from which
    Megatron derives its own accumulation over ``world / (TP × PP × CP)`` ranks."""
    micro = values["micro_batch_size"]
    values["gradient_accumulation_steps"] = None
    if world is None:
        return values, findings
    global_batch = max(per_rank * world // (model * experts), micro)
    dp = world // model
    values["global_batch_size"] = global_batch
    if global_batch % (micro * dp):
        findings.append(
            finding(
                "global-not-divisible",
                f"USE_MEGATRON_BRIDGE=1 sets the global batch to {per_rank} × {world} // "
                f"(tensor × pipeline × context × expert = {model * experts}) = {global_batch}, "
                f"which Megatron cannot split into micro-batches of {micro} on {dp} "
                "data-parallel ranks (its calculator refuses it)",
                where=where,
            )
        )
        return values, findings
    values["gradient_accumulation_steps"] = global_batch // (micro * dp)
    findings.append(
        finding(
            "llamafactory-megatron-batch",
            f"USE_MEGATRON_BRIDGE=1: the global batch is {per_rank} × world {world} // (tensor × "
            f"pipeline × context × expert = {model * experts}) = {global_batch}, so Megatron runs "
            f"{counted(global_batch // (micro * dp), 'micro-batch', 'micro-batches')} per step, "
            "not the YAML's accumulation",
            where=where,
        )
    )
    return values, findings


def memory_settings(reading: Reading) -> Settings:
    """The Trainer's sharding (its DeepSpeed JSON, its FSDP), and LLaMA-Factory's gradient
    checkpointing: on unless ``disable_gradient_checkpointing`` is true."""
    off = reading.values.get(CHECKPOINTING)
    if off is not None and off.value is True:
        recompute = Setting("recompute", "none", f"{reading.where(CHECKPOINTING)} {CHECKPOINTING}")
    else:
        recompute = Setting(
            "recompute", "full", f"{reading.path} (LLaMA-Factory checkpoints by default)"
        )
    return hf.sharding(reading) + Settings((recompute,))


#: LLaMA-Factory trains through the HF Trainer, with its loss normalisation.
loss_normalisation = hf.loss_normalisation
