"""The verdict of the code Megatron-Bridge and NeMo count with: megatron-core's micro-batch
calculator. Megatron-Bridge itself needs Transformer Engine (CUDA) and Python 3.12, so it does
not install here and its ``ConfigContainer`` cannot be asked; what it adds before the calculator
is ``get_data_parallel_size`` (``world % (TP × PP × CP)``), which this module applies as its
code does."""

from __future__ import annotations

from importlib import metadata

from translator.frameworks.megatron_bridge import rules
from translator.frameworks.shared.mcore_calculator import calculate
from translator.words.findings import counted


def data_parallel_size(world: int, tensor: int, pipeline: int, context: int) -> int:
    """Megatron-Bridge's ``ConfigContainer.get_data_parallel_size``, with its assertion."""
    model = tensor * pipeline * context
    assert world % model == 0, (
        f"world size ({world}) is not divisible by total_model_size "
        f"(tensor_model_parallel_size={tensor} * pipeline_model_parallel_size={pipeline} * "
        f"context_parallel_size={context})"
    )
    return world // model


def verdict(inspection, world: int) -> str:
    """megatron-core's calculator, initialised as Megatron-Bridge's ``initialize`` does: the
    file's written global batch, micro-batch, ramp-up and ``decrease_batch_size_if_needed``."""
    from translator.plugin.contract import NotEnoughKnown

    reading, values = inspection.reading, inspection.values
    gen = rules.generation(reading)
    written = reading.values.get(gen.key("global_batch_size"))
    micro = values.get("micro_batch_size")
    sizes = [values.get(f) for f in rules.SIZES]
    if micro is None or None in sizes:
        raise NotEnoughKnown("the micro-batch or a parallel size is unknown")
    dp = data_parallel_size(world, *sizes)
    glob = micro * dp if written is None or written.value is None else written.count
    if glob is None:
        raise NotEnoughKnown(f"{gen.key('global_batch_size')} is not a known count")
    rampup = reading.values.get(gen.rampup)
    decrease = reading.values.get(rules.DECREASE)
    got = calculate(
        glob,
        micro,
        dp,
        rampup.value if rampup is not None and rampup.value else None,
        decrease is not None and decrease.value is True,
    )
    runs = counted(got.num_microbatches, "micro-batch", "micro-batches")
    start = (
        f"; the ramp-up starts it at global {got.global_batch_size}"
        if got.global_batch_size != glob
        else ""
    )
    rounded = (
        f", rounded down from {glob}"
        if got.running_global_batch_size != got.global_batch_size
        else ""
    )
    return (
        f"megatron-core {metadata.version('megatron-core')}'s micro-batch calculator (what "
        f"{gen.name} counts with; Megatron-Bridge needs Transformer Engine and does not install "
        f"here) runs {runs} of {micro} on each of {dp} data-parallel ranks per step: global "
        f"{got.running_global_batch_size}{rounded}{start}"
    )
