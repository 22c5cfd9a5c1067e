"""Megatron-LM: ``--micro-batch-size`` and ``--global-batch-size``; there is no accumulation
flag, the number of micro-batches per step is ``global / (micro x DP)``. Rendered as a bash
array of literal ``--flag value`` pairs, ready to paste into a launch script; read from launch
scripts as people write them (variables, arrays, arithmetic, the torchrun line) without
running them."""

from __future__ import annotations

import re
from typing import Literal

from translator import shell as bash
from translator.batch import solve
from translator.frameworks.shared import deepspeed_json as deepspeed
from translator.frameworks.shared import flags, loss, mcore_schedule
from translator.model.memory import Setting, Settings
from translator.model.model_split import SplitRules
from translator.reading import Call, Launch, Note, Reading, Value, invalid_value, typo_findings
from translator.shell import launchers
from translator.shell.uses import uses_of
from translator.spec import BatchSpec
from translator.words.errors import InputError
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
#: Switches (flags without a value) read for the memory estimate (:func:`memory_settings`).
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
    args = [
        (flag, getattr(spec, field))
        for flag, field in FLAGS.items()
        if flag in ALWAYS or getattr(spec, field) not in (None, 1)
    ]
    launch = None
    if spec.nodes is not None:
        launch = [("--nproc_per_node", spec.gpus_per_node), ("--nnodes", spec.nodes)]
    return {"spec": spec, "args": args, "launch": launch}


# Reading ---------------------------------------------------------------------------------------


def _upstream(flag: str) -> str:
    """A fork's ``--micro_batch_size`` as upstream spells it."""
    return "--" + flag[2:].replace("_", "-") if flag.startswith("--") else flag


def _opaque(words: list[bash.Word]) -> list[str]:
    """Unknown words of the program's command line that may hold flags of their own
    (``$EXTRA_ARGS``; not the value after a ``--flag``, not ``--flag=$X``, nor an undecided
    value none of whose alternatives holds a flag that has a default)."""
    return [
        f"line {arg.word.line}: {arg.word.why_unknown}"
        for arg in flags.scan(words[1:])
        if arg.kind == "unknown"
        and (arg.word.maybe is None or any(_may_hold_flags(items) for items in arg.word.maybe))
    ]


def _known_start(word: bash.Word) -> str:
    """The known text an unknown word starts with (``--save=`` of ``--save=$DIR``)."""
    return (word.parts[0].text or "") if word.parts else ""


def _flag_argument(words: list[bash.Word], spellings: tuple[str, ...]):
    """``(the flag's word, its argument)`` for the first of ``spellings`` among ``words``
    (``--flag VALUE`` or ``--flag=VALUE``; the argument ``None`` when unknown or missing), or
    ``None`` when no word is the flag."""
    at = next((i for i, w in enumerate(words) if (w.text or "").split("=")[0] in spellings), None)
    if at is None:
        return None
    word = words[at]
    text = word.text or ""  # known: it matched a spelling
    if "=" in text:
        return word, text.split("=", 1)[1]
    return word, words[at + 1].text if at + 1 < len(words) else None


def _yaml_config(reading: Reading, words: list[bash.Word]) -> None:
    """``--yaml-cfg FILE``: Megatron takes every argument from that YAML instead of the command
    line, so nothing the line says about the batch holds."""
    found = _flag_argument(words, ("--yaml-cfg",))
    if found is None:
        return
    word, name = found
    why = f"set by the YAML file {name or 'that --yaml-cfg names'} (--yaml-cfg), not read"
    for flag in DEFAULTED:
        reading.values[flag] = Value(None, word.line, None, why)
    reading.notes.append(
        Note(
            word.line,
            "--yaml-cfg makes Megatron take every argument "
            f"from {name or 'a YAML file'}, which batchspec does not read",
        )
    )


def _after_flag(before: str | None) -> bool:
    return before is not None and before.startswith("--") and "=" not in before


