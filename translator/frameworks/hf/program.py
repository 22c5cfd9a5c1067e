"""A Hugging Face Trainer program in a launch script: a program given TrainingArguments flags
(``train.py --per_device_train_batch_size 4 --deepspeed ds.json``; one that names the batch,
DeepSpeed or the output folder, or two others), one whose single argument
is a TrainingArguments JSON or YAML, and the ``trl`` command-line tool (``trl sft --config
x.yaml --flag v``).

Its arguments are read as ``HfArgumentParser`` (argparse) reads them: ``--flag value`` or
``--flag=value``, the dashed spelling too, the last occurrence winning; a single ``.json``
/``.yaml`` argument is the whole arguments file; TRL's ``--config`` file gives defaults that
the flags override. A batch flag the script does not pass takes the program's own default,
which the script cannot show, so it is unknown; only the ``trl`` tool has documented defaults
(its configs keep the TrainingArguments ones). The world is the launcher's, except under plain
``python``: one process, on which the Trainer runs DataParallel over every visible GPU.
"""

from __future__ import annotations

from dataclasses import dataclass

from translator.frameworks.deepspeed import config_json as deepspeed_json
from translator.frameworks.hf import source
from translator.frameworks.shared import hf_deepspeed, hf_trainer
from translator.frameworks.shared.flags import scan
from translator.job.detection import detect
from translator.plugin.job_files import read_job_file
from translator.reading import Call, Launch, Note, Reading, Source, Value
from translator.shell.values import Word
from translator.words.errors import InputError
from translator.words.files import read_text
from translator.words.findings import Finding, finding

#: TrainingArguments flags that mark a program as the Trainer's (its arguments' dataclass).
MARKS = {
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "deepspeed",
    "auto_find_batch_size",
    "num_train_epochs",
    "max_steps",
    "output_dir",
    "do_train",
    "lr_scheduler_type",
    "warmup_ratio",
    "save_strategy",
    "evaluation_strategy",
    "eval_strategy",
    "logging_steps",
    "gradient_checkpointing",
    "report_to",
}
#: The marks that alone make a program a Trainer's: its batch, DeepSpeed, its output folder.
CLAIMS = {
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "deepspeed",
    "auto_find_batch_size",
    "output_dir",
}
#: The batch flags: a missing one is the program's own default (unknown).
BATCH = ("per_device_train_batch_size", "gradient_accumulation_steps")
#: Flags read beside the batch ones (as the TrainingArguments YAML reader reads them).
READ = (*BATCH, "auto_find_batch_size", "deepspeed", *hf_trainer.SEQUENCE_KEYS)
#: The command-line tool whose defaults are documented.
TOOLS = ("trl",)
#: The ``trl`` commands that train (trl's ``TrainingCommand``s); ``vllm-serve`` serves.
TRAINING_COMMANDS = ("dpo", "grpo", "kto", "reward", "rloo", "sft")
#: Spec field each batch flag sets (for the sources list).
FIELDS = {
    "per_device_train_batch_size": "micro_batch_size",
    "gradient_accumulation_steps": "gradient_accumulation_steps",
}


@dataclass(frozen=True)
class ArgumentFlag:
    """One ``--key value`` of the program's arguments."""

    key: str
    """The TrainingArguments field (``per_device_train_batch_size``)."""
    word: Word
    """The flag's own word."""
    value: Word | None
    """Its value; ``None`` for a bare switch (``--bf16``)."""


def program(call: Call) -> Reading | None:
    """The Trainer's arguments from one launch command, or ``None`` when it runs no Trainer."""
    tool = call.program.rsplit("/", 1)[-1] in TOOLS
    said = call.arguments[0].text if call.arguments else ""
    if tool and said is not None and said not in TRAINING_COMMANDS:
        return None  # trl vllm-serve, env, skills: no training
    arguments = call.arguments[1:] if tool and call.arguments else call.arguments
    flags, positional, opaque = _parse(arguments)
    named = _arguments_file(flags, positional, tool) or _named_arguments(call, flags, positional)
    built = None if tool or named is not None else _source(call)
    if not tool and named is None and not _trainer_flags(flags) and built is None:
        return None
    reading = Reading(call.path, hf_trainer.NAME, call.text)
    reading.opaque = opaque
    if named is not None:
        if not _read_file(reading, call, named) and not tool and not flags:
            return None
    for flag in flags:  # argparse: the last occurrence wins
        if flag.key in READ or flag.key in hf_trainer.MEMORY_KEYS:
            _set(reading, flag, call)
        elif flag.value is not None and flag.value.absent:
            reading.findings.append(_empty_value(flag, call.path))
    if built is not None:
        _from_source(reading, call, built, flags)
    _missing_batch(reading, call, tool)
    _deepspeed(reading, call)
    _world(reading, call, tool, built)
    return reading


