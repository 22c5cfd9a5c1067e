"""DeepSpeed: ``train_batch_size``, ``train_micro_batch_size_per_gpu``,
``gradient_accumulation_steps``, checked by DeepSpeed as ``TBS == micro x gas x world`` where
world is the data-parallel size a model-parallel unit reports (Megatron-DeepSpeed, the pipeline
engine), ``world / sequence_parallel_size`` without one, or every rank under AutoTP."""

from __future__ import annotations

from translator.batch import solve
from translator.batch.node_lines import NodeLines
from translator.frameworks.deepspeed.config_json import (
    AUTOTP,
    BATCH_KEYS,
    GAS,
    HF_FILLS,
    MBS,
    TBS,
)
from translator.reading import Launch, Reading, invalid_value
from translator.spec import BatchSpec
from translator.words.findings import Finding, counted, finding


def batch_world(spec: BatchSpec) -> int:
    """The world size DeepSpeed multiplies by in its batch check: the data-parallel size, except
    under AutoTP, where no mpu exists when the config is read and DeepSpeed takes every rank
    (divided by ``sequence_parallel_size`` when that is set)."""
    if spec.deepspeed_autotp:
        return spec.world // spec.context_parallel_size
    return spec.data_parallel


def context(spec: BatchSpec) -> dict:
    return {
        "train_batch_size": spec.micro * spec.accumulation * batch_world(spec),
        "micro_batch_size": spec.micro,
        "gradient_accumulation_steps": spec.accumulation,
        "sequence_parallel_size": spec.context_parallel_size
        if spec.context_parallel_size > 1
        else None,
        "autotp_size": spec.tensor_parallel_size if spec.deepspeed_autotp else None,
        "zero_stage": spec.zero_stage,
    }


# Interpreting ----------------------------------------------------------------------------------


def _counts(reading: Reading, findings: list[Finding]) -> tuple[dict[str, int], set[str]]:
    """Each batch key that is an int, and the keys that are "auto"; wrong values become
    findings."""
    out: dict[str, int] = {}
    auto: set[str] = set()
    for key in BATCH_KEYS + ["sequence_parallel_size", "zero_optimization.stage", AUTOTP]:
        v = reading.values.get(key)
        if v is None or (v.value is None and key in BATCH_KEYS):
            continue  # a null batch key is not set (DeepSpeed's default for each is None)
        if v.value == "auto" and key in BATCH_KEYS:
            auto.add(key)
            findings.append(
                finding(
                    "hf-auto",
                    f'{key} is "auto": the Hugging Face Trainer fills it from '
                    f'{HF_FILLS[key]}; DeepSpeed itself does not understand "auto"'
                    + (_autotp_fill(reading) if key == TBS else ""),
                    hint='"auto" is filled at launch from the training program\'s arguments: '
                    "inspect the launch script that runs it, or the TrainingArguments file that "
                    "names this JSON",
                    where=reading.where(key),
                )
            )
        elif key == "zero_optimization.stage" and type(v.value) is int and v.value in (0, 1, 2, 3):
            out[key] = v.value
        elif v.count is not None and key != "zero_optimization.stage":
            out[key] = v.count
        else:
            findings.append(
                invalid_value(
                    key,
                    v,
                    reading.path,
                    "0, 1, 2 or 3"
                    if key.startswith("zero")
                    else "a positive integer" + (' or "auto"' if key in BATCH_KEYS else ""),
                )
            )
    return out, auto


def _autotp_fill(reading: Reading) -> str:
    """Under AutoTP N, what the Trainer's ``train_batch_size`` is to the samples per step."""
    v = reading.values.get(AUTOTP)
    n = v.count if v is not None else None
    if n is None or n == 1:
        return ""
    return (
        f"; under {AUTOTP} {n} the {n} ranks of each tensor-parallel group share their "
        f"micro-batches, so the samples per optimizer step are that train_batch_size / {n}"
    )


def world_counted(launch: Launch, autotp: int, sequence_parallel: int) -> int | None:
    """The world DeepSpeed's batch check multiplies by, for a launch of ``launch.world_size``."""
    world = launch.world_size
    if world is None:
        return None
    model = (launch.tensor_parallel_size or 1) * (launch.pipeline_parallel_size or 1)
    if autotp == 1 and model > 1:  # Megatron-style model parallelism: the mpu reports DP
        return world // (model * (launch.context_parallel_size or sequence_parallel))
    return world // sequence_parallel


