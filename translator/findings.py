"""Findings: what batchspec has to say about a configuration, each with a stable code.

A code never changes meaning once released; scripts may match on it. Its severity is fixed
by the catalogue below, so the same problem is always an error (or always advice).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

Severity = Literal["error", "warning", "info"]

#: code -> (severity, what it is about). The catalogue is the list of everything we can say.
CATALOGUE: dict[str, tuple[Severity, str]] = {
    "tune-probe-failed": ("error", "a probe of tune failed for another reason than memory"),
    "tune-nothing-fits": ("error", "not even micro-batch 1 fits in memory"),
    "memory-exceeds-capacity": ("error", "the memory estimate per GPU exceeds the capacity given"),
    "global-not-divisible": (
        "error",
        "the global batch does not split into micro-batch x accumulation x data-parallel",
    ),
    "world-not-divisible": (
        "error",
        "the world size does not divide by tensor x pipeline x context parallel",
    ),
    "world-nodes-mismatch": ("error", "world_size disagrees with nodes x gpus_per_node"),
    "experts-not-divisible": (
        "error",
        "the number of experts does not divide by the expert-parallel size",
    ),
    "expert-grid": (
        "error",
        "the world size does not divide by expert-parallel x pipeline-parallel",
    ),
    "virtual-pipeline-needs-pp": (
        "error",
        "interleaved (virtual) pipeline stages need pipeline parallelism",
    ),
    "virtual-pipeline-microbatches": (
        "error",
        "the number of micro-batches does not fit the interleaved pipeline schedule",
    ),
    "megatron-accumulation-implied": (
        "info",
        "Megatron has no accumulation flag: it is global / (micro x data-parallel)",
    ),
    "deepspeed-pipeline-accumulation": (
        "info",
        "DeepSpeed's pipeline engine runs gradient_accumulation_steps micro-batches per step",
    ),
    "deepspeed-pipeline-zero": ("error", "DeepSpeed's pipeline engine refuses ZeRO stage 2 or 3"),
    "deepspeed-mpu-world": (
        "info",
        "with model parallelism DeepSpeed counts the data-parallel size its mpu reports",
    ),
    "deepspeed-autotp-world": (
        "warning",
        "DeepSpeed AutoTP checks train_batch_size against the full world size",
    ),
    "megatron-deepspeed-mismatch": (
        "error",
        "the DeepSpeed JSON a Megatron-DeepSpeed script writes counts another batch",
    ),
    "script-not-followed": (
        "info",
        "a part of the launch script that batchspec does not read (source, a bad eval)",
    ),
    "megatron-fork-flag": (
        "info",
        "a flag is spelt the way a Megatron fork spells it (underscores), read as such",
    ),
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
    "accelerate-processes-from-command-line": (
        "warning",
        "num_processes -1: accelerate launch needs --num_processes",
    ),
    "accelerate-uneven-machines": (
        "error",
        "num_processes does not split evenly over num_machines (accelerate floors it)",
    ),
    "accelerate-parallel-sizes": (
        "error",
        "parallelism_config sizes do not multiply to num_processes",
    ),
    "accelerate-accumulation-override": (
        "warning",
        "the accelerate config's DeepSpeed accumulation overrides the code's",
    ),
    "accelerate-batch-elsewhere": (
        "info",
        "an accelerate config gives the launch; the batch is in the training code",
    ),
    "llamafactory-megatron-batch": (
        "info",
        "LLaMA-Factory's Megatron paths: micro × accumulation × world / (TP × PP × CP)",
    ),
    "llamafactory-megatron-paths": (
        "warning",
        "with expert parallelism LLaMA-Factory's two Megatron paths give two batches",
    ),
    "hf-deepspeed-mismatch": (
        "error",
        "the DeepSpeed JSON disagrees with the TrainingArguments the Trainer fills it from",
    ),
    "axolotl-no-pipeline": ("error", "Axolotl has no pipeline parallelism"),
    "invalid-value": ("error", "a batch value is not a positive integer"),
    "batch-key-typo": (
        "error",
        "a key looks like a misspelt batch key, which the framework would ignore",
    ),
    "duplicate-key": ("error", "a key is set twice; DeepSpeed refuses such a file"),
    "unknown-value": ("warning", "a value depends on something only known when the script runs"),
    "missing-batch-value": (
        "error",
        "the file does not give enough batch values to know the batch",
    ),
    "world-unknown": (
        "warning",
        "the file does not say its world size, so the global batch is not known",
    ),
    "batch-depends-on-unknown": (
        "warning",
        "the batch depends on a value the script does not fix; listed for each value that fits",
    ),
    "world-implied": ("info", "the file is only valid at one data-parallel size"),
    "hf-auto": ("info", 'an "auto" value is filled by the Hugging Face Trainer, not by DeepSpeed'),
    "deepspeed-batch-mismatch": (
        "error",
        "train_batch_size is not micro x accumulation x the world DeepSpeed counts",
    ),
    "deepspeed-floor": (
        "error",
        "DeepSpeed would derive a missing batch value by floor division and then fail",
    ),
    "deepspeed-no-batch": (
        "error",
        "neither train_batch_size nor train_micro_batch_size_per_gpu is given",
    ),
    "deepspeed-elasticity-removed": (
        "error",
        "the elasticity block was removed from DeepSpeed and makes it raise",
    ),
    "axolotl-batch-keys": ("error", "Axolotl's validator refuses this combination of batch keys"),
    "axolotl-batch-size-redundant": (
        "warning",
        "Axolotl ignores batch_size, which equals micro_batch_size and so says "
        "accumulation 1 anyway",
    ),
    "axolotl-batch-size-ignored": (
        "error",
        "Axolotl ignores batch_size beside micro_batch_size without accumulation",
    ),
    "axolotl-world-rounding": (
        "error",
        "Axolotl floors world / context / tensor, silently changing the batch",
    ),
    "axolotl-deepspeed-mismatch": (
        "error",
        "the DeepSpeed JSON disagrees with the Axolotl YAML that points to it",
    ),
    "axolotl-sample-packing": (
        "info",
        "with sample packing a micro-batch holds packed rows, not samples",
    ),
    "yaml-duplicate-batch-key": (
        "error",
        "a batch key is set twice in a YAML file with different values; the last wins",
    ),
    "yaml-duplicate-key": (
        "warning",
        "a key is set twice in a YAML file; the loader keeps the last one silently",
    ),
    "axolotl-null-batch": ("error", "a batch key is null, which Axolotl keeps and then fails on"),
    "axolotl-accumulation-from-batch-size": (
        "info",
        "gradient_accumulation_steps is null, so Axolotl derives it from batch_size",
    ),
    "missing-file": ("error", "a file the config points to does not exist"),
    "megatron-global-default": (
        "info",
        "without --global-batch-size Megatron uses micro x data-parallel",
    ),
    "megatron-rampup-ignored": (
        "warning",
        "--rampup-batch-size is ignored by recent megatron-core",
    ),
    "megatron-decrease-batch": (
        "warning",
        "--decrease-batch-size-if-needed may round the global batch down",
    ),
    "framework-accepts": ("info", "the framework's own validator accepts the file"),
    "framework-refuses": ("error", "the framework's own validator refuses the file"),
    "framework-not-run": (
        "info",
        "the framework's own validator was not run (not installed, or too little known)",
    ),
    "update-impossible": ("error", "the requested update has no exact batch layout"),
    "smoke-world-mismatch": (
        "error",
        "the config is for another world size than the smoke run launches",
    ),
    "smoke-engine": ("error", "the smoke engine cannot run this layout here"),
    "lr-scaling": (
        "warning",
        "the global batch differs from the batch the learning rate was tuned for",
    ),
    "alignment": (
        "info",
        "a size is not a multiple of what NVIDIA recommends for tensor-core GEMMs",
    ),
}


@dataclass(frozen=True)
class Finding:
    """One thing batchspec found. Build it with :func:`finding` so severity follows the code."""

    code: str
    """Stable identifier from :data:`CATALOGUE`."""
    severity: Severity
    """``error`` makes the command exit 1; ``warning`` and ``info`` do not."""
    message: str
    """One sentence with the actual values."""
    where: str | None = None
    """``file:line`` (or ``file``, or a key) the finding is about, when there is one."""
    hint: str | None = None
    """The fix, with values, when there is one."""

    def as_dict(self) -> dict:
        return asdict(self)


def register(code: str, severity: Severity, about: str) -> None:
    """Add a code to the catalogue (a plugin framework's own findings); a code that is already
    there keeps its meaning, so registering it again with another severity is refused."""
    if code in CATALOGUE and CATALOGUE[code][0] != severity:
        raise ValueError(f"finding code {code!r} is already {CATALOGUE[code][0]}")
    CATALOGUE.setdefault(code, (severity, about))


def finding(code: str, message: str, hint: str | None = None, where: str | None = None) -> Finding:
    """A finding whose severity is the catalogue's for ``code``."""
    severity, _ = CATALOGUE[code]
    return Finding(code=code, severity=severity, message=message, where=where, hint=hint)


def has_errors(findings: list[Finding]) -> bool:
    return any(f.severity == "error" for f in findings)
