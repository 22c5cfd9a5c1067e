"""LLaMA-Factory: ``llamafactory-cli train config.yaml``, a YAML of the HF Trainer's keys
(its TrainingArguments subclass Seq2SeqTrainingArguments), so the batch counts as the HF
Trainer's: ``per_device_train_batch_size × gradient_accumulation_steps × NNODES ×
NPROC_PER_NODE`` (the launcher's torchrun sizes; give them as ``--nnodes`` and
``--nproc-per-node``). Its ``deepspeed:`` path is relative to where ``llamafactory-cli`` runs
(the repository root in its examples), so it is looked for there, then beside the YAML and in
the folders above. LLaMA-Factory refuses to run undistributed, so plain ``python`` with
DataParallel cannot happen. Its Megatron-Bridge path (``USE_MEGATRON_BRIDGE=1``) divides the
global batch by the expert-parallel size, which a YAML alone does not show.
"""

from __future__ import annotations

import math
from pathlib import Path

from translator.backends import hf
from translator.findings import Finding, finding
from translator.reading import Launch, Reading

NAME = "llamafactory"
TEMPLATE = "llamafactory.yaml.j2"
FILENAME = "llamafactory.yaml"
EXTENSIONS = (".yaml", ".yml", ".json")
PACKAGE = hf.PACKAGE
context, edits, insertion, holds_batch, verdict = (
    hf.context, hf.edits, hf.insertion, hf.holds_batch, hf.verdict)
#: The Megatron keys of its mcore_adapter / Megatron-Bridge path -> spec field.
MCORE = {"tensor_model_parallel_size": "tensor_parallel_size",
         "pipeline_model_parallel_size": "pipeline_parallel_size",
         "context_parallel_size": "context_parallel_size",
         "expert_model_parallel_size": "expert_parallel_size"}


def claims(text: str) -> bool:
    """LLaMA-Factory's own keys beside the HF ones."""
    return "finetuning_type:" in text or ("stage:" in text and "template:" in text)


def read(text: str, where: str) -> Reading:
    here = Path(where).resolve().parent if where != "-" else Path.cwd()
    reading = hf.read_as(NAME, text, where, [Path.cwd(), here, *here.parents],
                         extra=(*MCORE, "ray_num_workers"))
    if reading.count("ray_num_workers"):  # Ray starts one training worker per GPU
        reading.world_size = reading.count("ray_num_workers")
    return reading


def check(spec) -> list[Finding]:
    """Nothing LLaMA-Factory refuses: model parallelism goes through its Megatron path (the
    template writes those keys)."""
    return []


def interpret(reading: Reading, launch: Launch) -> tuple[dict, list[Finding]]:
    """The HF Trainer's counting, except on the Megatron path (a file with Megatron's
    ``*_model_parallel_size`` keys): there LLaMA-Factory sets the global batch to per_device ×
    accumulation × world / (TP × PP × CP × EP), and Megatron derives its own accumulation."""
    values, findings = hf.interpret(reading, launch)
    sizes = {field: reading.count(key) or 1 for key, field in MCORE.items()
             if key in reading.values}
    if not sizes or "micro_batch_size" not in values:
        return values, findings
    values |= sizes
    accumulation = values.pop("gradient_accumulation_steps")
    divisor = math.prod(sizes.get(f, 1) for f in ("tensor_parallel_size", "pipeline_parallel_size",
                                                 "context_parallel_size", "expert_parallel_size"))
    where = reading.where(next(k for k in MCORE if k in reading.values))
    findings.append(finding(
        "llamafactory-megatron-batch",
        f"Megatron path: LLaMA-Factory sets the global batch to per_device "
        f"{values['micro_batch_size']} × accumulation {accumulation} × world / {divisor} "
        "(tensor × pipeline × context × expert parallel), and Megatron runs global / (micro × "
        "data-parallel) micro-batches, which differs from gradient_accumulation_steps when "
        "expert parallelism is on", where=where))
    world = launch.world_size
    if world is not None:
        if world % divisor:
            findings.append(finding(
                "world-not-divisible",
                f"world size {world} does not divide by tensor × pipeline × context × expert "
                f"= {divisor} (LLaMA-Factory refuses it)", where=where))
        else:
            values["global_batch_size"] = values["micro_batch_size"] * accumulation * (
                world // divisor)
    return values, findings
