"""Megatron-LM: ``--micro-batch-size`` and ``--global-batch-size``; there is no accumulation
flag, the number of micro-batches per step is ``global / (micro x DP)``. Rendered as a bash
array of literal ``--flag value`` pairs, ready to paste into a launch script; the flags are read
by :mod:`.program`, and what they say about the model's split and memory is :mod:`.model`'s."""

from __future__ import annotations

import re

from translator.batch import solve
from translator.frameworks.deepspeed import config_json as deepspeed
from translator.frameworks.megatron import model
from translator.frameworks.shared import loss, mcore_schedule
from translator.reading import Launch, Reading, invalid_value
from translator.spec import BatchSpec
from translator.words.findings import Finding, counted, finding

NAME = "megatron"
#: What marks a launch script as Megatron's (content sniffing, and a batch being set).
BATCH_MARK = re.compile(r"--(micro|global)[-_]batch[-_]size\b")

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
#: The role of a launcher's sizing word -> spec field.
LAUNCH_ROLES = {"per_node": "gpus_per_node", "nodes": "nodes", "total": "world_size"}
#: Flags read for their effect on the batch, beside FLAGS.
OTHER_FLAGS = {"--num-layers", "--num-layers-per-virtual-pipeline-stage"}
#: Switches (flags without a value) read for the memory estimate (:func:`.model.memory_settings`).
MEMORY_SWITCHES = {
    "--use-distributed-optimizer",
    "--use-megatron-fsdp",
    "--use-torch-fsdp2",
    "--torch-fsdp2-no-reshard-after-forward",
    "--optimizer-cpu-offload",
    "--sequence-parallel",
    "--recompute-activations",
    "--bf16",
    "--grad-reduce-in-bf16",
    "--fp8-param-gather",
}
#: Flags with a value read for the memory estimate.
MEMORY_FLAGS = {
    "--data-parallel-sharding-strategy",
    "--num-distributed-optimizer-instances",
    "--optimizer-offload-fraction",
    "--recompute-granularity",
    "--recompute-method",
    "--recompute-num-layers",
    "--fp8-format",
}
#: Switches read, each as ``True`` where it stands.
SWITCHES = {"--decrease-batch-size-if-needed", "--calculate-per-token-loss"} | MEMORY_SWITCHES
#: The same, as the flag scanner takes them.
SWITCH_NAMES = frozenset(s[2:].replace("-", "_") for s in SWITCHES)
#: Flags always written, even at their default, so the layout is explicit.
ALWAYS = {
    "--micro-batch-size",
    "--global-batch-size",
    "--tensor-model-parallel-size",
    "--pipeline-model-parallel-size",
    "--context-parallel-size",
}
#: Real Megatron flags that look like batch flags.
LOOKALIKES = {
    "--rampup-batch-size",
    "--expert-tensor-parallel-size",
    "--decoder-seq-length",
    "--encoder-seq-length",
    "--num-layers",
    "--inference-max-batch-size",
    "--decrease-batch-size-if-needed",
}


def context(spec: BatchSpec) -> dict:
    """The template's values: the flags to write (the layout's always, the rest when not 1)
    and the launcher's sizes."""
    args = [
        (flag, getattr(spec, field))
        for flag, field in FLAGS.items()
        if flag in ALWAYS or getattr(spec, field) not in (None, 1)
    ]
    launch = None
    if spec.nodes is not None:
        launch = [("--nproc_per_node", spec.gpus_per_node), ("--nnodes", spec.nodes)]
    return {"spec": spec, "args": args, "launch": launch}


# Interpreting ----------------------------------------------------------------------------------


