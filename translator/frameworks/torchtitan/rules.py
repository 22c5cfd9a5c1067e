"""torchtitan: a TOML job file (≤ 0.2.2) or a launch of ``torchtitan.train`` with
``--section.key value`` flags (0.3.0 and later, on top of a ``--module``/``--config`` Python
config function). The batch's data-parallel degree is ``data_parallel_replicate_degree ×
data_parallel_shard_degree`` (context parallel excluded; shard ``-1`` takes the rest of the
world), and ``Trainer.__init__`` counts:

- samples (``toml``, ``python``): ``global_batch_size`` (``-1``: one accumulation step) must be
  a multiple of ``local_batch_size × DP`` (an ``assert``); accumulation is the quotient. With
  pipeline parallelism each local batch is cut into ``local_batch_size /
  pipeline_parallel_microbatch_size`` pipeline micro-batches, so the canonical micro-batch is
  ``pipeline_parallel_microbatch_size``;
- tokens (``tokens``): ``num_tokens_per_train_step`` (``-1``: one step) must divide by
  ``num_tokens_per_microbatch_per_dp_rank × num_pp_microbatches × DP`` (a ``ValueError``); a
  sample is ``max_context_length`` tokens.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from translator.batch.solve import nearest_multiples
from translator.frameworks.torchtitan import generation, keys, toml_file
from translator.job import script as job
from translator.reading import Launch, Reading, invalid_value, typo_findings
from translator.spec import BatchSpec
from translator.words.errors import InputError
from translator.words.findings import Finding, finding

NAME = "torchtitan"
#: What marks a torchtitan file or launch by content.
_MARK = re.compile(
    r"torchtitan[./](\w+[./])*train\b|--job\.config[_-]file|"
    r"^\s*\[(training|parallelism)\]\s*(#.*)?$",
    re.M,
)
#: A batch key in a file or a launch line.
_BATCH = re.compile(
    r"\b(local_batch_size|global_batch_size|num_tokens_per_(microbatch_per_dp_rank|train_step))\b"
    r"|--training\.batch_size\b|^\s*batch_size\s*=",
    re.M,
)


def claims(text: str) -> bool:
    """A TOML with torchtitan's tables, or a script that launches ``torchtitan.train``."""
    return _MARK.search(text) is not None


def holds_batch(text: str) -> bool:
    return _BATCH.search(text) is not None


# Reading -----------------------------------------------------------------------------------


def read(text: str, where: str) -> Reading:
    """A TOML job file, or a launch script (read as a job: its launcher's world, the flags and
    the TOML that ``--job.config_file`` names)."""
    if job.is_job(where, text):
        return job.read_job(text, where, framework=NAME)[1]
    return read_toml(text, where)


def read_toml(text: str, where: str) -> Reading:
    """A TOML job file's batch keys."""
    data = toml_file.load(text, where)
    if not any(isinstance(data.get(t), dict) for t in (*_TABLES, "experimental")):
        raise InputError(
            f"{where}: not a torchtitan job file (it has no [training] or [parallelism] table)"
        )
    values, lines = toml_file.values(text, data, [*keys.DEFAULTS, *keys.MODEL], keys.ALIASES)
    reading = Reading(where, NAME, text, values=values)
    table_keys = {k: line for k, line in lines.items() if k.split(".")[0] in _TABLES}
    reading.findings += typo(table_keys, where)
    return reading


#: The tables whose keys are checked for misspelt batch keys.
_TABLES = ("training", "parallelism")


def typo(seen: Mapping[str, int | None], where: str) -> list[Finding]:
    """Misspelt batch keys among ``seen`` (key -> line)."""
    return typo_findings(
        seen,
        list(keys.DEFAULTS),
        keys.LOOKALIKES | set(keys.ALIASES),
        where,
        "so torchtitan refuses it (an unknown field of its config)",
        cutoff=0.85,
    )


# Interpreting ------------------------------------------------------------------------------


