"""Findings that hold for every framework: the model's split, experts, learning-rate scaling,
alignment.

Framework quirks live in each framework's ``check`` (``translator.frameworks.<name>``).
"""

from __future__ import annotations

import math

from translator.batch import solve
from translator.checks import split_advice
from translator.model.model_split import ModelParts, SplitRules
from translator.spec import BatchSpec
from translator.words.findings import Finding, finding

#: NVIDIA's tensor-core guideline for FP16/BF16 GEMM dimensions ("Optimizing Linear/Fully-
#: Connected Layers"); 64 is where small dimensions stop wasting tiles.
TENSOR_CORE_MULTIPLE = 8
SMALL_DIMENSION_MULTIPLE = 64


def general_findings(
    spec: BatchSpec, parts: ModelParts | None = None, rules: SplitRules | None = None
) -> list[Finding]:
    """All framework-independent findings for a solved spec: with the ``parts`` of the model
    the job names and the ``rules`` its framework splits them by, how the layout splits it."""
    return [
        *split_advice.findings(spec, parts, rules),
        *expert_findings(spec),
        *learning_rate_findings(spec),
        *alignment_findings(spec),
    ]


def expert_findings(spec: BatchSpec) -> list[Finding]:
    out = []
    ep, pp, world = spec.expert_parallel_size, spec.pipeline_parallel_size, spec.world
    # An expert-parallel size must divide the experts and fit the expert grid of this world.
    fits = [
        d
        for d in range(1, world // pp + 1)
        if (world // pp) % d == 0 and (spec.num_experts is None or spec.num_experts % d == 0)
    ]
    sizes = f"an expert-parallel size of {', '.join(map(str, fits))}"
    if spec.num_experts is not None and spec.num_experts % ep:
        out.append(
            finding(
                "experts-not-divisible",
                f"num_experts {spec.num_experts} does not divide by expert_parallel_size {ep}",
                hint=f"use {sizes}: each divides both the {spec.num_experts} experts and "
                f"world {world} / pipeline {pp}",
            )
        )
    if world % (ep * pp):
        out.append(
            finding(
                "expert-grid",
                f"world size {world} does not divide by expert-parallel {ep} × "
                f"pipeline {pp} = {ep * pp}, so the expert grid cannot be built",
                hint=f"use {_expert_worlds(spec)}{sizes}",
            )
        )
    return out


def _expert_worlds(spec: BatchSpec) -> str:
    """The worlds nearest this one that build the expert grid, are whole nodes (when the spec
    says its nodes) and still split the global batch over the micro-batch (the accumulation
    re-solved), as ``"a world size of A or B, or "``."""
    model, grid = spec.model_parallel_size, spec.expert_parallel_size * spec.pipeline_parallel_size
    unit = math.lcm(grid, spec.gpus_per_node or 1)
    per_replica = spec.global_batch // (spec.micro_batch_size or 1)
    near = solve.nearest_divisors(
        per_replica, spec.data_parallel, lambda dp: dp * model % unit == 0
    )
    return f"a world size of {' or '.join(str(dp * model) for dp in near)}, or " if near else ""


def scaled_learning_rate(lr: float, scale: float, optimizer: str) -> float:
    """Square-root rule for Adam (Malladi et al. 2022), linear for SGD (Goyal et al. 2017)."""
    return lr * (math.sqrt(scale) if optimizer == "adam" else scale)


def factor(value: float) -> str:
    """A factor on the learning rate, to three figures and never shown as ``1`` unless it is
    (``1.004``, not ``1``, for the square root of 1008 / 1000)."""
    for digits in range(3, 8):
        text = f"{value:.{digits}g}"
        if text != "1" or value == 1:
            return text
    return text


def scaled_beta2(beta2: float, scale: float) -> float:
    """beta2 that keeps its half-life in tokens when the batch grows by ``scale``
    (Marek et al. 2025): beta2 ** scale."""
    return beta2**scale


def learning_rate_findings(spec: BatchSpec) -> list[Finding]:
    scale = spec.batch_scale
    if scale is None or scale == 1:
        return []
    ref, g = spec.reference_global_batch_size, spec.global_batch
    ratio = f"global batch {g} is {scale:.4g}× the reference batch {ref}"
    if spec.learning_rate is None:
        return [
            finding(
                "lr-scaling",
                f"{ratio}; retune or scale the learning rate",
                hint=f"give the learning rate tuned at global {ref} (learning_rate, or plan "
                "--lr) to get its scaled value",
            )
        ]
    lr = spec.learning_rate
    rule = (
        "square-root rule for Adam (Malladi et al. 2022)"
        if spec.optimizer == "adam"
        else "linear rule for SGD (Goyal et al. 2017)"
    )
    hint = (
        f"learning rate {lr:.4g} → {scaled_learning_rate(lr, scale, spec.optimizer):.4g} ({rule})"
    )
    if spec.optimizer == "adam":
        hint += f"; the linear rule would give {scaled_learning_rate(lr, scale, 'sgd'):.4g}"
        if spec.adam_beta2 is not None:
            hint += (
                f"; beta2 {spec.adam_beta2:g} → {scaled_beta2(spec.adam_beta2, scale):.6g}"
                " keeps its half-life in tokens (Marek et al. 2025)"
            )
    return [finding("lr-scaling", ratio, hint=hint)]


def alignment_findings(spec: BatchSpec) -> list[Finding]:
    seq = spec.sequence_length
    if seq is None or seq % TENSOR_CORE_MULTIPLE == 0:
        return []
    near = sorted(
        {
            n
            for m in (TENSOR_CORE_MULTIPLE, SMALL_DIMENSION_MULTIPLE)
            for n in solve.nearest_multiples(seq, m)
        }
    )
    return [
        finding(
            "alignment",
            f"sequence length {seq} is not a multiple of {TENSOR_CORE_MULTIPLE}; NVIDIA's guideline for "
            f"FP16/BF16 GEMMs is dimensions divisible by {TENSOR_CORE_MULTIPLE} (64-256 where small)",
            hint=f"consider {', '.join(map(str, near))}; the GEMM rows are micro × sequence, so also "
            "check hidden, FFN and vocabulary sizes and head dim, and measure with smoke",
        )
    ]
