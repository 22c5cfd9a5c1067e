"""nanotron: a YAML loaded into its ``Config`` dataclasses (``get_config_from_file``, dacite
``strict=True``). The batch is ``tokens.micro_batch_size × tokens.batch_accumulation_per_replica
× parallelism.dp`` (``Config.global_batch_size``); there is no global key, and ``dp`` is written,
not derived: ``ParallelContext`` refuses any world but the product of the parallel sizes. Under
pipeline parallelism ``batch_accumulation_per_replica`` is also the number of pipeline
micro-batches, which the 1F1B engine wants at least ``pp - 1`` of. ``pp_engine`` defaults to
AFAB (``AllForwardAllBackwardPipelineEngine``). The two generations of keys are
:mod:`.generation`'s."""

from __future__ import annotations

import re

from translator.frameworks.nanotron import generation
from translator.model.model_split import SplitRules
from translator.reading import Launch, Reading, invalid_value, typo_findings, values_at
from translator.spec import BatchSpec
from translator.words import parsing
from translator.words.errors import InputError
from translator.words.findings import Finding, counted, finding

NAME = "nanotron"

#: nanotron key -> spec field.
FIELDS = {
    "tokens.micro_batch_size": "micro_batch_size",
    "tokens.batch_accumulation_per_replica": "gradient_accumulation_steps",
    "tokens.sequence_length": "sequence_length",
    "parallelism.dp": "data_parallel_size",
    "parallelism.tp": "tensor_parallel_size",
    "parallelism.pp": "pipeline_parallel_size",
    "parallelism.context_parallel_size": "context_parallel_size",
}
EP = "parallelism.expert_parallel_size"
ENGINE = "parallelism.pp_engine"
MICRO, ACCUMULATION, SEQUENCE = (
    "tokens.micro_batch_size",
    "tokens.batch_accumulation_per_replica",
    "tokens.sequence_length",
)
#: Keys ``TokensArgs`` and ``ParallelismArgs`` have no default for, in both generations.
REQUIRED = (
    "parallelism.dp",
    "parallelism.tp",
    "parallelism.pp",
    MICRO,
    ACCUMULATION,
    SEQUENCE,
    "tokens.train_steps",
)
#: Of those, the ones a file holding only the batch blocks (what ``render`` writes, to be
#: merged into a full config) must have.
FRAGMENT_REQUIRED = REQUIRED[:5]
#: The sections that make a file a whole config (``Config`` requires both).
WHOLE = ("general", "model")
#: Every key of the two blocks, either generation (``ParallelismArgs``, ``TokensArgs``).
KNOWN = {
    "parallelism": {
        "dp",
        "tp",
        "pp",
        "pp_engine",
        "tp_mode",
        "tp_linear_async_communication",
        "expert_parallel_size",
        "context_parallel_size",
        "recompute_layer",
        "tp_recompute_allgather",
    },
    "tokens": {
        "sequence_length",
        "train_steps",
        "micro_batch_size",
        "batch_accumulation_per_replica",
        "val_check_interval",
        "limit_val_batches",
        "limit_test_batches",
    },
}
#: ``pp_engine`` values ``cast_str_to_pipeline_engine`` takes.
ENGINES = ("afab", "1f1b")


def claims(text: str) -> bool:
    """Its own batch key, or both of its top-level batch blocks."""
    return _OWN.search(text) is not None or all(b.search(text) for b in _BLOCKS)


_OWN = re.compile(r"^\s+batch_accumulation_per_replica\s*:", re.M)
_BLOCKS = (re.compile(r"^parallelism\s*:", re.M), re.compile(r"^tokens\s*:", re.M))


def holds_batch(text: str) -> bool:
    return _OWN.search(text) is not None or "micro_batch_size" in text


def context(spec: BatchSpec) -> dict:
    pp, accumulation = spec.pipeline_parallel_size, spec.accumulation
    return {
        "spec": spec,
        "engine": "1f1b" if pp == 1 or accumulation >= pp - 1 else "afab",
    }


# Reading ---------------------------------------------------------------------------------------


def read(text: str, where: str) -> Reading:
    """A nanotron YAML's batch values, the keys that tell its generation, typos in its batch
    blocks and duplicate keys."""
    doc = parsing.load_yaml(text, where)
    config = doc.data
    if not isinstance(config, dict):
        raise InputError(
            f"{where}: a nanotron config must be a YAML mapping, not {type(config).__name__}"
        )
    reading = Reading(where, NAME, text)
    reading.values |= values_at(
        doc,
        (
            *FIELDS,
            EP,
            ENGINE,
            "tokens.train_steps",
            *WHOLE,
            *KNOWN,
            *generation.CURRENT_KEYS,
            *generation.RELEASE_KEYS,
        ),
    )
    for block in KNOWN:
        if block in config and not isinstance(config[block], dict):
            line = doc.positions.get(block, (None,))[0]
            raise InputError(f"{where}:{line}: {block} must be a mapping of keys")
    keys = {
        f"{block}.{key}": doc.positions.get(f"{block}.{key}", (None,))[0]
        for block in KNOWN
        for key in config.get(block) or {}
    }
    known = [f"{b}.{k}" for b, names in KNOWN.items() for k in names]
    reading.findings += typo_findings(
        keys, list(FIELDS), set(known), where, "which nanotron's strict loading refuses"
    )
    reading.findings += [_duplicate(dup, where) for dup in doc.duplicates]
    return reading


