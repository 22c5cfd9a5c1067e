"""torchtitan's batch keys in its three generations, with the defaults torchtitan itself
applies, and which generation the installed torchtitan is.

- ``toml``: torchtitan ≤ 0.2.2, a TOML job file (``--job.config_file x.toml``) with
  ``[training] local_batch_size / global_batch_size / seq_len``;
- ``python``: torchtitan 0.3.0 (PR #2386, 2026-02-23), a Python config function
  (``--module llama3 --config llama3_8b``) and ``--section.key value`` flags on top, the same
  sample keys;
- ``tokens``: torchtitan after PR #4121 (2026-08-20), token counts
  (``training.num_tokens_per_microbatch_per_dp_rank``, ``training.num_tokens_per_train_step``,
  ``training.max_context_length``, ``parallelism.num_pp_microbatches``).
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

#: The sample keys (``toml`` and ``python``) -> torchtitan's default.
SAMPLES = {
    "training.local_batch_size": 8,
    "training.global_batch_size": -1,
    "training.seq_len": 2048,
    "parallelism.pipeline_parallel_microbatch_size": 1,
}
#: The token keys (``tokens``) -> torchtitan's default.
TOKENS = {
    "training.num_tokens_per_microbatch_per_dp_rank": 16384,
    "training.num_tokens_per_train_step": -1,
    "training.max_context_length": 2048,
    "parallelism.num_pp_microbatches": 1,
}
#: The keys before PR #1238 (2025-06-05), which forks such as flame kept: ``batch_size`` per
#: data-parallel rank, and the fork's own ``gradient_accumulation_steps`` (torchtitan itself
#: had no accumulation then) -> default.
OLDEST = {"training.batch_size": 8, "training.gradient_accumulation_steps": 1}
#: The keys that name the model (≤ 0.2.2's ``[model]`` table, or flags), read for what it is
#: (the tokenizer's: 0.1 took the vocabulary from ``tokenizer_path``, 0.2 from the flavor).
MODEL = ("model.name", "model.flavor", "model.tokenizer_path", "model.hf_assets_path")
#: The mesh's degrees (every generation) -> torchtitan's default.
DEGREES = {
    "parallelism.data_parallel_replicate_degree": 1,
    "parallelism.data_parallel_shard_degree": -1,
    "parallelism.tensor_parallel_degree": 1,
    "parallelism.pipeline_parallel_degree": 1,
    "parallelism.context_parallel_degree": 1,
    "parallelism.expert_parallel_degree": 1,
}
#: Where torchtitan kept the degrees before its typed config (PR #767, 2025-04): under
#: ``[training]``, and the pipeline's under ``[experimental]`` -> the key they are now.
ALIASES = {
    "training.data_parallel_replicate_degree": "parallelism.data_parallel_replicate_degree",
    "training.data_parallel_shard_degree": "parallelism.data_parallel_shard_degree",
    "training.tensor_parallel_degree": "parallelism.tensor_parallel_degree",
    "training.context_parallel_degree": "parallelism.context_parallel_degree",
    "experimental.pipeline_parallel_degree": "parallelism.pipeline_parallel_degree",
    "experimental.context_parallel_degree": "parallelism.context_parallel_degree",
}
#: Read for the token generation's sharding check (tokens must split over TP when it is on).
SEQUENCE_PARALLEL = "parallelism.enable_sequence_parallel"
#: torchtitan 0.3.0's switch that pipeline parallelism needs (``Trainer.Config`` raises "CUDA
#: graphs do not support pipeline parallelism yet. Set --training.disable_cuda_graphs.").
NO_CUDA_GRAPHS = "training.disable_cuda_graphs"
#: The switches read (true or false).
SWITCHES = {SEQUENCE_PARALLEL: True, NO_CUDA_GRAPHS: False}
#: Every key read, with its default.
DEFAULTS = SAMPLES | TOKENS | OLDEST | DEGREES | SWITCHES
#: Degree key -> spec field.
FIELDS = {
    "parallelism.tensor_parallel_degree": "tensor_parallel_size",
    "parallelism.pipeline_parallel_degree": "pipeline_parallel_size",
    "parallelism.context_parallel_degree": "context_parallel_size",
    "parallelism.expert_parallel_degree": "expert_parallel_size",
}
#: Real torchtitan keys of its ``[training]`` / ``[parallelism]`` tables that look like batch
#: keys (not typos).
LOOKALIKES = {
    "training.steps",
    "parallelism.expert_tensor_parallel_degree",
    "parallelism.pipeline_parallel_degree",
    "parallelism.pipeline_parallel_schedule",
    "parallelism.pipeline_parallel_layers_per_stage",
    "parallelism.context_parallel_rotate_method",
    "parallelism.enable_async_tensor_parallel",
    "parallelism.fsdp_reshard_after_forward",
    "parallelism.pipeline_parallel_split_points",
}

#: Generation name -> how messages name it.
GENERATIONS = {
    "batch_size": "torchtitan's config before PR #1238 (2025-06) or a fork of it such as flame "
    "(training.batch_size per rank, no global key)",
    "toml": "a TOML job file of torchtitan ≤ 0.2.2 (samples: local_batch_size)",
    "python": "torchtitan 0.3.0's --module/--config with flags (samples: local_batch_size)",
    "tokens": "torchtitan's token-based config (after PR #4121, 2026-08: "
    "num_tokens_per_microbatch_per_dp_rank)",
}


def generation_of(keys) -> str:
    """``tokens`` when any token key is set, ``batch_size`` when the oldest per-rank key is
    set without ``local_batch_size``, else ``samples``."""
    keys = set(keys)
    if keys & set(TOKENS):
        return "tokens"
    if "training.batch_size" in keys and "training.local_batch_size" not in keys:
        return "batch_size"
    return "samples"


@functools.cache
def installed() -> tuple[str, str] | None:
    """``(version, generation)`` of the installed torchtitan, read from its metadata and its
    config source without importing it; ``None`` when it is not installed."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("torchtitan")
        spec = importlib.util.find_spec("torchtitan")
    except (PackageNotFoundError, ImportError, ValueError):
        return None
    if spec is None or spec.origin is None:
        return None
    configs = Path(spec.origin).parent / "config" / "configs.py"
    if not configs.is_file():
        return found, "toml"  # ≤ 0.2.2 kept its config in config/job_config.py
    source = configs.read_text(encoding="utf-8", errors="replace")
    return found, "tokens" if "num_tokens_per_train_step" in source else "python"
