"""The finding codes of the torchtitan framework (registered when it loads)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from translator.words.findings import Severity

#: code -> (severity, what it is about).
CODES: dict[str, tuple[Severity, str]] = {
    "torchtitan-generation": (
        "info",
        "which of torchtitan's config generations a file or launch is (TOML, Python, tokens)",
    ),
    "torchtitan-other-generation": (
        "warning",
        "keys of another torchtitan generation than the one installed here, which it refuses",
    ),
    "torchtitan-toml-unread": (
        "warning",
        "a TOML job file, which the installed torchtitan no longer reads (--module/--config)",
    ),
    "torchtitan-global-follows-world": (
        "warning",
        "global_batch_size / num_tokens_per_train_step is -1: the global batch grows with the GPUs",
    ),
    "torchtitan-global-not-divisible": (
        "error",
        "the global batch is no multiple of local batch × data-parallel degree (torchtitan asserts)",
    ),
    "torchtitan-tokens-not-divisible": (
        "error",
        "num_tokens_per_train_step does not divide by one accumulation step's tokens (ValueError)",
    ),
    "torchtitan-tokens-not-samples": (
        "warning",
        "a token count that is no whole number of sequences of max_context_length",
    ),
    "torchtitan-tokens-sharding": (
        "error",
        "tokens per micro-batch do not divide by the sequence / context parallel split",
    ),
    "torchtitan-mesh": (
        "error",
        "replicate × shard × context × tensor × pipeline is not the world size (ParallelDims)",
    ),
    "torchtitan-pp-microbatch": (
        "error",
        "local_batch_size does not divide by pipeline_parallel_microbatch_size (ValueError)",
    ),
    "torchtitan-pp-few-microbatches": (
        "warning",
        "fewer pipeline micro-batches than pipeline stages (torchtitan only warns)",
    ),
    "torchtitan-config-function": (
        "info",
        "values the --config function sets, which are Python and not read",
    ),
    "torchtitan-bad-degree": (
        "error",
        "a parallel degree below 1 (data_parallel_shard_degree may be -1)",
    ),
}