def _source(call: Call) -> source.Program | None:
    """How a program whose source is here and builds TrainingArguments sets its batch (see
    :mod:`translator.frameworks.hf.source`)."""
    if not call.program.endswith(".py"):
        return None
    found, _ = call.locate(call.program)
    if found is None:
        return None
    try:
        text = read_text(found)
    except InputError:
        return None
    return source.read(text, str(found))


def _from_source(reading: Reading, call: Call, built: source.Program, flags) -> None:
    """Each batch field as the program's source sets it: its literal, else the flag or the
    environment variable it reads (the job's when the job gives it), else that one's default."""
    path = built.path
    given = {f.key: f for f in flags}
    for key, setting in built.settings.items():
        where = f"{path}:{setting.line}"
        own = setting.flag[2:].replace("-", "_") if setting.flag is not None else None
        if own is not None and own in given:
            flag = given[own]
            if flag.key != key:  # the program's own flag for it (--batch_size)
                _set(reading, ArgumentFlag(key, flag.word, flag.value), call)
            continue
        if setting.variable is not None and setting.variable in call.environment:
            word = call.environment[setting.variable]
            value = Value.of_word(word)
            where = f"{call.path}:{word.line} {setting.variable} (read by {where})"
        elif setting.value is None:
            value = Value(None, None, None, setting.why or "not known")
        else:
            value = Value(setting.value, setting.line, None, None, path)
            what = setting.flag or (f"${setting.variable}" if setting.variable else key)
            where = f"{where} {what} (the program's own)"
        reading.set_later(key, value, FIELDS.get(key), where, "the program sets it so")


def _trainer_flags(flags: list[ArgumentFlag]) -> bool:
    """Whether a program's flags are TrainingArguments': one that names the Trainer's batch,
    DeepSpeed or output folder (:data:`CLAIMS`), or two of its other fields (:data:`MARKS`). One
    such as ``--max_steps`` alone is any training script's (a custom FSDP loop takes it too)."""
    keys = {f.key for f in flags}
    return bool(keys & CLAIMS) or len(keys & MARKS) >= 2


def _parse(words: list[Word]) -> tuple[list[ArgumentFlag], list[Word], list[str]]:
    """``(flags, positional arguments, unknown words that may hold flags)``."""
    flags: list[ArgumentFlag] = []
    positional: list[Word] = []
    opaque: list[str] = []
    for arg in scan(words):
        if arg.kind == "flag" and arg.name is not None:
            flags.append(ArgumentFlag(arg.name.replace("-", "_"), arg.word, arg.value))
        elif arg.kind == "positional":
            positional.append(arg.word)
        else:
            opaque.append(f"line {arg.word.line}: {arg.word.why_unknown}")
    return flags, positional, opaque


def _arguments_file(flags: list[ArgumentFlag], positional: list[Word], tool: bool) -> Word | None:
    """The arguments file: TRL's ``--config FILE``, or the single ``.json``/``.yaml``
    argument ``HfArgumentParser`` reads instead of flags."""
    config = [f.value for f in flags if f.key == "config" and f.value is not None]
    if config and "=" not in (config[-1].text or ""):  # not fairseq2's ``--config key=value``
        return config[-1]
    if len(positional) == 1 and not flags:
        name = positional[0].text or ""
        if name.endswith((".json", ".yaml", ".yml")):
            return positional[0]
    return None


def _named_arguments(call: Call, flags: list[ArgumentFlag], positional: list[Word]) -> Word | None:
    """A JSON or YAML the program is given (``--train_args_file x.json``, a positional
    ``configs/lora.yaml``) that holds TrainingArguments' batch keys: the program builds its
    TrainingArguments from it (not the DeepSpeed JSON of ``--deepspeed``)."""
    given = [f.value for f in flags if f.key != "deepspeed" and f.value is not None]
    for word in [*given, *positional]:
        name = word.text or ""
        if not name.endswith((".json", ".yaml", ".yml")):
            continue
        found, _ = call.locate(name)
        if found is not None and hf_trainer.holds_batch(read_text(found)):
            if _trainers(str(found), read_text(found)):
                return word
    return None


