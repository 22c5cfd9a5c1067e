"""megatron-core's interleaved (virtual) pipeline schedule and the micro-batches it takes
(``core/pipeline_parallel/schedules.py``), for every framework that trains through
megatron-core."""

from __future__ import annotations

from translator.batch import solve
from translator.spec import BatchSpec
from translator.words.findings import Finding, counted, finding


def findings(spec: BatchSpec) -> list[Finding]:
    """What megatron-core's interleaved schedule refuses in ``spec``: virtual stages without
    pipeline parallelism, a group size outside [PP, M], a last group below PP."""
    m, pp = spec.accumulation, spec.pipeline_parallel_size
    out: list[Finding] = []
    if spec.virtual_pipeline_stages is None:
        return out
    if pp == 1:
        out.append(
            finding(
                "virtual-pipeline-needs-pp",
                f"virtual_pipeline_stages {spec.virtual_pipeline_stages} needs pipeline parallelism, "
                "but pipeline_parallel_size is 1",
                hint="set pipeline_parallel_size > 2 (or 2 with --overlap-p2p-comm), or drop the "
                "virtual stages",
            )
        )
        return out
    group = spec.microbatch_group_size_per_vp_stage or pp
    if not pp <= group <= m:
        out.append(_group_out_of_range(spec, m, group, pp))
    elif 0 < m % group < pp:
        # Below M only the multiple of N keeps a remainder Megatron takes; above it, the first
        # is remainder PP (the next multiple when N is PP).
        below = solve.nearest_multiples(m, group)[0]
        out.append(
            finding(
                "virtual-pipeline-microbatches",
                f"the remainder of M={m} micro-batches divided by N={group} should be 0 or at least "
                f"PP={pp}, but it is {m % group}",
                hint=f"use accumulation {below} or {below + pp}",
            )
        )
    return out


def _interleaves(m: int, group: int, pp: int) -> bool:
    """Whether Megatron's interleaved schedule takes ``m`` micro-batches per step in groups of
    ``group`` on ``pp`` stages (``core/pipeline_parallel/schedules.py``): the group size lies in
    [PP, M], and the last group is whole or at least PP."""
    return pp <= group <= m and not 0 < m % group < pp


def _group_out_of_range(spec: BatchSpec, m: int, group: int, pp: int) -> Finding:
    """Megatron's "[PP, M]" rule broken: said plainly, with the changes that satisfy it."""
    explicit = spec.microbatch_group_size_per_vp_stage is not None
    if m < pp:
        message = (
            f"the interleaved pipeline schedule needs at least PP={pp} micro-batches per step; "
            f"this step has {m}"
        )
    elif group > m:
        message = (
            f"microbatch_group_size_per_vp_stage {group} is more than the "
            f"{counted(m, 'micro-batch', 'micro-batches')} of a step; the interleaved schedule "
            f"needs it between PP={pp} and M={m}"
        )
    else:
        message = (
            f"microbatch_group_size_per_vp_stage {group} is below PP={pp}; the interleaved "
            f"schedule needs it between PP={pp} and M={m}"
        )
    prefix = ""
    if group < pp:  # the group size is what must change; M may not take PP either
        groups = [n for n in range(pp, m + 1) if _interleaves(m, n, pp)]
        if groups:
            return finding(
                "virtual-pipeline-microbatches",
                message,
                hint=f"use microbatch_group_size_per_vp_stage {groups[0]}"
                + (f" (or drop it: the default is PP={pp})" if groups[0] == pp else ""),
            )
        prefix, group = f"drop microbatch_group_size_per_vp_stage (the default is PP={pp}) and ", pp
    g, micro, dp = spec.global_batch, spec.micro, spec.data_parallel
    # More micro-batches keep the global batch with a smaller micro-batch; else the global
    # batch grows to the group size's (a remainder of 0 always satisfies the rule).
    keep = [
        mu for mu, a in solve.decompositions(g, dp) if mu < micro and _interleaves(a, group, pp)
    ]
    options = [
        f"micro-batch {mu} ({g // (mu * dp)} micro-batches, global {g} kept)" for mu in keep[:1]
    ]
    options.append(f"global {group * micro * dp} ({group} micro-batches of {micro})")
    if explicit and pp <= m < group:  # M itself is always a valid group size
        options.append(f"microbatch_group_size_per_vp_stage {m}")
    return finding(
        "virtual-pipeline-microbatches", message, hint=prefix + "use " + ", or ".join(options)
    )
