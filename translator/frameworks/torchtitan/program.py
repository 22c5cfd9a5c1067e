"""A torchtitan training launch in a job: ``torchrun ... -m torchtitan.train`` (or an
experiment's ``torchtitan.experiments.<x>.train``, or ``torchtitan/train.py``) with its
arguments, as torchtitan's ConfigManager takes them:

- ``--job.config_file x.toml`` (≤ 0.2.2): the TOML job file, then the flags on top;
- ``--module llama3 --config llama3_8b`` (0.3.0 and later): a Python config function, then
  the flags on top; what the function sets is Python, not read, so a key the flags do not give
  stays unknown;
- ``--section.key value`` / ``--section.key=value`` (dashes or underscores): the last one wins.
"""

from __future__ import annotations

import re

from translator.frameworks.shared import flags
from translator.frameworks.torchtitan import keys, rules
from translator.frameworks.torchtitan.generation import TOML_FLAG
from translator.plugin.job_files import read_job_file
from translator.reading import Call, Reading, Source, Value
from translator.shell.values import Word
from translator.words.findings import finding

#: A program that is torchtitan's trainer.
PROGRAM = re.compile(r"torchtitan(\.\w+)*\.train|(.*/)?torchtitan/(\w+/)*train\.py")
#: The spec field of each batch key whose sources a job lists.
SOURCES = {
    "training.local_batch_size": "micro_batch_size",
    "training.global_batch_size": "global_batch_size",
}


def program(call: Call) -> Reading | None:
    """torchtitan's training from one launch command, or ``None`` when it runs none."""
    if not PROGRAM.fullmatch(call.program) and not _names_toml(call.arguments):
        return None
    given = _flags(call.arguments)
    reading = Reading(call.path, rules.NAME, call.text)
    toml = given.pop(TOML_FLAG, None)
    config = given.get("config")
    if toml is not None:
        _toml(reading, call, toml)
    seen = {}
    for key, (flag, value) in given.items():
        seen[key] = flag.line
        if key in keys.DEFAULTS:
            before = reading.values.get(key)
            reading.values[key] = value
            if key in SOURCES and before is not None:
                reading.sources.append(
                    Source(SOURCES[key], before.value, reading.where(key), False, "a flag wins")
                )
            if key in SOURCES:
                reading.sources.append(
                    Source(SOURCES[key], value.value, f"{call.path}:{flag.line} --{key}")
                )
        elif key in ("module", "config", *keys.MODEL):
            reading.values[key] = value
    reading.findings += rules.typo(
        {k: line for k, line in seen.items() if k.split(".")[0] in ("training", "parallelism")},
        call.path,
    )
    reading.opaque = _opaque(call.arguments)
    why = None
    if reading.opaque:
        why = f"not given, and {reading.opaque[0]} may give it"
    elif toml is None:
        named = None if config is None else config[1]
        shown = "" if named is None else f" {named.value or named.why_unknown}"
        why = f"set by the --config{shown} function (Python, not read)"
        if set(unknown_keys(reading)) - set(reading.values) - _PIECES:
            reading.findings.append(
                finding(
                    "torchtitan-config-function",
                    f"the --config{shown} function sets every key the flags do not give; it is "
                    "Python, which batchspec does not run",
                    hint="give the batch keys and the parallelism degrees as flags (batchspec "
                    "render --to torchtitan writes them all)",
                    where=f"{call.path}:{call.line}",
                )
            )
    if why is not None:
        for key in unknown_keys(reading):
            reading.values.setdefault(key, Value(None, call.line, None, why))
    return reading


#: Keys whose value a rendered launch may leave to the config function (the sequence length,
#: and the pipeline split when there is no pipeline).
_PIECES = {
    "training.seq_len",
    "training.max_context_length",
    "parallelism.pipeline_parallel_microbatch_size",
    "parallelism.num_pp_microbatches",
    "parallelism.expert_parallel_degree",
}


def unknown_keys(reading: Reading) -> dict:
    """The keys a value not seen may set: the degrees, and the batch keys of the generation the
    given keys are (the installed torchtitan's when none is given)."""
    given = [k for k in reading.values if k in keys.SAMPLES or k in keys.TOKENS]
    found = keys.installed()
    if given:
        tokens = keys.generation_of(given) == "tokens"
    else:
        tokens = found is not None and found[1] == "tokens"
    return (keys.TOKENS if tokens else keys.SAMPLES) | keys.DEGREES


def _flags(words: list[Word]) -> dict[str, tuple[Word, Value]]:
    """``--section.key`` flags -> (the flag's word, its value), the last one winning; a flag
    whose own word is not known (``--x=$Y``) is left to :func:`_opaque`."""
    out: dict[str, tuple[Word, Value]] = {}
    for arg in flags.scan(words):
        if arg.kind != "flag" or arg.word.text is None or arg.name is None:
            continue
        key = _key(arg.name)
        if arg.value is None:
            value = Value(True, arg.word.line)
        else:
            read = Value.of_word(arg.value)
            value = Value(_parse(read.value), read.line, read.span, read.why_unknown)
        out.pop(key, None)
        out[key] = (arg.word, value)
    return out


def _names_toml(words: list[Word]) -> bool:
    """Whether the words give torchtitan's TOML job file flag: what :func:`_flags` would find,
    without reading every flag of another program's launch."""
    for word in words:
        text = word.text
        if text is not None and text.startswith("--"):
            if _key(text[2:].split("=", 1)[0]) == TOML_FLAG:
                return True
    return False


def _key(name: str) -> str:
    """The config key a ``--section.key`` flag's name sets (dashes as underscores, aliases
    resolved)."""
    key = name.replace("-", "_")
    return keys.ALIASES.get(key, key)


def _parse(value: object) -> object:
    """A flag's text as tyro takes it: an int, a bool, else the text."""
    if isinstance(value, str):
        if re.fullmatch(r"-?\d+", value):
            return int(value)
        if value in ("True", "False", "true", "false"):
            return value.lower() == "true"
    return value


def _opaque(words: list[Word]) -> list[str]:
    """Unknown words that may hold flags of their own (``$EXTRA_ARGS``, ``--x=$Y``; not a
    flag's value)."""
    return [
        f"line {arg.word.line}: {arg.word.why_unknown}"
        for arg in flags.scan(words)
        if arg.word.text is None and not arg.word.absent
    ]


def _toml(reading: Reading, call: Call, named: tuple[Word, Value]) -> None:
    """The TOML job file ``--job.config_file`` names, looked for where the job runs."""
    flag, value = named
    reading.values[TOML_FLAG] = value
    where = f"{call.path}:{flag.line}"
    if not isinstance(value.value, str):
        why = f"unknown: the job file is {value.why_unknown or value.value}"
    else:
        opened = read_job_file(
            reading,
            value.value,
            call.locate(value.value),
            rules.read_toml,
            kind="the torchtitan job file",
            reads_as="TOML",
            where=where,
        )
        if not isinstance(opened, str):
            found, inner = opened
            reading.take(inner.values, str(found), SOURCES)
            reading.findings += inner.findings
            return
        why = opened
    for key in keys.SAMPLES | keys.DEGREES:
        reading.values[key] = Value(None, flag.line, None, why)
