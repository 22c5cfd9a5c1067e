"""What a smoke run's figures mean beside the hardware: FLOPs per token, MFU on a GPU, the
length of a CPU run before it starts, and the memory estimate to set beside the peak."""

from __future__ import annotations

import math

from translator.launch.command import SmokePlan
from translator.launch.judging import RunReport
from translator.launch.preparing import Prepared
from translator.launch.progress import duration
from translator.launch.run_model import RunModel
from translator.model.memory import Model
from translator.rank.model import SHAPES, ModelShape
from translator.rank.result import RankResult
from translator.spec import BatchSpec
from translator.words.findings import counted

#: Peak dense bf16 FLOP/s per GPU, for MFU (NVIDIA data sheets).
PEAK_FLOPS = {"H200": 989e12, "H100": 989e12, "A100": 312e12, "L40S": 362e12}


#: FLOP/s one CPU rank (one thread) sustains, by the model's width, for the estimate of a
#: run's length (rounded down from runs on this project's 2-core machine, 2 ranks): narrow
#: matrices spend their time in overheads (the tiny model, 64 wide, 16 × 2048 tokens per
#: micro-batch: 5.6 GFLOP/s, 24 s a step), wide ones in the matrix kernels (a Llama-3.2-1B
#: shape cut to 2 layers, 2048 wide, under DeepSpeed ZeRO-2: 31 GFLOP/s, 151 s a step, where
#: 5 GFLOP/s had said 15 minutes). Between the two, on the logarithm of the width.
CPU_FLOPS = ((64, 5e9), (2048, 25e9))


def cpu_flops(hidden: int) -> float:
    """FLOP/s of one CPU rank on a model ``hidden`` wide (:data:`CPU_FLOPS`)."""
    (narrow, low), (wide, high) = CPU_FLOPS
    at = min(1.0, max(0.0, math.log(hidden / narrow) / math.log(wide / narrow)))
    return low * (high / low) ** at


#: Steps estimated to take longer than this many seconds are warned about before the launch.
LONG_RUN_SECONDS = 60.0


def flops_per_token(parameters: int, shape: ModelShape | Model, sequence_length: int) -> int:
    """Training FLOPs per token: 6 N + 12 L h s (PaLM, appendix B)."""
    return 6 * parameters + 12 * shape.layers * shape.hidden * sequence_length


def mfu(report: RunReport, prepared: Prepared) -> tuple[float | None, str]:
    """Model FLOPs utilisation on GPU: (6 N + 12 L h s) FLOPs per token (PaLM, appendix B)
    × tokens/s / (GPUs × peak dense bf16 FLOP/s). None on CPU, on an unknown GPU, or for a run
    that failed."""
    formula = "6·N + 12·L·h·s FLOPs per token (PaLM appendix B), peak dense bf16"
    m = report.measurement
    peak = next((v for k, v in PEAK_FLOPS.items() if k in (m.device or "")), None)
    if peak is None or not m.tokens_per_second or not report.results or report.errors:
        return None, formula
    shape, plan = prepared.model.shape, prepared.plan
    params = max(r.parameters for r in report.results)
    per_token = flops_per_token(params, shape, m.sequence_length or plan.sequence_length)
    return m.tokens_per_second * per_token / (plan.world_size * peak), formula


def estimated_seconds(
    prepared: Prepared,
    cores: int | None,
    sequence_length: int | None = None,
    steps: int | None = None,
) -> float | None:
    """How long the optimizer steps of a CPU run take, roughly (start-up not included): each
    rank's tokens per step (micro × accumulation × sequence) × FLOPs per token of the model
    (:func:`flops_per_token`, its parameters from its shape) / :data:`CPU_FLOPS`, × ranks per
    core when there are more ranks than ``cores`` (None: the nodes' own, not known here).
    ``sequence_length`` and ``steps``: another run's, for the advice. None on a GPU."""
    plan, spec = prepared.plan, prepared.spec
    if plan.device != "cpu":
        return None
    length = sequence_length or plan.sequence_length
    shape = _shape(prepared)
    if isinstance(shape, Model):
        params = shape.parameters
    else:
        params = 12 * shape.layers * shape.hidden**2 + (2 * shape.vocab + length) * shape.hidden
    tokens = spec.micro * spec.accumulation * length
    crowding = max(1.0, plan.nproc / cores) if cores else 1.0
    seconds = tokens * flops_per_token(params, shape, length) / cpu_flops(shape.hidden) * crowding
    return (steps or plan.steps) * seconds


