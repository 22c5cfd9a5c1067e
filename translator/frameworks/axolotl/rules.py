"""Axolotl: ``micro_batch_size`` and ``gradient_accumulation_steps`` per rank; the world size
comes from the launcher's ``WORLD_SIZE``. Axolotl computes
``batch_size = micro x gas x (world // context // tensor)``. It has no pipeline parallelism,
and its ``batch_size`` key is a trap (beside ``micro_batch_size`` without accumulation,
validation fills accumulation 1 first, so training ignores it), so it is never written."""

from __future__ import annotations

import re
from pathlib import Path

from translator.batch import solve
from translator.frameworks.deepspeed import config_json as deepspeed
from translator.frameworks.shared import fsdp, hf_deepspeed, loss, yaml_insert
from translator.model.memory import Setting, Settings
from translator.reading import Launch, Reading, Value, invalid_value, run_folders, typo_findings
from translator.spec import BatchSpec
from translator.words import parsing
from translator.words.errors import InputError
from translator.words.findings import Finding, finding

NAME = "axolotl"

#: Axolotl key -> spec field, for the keys that shape the batch.
KEYS = {
    "micro_batch_size": "micro_batch_size",
    "gradient_accumulation_steps": "gradient_accumulation_steps",
    "sequence_len": "sequence_length",
    "tensor_parallel_size": "tensor_parallel_size",
    "context_parallel_size": "context_parallel_size",
}
BATCH_KEYS = list(KEYS) + ["batch_size"]
#: Real Axolotl keys that look like batch keys.
LOOKALIKES = {
    "eval_batch_size",
    "pad_to_sequence_len",
    "eval_sequence_len",
    "dp_shard_size",
    "dp_replicate_size",
    "gradient_checkpointing",
    "sequence_parallel_degree",
    "expert_parallel_size",
}  # the last from the expert-parallel integration (plugins:)
#: Keys Axolotl's schema types without ``None`` (``sequence_len: int = 512``): its pydantic
#: validation refuses a null ("Input should be a valid integer"). Every other key read here is
#: ``Optional`` there: a null is its default, except that ``micro_batch_size`` and
#: ``gradient_accumulation_steps`` keep it and fail later (:func:`_nulls`).
NOT_NULL = frozenset({"sequence_len"})
#: Read too, for what they say about the batch.
OTHER_KEYS = [
    "batch_size",
    "eval_batch_size",
    "sample_packing",
    "deepspeed",
    "fsdp",
    "fsdp_config",
    "fsdp_version",
    "dp_shard_size",
    "dp_replicate_size",
    "gradient_checkpointing",
]


def context(spec: BatchSpec) -> dict:
    return {
        "spec": spec,
        "parallel": {
            k: getattr(spec, k)
            for k in ("tensor_parallel_size", "context_parallel_size")
            if getattr(spec, k) > 1
        },
    }


def read(text: str, where: str) -> Reading:
    """An Axolotl YAML, and the DeepSpeed JSON its ``deepspeed:`` key points to. Axolotl opens
    that path from the folder it runs in; a YAML read alone does not say which folder that is,
    so the current one is tried first, then the YAML's own and those above it (a repository's
    ``examples/`` YAMLs name ``deepspeed_configs/`` at its root)."""
    reading, config = read_yaml(text, where)
    if "deepspeed" in config:
        here = Path(where).resolve().parent if where != "-" else Path.cwd()
        bases = [*run_folders(), here, *here.parents]
        hf_deepspeed.read_partner(reading, config["deepspeed"], bases)
    return reading


def read_yaml(text: str, where: str, extra: tuple[str, ...] = ()) -> tuple[Reading, dict]:
    """An Axolotl YAML's batch values (and those of its ``extra`` keys), typos and duplicate
    keys (the DeepSpeed JSON it names is not read), and the whole mapping as loaded."""
    doc = parsing.load_yaml(text, where)
    config = doc.data
    if not isinstance(config, dict):
        raise InputError(
            f"{where}: an Axolotl config must be a YAML mapping, not {type(config).__name__}"
        )
    reading = Reading(where, NAME, text)
    for key in [*KEYS, *OTHER_KEYS, *extra]:
        if key in config:
            line, span = doc.positions.get(key, (None, None))
            reading.values[key] = Value(config[key], line, span)
    keys = {str(k): doc.positions.get(str(k), (None,))[0] for k in config}
    reading.findings += typo_findings(keys, BATCH_KEYS, LOOKALIKES, where)
    reading.findings += [_duplicate(dup, where) for dup in doc.duplicates]
    return reading, config