def _duplicate(dup: parsing.Duplicate, where: str) -> Finding:
    """A key set twice: an error when it is a batch key and the two values differ."""
    batch = dup.path in FIELDS and not dup.same
    return finding(
        "yaml-duplicate-batch-key" if batch else "yaml-duplicate-key",
        f"{dup.path} is set twice (lines {dup.first} and {dup.again}); nanotron loads its YAML "
        "with PyYAML's SafeLoader, which keeps the last one and says nothing",
        hint=f"delete line {dup.first} or line {dup.again}",
        where=f"{where}:{dup.again}",
    )


# Interpreting ----------------------------------------------------------------------------------


def interpret(reading: Reading, launch: Launch) -> tuple[dict, list[Finding]]:
    """Spec values as nanotron's ``Config`` and ``ParallelContext`` take them."""
    findings = list(reading.findings)
    counts: dict[str, int] = {}
    values: dict[str, int | None] = {}
    unknown: dict[str, list[str]] = {}  # why -> keys
    for key in (*FIELDS, EP):
        v = reading.values.get(key)
        if v is None:
            continue
        if v.value is None and v.why_unknown is not None:
            if key in FIELDS:
                values[FIELDS[key]] = None
            unknown.setdefault(v.why_unknown, []).append(key)
        elif v.count is None:
            findings.append(invalid_value(key, v, reading.path))
        else:
            counts[key] = v.count
    findings += [_unknown(reading, keys, why) for why, keys in unknown.items()]
    findings += _null_required(reading)
    values |= {FIELDS[k]: c for k, c in counts.items() if k in FIELDS}
    findings += _missing(reading)
    findings += _generations(reading)
    engine, wrong = _engine(reading)
    findings += wrong
    findings += _layout(reading, counts, launch, values)
    accumulation, pp = counts.get(ACCUMULATION), counts.get("parallelism.pp")
    if engine == "1f1b" and accumulation is not None and pp is not None and accumulation < pp - 1:
        findings.append(_one_f_one_b(reading, counts.get(MICRO), accumulation, pp))
    return values, findings


def _layout(reading: Reading, counts: dict[str, int], launch: Launch, values: dict) -> list:
    """The world the parallel sizes ask for (the file's world when the launch gives none) and
    the findings on it, once every size is known."""
    given = {
        "dp": counts.get("parallelism.dp"),
        "tp": counts.get("parallelism.tp"),
        "pp": counts.get("parallelism.pp"),
        "context_parallel_size": counts.get("parallelism.context_parallel_size", 1),
        "expert_parallel_size": counts.get(EP, 1),
    }
    sizes = {k: v for k, v in given.items() if v is not None}
    if len(sizes) < len(given):
        return []
    if launch.world_size is None and sizes["expert_parallel_size"] == 1:
        # the only world nanotron runs the file on (what its validator is asked at)
        values["world_size"] = generation.world_of("current", sizes)
    per_replica = (counts.get(MICRO) or 0) * (counts.get(ACCUMULATION) or 0)
    return _world(reading, sizes, launch.world_size, per_replica)


def _unknown(reading: Reading, keys: list[str], why: str) -> Finding:
    """One finding for the keys a job leaves unknown for one reason."""
    return finding(
        "unknown-value",
        f"{', '.join(keys)} {'is' if len(keys) == 1 else 'are'} {why}",
        hint="write the values in the YAML as literals",
        where=reading.where(keys[0]),
    )


def _null_required(reading: Reading) -> list[Finding]:
    """The required keys not read into the spec (``train_steps``) written blank: dacite loads
    a null only into an ``Optional`` field and refuses it for these plain ``int`` ones."""
    return [
        invalid_value(key, v, reading.path)
        for key in REQUIRED
        if key not in FIELDS
        and (v := reading.values.get(key)) is not None
        and v.value is None
        and v.why_unknown is None
    ]