def _shape(prepared: Prepared) -> ModelShape | Model:
    """The shape of the model the run builds: the job's, else the stand-in's."""
    if prepared.model.config is not None:
        return prepared.model.shape
    return SHAPES[prepared.plan.model]


def long_run_warning(prepared: Prepared, cores: int | None) -> str | None:
    """A warning for a run whose steps are estimated (:func:`estimated_seconds`) to take longer
    than :data:`LONG_RUN_SECONDS`, with how long it would take shortened; else None."""
    seconds = estimated_seconds(prepared, cores)
    if seconds is None or seconds <= LONG_RUN_SECONDS:
        return None
    plan, spec = prepared.plan, prepared.spec
    tips = []
    shorter = [
        length
        for length in (2**k for k in range(4, 16))
        if length < plan.sequence_length
        and (estimated_seconds(prepared, cores, length) or 0) <= LONG_RUN_SECONDS / 4
    ]
    if shorter:
        quick = estimated_seconds(prepared, cores, shorter[-1]) or 0
        tips.append(f"--seq-len {shorter[-1]} (about {duration(quick)})")
    if plan.steps > 1:
        one = estimated_seconds(prepared, cores, steps=1) or 0
        tips.append(f"--steps 1 (about {duration(one)})")
    return (
        f"warning: {counted(plan.steps, 'optimizer step')} of micro-batch {spec.micro_batch_size} × accumulation "
        f"{spec.gradient_accumulation_steps} × {plan.sequence_length} tokens per rank may take "
        f"about {duration(seconds)} on CPU (the {prepared.model.architecture} model at "
        f"{cpu_flops(_shape(prepared).hidden) / 1e9:.3g} GFLOP/s per rank)"
        + (f"; shorter: {' or '.join(tips)}" if tips else "")
    )


def built_parameters(results: list[RankResult], spec: BatchSpec) -> int | None:
    """The parameters of the model as the ranks built it (each rank holds it whole without
    model parallelism); None with model parallelism, where a rank holds a part, or when no
    rank said."""
    if spec.tensor_parallel_size * spec.pipeline_parallel_size * spec.context_parallel_size > 1:
        return None
    return max((r.parameters for r in results), default=0) or None


def precision_of(plan: SmokePlan, model: RunModel | None) -> str:
    """The precision a run of ``plan`` building ``model`` trains in, as
    :class:`translator.model.memory.RunSettings` names it: mixed bf16 on a GPU; on CPU fp32, or
    the model's own 16-bit dtype where its config says one (``from_config`` builds it so; a
    parity side builds fp32)."""
    if plan.device == "gpu":
        return "bf16"
    sixteen = model is not None and model.sixteen_bit
    return "16-bit" if sixteen and not plan.parity else "fp32"


def estimated_memory(prepared: Prepared, sequence_length: int) -> dict:
    """The estimate of :mod:`translator.model.memory` for the run as it ran (the engines train in
    :func:`precision_of`), to set beside the peak it measured."""
    from translator.model import memory

    gpu = prepared.plan.device == "gpu"
    run = memory.run_of(
        prepared.spec,
        sequence_length,
        precision=precision_of(prepared.plan, prepared.model),
        overhead=memory.GIB if gpu else 0,
        **prepared.trains,
    )
    found = memory.estimate(prepared.model.shape, run)
    states = sum(p.bytes for p in found.parts if p.name in memory.STATES)
    return {"model_states_bytes": states, **found.as_dict()}