def interpret(reading: Reading, launch: Launch) -> tuple[dict, list[Finding]]:
    """Spec values as torchtitan's ``ParallelDims`` and ``Trainer.__init__`` compute them."""
    findings = list(reading.findings) + generation.findings(reading)
    got = {key: _count(reading, key, findings) for key in keys.DEFAULTS}
    values: dict = {
        field: got[key]
        for key, field in keys.FIELDS.items()
        if got[key] is not None or field != "expert_parallel_size"
    }
    if any(f.code in ("invalid-value", "torchtitan-bad-degree") for f in findings):
        return values, findings
    dp = _mesh(reading, got, launch.world_size, values, findings)
    if keys.generation_of(k for k in reading.values if k in keys.DEFAULTS) == "tokens":
        _tokens(reading, got, dp, values, findings)
    else:
        _samples(reading, got, dp, values, findings)
    return values, findings


def _count(reading: Reading, key: str, findings: list[Finding]) -> int | None:
    """The key's value: torchtitan's default when it is not set, ``None`` when unknown; a value
    of the wrong kind is an error."""
    v = reading.values.get(key)
    if v is None:
        return keys.DEFAULTS[key]
    if v.value is None:
        return None
    if key in keys.SWITCHES:
        return v.value if isinstance(v.value, bool) else None
    if isinstance(v.value, int) and not isinstance(v.value, bool):
        if v.value >= 1 or (v.value == -1 and key in _MINUS_ONE):
            return v.value
        if key in keys.DEGREES:
            findings.append(_bad_degree(reading, key, v.value))
            return None
    findings.append(
        invalid_value(
            key,
            v,
            v.file or reading.path,
            "-1 or a positive integer" if key in _MINUS_ONE else "a positive integer",
        )
    )
    return None


#: Keys where ``-1`` means "derive it".
_MINUS_ONE = {
    "training.global_batch_size",
    "training.num_tokens_per_train_step",
    "parallelism.data_parallel_shard_degree",
}


def _bad_degree(reading: Reading, key: str, value: int) -> Finding:
    return finding(
        "torchtitan-bad-degree",
        f"{key} is {value}: ParallelDims asserts every degree is >= 1 (Parallelism degree "
        "should be >= 1, except for dp_shard, which may be -1)",
        hint=f"set {key} to 1"
        + (" or -1 (the rest of the world)" if key.endswith("shard_degree") else ""),
        where=reading.where(key),
    )


def _mesh(
    reading: Reading, got: dict, world: int | None, values: dict, findings: list[Finding]
) -> int | None:
    """The batch's data-parallel degree (replicate × shard), after ``ParallelDims._validate``:
    shard ``-1`` is ``world // (replicate × cp × tp × pp)``, and the product must be the world.
    An explicit shard with no world given implies the world."""
    rep, shard = (
        got["parallelism.data_parallel_replicate_degree"],
        got["parallelism.data_parallel_shard_degree"],
    )
    others = [got[k] for k in keys.FIELDS if k != "parallelism.expert_parallel_degree"]
    if rep is None or shard is None or None in others:
        return None
    model = rep * math.prod(others)
    if shard == -1:
        if world is None:
            return None
        shard = world // model
    product = rep * shard * math.prod(others)
    if world is None:
        values["world_size"] = product
        return rep * shard
    if shard < 1 or product != world:
        tp, pp, cp = (
            got[f"parallelism.{n}_parallel_degree"] for n in ("tensor", "pipeline", "context")
        )
        fix = world // (rep * cp * tp * pp)
        findings.append(
            finding(
                "torchtitan-mesh",
                f"Invalid parallel dims: dp_replicate({rep}) * dp_shard({shard}) * cp({cp}) * "
                f"tp({tp}) * pp({pp}) != WORLD_SIZE({world}) (torchtitan's ParallelDims)",
                hint=(
                    f"set parallelism.data_parallel_shard_degree to {fix} (or -1)"
                    if fix >= 1 and world % model == 0
                    else f"launch a world that is a multiple of replicate × cp × tp × pp = {model}"
                ),
                where=reading.where("parallelism.data_parallel_shard_degree")
                if "parallelism.data_parallel_shard_degree" in reading.values
                else reading.path,
            )
        )
        return None
    return rep * shard