def _may_hold_flags(items: tuple) -> bool:
    """Whether one alternative of an undecided value may set a flag that has a default."""
    words = [w for item in items for w in item.split()]
    return any(
        bash.UNKNOWN_MARK in w
        and not _after_flag(words[i - 1] if i else None)
        or _upstream(w.split("=")[0]) in DEFAULTED
        for i, w in enumerate(words)
    )


def read(text: str, where: str) -> Reading:
    """A launch script, an argument file, or a snippet of flags (arrays, no launch line):
    Megatron's batch flags. A script that launches a Megatron program is read as a job (the
    launcher's world, the files it names); anything else is read word by word."""
    script = bash.parse(text, where)
    if any(_is_megatron(s) for c in script.commands if (s := launchers.call_of(c)) is not None):
        from translator.job.script import read_job  # the job reader asks the registry, which has us

        return read_job(text, where, framework=NAME)[1]
    words = [w for ws in script.variables.values() if len(ws) > 1 for w in ws]
    words += [w for c in script.commands for w in c]
    reading = Reading(where, NAME, text, uses=uses_of(script), notes=list(script.notes))
    _read_words(reading, words, script)
    reading.opaque = [
        f"line {c[0].line}: {c[0].why_unknown}"
        for c in script.commands
        if c[0].text is None
        and not c[0].absent
        and (c[0].maybe is None or any(map(_may_hold_flags, c[0].maybe)))
    ]
    reading.world_unknown = Note(
        None, "no launcher (torchrun, deepspeed, srun, mpirun) starts the program"
    )
    for note in reading.notes:
        reading.findings.append(
            finding(
                "script-not-followed",
                note.text,
                hint="values set there are unknown to batchspec",
                where=where if note.line is None else f"{where}:{note.line}",
            )
        )
    return reading


def program(call: Call) -> Reading | None:
    """A launch of a Megatron program (``pretrain_*.py``, or one given Megatron's batch or
    parallel flags): its flags, and the DeepSpeed JSON the script writes for it."""
    if not _is_megatron(call.split):
        return None
    reading = Reading(call.path, NAME, call.text)
    words = [call.split.program, *call.arguments]
    _read_words(reading, words, call.script, call)
    reading.opaque = _opaque(words)
    return reading


#: A program name that is Megatron's (``pretrain_gpt.py``, ``pretrain_t5.py``...).
PROGRAM = re.compile(r"pretrain_\w*\.py")


def _is_megatron(split: launchers.Split) -> bool:
    """Whether a command runs Megatron: a ``pretrain_*.py`` program, Megatron's own flags (as
    upstream spells them) among its arguments, or a fork's spelling of its global batch or
    model-parallel flags (``--micro_batch_size`` alone is other programs' too)."""
    if PROGRAM.fullmatch(split.name.rsplit("/", 1)[-1]):
        return True
    known = set(FLAGS) | {"--rampup-batch-size", "--yaml-cfg"}
    given = {(w.text or _known_start(w)).split("=")[0] for w in split.arguments}
    return bool(given & known) or bool({_upstream(f) for f in given} & FORK_MARKS)


#: Flags that, spelt the fork's way, mark a Megatron fork.
FORK_MARKS = {
    "--global-batch-size",
    "--tensor-model-parallel-size",
    "--pipeline-model-parallel-size",
}


def _read_words(
    reading: Reading, words: list[bash.Word], script: bash.Script, call: Call | None = None
) -> None:
    """Megatron's flags among ``words`` into ``reading``, with the typos, ``--yaml-cfg`` and
    the DeepSpeed JSON the script writes."""
    wanted = set(FLAGS) | OTHER_FLAGS | MEMORY_FLAGS
    flags_seen: dict[str, int | None] = {}
    args = list(flags.scan(words, SWITCH_NAMES))
    for n, arg in enumerate(args):
        if arg.kind != "flag" or arg.name is None:
            continue
        word = arg.word
        flag = _fork_spelling(reading, "--" + arg.name, word.line, wanted)
        flags_seen.setdefault(flag, word.line)
        if flag == "--rampup-batch-size":  # three numbers: start, increment, samples
            numbers = [w for a in args[n : n + 3] for w in a.stood][1:4]
            reading.values[flag] = Value(" ".join(w.text or "?" for w in numbers), word.line)
        elif flag in SWITCHES:
            reading.values[flag] = Value(True, word.line)
        elif flag in wanted and arg.value is not None:
            value = arg.value
            if len(arg.stood) == 1 and value.text is not None:  # --flag=V: read, no span
                value = bash.Word(value.text, word.line)
            reading.values[flag] = Value.of_word(value)
    reading.findings += typo_findings(
        flags_seen,
        list(FLAGS),
        LOOKALIKES | OTHER_FLAGS | MEMORY_FLAGS | MEMORY_SWITCHES,
        reading.path,
        "so Megatron-LM stops at start (argparse: unrecognized arguments)",
        cutoff=0.9,
    )  # programs add flags of their own (--total-seq-length): only near misses
    _yaml_config(reading, words)
    _read_deepspeed(reading, script, words, call)