def _missing(reading: Reading) -> list[Finding]:
    """The required keys a file lacks: dacite refuses a ``tokens`` or ``parallelism`` block
    without one of them. A whole config without ``tokens`` loads, but its trainer then reads
    ``config.tokens.micro_batch_size`` from ``None``."""
    whole = any(k in reading.values for k in WHOLE)
    out = []
    for key in REQUIRED if whole else FRAGMENT_REQUIRED:
        if key in reading.values:
            continue
        block = key.split(".")[0]
        holder = "TokensArgs" if block == "tokens" else "ParallelismArgs"
        missing = key if block in reading.values else block
        why = (
            f"the file has no tokens block: nanotron loads it, then its trainer fails reading "
            f"config.{key}"
            if missing == "tokens" and whole
            else f"{holder} has no default for it: get_config_from_file refuses the file "
            f'(dacite: missing value for field "{missing}")'
        )
        out.append(
            finding(
                "nanotron-missing-key",
                f"{key} is missing; {why}",
                hint=f"write {key} under {block}:",
                where=reading.path,
            )
        )
    return out


def _generations(reading: Reading) -> list[Finding]:
    """Which generation the file is written for, and whether the installed nanotron is the
    other one (it would refuse the keys only the file's generation has)."""
    found = generation.own_keys(reading.values)
    if found is None:
        return _mixed(reading)
    written, own = found
    out = [
        finding(
            "nanotron-generation",
            f"written for {generation.TITLES[written]}: it has {', '.join(own)}",
            where=reading.where(own[0]),
        )
    ]
    installed = generation.installed()
    if installed is not None and installed != written:
        out.append(
            finding(
                "nanotron-other-generation",
                f"the installed nanotron is {generation.TITLES[installed]}, whose strict loading "
                f"refuses {', '.join(own)} (dacite: unexpected config keys)",
                hint="run it with "
                + (
                    "nanotron installed from git (pip install "
                    "git+https://github.com/huggingface/nanotron)"
                    if written == "current"
                    else "nanotron 0.4 from PyPI (pip install nanotron==0.4)"
                ),
                where=reading.where(own[0]),
            )
        )
    return out


def _mixed(reading: Reading) -> list[Finding]:
    """A file with keys of both generations (a fork's config): neither loads it as it is."""
    current = [k for k in generation.CURRENT_KEYS if k in reading.values]
    release = [k for k in generation.RELEASE_KEYS if k in reading.values]
    if not (current and release):
        return []
    return [
        finding(
            "nanotron-generation",
            f"mixes keys of both generations ({', '.join(current)} of the current one; "
            f"{', '.join(release)} of 0.4): neither nanotron's strict loading takes it as it is "
            "(a fork's config?); batchspec applies the installed nanotron's rules",
            where=reading.where(current[0]),
        )
    ]


def in_force(reading: Reading) -> generation.Generation:
    """The generation whose rules apply: the file's, else the installed one's, else the
    current one."""
    found = generation.own_keys(reading.values)
    return found[0] if found else generation.installed() or "current"


def _engine(reading: Reading) -> tuple[str, list[Finding]]:
    """The pipeline engine (``afab`` when not set, as ``ParallelismArgs`` defaults it)."""
    v = reading.values.get(ENGINE)
    if v is None or (v.value is None and v.why_unknown is None):
        return "afab", []
    if v.value in ENGINES:
        return str(v.value), []
    if v.value is None:
        return "unknown", [_unknown(reading, [ENGINE], str(v.why_unknown))]
    return "unknown", [
        finding(
            "nanotron-pp-engine",
            f"pp_engine should be a string selected in ['afab', '1f1b'] and not "
            f"{parsing.brief(v.value, quote='')} (nanotron's words)",
            hint="write pp_engine: 1f1b or pp_engine: afab",
            where=reading.where(ENGINE),
        )
    ]