def _samples(
    reading: Reading, got: dict, dp: int | None, values: dict, findings: list[Finding]
) -> None:
    """``Trainer.__init__`` of the sample generations (and the PP micro-batch split)."""
    local, total = got["training.local_batch_size"], got["training.global_batch_size"]
    oldest = keys.generation_of(reading.values) == "batch_size"
    if oldest:  # per-rank batch_size, the fork's accumulation: no global key to check
        local, total = got["training.batch_size"], -1
    size, pp = (
        got["parallelism.pipeline_parallel_microbatch_size"],
        got["parallelism.pipeline_parallel_degree"],
    )
    if got["training.seq_len"] is not None:
        values["sequence_length"] = got["training.seq_len"]
    if local is None or total is None or pp is None or (pp > 1 and size is None):
        values |= {"micro_batch_size": None, "gradient_accumulation_steps": None}
        return
    pieces = 1
    if pp > 1:
        if local % size:
            findings.append(_pp_split(reading, local, size))
            return
        pieces = local // size
        if pieces < pp:
            findings.append(_few_pieces(reading, pieces, pp, "training.local_batch_size"))
    values["micro_batch_size"] = size if pp > 1 else local
    if oldest:
        accumulation = got["training.gradient_accumulation_steps"]
        values["gradient_accumulation_steps"] = (
            None if accumulation is None else accumulation * pieces
        )
        return
    if total == -1:
        values["gradient_accumulation_steps"] = pieces
        findings.append(_follows_world(reading, "training.global_batch_size", local, dp, "samples"))
        return
    values["global_batch_size"] = total
    if dp is None:
        return
    if total % (local * dp):
        findings.append(_not_multiple(reading, total, local, dp))
        return
    values["gradient_accumulation_steps"] = total // (local * dp) * pieces


def _tokens(
    reading: Reading, got: dict, dp: int | None, values: dict, findings: list[Finding]
) -> None:
    """``Trainer.__init__`` of the token generation; a sample is ``max_context_length``
    tokens."""
    per_micro, per_step = (
        got["training.num_tokens_per_microbatch_per_dp_rank"],
        got["training.num_tokens_per_train_step"],
    )
    context, pieces = got["training.max_context_length"], got["parallelism.num_pp_microbatches"]
    pp, tp, cp = (
        got[f"parallelism.{n}_parallel_degree"] for n in ("pipeline", "tensor", "context")
    )
    if context is not None:
        values["sequence_length"] = context
    if None in (pp, tp, cp):
        values |= {"micro_batch_size": None, "gradient_accumulation_steps": None}
        return
    pieces = pieces if pp > 1 else 1
    if None in (per_micro, per_step, context, pieces):
        values |= {"micro_batch_size": None, "gradient_accumulation_steps": None}
        return
    split = (tp if got[keys.SEQUENCE_PARALLEL] is not False else 1) * (2 * cp if cp > 1 else 1)
    if per_micro % split:
        findings.append(_sharding(reading, per_micro, split))
        return
    if pp > 1 and pieces < pp:
        findings.append(_few_pieces(reading, pieces, pp, "parallelism.num_pp_microbatches"))
    if per_micro % context:
        findings.append(_not_samples(reading, per_micro, context))
        values |= {"micro_batch_size": None, "gradient_accumulation_steps": None}
        return
    values["micro_batch_size"] = per_micro // context
    if per_step == -1:
        values["gradient_accumulation_steps"] = pieces
        findings.append(
            _follows_world(
                reading, "training.num_tokens_per_train_step", per_micro * pieces, dp, "tokens"
            )
        )
        return
    if dp is None:
        if per_step % context == 0:
            values["global_batch_size"] = per_step // context
        return
    step_tokens = per_micro * pieces * dp
    if per_step % step_tokens:
        findings.append(_tokens_not_divisible(reading, per_step, step_tokens))
        values |= {"micro_batch_size": None, "gradient_accumulation_steps": None}
        return
    values["gradient_accumulation_steps"] = per_step // step_tokens * pieces