def interpret(reading: Reading, launch: Launch) -> tuple[dict, list[Finding]]:
    """Spec values the way DeepSpeed completes them (``_set_batch_related_parameters``), with
    its own error where its floor division or its batch assertion would fail."""
    findings = list(reading.findings)
    c, auto = _counts(reading, findings)
    autotp = c.get(AUTOTP, 1)
    sp = c.get("sequence_parallel_size", 1)
    values = {"context_parallel_size": sp}
    if autotp > 1:
        values |= {"tensor_parallel_size": autotp, "deepspeed_autotp": True}
    if "zero_optimization.stage" in c:
        values["zero_stage"] = c["zero_optimization.stage"]
    tbs, mbs, gas = (c.get(k) for k in BATCH_KEYS)
    written = _known(tbs // autotp if tbs is not None and tbs % autotp == 0 else None, mbs, gas)
    if auto or any(f.code == "invalid-value" for f in findings):
        return values | written, findings
    if tbs is None and mbs is None:
        findings.append(
            finding(
                "deepspeed-no-batch",
                "Either train_batch_size or train_micro_batch_size_per_gpu needs to be provided "
                "(DeepSpeed's words)",
                hint=f"add {MBS}",
                where=reading.path,
            )
        )
        return values | written, findings
    explicit_gas = gas is not None
    if gas is None and (tbs is None or mbs is None):
        gas = 1  # DeepSpeed's default when it cannot derive accumulation
    values |= written | _known(None, None, gas)
    w = world_counted(launch, autotp, sp)
    if w is not None and tbs is not None:
        findings += _against_world(reading, tbs, mbs, gas, explicit_gas, w)
    elif (
        w is None and tbs and mbs and gas and tbs % (mbs * gas) == 0
    ):  # counts are ≥ 1: truthy once known
        ranks = tbs // (mbs * gas)
        findings.append(
            finding(
                "world-implied",
                f"{TBS} {tbs} = {MBS} {mbs} × {GAS} {gas} × {ranks}: DeepSpeed accepts this file "
                f"only where it counts {counted(ranks, 'rank')}",
                where=reading.where(TBS),
            )
        )
    return values, findings


def _known(global_batch, micro, accumulation) -> dict:
    pairs = (
        ("global_batch_size", global_batch),
        ("micro_batch_size", micro),
        ("gradient_accumulation_steps", accumulation),
    )
    return {k: v for k, v in pairs if v is not None}


def _against_world(reading: Reading, tbs, mbs, gas, explicit_gas, w) -> list[Finding]:
    """DeepSpeed's batch assertion, after its floor-division completion, at world ``w``."""
    if mbs is not None and explicit_gas:
        if tbs == mbs * gas * w:
            return []
        return [
            finding(
                "deepspeed-batch-mismatch",
                f"Check batch related parameters. train_batch_size is not equal to "
                f"micro_batch_per_gpu * gradient_acc_step * world_size {tbs} != {mbs} * {gas} * {w} "
                "(DeepSpeed's words)",
                hint=_mismatch_fix(tbs, mbs, gas, w),
                where=reading.where(TBS),
            )
        ]
    if mbs is not None:
        key, derived, formula = GAS, tbs // mbs // w, f"{tbs} // {mbs} // {w}"
        mbs_, gas_ = mbs, derived
        fix = _fix(tbs, MBS, mbs, w, GAS)
    else:
        key, derived, formula = MBS, tbs // w // gas, f"{tbs} // {w} // {gas}"
        mbs_, gas_ = derived, gas
        fix = _fix(tbs, GAS, gas, w, MBS)
    if derived >= 1 and tbs == mbs_ * gas_ * w:
        return []
    return [
        finding(
            "deepspeed-floor",
            f"DeepSpeed derives {key} = {formula} = {derived} and then fails its own check: "
            f"{tbs} != {mbs_} * {gas_} * {w}",
            hint=fix,
            where=reading.where(TBS),
        )
    ]


def _mismatch_fix(tbs: int, mbs: int, gas: int, w: int) -> str:
    keep_gas = f"train_batch_size {mbs * gas * w} keeps accumulation {gas}"
    if tbs % (mbs * w) == 0:
        return f"{GAS} {tbs // (mbs * w)} keeps train_batch_size {tbs}; or {keep_gas}"
    return f"{keep_gas}; {_fix(tbs, MBS, mbs, w, GAS)}"


def _fix(tbs: int, kept: str, value: int, w: int, derived: str) -> str:
    """The train_batch_size values nearest ``tbs`` that DeepSpeed splits exactly when the file
    keeps ``kept`` at ``value`` on ``w`` ranks, each with the ``derived`` value it gives."""
    unit = value * w
    options = [f"{v} ({derived} {v // unit})" for v in solve.nearest_multiples(tbs, unit)]
    return f"with {kept} {value} on {w} ranks use train_batch_size {' or '.join(options)}"


def check(spec: BatchSpec) -> list[Finding]:
    out = []
    pp = spec.pipeline_parallel_size
    if pp > 1:
        out.append(
            finding(
                "deepspeed-pipeline-accumulation",
                f"with pipeline parallelism (PP {pp}) DeepSpeed's pipeline engine runs "
                f"gradient_accumulation_steps = "
                f"{counted(spec.accumulation, 'micro-batch', 'micro-batches')} per optimizer step "
                "through the pipeline; only engine.train_batch() may be called",
                hint=f"more micro-batches shrink the pipeline bubble: accumulation ≥ PP {pp} is "
                "usually wanted",
            )
        )
        if spec.zero_stage is not None and spec.zero_stage >= 2:
            out.append(
                finding(
                    "deepspeed-pipeline-zero",
                    f"ZeRO stage {spec.zero_stage} with pipeline parallelism (PP {pp}): DeepSpeed's "
                    "pipeline engine refuses ZeRO stage 2 or 3",
                    hint="use zero_stage 0 or 1 with pipeline parallelism",
                )
            )
    if not spec.deepspeed_autotp and spec.tensor_parallel_size * pp > 1:
        out.append(
            finding(
                "deepspeed-mpu-world",
                f"train_batch_size {spec.global_batch} counts data-parallel {spec.data_parallel}"
                f", the size a model-parallel unit reports (Megatron-DeepSpeed's mpu, the pipeline "
                f"engine's grid); DeepSpeed without one would count all {spec.world} ranks",
                hint="pass mpu= to deepspeed.initialize (or use a PipelineModule)",
            )
        )
    if spec.deepspeed_autotp and spec.tensor_parallel_size > 1:
        written = context(spec)["train_batch_size"]
        out.append(
            finding(
                "deepspeed-autotp-world",
                f"DeepSpeed AutoTP checks train_batch_size against every rank, so it is written as "
                f"{written} = micro {spec.micro} × accumulation "
                f"{spec.accumulation} × {batch_world(spec)} ranks; the samples per optimizer step "
                f"are still {spec.global_batch}: the {spec.tensor_parallel_size} ranks of each "
                "tensor-parallel group get the same micro-batches (DeepSpeed's and accelerate's "
                "loaders shard over the data-parallel ranks; DeepSpeed checks it on the first "
                f"forward), and DeepSpeed's own throughput and global_samples count {written} "
                "per step",
                hint="do not 'correct' train_batch_size to the global batch: DeepSpeed would refuse it",
            )
        )
    return out


def edits(reading: Reading, spec: BatchSpec) -> dict[str, int | None]:
    """New values for the batch keys the file holds ("auto" stays: the Trainer fills it)."""
    wanted = {
        TBS: context(spec)["train_batch_size"],
        MBS: spec.micro,
        GAS: spec.accumulation,
        "sequence_parallel_size": spec.context_parallel_size,
        AUTOTP: spec.tensor_parallel_size,
    }
    return {
        k: v for k, v in wanted.items() if k in reading.values and reading.values[k].value != "auto"
    }


# The plugin contract's other parts -------------------------------------------------------------


def claims(text: str) -> bool:
    """A JSON object, by its first character, unless it is TrainingArguments (the Trainer's
    per-device key and none of DeepSpeed's batch keys: a ``deepspeed`` key names the JSON)."""
    trainer = '"per_device_train_batch_size"' in text or '"output_dir"' in text
    own = '"train_batch_size"' in text or '"train_micro_batch_size_per_gpu"' in text
    return text.lstrip().startswith("{") and not (trainer and not own)


def holds_batch(text: str) -> bool:
    return any(f'"{key}"' in text for key in BATCH_KEYS)


def node_lines(nodes: int, per_node: int) -> NodeLines:
    """The ``deepspeed`` launcher: nodes and GPUs a node on its line; past one node the hosts
    come from a hostfile (without one it runs on the local node alone)."""
    return NodeLines(
        "deepspeed",
        (f"deepspeed --num_nodes {nodes} --num_gpus {per_node}",),
        f"on the first node, with --hostfile listing the {nodes} nodes, slots={per_node} "
        "each; without a hostfile deepspeed runs on this node alone"
        if nodes > 1
        else None,
    )
