"""What ``update`` changes in a torchtitan file or launch: the keys it sets, in its own
generation, and the global batch key even where the file leaves it at ``-1`` (a global batch
that follows the world would not keep the batch). A TOML file takes a key it lacks as a
``key = value`` line at the end of its table (a new table at the end when it has none)."""

from __future__ import annotations

from translator.frameworks.torchtitan import generation, keys, template
from translator.reading import Reading
from translator.spec import BatchSpec


def edits(reading: Reading, spec: BatchSpec) -> dict:
    """Key -> new value for each key of the reading's generation that the spec changes."""
    if generation.of(reading) == "tokens":
        wanted = _tokens(reading, spec)
        always = "training.num_tokens_per_train_step"
    else:
        wanted = template.flags(spec)
        wanted.pop(keys.NO_CUDA_GRAPHS, None)
        always = "training.global_batch_size"
        shard = reading.values.get("parallelism.data_parallel_shard_degree")
        if shard is None or shard.value == -1:
            wanted.pop("parallelism.data_parallel_shard_degree")
    return {
        k: v
        for k, v in wanted.items()
        if k in reading.values or k == always or v != keys.DEFAULTS.get(k, v)
    }


def _tokens(reading: Reading, spec: BatchSpec) -> dict:
    """The token keys for a spec (a sample is ``max_context_length`` tokens)."""
    from translator.plugin.findings import cannot_edit

    samples = template.flags(spec)
    if spec.sequence_length is None:
        raise cannot_edit(
            reading.path, "the token counts need the sequence length (max_context_length)"
        )
    seq = spec.sequence_length
    out = {
        "training.num_tokens_per_microbatch_per_dp_rank": spec.micro * seq,
        "training.num_tokens_per_train_step": spec.global_batch * seq,
        "training.max_context_length": seq,
    }
    if spec.pipeline_parallel_size > 1:
        out["parallelism.num_pp_microbatches"] = spec.accumulation
    return out | {k: v for k, v in samples.items() if k in keys.DEGREES}


def insertion(reading: Reading, key: str) -> tuple[int, int]:
    """Where a TOML file takes a key it lacks: after the last line of its table, else at the
    end of the file. A launch script's flags are not added to."""
    from translator.plugin.findings import cannot_edit

    if not reading.path.lower().endswith(".toml"):
        raise cannot_edit(reading.where(key), f"--{key} is not on the launch line; add it by hand")
    table = key.rpartition(".")[0]
    lines = reading.text.splitlines(keepends=True)
    at, inside = None, False
    offset = 0
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("["):
            inside = stripped.strip("[] ") == table
        elif inside and stripped and not stripped.startswith("#"):
            at = offset + len(line)
        offset += len(line)
    if at is None:
        return len(reading.text), len(reading.text)
    return at, at


def inserted(reading: Reading, key: str, value: object) -> str:
    """The line a TOML file takes for a key it lacks (its table's header first when the file
    has no such table)."""
    table, _, name = key.rpartition(".")
    has_table = any(
        line.strip().strip("[] ") == table
        for line in reading.text.splitlines()
        if line.strip().startswith("[")
    )
    ending = "" if reading.text.endswith("\n") or not reading.text else "\n"
    return f"{name} = {value}" if has_table else f"{ending}\n[{table}]\n{name} = {value}"
