"""Which of torchtitan's generations a reading is, against the installed torchtitan's, with
the keys that say the same batch in the installed one (:mod:`.keys` names the generations)."""

from __future__ import annotations

from translator.frameworks.torchtitan import keys
from translator.reading import Reading
from translator.words.findings import Finding, finding

#: The key a job's reading keeps for ``--job.config_file`` (the TOML it names).
TOML_FLAG = "job.config_file"


def of(reading: Reading) -> str:
    """``toml``, ``python``, ``tokens`` or ``batch_size``: token keys make it ``tokens``, the
    oldest per-rank key ``batch_size``; else a TOML file (or
    a job naming one) is ``toml``, anything else ``python``."""
    given = keys.generation_of(reading.values)
    if given != "samples":
        return given
    if reading.path.lower().endswith(".toml") or TOML_FLAG in reading.values:
        return "toml"
    return "python"


def findings(reading: Reading) -> list[Finding]:
    """An info naming the generation, and, where the installed torchtitan is of another
    generation, what it makes of the file, with the equivalent keys."""
    mine = of(reading)
    out = [
        finding(
            "torchtitan-generation",
            f"{reading.path} is {keys.GENERATIONS[mine]}",
            where=reading.path,
        )
    ]
    found = keys.installed()
    if found is None:
        return out
    version, theirs = found
    if mine == theirs:
        return out
    if mine == "toml" and theirs == "python" and TOML_FLAG not in reading.values:
        return [*out, _toml_unread(reading, version)]  # a file, maybe for an older install
    return [
        *out,
        finding(
            "torchtitan-other-generation",
            f"{reading.path} is {keys.GENERATIONS[mine]}, but the installed torchtitan "
            f"{version} is {keys.GENERATIONS[theirs]}: {_fate(mine, theirs)}",
            hint=f"for torchtitan {version} write {equivalents(reading, theirs)}",
            where=reading.path,
        ),
    ]


def _toml_unread(reading: Reading, version: str) -> Finding:
    return finding(
        "torchtitan-toml-unread",
        f"torchtitan {version} reads no TOML job file: its ConfigManager takes --module and "
        "--config (a Python config function) and --section.key flags",
        hint=f"launch it as python -m torchtitan.train --module <model> --config <function> "
        f"{equivalents(reading, 'python')}",
        where=reading.path,
    )


def _fate(mine: str, theirs: str) -> str:
    if theirs == "toml":
        return "it takes --job.config_file with a TOML job file, and refuses these flags"
    if mine == "toml":
        return "its ConfigManager raises (--module is required) and reads no TOML"
    return "it refuses these keys (an unknown field of its config)"


def _get(reading: Reading, key: str) -> int | None:
    v = reading.values.get(key)
    if v is None:
        return keys.DEFAULTS[key]
    return v.value if isinstance(v.value, int) and not isinstance(v.value, bool) else None


def equivalents(reading: Reading, target: str) -> str:
    """The reading's batch as flags of the ``target`` generation (``?`` where a value is not
    known)."""
    pp = _get(reading, "parallelism.pipeline_parallel_degree") or 1
    if target == "tokens":
        local, total = (
            _get(reading, "training.local_batch_size"),
            reading.values.get("training.global_batch_size"),
        )
        seq = _get(reading, "training.seq_len")
        size = _get(reading, "parallelism.pipeline_parallel_microbatch_size")
        micro = size if pp > 1 else local
        step = -1 if total is None or total.value == -1 else total.count
        flags: dict[str, object] = {
            "training.num_tokens_per_microbatch_per_dp_rank": _times(micro, seq),
            "training.num_tokens_per_train_step": step if step == -1 else _times(step, seq),
            "training.max_context_length": seq,
        }
        if pp > 1:
            flags["parallelism.num_pp_microbatches"] = (
                local // size if local and size and local % size == 0 else None
            )
    else:
        per_micro = _get(reading, "training.num_tokens_per_microbatch_per_dp_rank")
        context = _get(reading, "training.max_context_length")
        pieces = _get(reading, "parallelism.num_pp_microbatches") if pp > 1 else 1
        per_step = reading.values.get("training.num_tokens_per_train_step")
        micro = _over(per_micro, context)
        flags = {
            "training.local_batch_size": _times(micro, pieces),
            "training.global_batch_size": -1
            if per_step is None or per_step.value == -1
            else _over(per_step.count, context),
            "training.seq_len": context,
        }
        if pp > 1:
            flags["parallelism.pipeline_parallel_microbatch_size"] = micro
        given = keys.generation_of(reading.values)
        if given == "samples":  # TOML -> flags: the same keys
            flags = {k: _get(reading, k) for k in keys.SAMPLES if k in reading.values}
        elif given == "batch_size":  # the global batch needs the data-parallel degree
            batch = _get(reading, "training.batch_size")
            accumulation = _get(reading, "training.gradient_accumulation_steps")
            flags = {
                "training.local_batch_size": batch,
                "training.global_batch_size": f"{batch}×{accumulation}×DP",
            }
    flags |= {k: _get(reading, k) for k in keys.DEGREES if k in reading.values}
    return " ".join(f"--{k} {'?' if v is None else v}" for k, v in flags.items())


def _times(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None else a * b


def _over(a: int | None, b: int | None) -> int | None:
    return None if a is None or b is None or a % b else a // b