def _read_file(reading: Reading, call: Call, named: Word) -> bool:
    """The arguments file's values (in that file, at their lines); whether it holds any."""
    if named.text is None:
        reading.notes.append(Note(named.line, f"the arguments file is {named.why_unknown}"))
        return True
    opened = read_job_file(
        reading,
        named.text,
        call.locate(named.text),
        lambda text, path: _trainer_arguments(call, text, path),
        kind="the arguments file",
        reads_as="TrainingArguments",
        where=f"{call.path}:{named.line}",
    )
    if isinstance(opened, str):
        return True
    found, inner = opened
    if inner is None:
        return False
    reading.take(inner.values, str(found), FIELDS)
    reading.partners += inner.partners
    reading.findings += [_as_job(f) for f in inner.findings]
    return True


def _trainer_arguments(call: Call, text: str, path: str) -> Reading | None:
    """An arguments file read as TrainingArguments; ``None`` when it is not the Trainer's."""
    if not _trainers(path, text):
        return None
    return hf_trainer.read_as(hf_trainer.NAME, text, path, _bases(call), extra=("num_processes",))


def _as_job(f: Finding) -> Finding:
    """A file the arguments file names that is not found: a warning in a job, whose folder
    batchspec may not be run from (the file alone makes it an error)."""
    if f.code != "missing-file":
        return f
    return finding(
        "job-file-not-found",
        f"{f.message}; the values it would set are unknown",
        hint="run batchspec from the folder the job runs in, or give --run-dir",
        where=f.where,
    )


def _trainers(path: str, text: str) -> bool:
    """Whether a YAML or JSON is TrainingArguments: the Trainer's keys, and no framework
    asked before the Trainer claims it (an Axolotl or LLaMA-Factory YAML holds such keys too)."""
    if not hf_trainer.claims(text) and not hf_trainer.holds_batch(text):
        return False
    try:
        return detect(path, text).name == hf_trainer.NAME
    except InputError:
        return True


def _bases(call: Call) -> list:
    """Where a path the arguments file names is looked for: where the job runs."""
    return list(call.folders[:1])


def _set(reading: Reading, flag: ArgumentFlag, call: Call) -> None:
    """One flag's value, over the arguments file's and any earlier occurrence."""
    value = flag.value
    if value is None:
        parsed = Value(True, flag.word.line)
    elif value.text is None:
        why = value.why_unknown or "not known"
        parsed = Value(None, value.line, None, why)
    else:
        parsed = Value(_literal(value.text), value.line, value.span)
    reading.set_later(
        flag.key,
        parsed,
        FIELDS.get(flag.key),
        f"{call.path}:{flag.word.line} --{flag.key}",
        "a flag overrides the arguments file (TrlParser)",
        "the last occurrence of a flag wins (argparse)",
    )


def _empty_value(flag: ArgumentFlag, path: str) -> Finding:
    """A flag whose value is a variable nothing sets: as run it is empty, and argparse stops
    (``expected one argument``) unless the environment sets it."""
    assert flag.value is not None
    return finding(
        "hf-flag-value-unset",
        f"--{flag.key} takes {flag.value.why_unknown}: read as run it is empty, so argparse "
        f"stops (argument --{flag.key}: expected one argument) unless the environment sets it",
        hint="set the variable in the script, or give it with --env NAME=VALUE",
        where=f"{path}:{flag.word.line}",
    )


def _literal(text: str) -> object:
    """A flag's text as argparse would convert it for the fields batchspec reads."""
    if text.isascii() and text.lstrip("-").isdigit():
        return int(text)
    if text in ("True", "true"):
        return True
    if text in ("False", "false"):
        return False
    return text


def _missing_batch(reading: Reading, call: Call, tool: bool) -> None:
    """A batch flag the job does not give is the program's own default: unknown, unless the
    program is the ``trl`` tool (the TrainingArguments default) or an unknown word may hold
    it (then unknown either way)."""
    for key in BATCH:
        if key in reading.values:
            continue
        if reading.opaque:
            why = f"not given, and {reading.opaque[0]} may hold it"
        elif tool:
            continue
        else:
            why = f"not given: {call.program}'s own default, which the job does not show"
        reading.values[key] = Value(None, None, None, why)  # no line: nothing stands there


