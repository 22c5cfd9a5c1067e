"""megatron-core's own micro-batch calculator, which needs no process group."""

from __future__ import annotations

from translator.frameworks.shared.mcore_calculator import num_microbatches
from translator.words.findings import counted


def verdict(inspection, world: int) -> str:
    """megatron-core's own micro-batch calculator on the file's values."""
    from translator.plugin.contract import NotEnoughKnown

    v = inspection.values
    if None in (v.get("global_batch_size"), v.get("micro_batch_size"), v.get("data_parallel_size")):
        raise NotEnoughKnown("global batch, micro-batch or data-parallel size unknown")
    m = num_microbatches(v["global_batch_size"], v["micro_batch_size"], v["data_parallel_size"])
    return (
        f"megatron-core's micro-batch calculator runs {counted(m, 'micro-batch', 'micro-batches')} "
        "per step (it checks global against micro × data-parallel only)"
    )
