"""Megatron-LM: ``--micro-batch-size`` and ``--global-batch-size``; there is no accumulation
flag, the number of micro-batches per step is ``global / (micro x DP)``. Rendered as a bash
array of literal ``--flag value`` pairs, ready to paste into a launch script."""

from __future__ import annotations

import shlex

from translator.errors import InputError
from translator.findings import Finding, finding
from translator.spec import BatchSpec

NAME = "megatron"
TEMPLATE = "megatron.sh.j2"
FILENAME = "megatron.sh"

#: Megatron-LM flag -> spec field, in the order they are written.
FLAGS = {
    "--micro-batch-size": "micro_batch_size",
    "--global-batch-size": "global_batch_size",
    "--tensor-model-parallel-size": "tensor_parallel_size",
    "--pipeline-model-parallel-size": "pipeline_parallel_size",
    "--context-parallel-size": "context_parallel_size",
    "--num-virtual-stages-per-pipeline-rank": "virtual_pipeline_stages",
    "--microbatch-group-size-per-virtual-pipeline-stage": "microbatch_group_size_per_vp_stage",
    "--expert-model-parallel-size": "expert_parallel_size",
    "--num-experts": "num_experts",
    "--seq-length": "sequence_length",
}
#: torchrun flags that give the world size.
LAUNCH_FLAGS = {"--nproc_per_node": "gpus_per_node", "--nnodes": "nodes"}
#: Flags always written, even at their default, so the layout is explicit.
ALWAYS = {"--micro-batch-size", "--global-batch-size", "--tensor-model-parallel-size",
          "--pipeline-model-parallel-size", "--context-parallel-size"}


def context(spec: BatchSpec) -> dict:
    args = [(flag, getattr(spec, field)) for flag, field in FLAGS.items()
            if flag in ALWAYS or getattr(spec, field) not in (None, 1)]
    launch = None
    if spec.nodes is not None:
        launch = [(flag, getattr(spec, field)) for flag, field in LAUNCH_FLAGS.items()]
    return {"spec": spec, "args": args, "launch": launch}


def read(text: str, where: str) -> tuple[dict, list[Finding]]:
    try:
        words = shlex.split(text, comments=True)
    except ValueError as exc:
        raise InputError(f"{where}: cannot split into shell words: {exc}") from None
    known = FLAGS | LAUNCH_FLAGS
    partial = {}
    for flag, value in zip(words, words[1:]):
        if flag in known:
            try:
                partial[known[flag]] = int(value)
            except ValueError:
                raise InputError(f"{where}: {flag} wants an integer, not {value!r}") from None
    return partial, []


def check(spec: BatchSpec) -> list[Finding]:
    m, pp = spec.gradient_accumulation_steps, spec.pipeline_parallel_size
    out = [finding(
        "megatron-accumulation-implied",
        f"Megatron has no accumulation flag: it runs global {spec.global_batch_size} / (micro "
        f"{spec.micro_batch_size} × DP {spec.data_parallel_size}) = {m} micro-batches per step",
        hint="keep any wrapper's own accumulation at 1 (NeMo/Lightning accumulate_grad_batches)")]
    if spec.virtual_pipeline_stages is None:
        return out
    if pp == 1:
        out.append(finding(
            "virtual-pipeline-needs-pp",
            f"virtual_pipeline_stages {spec.virtual_pipeline_stages} needs pipeline parallelism, "
            "but pipeline_parallel_size is 1",
            hint="set pipeline_parallel_size > 2 (or 2 with --overlap-p2p-comm), or drop the "
                 "virtual stages"))
        return out
    group = spec.microbatch_group_size_per_vp_stage or pp
    if not pp <= group <= m:
        out.append(finding(
            "virtual-pipeline-microbatches",
            f"the number of contiguous micro-batches in a virtual pipeline stage should range in "
            f"[PP={pp}, M={m}], but it is {group}",
            hint=f"raise accumulation to at least {group} (global "
                 f"{group * spec.micro_batch_size * spec.data_parallel_size}), or lower the group "
                 "size"))
    elif 0 < m % group < pp:
        out.append(finding(
            "virtual-pipeline-microbatches",
            f"the remainder of M={m} micro-batches divided by N={group} should be 0 or at least "
            f"PP={pp}, but it is {m % group}",
            hint=f"use accumulation {m - m % group} or {m - m % group + group}"))
    return out