def _deepspeed(reading: Reading, call: Call) -> None:
    """The DeepSpeed JSON of ``--deepspeed`` (or of ``accelerate launch
    --deepspeed_config_file``), read as a partner the Trainer fills and checks."""
    if reading.partners:
        return
    v = reading.values.get("deepspeed")
    name = v.value if v is not None and not v.file else None
    line = v.line if v is not None else call.line
    if name is None:
        option = call.sizes.options.get("--deepspeed_config_file")
        name = option.text if option is not None else None
        line = option.line if option is not None else line
    if not isinstance(name, str) or name.lstrip().startswith("{"):
        return  # none, or a JSON string (its values are not read)
    hf_deepspeed.read_located(reading, call, name, f"{call.path}:{line}")


def _world(reading: Reading, call: Call, tool: bool, built: source.Program | None) -> None:
    """Plain ``python``: one process; without DeepSpeed the Trainer runs DataParallel over the
    visible GPUs, so the batch counts each of them, unless the program spreads its model
    over them (``device_map``: then it may run none). The ``trl`` tool starts ``accelerate
    launch``, sized by its ``--num_processes`` (or its config's ``num_processes``)."""
    if tool:
        _tool_world(reading, call)
        return
    if call.sizes.launcher != "python":
        return
    if "deepspeed" in reading.values or reading.partners:
        reading.world_size = 1  # DeepSpeed makes its own one-process group
        return
    count, why = call.sizes.visible_count()
    if count is not None and count > 1 and built is not None and built.device_map is not None:
        count, why = (
            None,
            (
                f"{built.path}:{built.device_map} places the model with device_map: spread over "
                "the GPUs, the Trainer runs no DataParallel, on one it runs it over all"
            ),
        )
    if count is None:
        reading.world_unknown = Note(
            call.line,
            "python starts one process and the HF Trainer runs DataParallel over every visible "
            f"GPU, and {why}",
        )
        return
    reading.world_size = count
    reading.sources.append(
        Source("world_size", count, f"{call.path}:{call.line} {call.sizes.visible_key}")
    )
    if count > 1:
        reading.findings.append(
            finding(
                "hf-dataparallel",
                f"python starts one process and the HF Trainer runs DataParallel over the {count} "
                f"GPUs {call.sizes.visible_key} gives: each step takes per-device × "
                f"{count} × accumulation samples",
                hint="launch with torchrun or accelerate launch for one process per GPU",
                where=f"{call.path}:{call.line}",
            )
        )


def _tool_world(reading: Reading, call: Call) -> None:
    """``trl sft ... --num_processes N`` (or ``num_processes`` in its ``--config`` YAML): the
    options TRL hands to ``accelerate launch``."""
    flags, _, _ = _parse(call.arguments[1:])
    processes = [f.value.text for f in flags if f.key == "num_processes" and f.value is not None]
    if processes and processes[-1] is not None and processes[-1].isdigit():
        reading.world_size = int(processes[-1])
        return
    v = reading.values.get("num_processes")
    if v is not None and v.count:
        reading.world_size = v.count
        return
    reading.world_unknown = Note(
        call.line,
        "trl starts accelerate launch, and without --num_processes it takes the number of "
        "processes from accelerate's default config, which the job does not show",
    )


def job_config(reading: Reading) -> str:
    """The TrainingArguments a job's flags and arguments file give, as the YAML the engine
    runs (values the job leaves unknown are left out: the engine would refuse them)."""
    import yaml

    given = {k: v.value for k, v in reading.values.items() if k in READ and v.value is not None}
    partners, _ = hf_deepspeed.of_launch(reading, reading.launch or Launch())
    unknown = [k for k in BATCH if k in reading.values and k not in given]
    given |= hf_deepspeed.fixed_by(reading, partners, unknown).counts
    if "deepspeed" not in given and hf_deepspeed.partner_files(reading):
        given["deepspeed"] = deepspeed_json.FILENAME  # the one its launcher hands it
    return yaml.safe_dump(given, sort_keys=False)
