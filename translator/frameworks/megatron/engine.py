"""Megatron-core: the rendered ``--flag value`` arguments, run through megatron-core's own parts.

What runs is what was rendered: the micro and global batch, the tensor / pipeline / context
parallel sizes, the virtual pipeline stages and ``--use-distributed-optimizer`` are read back
from the rendered args file (``translator.frameworks.megatron.program.read``), not taken from
the spec; then :mod:`translator.frameworks.shared.mcore_engine` trains that layout on every rank
(GPTModel, the micro-batch calculator, ``get_forward_backward_func``, megatron's DDP and
optimizer) and counts its samples. On CPU it runs data parallelism only; other layouts are
refused before launch (:func:`refuse_config`).
"""

from __future__ import annotations

from pathlib import Path

from translator.frameworks.megatron.program import read
from translator.frameworks.shared import mcore_engine
from translator.frameworks.shared.mcore_engine import EngineLayout, check_layout, layout_refusal
from translator.rank.context import RunContext

__all__ = [
    "EngineLayout",
    "check_layout",
    "parse_layout",
    "read_layout",
    "refuse",
    "refuse_config",
    "run",
]

#: megatron-core's CPU redirection (kept under its old name for the engine's tests).
_cpu_megatron = mcore_engine.cpu_megatron


def read_layout(path: Path) -> EngineLayout:
    """The layout of a rendered Megatron args file, read as the renderer's reader reads it."""
    return parse_layout(Path(path).read_text(), str(path))


def parse_layout(text: str, path: str) -> EngineLayout:
    """The layout of Megatron args ``text`` (``path``: the file they come from, for errors)."""
    reading = read(text, path)

    def count(flag: str) -> int | None:
        """The flag's literal count; ``None`` when the flag is absent."""
        if flag not in reading.values:
            return None
        value = reading.count(flag)
        if value is None:
            raise RuntimeError(
                f"{path}: {flag} is not a literal count ({reading.values[flag].value!r})"
            )
        return value

    micro = count("--micro-batch-size")
    if micro is None:
        raise RuntimeError(f"{path}: no --micro-batch-size; Megatron needs one")
    if "--rampup-batch-size" in reading.values:
        raise RuntimeError(
            f"{path}: --rampup-batch-size is not supported by smoke runs "
            "(the number of micro-batches would change from step to step)"
        )
    return EngineLayout(
        micro_batch_size=micro,
        global_batch_size=count("--global-batch-size"),
        tensor_parallel_size=count("--tensor-model-parallel-size") or 1,
        pipeline_parallel_size=count("--pipeline-model-parallel-size") or 1,
        context_parallel_size=count("--context-parallel-size") or 1,
        virtual_pipeline_stages=count("--num-virtual-stages-per-pipeline-rank"),
        decrease_batch_size_if_needed="--decrease-batch-size-if-needed" in reading.values,
        use_distributed_optimizer="--use-distributed-optimizer" in reading.values,
        calculate_per_token_loss="--calculate-per-token-loss" in reading.values,
    )


#: Why this engine cannot run a spec's layout on a device (megatron-core's CPU limits).
refuse = mcore_engine.refuse


def refuse_config(config: str, partners, where: str, device: str) -> str | None:
    """Why this engine cannot run the args ``config`` (from the file ``where``) on ``device``:
    what the ranks would raise on reading them (:func:`check_layout`), asked before they start."""
    try:
        layout = parse_layout(config, where)
    except RuntimeError as exc:  # its text names the file
        return str(exc)
    why = layout_refusal(layout, device == "gpu")
    return f"{where}: {why}" if why else None


def run(ctx: RunContext):
    """The rendered args' layout, trained and counted on this rank."""
    return mcore_engine.run(ctx, read_layout(ctx.config))