def _world(
    reading: Reading, sizes: dict[str, int], world: int | None, per_replica: int
) -> list[Finding]:
    """``ParallelContext``'s check of the world against the sizes, in the generation in force
    (``per_replica``: micro × accumulation, 0 when unknown), and what expert parallelism does
    to it."""
    rules = in_force(reading)
    wanted = generation.world_of(rules, sizes)
    out = []
    ep = sizes["expert_parallel_size"]
    if ep > 1:
        out.append(
            finding(
                "nanotron-expert-world",
                f"expert_parallel_size {ep}: nanotron 0.4 asks for tp × pp × ep × dp = "
                f"{generation.world_of('0.4', sizes)} processes, while the current nanotron "
                f"asserts TP*CP*DP*PP == WORLD_SIZE ({generation.world_of('current', sizes)}) "
                "and its rank grid (ep, pp, dp, cp, tp) then cannot be laid out; batchspec's "
                "world is tp × pp × cp × dp",
                hint="keep expert_parallel_size 1 on the current nanotron",
                where=reading.where(EP),
            )
        )
    if world is None and reading.world_unknown is not None:
        out.append(
            finding(
                "nanotron-world-needed",
                f"{reading.world_unknown}; nanotron's ParallelContext needs exactly {wanted}",
                hint=f"make the launch start {counted(wanted, 'process', 'processes')}",
                where=reading.path,
            )
        )
    if world is None or world == wanted:
        return out
    names = ["tp", "pp", "dp"] + (["ep"] if rules == "0.4" else ["cp"])
    short = {"ep": "expert_parallel_size", "cp": "context_parallel_size"}
    product = " × ".join(f"{n} {sizes[short.get(n, n)]}" for n in names)
    said = (
        f"The number of process requires to run all replicas ({wanted}) must be equal to the "
        f"world size ({world})"
        if rules == "0.4"
        else f"TP*CP*DP*PP={wanted} != WORLD_SIZE={world}"
    )
    model = wanted // sizes["dp"]
    fix = f"launch exactly {counted(wanted, 'process', 'processes')}"
    if world % model == 0:
        dp = world // model
        fix += f", or set dp: {dp} for {counted(world, 'process', 'processes')}"
        if per_replica:
            total = per_replica * sizes["dp"]
            fix += (
                f" and micro × batch_accumulation_per_replica = {total // dp} to keep the "
                f"global batch {total}"
                if total % dp == 0
                else f" (no micro × accumulation keeps the global batch {total} on dp {dp})"
            )
    else:
        verb = "does" if world == 1 else "do"
        fix += (
            f"; {counted(world, 'process', 'processes')} {verb} not split into replicas of "
            f"{model} ({product} / dp)"
        )
    out.append(
        finding(
            "nanotron-world-product",
            f"{product} = {wanted}, but {counted(world, 'process', 'processes')} "
            f"{'is' if world == 1 else 'are'} launched: nanotron's "
            f"ParallelContext refuses it ({said})",
            hint=fix,
            # a job's launcher words, else the file's dp
            where=reading.where(next(iter(reading.launch_keys.values()), "parallelism.dp")),
        )
    )
    return out


def _one_f_one_b(reading: Reading, micro: int | None, accumulation: int, pp: int) -> Finding:
    """1F1B's assertion, naming the key it is about (huggingface/nanotron#347)."""
    need = pp - 1
    hint = f"set batch_accumulation_per_replica to at least {need}, or pp_engine: afab"
    if micro is not None:
        per_replica = micro * accumulation
        fits = [a for a in range(need, per_replica + 1) if per_replica % a == 0]
        hint = (
            f"keep the global batch with micro_batch_size {per_replica // fits[0]} and "
            f"batch_accumulation_per_replica {fits[0]}, or use pp_engine: afab"
            if fits
            else f"use pp_engine: afab, which keeps the global batch (no split of the "
            f"{per_replica} samples per replica gives {need} micro-batches), or set "
            f"batch_accumulation_per_replica to at least {need}, which makes it larger"
        )
    return finding(
        "nanotron-1f1b-microbatches",
        f"Number of microbatches ({accumulation}) must be at least PP_SIZE-1={need} when using "
        "the OneForwardOneBackwardPipelineEngine (nanotron's words, when training starts): the "
        "micro-batches are batch_accumulation_per_replica",
        hint=hint,
        where=reading.where(ACCUMULATION),
    )


# Checking, updating --------------------------------------------------------------------------


def check(spec: BatchSpec) -> list[Finding]:
    if spec.sequence_length is not None:
        return []
    return [
        finding(
            "nanotron-sequence-length-missing",
            "nanotron's TokensArgs has no default for tokens.sequence_length and the batch "
            "gives none: a config without it is refused",
            hint="give the spec a sequence_length (or --seq-len), or write tokens.sequence_length",
        )
    ]


def edits(reading: Reading, spec: BatchSpec) -> dict[str, int | None]:
    """New values for the batch keys (``context_parallel_size`` when the file has it or it is
    no longer 1: it is a key of the current generation only)."""
    out: dict[str, int | None] = {
        MICRO: spec.micro_batch_size,
        ACCUMULATION: spec.gradient_accumulation_steps,
        "parallelism.dp": spec.data_parallel_size,
        "parallelism.tp": spec.tensor_parallel_size,
        "parallelism.pp": spec.pipeline_parallel_size,
    }
    cp = "parallelism.context_parallel_size"
    if cp in reading.values or spec.context_parallel_size != 1:
        out[cp] = spec.context_parallel_size
    return out


def split_rules(reading: Reading, values: dict) -> SplitRules:
    """nanotron's Llama attention asserts that the tensor-parallel size divides the attention
    heads and the key/value heads; its pipeline balances stages by each block's compute cost,
    not by a count of layers, so no split of the layers is its rule."""
    return SplitRules(
        "nanotron's attention",
        pipeline="given",
        tensor_at=reading.where("parallelism.tp") if "parallelism.tp" in reading.values else None,
    )