def _duplicate(dup: parsing.Duplicate, where: str) -> Finding:
    """A key set twice: an error when it is a batch key and the two values differ."""
    batch = dup.path in BATCH_KEYS or dup.path in {f"deepspeed.{k}" for k in deepspeed.BATCH_KEYS}
    code = "yaml-duplicate-batch-key" if batch and not dup.same else "yaml-duplicate-key"
    return finding(
        code,
        f"{parsing.brief(dup.path, quote='')} is set twice (lines {dup.first} and "
        f"{dup.again}); Axolotl loads its YAML with yaml.safe_load, which keeps the last "
        "one and says nothing",
        hint=f"delete line {dup.first} or line {dup.again}",
        where=f"{where}:{dup.again}",
    )


def interpret(reading: Reading, launch: Launch) -> tuple[dict, list[Finding]]:
    """Spec values as Axolotl's ``validate_config`` + ``normalize_config`` compute them."""
    findings = list(reading.findings)
    counts: dict[str, int] = {}
    unknown = _unknown(reading, findings)
    for key in BATCH_KEYS:
        v = reading.values.get(key)
        if v is None or (v.value is None and (key not in NOT_NULL or v.why_unknown is not None)):
            continue
        if v.count is not None:
            counts[key] = v.count
        else:
            findings.append(invalid_value(key, v, reading.path))
    micro, gas, bs = (
        counts.get(k) for k in ("micro_batch_size", "gradient_accumulation_steps", "batch_size")
    )
    nulls = _nulls(reading, micro, bs)
    findings += nulls
    if (
        bs is not None
        and micro is not None
        and any(f.code == "axolotl-accumulation-from-batch-size" for f in nulls)
    ):
        counts["gradient_accumulation_steps"] = bs // micro
    elif gas is not None and bs is not None:
        findings.append(
            finding(
                "axolotl-batch-keys",
                "please set only one of gradient_accumulation_steps or batch_size (Axolotl's words)",
                hint="delete batch_size",
                where=reading.where("batch_size"),
            )
        )
    elif bs is not None:
        findings.append(_batch_size_alone(reading, bs, micro))
    # Axolotl's schema defaults both to 1.
    values: dict[str, int | None] = {
        field: counts[key] for key, field in KEYS.items() if key in counts
    }
    values |= {KEYS[key]: None for key in unknown}
    if not any(f.code in ("invalid-value", "axolotl-null-batch") for f in findings):
        values.setdefault("micro_batch_size", 1)
        values.setdefault("gradient_accumulation_steps", 1)
    findings += _world_rounding(reading, values, launch.world_size)
    findings += _sample_packing(reading)
    # Its own deepspeed: builds the Trainer's DeepSpeed plugin; else accelerate's is checked
    partners, launched = hf_deepspeed.of_launch(reading, launch)
    findings += launched
    for partner in partners:
        findings += partner.findings + hf_deepspeed.pair(
            reading, partner, values, launch.world_size, "axolotl-deepspeed-mismatch"
        )
    return values, findings


def _unknown(reading: Reading, findings: list[Finding]) -> list[str]:
    """The batch keys a job leaves unknown (a YAML not found, a variable not set): each is a
    finding, and its field is unknown (not Axolotl's default)."""
    out = []
    for key in KEYS:
        v = reading.values.get(key)
        if v is None or v.value is not None or v.why_unknown is None:
            continue
        out.append(key)
        findings.append(
            finding(
                "unknown-value",
                f"{key} is {v.why_unknown}",
                hint=f"write {key} in the YAML, or pass --{key.replace('_', '-')} with a literal",
                where=reading.where(key),
            )
        )
    return out


def _batch_size_alone(reading: Reading, bs: int, micro: int | None) -> Finding:
    """What Axolotl does with ``batch_size`` when ``gradient_accumulation_steps`` is not set."""
    if micro is None:
        return finding(
            "axolotl-batch-keys",
            "At least two of micro_batch_size, gradient_accumulation_steps, batch_size must be "
            "set (Axolotl's words): batch_size alone is refused",
            hint="set micro_batch_size and gradient_accumulation_steps instead of batch_size",
            where=reading.where("batch_size"),
        )
    if bs == micro:
        return finding(
            "axolotl-batch-size-redundant",
            f"batch_size {bs} equals micro_batch_size: Axolotl ignores it and fills accumulation "
            "1, which is what it says anyway (its reported batch_size becomes "
            f"{bs} × world)",
            hint="delete batch_size",
            where=reading.where("batch_size"),
        )
    return finding(
        "axolotl-batch-size-ignored",
        f"batch_size {bs} is ignored: Axolotl fills gradient_accumulation_steps 1 before it "
        f"could derive it, so each rank trains micro {micro} × accumulation 1 (and its "
        f"reported batch_size becomes {bs} × world)",
        hint=(
            f"replace batch_size: {bs} with gradient_accumulation_steps: {bs // micro}"
            if bs % micro == 0
            else "replace batch_size with gradient_accumulation_steps: "
            + " or ".join(
                f"{v // micro} (per rank {v})" for v in solve.nearest_multiples(bs, micro)
            )
            + f"; batch_size {bs} is not a multiple of micro_batch_size {micro}"
        ),
        where=reading.where("batch_size"),
    )