#: What a Megatron-DeepSpeed job takes from its DeepSpeed JSON: the batch keys, and the ZeRO
#: stage for the memory estimate.
DEEPSPEED_KEYS = [*deepspeed.BATCH_KEYS, "zero_optimization.stage"]


def _read_deepspeed(
    reading: Reading, script: bash.Script, words: list[bash.Word], call: Call | None = None
) -> None:
    """The DeepSpeed JSON that ``--deepspeed_config`` names: written by the script itself
    (``cat <<EOT > $config_json``, Megatron-DeepSpeed's examples), its batch keys join the
    reading at the spans of the literals they come from; else the file, where the job runs
    (``call``'s folders), its values marked as that file's."""
    found = _flag_argument(words, ("--deepspeed_config", "--deepspeed-config"))
    if found is None:
        return
    word, name = found
    docs = [d for d in script.heredocs if name is None or d.target.text in (None, name)]
    if not docs:
        _deepspeed_file(reading, word.line, name, call)
        return
    doc = docs[-1]
    text, table = "", []
    for piece in doc.pieces:
        table.append((len(text), piece))
        text += "null" if piece.text is None else piece.text
    try:
        ds = deepspeed.read(text, f"{reading.path}:{doc.line} (heredoc)")
    except InputError as exc:
        reading.notes.append(
            Note(doc.line, f"the DeepSpeed JSON written here does not read ({exc})")
        )
        return
    for key in DEEPSPEED_KEYS:
        if key in ds.values:
            v = ds.values[key]
            reading.values[key] = Value(
                v.value, doc.line + (v.line or 0), _file_span(table, v.span)
            )
    reading.findings += [f for f in ds.findings if f.severity != "info"]


def _deepspeed_file(reading: Reading, line: int, name: str | None, call: Call | None) -> None:
    """``--deepspeed_config FILE`` that the script does not write: read where the job runs."""
    from translator.plugin.findings import not_found
    from translator.words.files import read_text

    if name is None or call is None:
        why = "is not known" if name is None else "is not written by the script"
        reading.notes.append(
            Note(line, f"the DeepSpeed JSON {name or ''} {why}, so it is not read")
        )
        return
    path, looked = call.locate(name)
    if path is None:
        reading.findings.append(
            not_found(f"the DeepSpeed JSON {name}", looked, f"{reading.path}:{line}")
        )
        return
    try:
        ds = deepspeed.read(read_text(path), str(path))
    except InputError as exc:
        reading.notes.append(Note(line, f"the DeepSpeed JSON {name} does not read ({exc})"))
        return
    for key in DEEPSPEED_KEYS:
        if key in ds.values:
            v = ds.values[key]
            reading.values[key] = Value(v.value, v.line, None, v.why_unknown, str(path))
    reading.findings += [f for f in ds.findings if f.severity != "info"]


def _file_span(table: list, span):
    """The file span of ``span`` in an expanded heredoc, when it lies in one literal."""
    if span is None:
        return None
    for at, piece in table:
        if (
            piece.span
            and piece.text is not None
            and at <= span[0]
            and span[1] <= at + len(piece.text)
        ):
            return piece.span[0] + span[0] - at, piece.span[0] + span[1] - at
    return None