def interpret(reading: Reading, launch: Launch) -> tuple[dict, list[Finding]]:
    """Spec values as Megatron-LM takes them from its arguments."""
    findings = list(reading.findings)
    values: dict = {}
    roles = {key: LAUNCH_ROLES[role] for role, key in reading.launch_keys.items()}
    for flag, v in reading.values.items():
        field = FLAGS.get(flag) or roles.get(flag)
        if flag in OTHER_FLAGS and v.value is not None and not v.is_count:
            findings.append(invalid_value(flag, v, reading.path))
        if field is None:
            continue
        if v.value is None and _refused(flag, findings):
            values[field] = None  # an error says why: no default stands in
        elif v.value is None:
            findings.append(
                finding(
                    "unknown-value",
                    f"{flag} is {v.why_unknown}, unknown until the script runs",
                    hint=(
                        "give --world-size"
                        if flag in roles
                        else f"write {flag} as a literal, or set the variable in the script"
                    ),
                    where=f"{reading.path}:{v.line}",
                )
            )
            if flag not in roles:
                values[field] = None  # unknown: never replaced by a default
        elif not v.is_count and flag in roles:  # torchrun --nnodes 1:4, --nproc_per_node gpu
            findings.append(
                finding(
                    "unknown-value",
                    f"{flag} is {v.value!r}, not a fixed number of processes",
                    hint="give --world-size",
                    where=f"{reading.path}:{v.line}",
                )
            )
        elif not v.is_count:
            findings.append(invalid_value(flag, v, reading.path))
        elif flag not in roles:
            values[field] = v.value
    _hidden(reading, values, findings)
    findings += _virtual_from_layers(reading, values)
    findings += _against_deepspeed(reading, values, launch)
    if (
        "global_batch_size" not in values
        and "--global-batch-size" not in reading.values
        and "micro_batch_size" in values
    ):
        values["gradient_accumulation_steps"] = 1
        findings.append(
            finding(
                "megatron-global-default",
                "no --global-batch-size: Megatron uses micro × data-parallel, one micro-batch per "
                "step (no accumulation)",
                hint="write --global-batch-size explicitly",
                where=reading.where("--micro-batch-size"),
            )
        )
    if "--rampup-batch-size" in reading.values:
        findings.append(
            finding(
                "megatron-rampup-ignored",
                f"--rampup-batch-size {reading.values['--rampup-batch-size'].value}: the global batch "
                "grows during the ramp-up, and megatron-core 0.18 and later ignore this flag",
                hint="use --step-batch-size-schedule on recent megatron-core",
                where=reading.where("--rampup-batch-size"),
            )
        )
    if "--decrease-batch-size-if-needed" in reading.values:
        findings.append(
            finding(
                "megatron-decrease-batch",
                "--decrease-batch-size-if-needed: Megatron rounds the global batch down to a multiple "
                "of micro × data-parallel instead of failing, so the batch may not be the one written",
                hint="drop it and let batchspec name valid global batches",
                where=reading.where("--decrease-batch-size-if-needed"),
            )
        )
    return values, findings


#: Flags whose absence means a default (or a missing value), unless an unknown word may
#: hold them.
DEFAULTED = (
    "--micro-batch-size",
    "--global-batch-size",
    "--tensor-model-parallel-size",
    "--pipeline-model-parallel-size",
    "--context-parallel-size",
)


def _hidden(reading: Reading, values: dict, findings: list[Finding]) -> None:
    """With an unknown word that may hold flags, a flag not seen is unknown, not its default."""
    absent = [flag for flag in DEFAULTED if flag not in reading.values]
    if not reading.opaque or not absent:
        return
    for flag in absent:
        values[FLAGS[flag]] = None
    findings.append(
        finding(
            "unknown-value",
            f"{'; '.join(reading.opaque[:3])}: it may hold more flags, so "
            f"{', '.join(absent)} may be set there and are unknown (not taken as their defaults)",
            hint="write the batch and parallel flags as literals, or set the variable in the script",
            where=reading.path,
        )
    )


def _against_deepspeed(reading: Reading, values: dict, launch: Launch) -> list[Finding]:
    """The DeepSpeed JSON of a Megatron-DeepSpeed job against Megatron's flags. Each iteration
    Megatron-DeepSpeed hands DeepSpeed its own global batch (``set_train_batch_size(DP ×
    micro × micro-batches)``), from which DeepSpeed derives its accumulation with the JSON's
    micro-batch: a JSON micro-batch that differs is wrong at every step; a JSON global batch
    or accumulation that differs is replaced (a warning: DeepSpeed only checks it once, at
    initialize)."""
    micro, global_ = values.get("micro_batch_size"), values.get("global_batch_size")
    model = [
        values.get(k, 1)
        for k in ("tensor_parallel_size", "pipeline_parallel_size", "context_parallel_size")
    ]
    accumulation = None
    if None not in (micro, global_, launch.world_size, *model):
        dp, rest = divmod(launch.world_size, model[0] * model[1] * model[2])
        if not rest and dp and global_ % (micro * dp) == 0:
            accumulation = global_ // (micro * dp)
    out = []
    v = reading.values.get(deepspeed.MBS)
    if v is not None and v.is_count and micro is not None and v.value != micro:
        out.append(
            finding(
                "megatron-deepspeed-mismatch",
                f"the DeepSpeed JSON says {deepspeed.MBS} {v.value} where --micro-batch-size "
                f"gives {micro}: each step DeepSpeed takes Megatron's global batch and counts "
                f"its accumulation in micro-batches of {v.value}, so it steps the optimizer "
                "at the wrong boundary",
                hint="write the JSON's micro-batch from the same variable as the flag",
                where=reading.where(deepspeed.MBS),
            )
        )
    replaced = [
        f"{key} {v.value} where {flag} gives {expected}"
        for key, flag, expected in (
            (deepspeed.TBS, "--global-batch-size", global_),
            (deepspeed.GAS, "micro-batches per step", accumulation),
        )
        if (v := reading.values.get(key)) is not None
        and v.is_count
        and expected is not None
        and v.value != expected
    ]
    if replaced:
        key = next(k for k in (deepspeed.TBS, deepspeed.GAS) if k in reading.values)
        out.append(
            finding(
                "megatron-deepspeed-overridden",
                f"the DeepSpeed JSON disagrees with Megatron's flags: {'; '.join(replaced)}; "
                "Megatron-DeepSpeed replaces it with its own global batch at every iteration "
                "(set_train_batch_size), so the flags train, and DeepSpeed checks the JSON's "
                "values only at initialize",
                hint="write the JSON from the same variables as the flags",
                where=reading.where(key),
            )
        )
    return out