def _nulls(reading: Reading, micro: int | None, bs: int | None) -> list[Finding]:
    """What Axolotl makes of ``micro_batch_size: null`` or ``gradient_accumulation_steps: null``:
    its schema keeps an explicit null (the default 1 is for a missing key), and
    ``normalize_config`` then derives accumulation as ``batch_size // micro_batch_size`` or
    fails on the None."""
    out = []
    for key in ("micro_batch_size", "gradient_accumulation_steps"):
        v = reading.values.get(key)
        if v is None or v.value is not None or v.why_unknown is not None:
            continue  # unknown (a job's value the script does not fix) is not a null
        if key == "gradient_accumulation_steps" and micro is not None and bs is not None:
            floors = (
                ""
                if bs % micro == 0
                else (f", flooring: each rank trains {micro * (bs // micro)}, not batch_size {bs}")
            )
            out.append(
                finding(
                    "axolotl-accumulation-from-batch-size",
                    f"{key} is null, so Axolotl derives it as batch_size // micro_batch_size = "
                    f"{bs} // {micro} = {bs // micro}{floors}",
                    hint=f"write {key}: {max(bs // micro, 1)} and delete batch_size",
                    where=reading.where(key),
                )
            )
            continue
        out.append(
            finding(
                "axolotl-null-batch",
                f"{key} is null: Axolotl keeps an explicit null (its default 1 is only for a missing "
                "key) and its normalize_config then fails computing the batch (a TypeError on None)",
                hint=f"write {key} as a positive integer, or delete the line for the default 1",
                where=reading.where(key),
            )
        )
    return out


def _world_rounding(reading: Reading, values: dict, world: int | None) -> list[Finding]:
    tp, cp = values.get("tensor_parallel_size", 1), values.get("context_parallel_size", 1)
    if world is None or world % (tp * cp) == 0:
        return []
    return [
        finding(
            "axolotl-world-rounding",
            f"WORLD_SIZE {world} does not divide by context {cp} × tensor {tp}: Axolotl floors "
            f"{world} // {cp} // {tp} = {world // cp // tp} and reports a batch_size no rank trains",
            hint=f"launch a multiple of {tp * cp} processes",
            where=reading.path,
        )
    ]


def _sample_packing(reading: Reading) -> list[Finding]:
    v = reading.values.get("sample_packing")
    if v is None or v.value is not True:
        return []
    return [
        finding(
            "axolotl-sample-packing",
            "sample_packing is on: each micro-batch row packs several samples up to sequence_len "
            "tokens, so samples per step vary while rows (and tokens) per step are fixed",
            where=reading.where("sample_packing"),
        )
    ]


def check(spec: BatchSpec) -> list[Finding]:
    pp = spec.pipeline_parallel_size
    if pp > 1:
        g, micro, dp = spec.global_batch, spec.micro, spec.data_parallel * pp
        keep = (
            f"accumulation {g // (micro * dp)} keeps global {g}"
            if g % (micro * dp) == 0
            else f"global {g} does not split into micro {micro} × data-parallel {dp}, so "
            + solve.alternatives(
                g, {"micro": micro, "DP": dp}, False, spec.model_parallel_size // pp
            )
        )
        return [
            finding(
                "axolotl-no-pipeline",
                f"Axolotl has no pipeline parallelism, but the batch layout has pipeline {pp}",
                hint="keep it for Megatron or DeepSpeed; for Axolotl use pipeline parallel size 1, "
                f"which makes data-parallel {dp}: {keep}",
            )
        ]
    return []


def edits(reading: Reading, spec: BatchSpec) -> dict[str, int | None]:
    """New values for Axolotl's batch keys: ``batch_size`` is removed (``None``), and parallel
    sizes are written when the file has them or they are no longer 1."""
    out = {
        "micro_batch_size": spec.micro_batch_size,
        "gradient_accumulation_steps": spec.gradient_accumulation_steps,
    }
    for key in ("tensor_parallel_size", "context_parallel_size"):
        if key in reading.values or getattr(spec, key) != 1:
            out[key] = getattr(spec, key)
    if "batch_size" in reading.values:
        out["batch_size"] = None
    return out


# Recognising a file -------------------------------------------------------------