def _fork_spelling(reading: Reading, flag: str, line: int, wanted: set[str]) -> str:
    """``--micro_batch_size``, as forks spell Megatron's flags, read as ``--micro-batch-size``
    (with a note); upstream Megatron-LM would refuse it."""
    if "_" not in flag:
        return flag
    upstream = _upstream(flag)
    if upstream not in wanted | SWITCHES | {"--rampup-batch-size"}:
        return flag
    if not any(f.code == "megatron-fork-flag" for f in reading.findings):
        reading.findings.append(
            finding(
                "megatron-fork-flag",
                f"{flag} is spelt the way some Megatron forks spell their flags, and is read as "
                f"{upstream}; upstream Megatron-LM refuses it (unrecognized arguments)",
                hint=f"write {upstream} if this runs upstream Megatron-LM",
                where=f"{reading.path}:{line}",
            )
        )
    return upstream


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
        if v.value is None:
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
    if layers % pp or _flags(reading) & STAGE_LAYER_FLAGS:
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


# How the model splits ----------------------------------------------------------------------------

#: Flags that set the layers of each pipeline stage themselves (uneven pipeline parallelism).
STAGE_LAYER_FLAGS = {
    "--decoder-first-pipeline-num-layers",
    "--decoder-last-pipeline-num-layers",
    "--pipeline-model-parallel-layout",
}
#: Flags that count the embedding or the loss as one more layer of the pipeline split.
PIPELINE_SLOT_FLAGS = {
    "--account-for-embedding-in-pipeline-split",
    "--account-for-loss-in-pipeline-split",
}


def _flags(reading: Reading) -> set[str]:
    """The flags among the program's arguments (a job's reading; none for a snippet)."""
    return {(w.text or _known_start(w)).split("=")[0] for w in reading.arguments}


def split_rules(reading: Reading, values: dict) -> SplitRules:
    """megatron-core's: ``TransformerConfig`` refuses attention heads that the tensor-parallel
    size does not divide, and query groups it neither divides nor is a multiple of;
    ``get_num_layers_to_build`` asserts the layers (with an embedding or loss slot counted)
    divide by the pipeline stages and each stage's layers by the virtual stages, unless the
    job sets the first and last stages' layers. Megatron-DeepSpeed (``--deepspeed``, or its
    ``--num-key-value-heads``) divides the key/value heads by the tensor-parallel size
    (``core.utils.divide``), and its DeepSpeed pipeline balances the layers over the stages,
    unevenly where they do not divide (``--no-pipeline-parallel`` turns it off)."""
    flags = _flags(reading)
    fork = bool(flags & {"--deepspeed", "--num-key-value-heads"})
    pipeline: Literal["even", "uneven", "given"] = "even"
    if flags & STAGE_LAYER_FLAGS:
        pipeline = "given"
    elif "--deepspeed" in flags and "--no-pipeline-parallel" not in flags:
        pipeline = "uneven"
    return SplitRules(
        "Megatron-DeepSpeed" if fork else "megatron-core",
        heads="divide",
        kv_heads="divide" if fork else "divide-or-multiple",
        pipeline=pipeline,
        pipeline_extra=len(flags & PIPELINE_SLOT_FLAGS),
        uneven_fix=None
        if fork
        else "give the first and last stages their own layers with "
        "--decoder-first-pipeline-num-layers and --decoder-last-pipeline-num-layers",
        tensor_at=_at(reading, "--tensor-model-parallel-size"),
        pipeline_at=_at(reading, "--pipeline-model-parallel-size"),
    )


def _at(reading: Reading, key: str) -> str | None:
    """Where the reading sets ``key``, when it does."""
    return reading.where(key) if key in reading.values else None


# The memory estimate's settings ---------------------------------------------------------------

#: ``--data-parallel-sharding-strategy`` of Megatron FSDP -> the ZeRO stage it shards as
#: (Megatron-LM's default is ``optim_grads_params``).
FSDP_STAGES = {"no_shard": 0, "optim": 1, "optim_grads": 2, "optim_grads_params": 3}