# Findings ----------------------------------------------------------------------------------


def _follows_world(reading: Reading, key: str, per_rank: int, dp: int | None, unit: str) -> Finding:
    shown = "-1 (its default)" if key not in reading.values else "-1"
    now = "" if dp is None else f" (now {per_rank * dp} {unit} on {dp} data-parallel ranks)"
    return finding(
        "torchtitan-global-follows-world",
        f"{key} is {shown}: one accumulation step, so the global batch is {per_rank} {unit} "
        f"× the data-parallel degree{now} and grows with the GPU count",
        hint=f"set {key} to {per_rank * dp} to keep this batch on another world"
        if dp is not None
        else f"set {key} to the global batch you mean",
        where=reading.where(key),
    )


def _not_multiple(reading: Reading, total: int, local: int, dp: int) -> Finding:
    near = nearest_multiples(total, local * dp)
    return finding(
        "torchtitan-global-not-divisible",
        f"global batch size must be multiple of local batch size times data-parallel degree "
        f"({total} % ({local} * {dp}) != 0) (torchtitan's assert in Trainer.__init__)",
        hint=f"set training.global_batch_size to {' or '.join(map(str, near))}",
        where=reading.where("training.global_batch_size"),
    )


def _tokens_not_divisible(reading: Reading, per_step: int, step_tokens: int) -> Finding:
    near = nearest_multiples(per_step, step_tokens)
    return finding(
        "torchtitan-tokens-not-divisible",
        f"training.num_tokens_per_train_step ({per_step}) must be divisible by the number of "
        f"tokens processed globally in one gradient accumulation iteration ({step_tokens}) "
        "(torchtitan's ValueError)",
        hint=f"set training.num_tokens_per_train_step to {' or '.join(map(str, near))}",
        where=reading.where("training.num_tokens_per_train_step"),
    )


def _pp_split(reading: Reading, local: int, size: int) -> Finding:
    near = nearest_multiples(local, size)
    return finding(
        "torchtitan-pp-microbatch",
        f"training.local_batch_size ({local}) must be evenly divisible by "
        f"parallelism.pipeline_parallel_microbatch_size ({size}) when pipeline parallelism is "
        "enabled (torchtitan's ValueError)",
        hint=f"set training.local_batch_size to {' or '.join(map(str, near))}",
        where=reading.where("training.local_batch_size"),
    )


def _few_pieces(reading: Reading, pieces: int, pp: int, key: str) -> Finding:
    return finding(
        "torchtitan-pp-few-microbatches",
        f"{pieces} pipeline micro-batches for {pp} pipeline stages: the pipeline idles "
        "(torchtitan only warns)",
        hint=f"give at least {pp} pipeline micro-batches per step ({key})",
        where=reading.where(key),
    )


def _sharding(reading: Reading, per_micro: int, split: int) -> Finding:
    return finding(
        "torchtitan-tokens-sharding",
        f"The number of tokens per pipeline microbatch ({per_micro}) must be divisible by "
        f"{split} for the configured sequence/context parallelism (torchtitan's ValueError)",
        hint="set training.num_tokens_per_microbatch_per_dp_rank to "
        f"{' or '.join(map(str, nearest_multiples(per_micro, split)))}",
        where=reading.where("training.num_tokens_per_microbatch_per_dp_rank"),
    )


def _not_samples(reading: Reading, per_micro: int, context: int) -> Finding:
    return finding(
        "torchtitan-tokens-not-samples",
        f"training.num_tokens_per_microbatch_per_dp_rank ({per_micro}) is no whole number of "
        f"sequences of max_context_length {context}: the batch in samples is unknown (the "
        "tokens per step still hold)",
        hint="set training.num_tokens_per_microbatch_per_dp_rank to "
        f"{' or '.join(map(str, nearest_multiples(per_micro, context)))}",
        where=reading.where("training.num_tokens_per_microbatch_per_dp_rank"),
    )


def check(spec: BatchSpec) -> list[Finding]:
    """Nothing torchtitan refuses in a solved spec: every layout maps onto its mesh."""
    return []
