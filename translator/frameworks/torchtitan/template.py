"""What the rendered launch script holds: torchtitan 0.3.0's flags for a spec, written whole
(every batch key and degree, the shard degree explicit), so the config function's own values
do not enter the batch and another world fails at start instead of changing it."""

from __future__ import annotations

from translator.frameworks.torchtitan import keys
from translator.spec import BatchSpec


def flags(spec: BatchSpec) -> dict[str, int | bool]:
    """torchtitan 0.3.0 key -> value for a solved spec. With pipeline parallelism the
    accumulation runs as pipeline micro-batches (``local_batch_size = micro × accumulation``,
    one torchtitan accumulation step, and CUDA graphs off, which 0.3.0 demands); without it,
    ``local_batch_size`` is the micro-batch. A switch that is on is ``True``."""
    pp = spec.pipeline_parallel_size
    out: dict[str, int | bool] = {
        "training.local_batch_size": spec.micro * spec.accumulation if pp > 1 else spec.micro,
        "training.global_batch_size": spec.global_batch,
    }
    if spec.sequence_length is not None:
        out["training.seq_len"] = spec.sequence_length
    if pp > 1:
        out["parallelism.pipeline_parallel_microbatch_size"] = spec.micro
        out[keys.NO_CUDA_GRAPHS] = True
    out |= {
        "parallelism.data_parallel_replicate_degree": 1,
        "parallelism.data_parallel_shard_degree": spec.data_parallel,
        "parallelism.tensor_parallel_degree": spec.tensor_parallel_size,
        "parallelism.pipeline_parallel_degree": pp,
        "parallelism.context_parallel_degree": spec.context_parallel_size,
    }
    if spec.expert_parallel_size > 1:
        out["parallelism.expert_parallel_degree"] = spec.expert_parallel_size
    return out


def context(spec: BatchSpec) -> dict:
    launch = [("--nnodes", spec.nodes or 1), ("--nproc_per_node", spec.gpus_per_node or spec.world)]
    return {"spec": spec, "flags": list(flags(spec).items()), "launch": launch}
