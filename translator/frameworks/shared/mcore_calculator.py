"""megatron-core's own micro-batch calculator, which needs no process group: every framework
that trains through megatron-core (Megatron-LM, Megatron-Bridge, NeMo) asks it for the number of
micro-batches a step runs."""

from __future__ import annotations

import inspect
from dataclasses import dataclass


@dataclass(frozen=True)
class Calculated:
    """What megatron-core's calculator makes of a batch at the start of training."""

    num_microbatches: int
    """Micro-batches per step on each data-parallel rank (``get_num_microbatches()``)."""
    global_batch_size: int
    """The global batch it counts at step 0 (a ramp-up's start batch, else the one given)."""
    running_global_batch_size: int
    """The global batch it runs at step 0: rounded down to a multiple of micro x data-parallel
    under ``decrease_batch_size_if_needed``, else the one it counts."""


def calculate(
    global_batch_size: int,
    micro_batch_size: int,
    data_parallel_size: int,
    rampup_batch_size: list[int] | None = None,
    decrease_batch_size_if_needed: bool = False,
) -> Calculated:
    """megatron-core's calculator on these sizes, as initialised at the start of training.

    Works with both signatures of ``init_num_microbatches_calculator`` (0.16: five positional
    parameters; 0.19: keywords with defaults) by passing only the parameters the installed
    version names. The calculator's own errors propagate unchanged.
    """
    from megatron.core import num_microbatches_calculator as calc

    wanted = {
        "rank": 0,
        "rampup_batch_size": rampup_batch_size,
        "global_batch_size": global_batch_size,
        "micro_batch_size": micro_batch_size,
        "data_parallel_size": data_parallel_size,
        "decrease_batch_size_if_needed": decrease_batch_size_if_needed,
    }
    params = inspect.signature(calc.init_num_microbatches_calculator).parameters
    calc.destroy_num_microbatches_calculator()
    try:
        calc.init_num_microbatches_calculator(**{k: v for k, v in wanted.items() if k in params})
        return Calculated(
            calc.get_num_microbatches(),
            calc.get_current_global_batch_size(),
            calc.get_current_running_global_batch_size(),
        )
    finally:
        calc.destroy_num_microbatches_calculator()


def num_microbatches(
    global_batch_size: int,
    micro_batch_size: int,
    data_parallel_size: int,
    rampup_batch_size: list[int] | None = None,
) -> int:
    """How many micro-batches per step megatron-core runs for these sizes."""
    return calculate(
        global_batch_size, micro_batch_size, data_parallel_size, rampup_batch_size
    ).num_microbatches
