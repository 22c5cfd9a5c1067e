"""DeepSpeed: ``train_batch_size``, ``train_micro_batch_size_per_gpu``,
``gradient_accumulation_steps``, checked by DeepSpeed as ``TBS == micro x gas x world`` where
world is the data-parallel size a model-parallel unit reports (Megatron-DeepSpeed, the pipeline
engine), ``world / sequence_parallel_size`` without one, or every rank under AutoTP."""

from __future__ import annotations

import json

from translator.errors import InputError
from translator.findings import Finding, finding
from translator.spec import BatchSpec

NAME = "deepspeed"
TEMPLATE = "deepspeed.json.j2"
FILENAME = "deepspeed.json"


def batch_world(spec: BatchSpec) -> int:
    """The world size DeepSpeed multiplies by in its batch check: the data-parallel size, except
    under AutoTP, where no mpu exists when the config is read and DeepSpeed takes every rank
    (divided by ``sequence_parallel_size`` when that is set)."""
    if spec.deepspeed_autotp:
        return spec.world_size // spec.context_parallel_size
    return spec.data_parallel_size


def context(spec: BatchSpec) -> dict:
    return {
        "train_batch_size":
            spec.micro_batch_size * spec.gradient_accumulation_steps * batch_world(spec),
        "micro_batch_size": spec.micro_batch_size,
        "gradient_accumulation_steps": spec.gradient_accumulation_steps,
        "sequence_parallel_size": spec.context_parallel_size if spec.context_parallel_size > 1 else None,
        "autotp_size": spec.tensor_parallel_size if spec.deepspeed_autotp else None,
        "zero_stage": spec.zero_stage,
    }


def read(text: str, where: str) -> tuple[dict, list[Finding]]:
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{where}:{exc.lineno}: not valid JSON: {exc.msg}") from None
    if not isinstance(config, dict):
        raise InputError(f"{where}: a DeepSpeed config must be a JSON object")
    tbs = config.get("train_batch_size")
    micro = config.get("train_micro_batch_size_per_gpu")
    gas = config.get("gradient_accumulation_steps")
    autotp = config.get("tensor_parallel", {}).get("autotp_size", 1)
    partial = {"micro_batch_size": micro, "gradient_accumulation_steps": gas}
    if autotp > 1:
        partial |= {"tensor_parallel_size": autotp, "deepspeed_autotp": True}
    if tbs is not None:
        partial["global_batch_size"] = tbs // autotp
        if micro and gas:
            partial["data_parallel_size"] = tbs // (micro * gas * autotp)
    if "sequence_parallel_size" in config:
        partial["context_parallel_size"] = config["sequence_parallel_size"]
    if "zero_optimization" in config:
        partial["zero_stage"] = config["zero_optimization"].get("stage", 0)
    return {k: v for k, v in partial.items() if v is not None}, []


def check(spec: BatchSpec) -> list[Finding]:
    out = []
    pp = spec.pipeline_parallel_size
    if pp > 1:
        out.append(finding(
            "deepspeed-pipeline-accumulation",
            f"with pipeline parallelism (PP {pp}) DeepSpeed's pipeline engine runs "
            f"gradient_accumulation_steps = {spec.gradient_accumulation_steps} micro-batches per "
            "optimizer step through the pipeline; only engine.train_batch() may be called",
            hint=f"more micro-batches shrink the pipeline bubble: accumulation ≥ PP {pp} is "
                 "usually wanted"))
        if spec.zero_stage is not None and spec.zero_stage >= 2:
            out.append(finding(
                "deepspeed-pipeline-zero",
                f"ZeRO stage {spec.zero_stage} with pipeline parallelism (PP {pp}): DeepSpeed's "
                "pipeline engine refuses ZeRO stage 2 or 3",
                hint="use zero_stage 0 or 1 with pipeline parallelism"))
    if not spec.deepspeed_autotp and spec.tensor_parallel_size * pp > 1:
        out.append(finding(
            "deepspeed-mpu-world",
            f"train_batch_size {spec.global_batch_size} counts data-parallel {spec.data_parallel_size}"
            f", the size a model-parallel unit reports (Megatron-DeepSpeed's mpu, the pipeline "
            f"engine's grid); DeepSpeed without one would count all {spec.world_size} ranks",
            hint="pass mpu= to deepspeed.initialize (or use a PipelineModule)"))
    if spec.deepspeed_autotp and spec.tensor_parallel_size > 1:
        written = context(spec)["train_batch_size"]
        out.append(finding(
            "deepspeed-autotp-world",
            f"DeepSpeed AutoTP checks train_batch_size against every rank, so it is written as "
            f"{written} = micro {spec.micro_batch_size} × accumulation "
            f"{spec.gradient_accumulation_steps} × {batch_world(spec)} ranks; the "
            f"samples per optimizer step are still {spec.global_batch_size} (tensor-parallel ranks "
            "share their data)",
            hint="do not 'correct' train_batch_size to the global batch: DeepSpeed would refuse it"))
    return out