_MARK = re.compile(
    r"^(micro_batch_size|gradient_accumulation_steps|batch_size|base_model)\s*:", re.M
)


def claims(text: str) -> bool:
    """Its own keys at the top of the file (a ``micro_batch_size:`` nested in another tool's
    sections, as NeMo's ``model.data.train_ds``, is not Axolotl's)."""
    return _OWN_KEY.search(text) is not None or bool(_flow_keys(text) & _OWN_KEYS)


#: The top-level keys only Axolotl's configs carry.
_OWN_KEYS = frozenset({"micro_batch_size", "base_model"})
_OWN_KEY = re.compile(r"^(micro_batch_size|base_model):", re.MULTILINE)
#: The top-level keys that hold its batch (or say it is Axolotl's).
_BATCH_KEYS = frozenset(
    {"micro_batch_size", "gradient_accumulation_steps", "batch_size", "base_model"}
)
#: A YAML whose document is a flow mapping (``{base_model: m, ...}``), after any comments.
_FLOW = re.compile(r"\A\ufeff?(\s*#[^\n]*\n)*\s*\{")


def holds_batch(text: str) -> bool:
    return _MARK.search(text) is not None or bool(_flow_keys(text) & _BATCH_KEYS)


def _flow_keys(text: str) -> set[str]:
    """The top-level keys of a YAML written as one flow mapping, which the line patterns above
    cannot see; none for any other text."""
    if not _FLOW.match(text):
        return set()
    try:
        data = parsing.load_yaml(text, "<flow>").data
    except InputError:
        return set()
    return {str(k) for k in data} if isinstance(data, dict) else set()


def insertion(reading: Reading, key: str) -> tuple[int, int]:
    """Where ``update`` writes a key the YAML lacks: after ``micro_batch_size``."""
    return yaml_insert.after_key(reading, key, "micro_batch_size")


def memory_settings(reading: Reading) -> Settings:
    """What an Axolotl config says about memory: its DeepSpeed JSON's ZeRO stage and offload,
    or its FSDP (``fsdp`` or ``fsdp_config``, which Axolotl hands the Trainer with
    ``fsdp_version``, 1 when a ``fsdp_config`` gives none, and ``offload_params`` through
    accelerate's environment), and ``gradient_checkpointing``."""
    out = Settings()
    for partner in reading.partners:
        out += deepspeed.memory_settings(partner)
    legacy, raw = (reading.values.get(k) for k in ("fsdp", "fsdp_config"))
    if (legacy is not None and legacy.value) or (raw is not None and raw.value):
        config = fsdp.config_of(raw.value if raw is not None else None)
        version = reading.values.get("fsdp_version")
        given = version.value if version is not None else config.get("version")
        number = 2 if str(given) == "2" or (given is None and not config) else 1
        fsdp.legacy(legacy.value if legacy is not None else None, config, number)
        offload = any(
            str(config.get(k)).lower() == "true" for k in ("offload_params", "cpu_offload")
        )
        key = "fsdp_config" if raw is not None else "fsdp"
        out += fsdp.settings(config, number, offload, f"{reading.where(key)} {key}")
        replicas = reading.count("dp_replicate_size")
        if replicas and replicas > 1:
            out += Settings(
                unused=(
                    f"{reading.where('dp_replicate_size')} dp_replicate_size {replicas}: FSDP "
                    "shards over dp_shard_size ranks only (HSDP), and the estimate divides by DP",
                )
            )
    checkpointing = reading.values.get("gradient_checkpointing")
    if checkpointing is not None and checkpointing.value not in (None, False):
        where = f"{reading.where('gradient_checkpointing')} gradient_checkpointing"
        out += Settings((Setting("recompute", "full", where),))
    return out


def loss_normalisation(reading: Reading | None, spec: BatchSpec | None) -> list[Finding]:
    """Axolotl's trainer turns the HF Trainer's token-count normalisation (transformers 4.46)
    back off for a model whose forward does not name ``num_items_in_batch`` (a Llama's does
    not, in 0.19): each micro-batch's loss over its own tokens under accumulation."""
    if spec is not None and spec.accumulation == 1:
        return []
    return loss.per_micro_batch(
        spec,
        "Axolotl's trainer (0.19) sets model_accepts_loss_kwargs False for a model whose forward "
        "takes no num_items_in_batch (Llama among them), so each micro-batch's loss is divided "
        "by its own tokens under accumulation",
        "keep gradient_accumulation_steps 1 where the exact batch matters (a larger micro_batch_"
        "size or more ranks), or use sample_packing, whose full rows weigh alike",
        reading.where("gradient_accumulation_steps") if reading is not None else "axolotl",
    )
