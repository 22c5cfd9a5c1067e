"""Findings on how a layout splits the model the job names: heads over tensor-parallel ranks
and layers over pipeline stages, by the framework's :class:`~translator.model.model_split.SplitRules`,
and tensor-parallel groups that cross nodes. Each fix offers only sizes the model, the rules and
the nodes accept and on which the batch still splits."""

from __future__ import annotations

from translator.batch import solve
from translator.model.model_split import SIZES, ModelParts, SplitRules, fits, splits
from translator.spec import BatchSpec
from translator.words.errors import BatchspecError
from translator.words.findings import Finding, counted, finding


def findings(
    spec: BatchSpec, parts: ModelParts | None = None, rules: SplitRules | None = None
) -> list[Finding]:
    """The model's heads and layers against the layout by ``rules``, and a tensor-parallel group
    that crosses nodes."""
    out = []
    if parts is not None and rules is not None:
        out += _tensor(spec, parts, rules) + _pipeline(spec, parts, rules)
    return out + _across_nodes(spec, parts, rules)


def _tensor(spec: BatchSpec, parts: ModelParts, rules: SplitRules) -> list[Finding]:
    tp = spec.tensor_parallel_size
    split = [
        (count, rule, noun)
        for count, rule, noun in (
            (parts.kv_heads, rules.kv_heads, "key/value heads (query groups)"),
            (parts.heads, rules.heads, "attention heads"),
        )
        if count is not None and not splits(count, tp, "divide" if rule == "uneven" else rule)
    ]
    uneven = [(count, noun) for count, rule, noun in split if rule == "uneven"]
    if uneven:  # the query heads follow the key/value heads: one warning says it
        return [_uneven_heads(spec, parts, rules, *uneven[0])]
    if not split:
        return []
    counts = " and the ".join(f"{count} {noun}" for count, _, noun in reversed(split))
    multiple = any(rule == "divide-or-multiple" for _, rule, _ in split)
    return [
        finding(
            "model-tensor-heads",
            f"tensor-parallel size {tp} does not split the {counts} of the model "
            f"({parts.where}): {rules.source} needs it to divide them"
            + (" (or the query groups to divide it)" if multiple else ""),
            hint=_offer(spec, "tensor", parts, rules),
            where=rules.tensor_at,
        )
    ]


def _uneven_heads(
    spec: BatchSpec, parts: ModelParts, rules: SplitRules, count: int, noun: str
) -> Finding:
    tp = spec.tensor_parallel_size
    shares = [count // tp + (rank < count % tp) for rank in range(tp)]
    message = (
        f"tensor-parallel size {tp} splits the {count} {noun} of the model ({parts.where}) "
        f"unevenly: {_shares(shares, 'rank')}"
    )
    return finding(
        "model-uneven-split",
        message,
        hint=f"the ranks with more heads set the pace; {_offer(spec, 'tensor', parts, rules)}",
        where=rules.tensor_at,
    )


def _pipeline(spec: BatchSpec, parts: ModelParts, rules: SplitRules) -> list[Finding]:
    pp, layers, virtual = spec.pipeline_parallel_size, parts.layers, spec.virtual_pipeline_stages
    if pp == 1 or layers is None or rules.pipeline == "given":
        return []
    slots = layers + rules.pipeline_extra
    counted_as = f"{layers} layers" + (
        f" and {rules.pipeline_extra} more pipeline slots" if rules.pipeline_extra else ""
    )
    if slots % pp and rules.pipeline == "uneven":
        stages = [slots // pp + (stage < slots % pp) for stage in range(pp)]
        return [
            finding(
                "model-uneven-split",
                f"pipeline-parallel size {pp} splits the {counted_as} of the model "
                f"({parts.where}) unevenly: {_shares(stages, 'stage')}",
                hint=f"the longest stage sets the pace; {_offer(spec, 'pipeline', parts, rules)}",
                where=rules.pipeline_at,
            )
        ]
    if rules.pipeline_fits(parts, pp, virtual):
        return []
    if slots % pp:
        message = f"pipeline-parallel size {pp} does not divide the {counted_as} of the model"
    else:
        message = (
            f"the {slots // pp} layers of each of the {pp} pipeline stages do not split into "
            f"{virtual} virtual stages"
        )
    hint = _offer(spec, "pipeline", parts, rules)
    if rules.uneven_fix:
        hint += f"; or {rules.uneven_fix}"
    return [
        finding(
            "model-pipeline-layers",
            f"{message} ({parts.where}): {rules.source} refuses it",
            hint=hint,
            where=rules.pipeline_at,
        )
    ]


def _across_nodes(
    spec: BatchSpec, parts: ModelParts | None, rules: SplitRules | None
) -> list[Finding]:
    tp, per_node = spec.tensor_parallel_size, spec.gpus_per_node
    if per_node is None or tp == 1 or per_node % tp == 0:
        return []
    if tp > per_node:
        message = (
            f"tensor-parallel size {tp} is more than the {per_node} GPUs of a node, so every "
            "tensor-parallel group spans nodes"
        )
    else:
        message = (
            f"tensor-parallel size {tp} does not divide the {per_node} GPUs of a node, so some "
            "tensor-parallel groups span two nodes"
        )
    return [
        finding(
            "tensor-across-nodes",
            message + ": their all-reduces in every layer cross the network between nodes",
            hint=_offer(spec, "tensor", parts, rules),
            where=None if rules is None else rules.tensor_at,
        )
    ]


def _shares(counts: list[int], holder: str) -> str:
    """``3 on 2 ranks, 2 on 1 rank`` for counts of 3, 3 and 2 on three ranks."""
    return ", ".join(
        f"{c or 'none'} on {counted(counts.count(c), holder)}" for c in dict.fromkeys(counts)
    )


def _offer(spec: BatchSpec, name: str, parts: ModelParts | None, rules: SplitRules | None) -> str:
    """The ``name``-parallel sizes nearest the spec's that the model, the rules and the nodes
    accept and on which the global and micro-batch still split (accumulation re-solved)."""
    accept = fits(parts, rules, spec.gpus_per_node, spec.virtual_pipeline_stages)
    size = getattr(spec, SIZES[name])
    per_model = spec.world * size // spec.model_parallel_size

    def solves(candidate: int) -> bool:
        return accept(name, candidate) and resolved(spec, SIZES[name], candidate) is not None

    near = solve.nearest_divisors(per_model, size, solves)
    if not near:
        return (
            f"no {name}-parallel size splits world {spec.world} with the model and the global "
            f"batch {spec.global_batch}: change the world or the global batch"
        )
    return (
        f"use {name}-parallel size {' or '.join(map(str, near))} (global "
        f"{spec.global_batch} kept, the accumulation re-solved)"
    )


def resolved(spec: BatchSpec, field: str, value: int) -> BatchSpec | None:
    """``spec`` with ``field`` set to ``value``, its global and micro-batch kept and the
    accumulation re-solved; None when that is no valid spec."""
    from translator.spec import BatchSpec

    values = spec.model_dump(exclude={"data_parallel_size", "gradient_accumulation_steps"})
    try:
        return BatchSpec(**(values | {field: value}))
    except (BatchspecError, ValueError):  # pydantic's ValidationError is a ValueError
        return None
