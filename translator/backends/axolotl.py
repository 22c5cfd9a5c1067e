"""Axolotl: ``micro_batch_size`` and ``gradient_accumulation_steps`` per rank; the world size
comes from the launcher's ``WORLD_SIZE``. Axolotl computes
``batch_size = micro x gas x (world // context // tensor)``. It has no pipeline parallelism,
and its ``batch_size`` key is a trap (beside ``micro_batch_size`` without accumulation,
validation fills accumulation 1 first, so training ignores it), so it is never written."""

from __future__ import annotations

import yaml

from translator.errors import InputError
from translator.findings import Finding, finding
from translator.spec import BatchSpec

NAME = "axolotl"
TEMPLATE = "axolotl.yaml.j2"
FILENAME = "axolotl.yaml"

#: Axolotl key -> spec field, for the keys that shape the batch.
KEYS = {
    "micro_batch_size": "micro_batch_size",
    "gradient_accumulation_steps": "gradient_accumulation_steps",
    "sequence_len": "sequence_length",
    "tensor_parallel_size": "tensor_parallel_size",
    "context_parallel_size": "context_parallel_size",
}


def context(spec: BatchSpec) -> dict:
    return {
        "spec": spec,
        "parallel": {k: getattr(spec, k) for k in ("tensor_parallel_size", "context_parallel_size")
                     if getattr(spec, k) > 1},
    }


def read(text: str, where: str) -> tuple[dict, list[Finding]]:
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        line = getattr(getattr(exc, "problem_mark", None), "line", None)
        at = f"{where}:{line + 1}" if line is not None else where
        raise InputError(f"{at}: not valid YAML: {getattr(exc, 'problem', exc)}") from None
    if not isinstance(config, dict):
        raise InputError(f"{where}: an Axolotl config must be a YAML mapping")
    return {field: config[key] for key, field in KEYS.items() if key in config}, []


def check(spec: BatchSpec) -> list[Finding]:
    if spec.pipeline_parallel_size > 1:
        return [finding(
            "axolotl-no-pipeline",
            f"Axolotl has no pipeline parallelism, but the spec asks for pipeline "
            f"{spec.pipeline_parallel_size}",
            hint="render this spec for Megatron or DeepSpeed, or use pipeline_parallel_size 1 "
                 f"(data-parallel {spec.data_parallel_size * spec.pipeline_parallel_size})")]
    return []
