"""Findings: what batchspec has to say about a configuration, each with a stable code.

A code never changes meaning once released; scripts may match on it. Its severity is fixed
by the catalogue below, so the same problem is always an error (or always advice).
"""

from __future__ import annotations

import dataclasses
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
    "slurm-layout-unknown": (
        "error",
        "the job runs under Slurm without saying its nodes or GPUs a node: no script can keep it",
    ),
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
    "model-tensor-heads": (
        "error",
        "the tensor-parallel size does not split the model's attention or key/value heads as "
        "the framework needs",
    ),
    "model-pipeline-layers": (
        "error",
        "the pipeline stages do not split the model's layers as the framework needs",
    ),
    "model-uneven-split": (
        "warning",
        "the framework splits the model's heads or layers unevenly over the ranks or stages",
    ),
    "tensor-across-nodes": (
        "warning",
        "tensor-parallel groups span nodes (the size does not divide the GPUs of a node)",
    ),
    "script-not-followed": (
        "warning",
        "a part of the launch script that batchspec does not read (source, a statement bash "
        "cannot parse, a bad eval, an exit as run)",
    ),
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
    "yaml-duplicate-batch-key": (
        "error",
        "a batch key is set twice in a YAML file with different values; the last wins",
    ),
    "yaml-duplicate-key": (
        "warning",
        "a key is set twice in a YAML file; the loader keeps the last one silently",
    ),
    "missing-file": (
        "warning",
        "a file the config points to is not found from here; what it sets is not checked",
    ),
    "job-file-not-found": (
        "warning",
        "a file the job names is not where it was looked for; what it sets is unknown",
    ),
    "job-file-unreadable": ("warning", "a file the job names does not read as its program's"),
    "deepspeed-config-unreadable": (
        "error",
        "the DeepSpeed config a file names is a YAML, not JSON: the Trainer and Axolotl "
        "json.load it, and the run stops",
    ),
    "job-defaults": (
        "info",
        "the batch rests on defaults the script takes when a variable or argument is not set",
    ),
    "launcher-copies": (
        "error",
        "an outer launcher starts another number of copies of a node launcher than the node "
        "launcher is told there are nodes (srun --ntasks-per-node=8 of torchrun --nnodes 2)",
    ),
    "job-launches-several": (
        "warning",
        "the script trains several times in turn with other values (a loop over layouts): "
        "read as its last launch line, a loop's first round",
    ),
    "job-definition": (
        "info",
        "what a job definition (a Kubernetes manifest, a SkyPilot or dstack task) leaves open, "
        "or how it was read",
    ),
    "job-definition-pods-differ": (
        "warning",
        "pods of one job definition run commands written otherwise (a PyTorchJob's Workers "
        "and its Master): only one is read",
    ),
    "job-definition-several": (
        "warning",
        "a file defines several training jobs: one is read, the others are not checked",
    ),
    "job-definition-mismatch": (
        "warning",
        "the launcher inside a job definition starts another number of processes per node, or "
        "waits for another number of nodes, than the definition gives it",
    ),
    "framework-accepts": ("info", "the framework's own validator accepts the file"),
    "framework-refuses": ("error", "the framework's own validator refuses the file"),
    "framework-not-installed": (
        "warning",
        "the framework's own validator was not run: its packages are not installed here",
    ),
    "framework-not-run": (
        "info",
        "the framework's own validator was not run (not installed, or too little known)",
    ),
    "model-carried": (
        "info",
        "a converted file names the model its source trains, as its framework names that shape",
    ),
    "model-not-matched": (
        "warning",
        "none of the target framework's models has the shape the source trains: the converted "
        "file names none, and says the nearest and how it differs",
    ),
    "model-not-carried": (
        "info",
        "a converted file holds the batch only: the model its source trains is set elsewhere",
    ),
    "convert-layout-changed": (
        "info",
        "convert wrote the batch on the parallel sizes given on its command line, not the "
        "source's, the accumulation re-solved to keep the global batch",
    ),
    "update-impossible": ("error", "the requested update has no exact batch layout"),
    "update-not-editable": (
        "error",
        "the requested update needs a value changed that the file does not write as a literal",
    ),
    "smoke-world-mismatch": (
        "error",
        "the config is for another world size than the smoke run launches",
    ),
    "loss-normalisation": (
        "info",
        "the framework normalises the loss per micro-batch: splits of one padded batch differ",
    ),
    "smoke-other-world": (
        "info",
        "the smoke run starts another number of processes than the job: the batch it runs",
    ),
    "smoke-sharding-not-run": (
        "warning",
        "the job shards its model states other than through DeepSpeed (FSDP), which the smoke run "
        "does not: it proves the batch, not the job's memory",
    ),
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


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``count`` with its ``noun``, in the ``plural`` (else ``noun`` + "s") unless it is 1:
    "1 micro-batch", "8 micro-batches"."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


def located(findings: list[Finding], where: str) -> list[Finding]:
    """``findings``, each that names no place naming ``where`` (the file they are about)."""
    return [f if f.where else dataclasses.replace(f, where=where) for f in findings]


def has_errors(findings: list[Finding]) -> bool:
    return any(f.severity == "error" for f in findings)
