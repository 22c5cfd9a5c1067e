"""The finding codes of the litgpt framework (registered when it loads)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from translator.words.findings import Severity

#: code -> (severity, what it is about).
CODES: dict[str, tuple[Severity, str]] = {
    "litgpt-floor": (
        "error",
        "litgpt floors global // (devices × num_nodes) // micro silently: it runs a smaller batch",
    ),
    "litgpt-batch-too-small": (
        "error",
        "the global batch is smaller than one micro-batch per rank: litgpt's assert fails",
    ),
    "litgpt-no-model-parallel": (
        "error",
        "litgpt's training has no tensor, pipeline or context parallelism",
    ),
    "litgpt-world-mismatch": (
        "error",
        "devices × num_nodes is not the world the launcher starts: Lightning Fabric refuses it",
    ),
    "litgpt-per-node-batch": (
        "warning",
        "litgpt before 0.5.8 took train.global_batch_size per node, not over every node",
    ),
    "litgpt-global-since-058": (
        "info",
        "since litgpt 0.5.8 train.global_batch_size counts every node (before, one node)",
    ),
    "litgpt-old-optimizer-keys": (
        "error",
        "optimizer keys under train: (litgpt 0.3 and before), which litgpt 0.4 and later refuse",
    ),
    "litgpt-default-unknown": (
        "warning",
        "a batch key is not set and its default depends on the litgpt command, which is not known",
    ),
    "litgpt-devices-auto": (
        "info",
        "devices auto: litgpt takes every GPU of the machine (torch.cuda.device_count())",
    ),
    "litgpt-not-an-option": (
        "error",
        "a word of the litgpt command line that its parser (jsonargparse) refuses",
    ),
}
