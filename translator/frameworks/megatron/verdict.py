"""megatron-core's own micro-batch calculator, which needs no process group."""

from __future__ import annotations

import inspect

from translator.findings import counted


def num_microbatches(
    global_batch_size: int,
    micro_batch_size: int,
    data_parallel_size: int,
    rampup_batch_size: list[int] | None = None,
) -> int:
    """How many micro-batches per step megatron-core runs for these sizes.

    Works with both calculator signatures (0.16: five positional parameters; 0.19: keywords
    with defaults) by passing only the parameters the installed version names. The
    calculator's own errors propagate unchanged.
    """
    from megatron.core import num_microbatches_calculator as calc

    wanted = {
        "rank": 0,
        "rampup_batch_size": rampup_batch_size,
        "global_batch_size": global_batch_size,
        "micro_batch_size": micro_batch_size,
        "data_parallel_size": data_parallel_size,
        "decrease_batch_size_if_needed": False,
    }
    params = inspect.signature(calc.init_num_microbatches_calculator).parameters
    calc.destroy_num_microbatches_calculator()
    try:
        calc.init_num_microbatches_calculator(**{k: v for k, v in wanted.items() if k in params})
        return calc.get_num_microbatches()
    finally:
        calc.destroy_num_microbatches_calculator()


def verdict(inspection, world: int) -> str:
    """megatron-core's own micro-batch calculator on the file's values."""
    from translator.frameworks.contract import NotEnoughKnown

    v = inspection.values
    if None in (v.get("global_batch_size"), v.get("micro_batch_size"), v.get("data_parallel_size")):
        raise NotEnoughKnown("global batch, micro-batch or data-parallel size unknown")
    m = num_microbatches(v["global_batch_size"], v["micro_batch_size"], v["data_parallel_size"])
    return (
        f"megatron-core's micro-batch calculator runs {counted(m, 'micro-batch', 'micro-batches')} "
        "per step (it checks global against micro × data-parallel only)"
    )
