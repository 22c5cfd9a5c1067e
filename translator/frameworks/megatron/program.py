"""Megatron-LM's launch read: its flags from a launch script, an argument file or a snippet of
flags (variables, arrays, arithmetic, the torchrun line) without running them; from a job's
launch command (:func:`program`), the flags of a Megatron program and the DeepSpeed JSON a
Megatron-DeepSpeed script writes or names. What they mean for the batch is :mod:`.rules`'."""

from __future__ import annotations

import re

from translator import shell as bash
from translator.frameworks.deepspeed import config_json as deepspeed
from translator.frameworks.megatron.rules import (
    DEFAULTED,
    FLAGS,
    LOOKALIKES,
    MEMORY_FLAGS,
    MEMORY_SWITCHES,
    NAME,
    OTHER_FLAGS,
    SWITCH_NAMES,
    SWITCHES,
)
from translator.frameworks.shared import flags
from translator.reading import Call, Note, Reading, Value, typo_findings
from translator.shell import launchers
from translator.shell.uses import uses_of
from translator.words.errors import InputError
from translator.words.findings import finding


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
    """Whether a word after ``before`` is that flag's value (``--flag VALUE``)."""
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
    given = {flags.flag_of(w) for w in split.arguments}
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
        elif flag in FLAGS and arg.value is None:
            _without_value(reading, flag, word, args[n + 1].word if n + 1 < len(args) else None)
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


def _without_value(reading: Reading, flag: str, word: bash.Word, following) -> None:
    """A batch or parallel flag given no value (the next word is another flag, or none):
    Megatron-LM's argparse stops at start, so the value is no default but an error."""
    after = (
        f"the next word is {following.text}"
        if following is not None and following.text
        else "none follows"
    )
    reading.findings.append(
        finding(
            "invalid-value",
            f"{flag} has no value ({after}): Megatron-LM's argparse stops at start "
            "(expected one argument)",
            hint=f"give {flag} its number",
            where=f"{reading.path}:{word.line}",
        )
    )
    reading.values[flag] = Value(None, word.line, why_unknown="given without a value")


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
    from translator.plugin.job_files import read_job_file

    if name is None or call is None:
        why = "is not known" if name is None else "is not written by the script"
        reading.notes.append(
            Note(line, f"the DeepSpeed JSON {name or ''} {why}, so it is not read")
        )
        return
    opened = read_job_file(
        reading,
        name,
        call.locate(name),
        deepspeed.read,
        kind="the DeepSpeed JSON",
        reads_as="a DeepSpeed JSON",
        where=f"{reading.path}:{line}",
    )
    if isinstance(opened, str):
        return
    path, ds = opened
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