def _virtual_from_layers(reading: Reading, values: dict) -> list[Finding]:
    """``--num-layers-per-virtual-pipeline-stage`` gives the virtual stages per rank; the error
    when it does not divide each stage's layers (Megatron-LM asserts it in ``validate_args``)."""
    layers, per_stage = (
        reading.count("--num-layers"),
        reading.count("--num-layers-per-virtual-pipeline-stage"),
    )
    pp = values.get("pipeline_parallel_size", 1)
    if not (layers and per_stage and pp) or "virtual_pipeline_stages" in values:
        return []
    if layers % (pp * per_stage) == 0:
        values["virtual_pipeline_stages"] = layers // (pp * per_stage)
        return []
    if layers % pp or model.given_flags(reading) & model.STAGE_LAYER_FLAGS:
        return []  # the model's check says it, or the job sets its stages' layers itself
    return [
        finding(
            "model-pipeline-layers",
            f"--num-layers-per-virtual-pipeline-stage {per_stage} does not divide the "
            f"{layers // pp} layers of each of the {pp} pipeline stages (--num-layers {layers}): "
            "Megatron-LM refuses it",
            hint="use --num-layers-per-virtual-pipeline-stage "
            + " or ".join(map(str, solve.nearest_divisors(layers // pp, per_stage))),
            where=reading.where("--num-layers-per-virtual-pipeline-stage"),
        )
    ]


def check(spec: BatchSpec) -> list[Finding]:
    """What a solved spec means for Megatron: its implied accumulation, and the schedule's
    findings."""
    m = spec.accumulation
    return [
        finding(
            "megatron-accumulation-implied",
            f"Megatron has no accumulation flag: it runs global {spec.global_batch} / (micro "
            f"{spec.micro} × DP {spec.data_parallel}) = {counted(m, 'micro-batch', 'micro-batches')} "
            "per step",
            hint="keep any wrapper's own accumulation at 1 (NeMo/Lightning accumulate_grad_batches)",
        )
    ] + mcore_schedule.findings(spec)


def edits(reading: Reading, spec: BatchSpec) -> dict[str, int | None]:
    """New values for the batch and parallel flags (the launcher's sizes are the job's)."""
    out = {
        "--micro-batch-size": spec.micro_batch_size,
        "--global-batch-size": spec.global_batch_size,
    }
    for key, value in (
        (deepspeed.TBS, spec.global_batch_size),
        (deepspeed.MBS, spec.micro_batch_size),
        (deepspeed.GAS, spec.gradient_accumulation_steps),
    ):
        if key in reading.values:  # the DeepSpeed JSON the script writes
            out[key] = value
    for flag in (
        "--tensor-model-parallel-size",
        "--pipeline-model-parallel-size",
        "--context-parallel-size",
    ):
        value = getattr(spec, FLAGS[flag])
        if flag in reading.values or value != 1:
            out[flag] = value
    return out


# The plugin contract's other parts -------------------------------------------------------------


def claims(text: str) -> bool:
    """Whether a text may be Megatron's: it sets a batch flag, or launches with torchrun."""
    return BATCH_MARK.search(text) is not None or "torchrun" in text


def holds_batch(text: str) -> bool:
    """Whether a text sets Megatron's micro or global batch."""
    return BATCH_MARK.search(text) is not None


def loss_normalisation(reading: Reading | None, spec: BatchSpec | None) -> list[Finding]:
    """megatron-core divides each micro-batch's loss by its own tokens and averages the
    micro-batches unless ``--calculate-per-token-loss`` is given (a rendered file gives none)."""
    if reading is not None and "--calculate-per-token-loss" in reading.values:
        return []
    return loss.per_micro_batch(
        spec,
        "without --calculate-per-token-loss, megatron-core divides each micro-batch's loss by "
        "its own tokens and averages the micro-batches",
        "add --calculate-per-token-loss (the step's loss over all its tokens)",
        reading.path if reading is not None else "megatron",
    )


def _refused(flag: str, findings: list[Finding]) -> bool:
    """Whether an error of the reading already says why ``flag`` has no value."""
    return any(f.severity == "error" and f.message.startswith(f"{flag} ") for f in findings)
