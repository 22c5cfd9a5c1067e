"""``tune --parity``: the fastest split is also the same training. The pick is run against the
micro-batch × accumulation of the user's own file with ``smoke --parity``
(:mod:`translator.launch.parity`): one optimizer step each, the same samples and weights, the
loss and update compared."""

from __future__ import annotations

import time

from translator.batch.tuning import Candidate
from translator.launch import parity, probes
from translator.launch.local import Local
from translator.launch.progress import Progress
from translator.launch.request import RunRequest
from translator.spec import BatchSpec
from translator.words.errors import InputError


def wanted(asked: bool | None, spec: BatchSpec, framework: str, where: str) -> bool:
    """Whether to check the pick: as ``--parity/--no-parity`` asks; unasked, when the file gives
    a split (``spec`` is decided) and the engine checks parity on its layout. Asked for where it
    cannot run, an input error (before any probe)."""
    why = parity.refusal(framework, spec)
    if asked:
        if why:
            raise InputError(f"--parity: {where}: {why}")
        if not spec.is_decided:
            raise InputError(
                f"--parity: {where} gives no micro-batch, so it has no split to check the "
                "pick against"
            )
    return asked if asked is not None else why is None and spec.is_decided


def check(
    file: str, setup: probes.Setup, pick: Candidate, say: Progress
) -> tuple[dict, str | None]:
    """``(what --json shows, the error)``: the file's own split against the pick's (the
    candidate file its probe ran); no error when they train the same step."""
    spec = setup.spec
    if (pick.micro_batch_size, pick.zero_stage, pick.recompute) == (spec.micro, None, False):
        return {"checked": False, "why": "the pick is the file's own split"}, None
    plan = setup.plan
    left = None if setup.deadline is None else max(setup.deadline - time.monotonic(), 0.1)

    # B is the user's file at the pick's micro-batch (edited as `smoke --parity micro=N` edits
    # it), so that it keeps the file's other settings (a per-token loss switch, say), which the
    # candidate spec its probe ran does not carry; a ZeRO stage is the candidate's alone.
    other = (
        f"micro={pick.micro_batch_size}"
        if pick.zero_stage is None
        else str(probes.probe_folder(setup, pick) / "candidate.json")
    )
    request = RunRequest(
        file,
        plan.framework,
        plan.nproc,
        plan.nnodes,
        1,
        setup.model or plan.model,
        plan.sequence_length,
        plan.workdir / "parity",
        device=plan.device,
    )
    a, b = parity.sides(request, other)
    say(f"parity: the pick against {file}'s own split")
    done = parity.run(a, b, Local(), left, setup.memory_limit, parity.TOLERANCE[plan.device], say)
    if done.output["out_of_memory"] == "A":  # the probes' memory cap, or the device's
        return {"checked": False, "why": f"{file}'s own split ran out of memory"}, None
    out = {"checked": True} | done.output
    if not done.errors:
        return out, None
    return out, (
        f"the pick (micro-batch {pick.micro_batch_size} × accumulation "
        f"{pick.gradient_accumulation_steps}) does not train the same step as {file}'s own "
        f"split: {'; '.join(done.errors)}"
    )