def memory_settings(reading: Reading) -> Settings:
    """What Megatron's flags say about memory: the ZeRO stage its distributed optimizer or FSDP
    shards as, the optimizer's CPU offload, sequence parallelism and recomputation."""
    given, unused = [], []

    def at(flag: str) -> str:
        return f"{reading.where(flag)} {flag}"

    def value(flag: str) -> object:
        v = reading.values.get(flag)
        if v is not None and v.value is None:
            why = v.why_unknown or "not known"
            unused.append(f"{at(flag)} is {why}, unknown until the script runs")
        return None if v is None else v.value

    strategy = FSDP_STAGES.get(
        str(value("--data-parallel-sharding-strategy") or "optim_grads_params")
    )
    deepspeed_stage = value("zero_optimization.stage")  # a Megatron-DeepSpeed job's JSON
    if value("--use-megatron-fsdp") and strategy is not None:
        given.append(Setting("zero_stage", strategy, at("--use-megatron-fsdp")))
    elif value("--use-torch-fsdp2"):
        stage = 2 if value("--torch-fsdp2-no-reshard-after-forward") else 3
        given.append(Setting("zero_stage", stage, at("--use-torch-fsdp2")))
    elif value("--use-distributed-optimizer"):
        # megatron-core's DistributedOptimizer shards the fp32 main weights and Adam states
        # over DP; every rank keeps the whole gradient buffer: ZeRO 1.
        given.append(Setting("zero_stage", 1, at("--use-distributed-optimizer")))
    elif type(deepspeed_stage) is int and deepspeed_stage in (0, 1, 2, 3):
        given.append(Setting("zero_stage", deepspeed_stage, at("zero_optimization.stage")))
    instances = value("--num-distributed-optimizer-instances")
    if isinstance(instances, int) and instances > 1:
        unused.append(
            f"{at('--num-distributed-optimizer-instances')} {instances}: the optimizer is "
            "sharded over DP / instances, and the estimate divides by DP"
        )
    if value("--optimizer-cpu-offload"):
        fraction = value("--optimizer-offload-fraction")
        if fraction in (None, 1, "1", "1.0"):
            given.append(
                Setting("offload", frozenset({"optimizer"}), at("--optimizer-cpu-offload"))
            )
        else:
            unused.append(
                f"{at('--optimizer-offload-fraction')} {fraction}: part of the optimizer is "
                "offloaded, which the estimate does not count"
            )
    if value("--bf16") and value("--grad-reduce-in-bf16"):
        # megatron-core's gradient buffer takes the weights' dtype unless grad_reduce_in_fp32
        given.append(Setting("gradient_bytes", 2, at("--grad-reduce-in-bf16")))
    for flag in ("--fp8-format", "--fp8-param-gather"):
        if value(flag) is not None:
            unused.append(f"{at(flag)}: FP8 is not counted, the estimate takes bf16 weights")
            break
    if value("--sequence-parallel"):
        given.append(Setting("sequence_parallel", True, at("--sequence-parallel")))
    _recompute(value, at, given, unused)
    return Settings(tuple(given), tuple(unused))


def _recompute(value, at, given: list, unused: list) -> None:
    """``--recompute-activations`` (selective) or ``--recompute-granularity``, and the
    ``--recompute-method`` / ``--recompute-num-layers`` that the estimate cannot follow."""
    granularity = value("--recompute-granularity")
    if granularity in ("full", "selective"):
        given.append(Setting("recompute", granularity, at("--recompute-granularity")))
    elif value("--recompute-activations"):
        given.append(Setting("recompute", "selective", at("--recompute-activations")))
    method, layers = value("--recompute-method"), value("--recompute-num-layers")
    if granularity == "full" and (method, layers) != ("uniform", 1) and method is not None:
        unused.append(
            f"{at('--recompute-method')} {method} with --recompute-num-layers {layers}: the "
            "estimate counts full recomputation of every layer on its own (uniform, 1)"
        )


# The plugin contract's other parts -------------------------------------------------------------


def claims(text: str) -> bool:
    return BATCH_MARK.search(text) is not None or "torchrun" in text


def holds_batch(text: str) -> bool:
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
