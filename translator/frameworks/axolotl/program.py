"""An Axolotl training launch in a job: the ``axolotl train`` tool and the module it starts.

- ``axolotl train x.yml [--key value ...] [--launcher accelerate|torchrun|python] [-- ARGS]``:
  a click command. Its options are Axolotl's config keys spelt with dashes
  (``--micro-batch-size``); any other option (``--micro_batch_size``, ``--num_processes``) and
  every word after ``--`` is handed to the launcher. It then runs ``accelerate launch ARGS -m
  axolotl.cli.train x.yml --key=value`` (its default), ``torchrun ARGS -m ...``, the training
  in its own process (``--launcher python``), or Ray's workers (``--use-ray``).
- ``accelerate launch [flags] -m axolotl.cli.train x.yml [--key value]`` (also under
  ``torchrun``, ``deepspeed`` or ``python -m``): a Fire command, dashes or underscores alike;
  the world is the launcher's.

The YAML is read with Axolotl's reader (its values carry ``file=``). The overrides are applied
on top as Axolotl's ``load_cfg`` applies them: they win (both sources are listed, the YAML's
marked not used), an override of a key the YAML lacks is dropped when the YAML says ``strict:
true``, and a text value is cast to the type of the YAML's value. The DeepSpeed JSON the
final ``deepspeed`` names is opened where the job runs (``call.locate``), as Axolotl opens it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from translator.frameworks.accelerate.launcher import LAUNCHER as ACCELERATE
from translator.frameworks.axolotl import rules
from translator.frameworks.shared import flags, hf_deepspeed
from translator.frameworks.shared.ray_world import ray_world
from translator.job.script import launcher_config
from translator.plugin.job_files import read_job_file
from translator.plugin.registry import launchers as known_launchers
from translator.reading import Call, Note, Reading, Source, Value
from translator.shell import launchers
from translator.shell.values import Word
from translator.words.files import read_text
from translator.words.findings import finding

#: The module every launch of Axolotl's training runs.
MODULE = "axolotl.cli.train"
#: Axolotl's command-line tool.
TOOLS = ("axolotl",)
#: The entry point of Axolotl before its CLI (``accelerate launch scripts/finetune.py x.yml``).
LEGACY = "finetune.py"
#: Ray's keys (``axolotl train --use-ray``).
RAY = ("use_ray", "ray_num_workers")
#: The keys read from the YAML and its overrides (the reader's, and Ray's).
READ = (*rules.KEYS, *rules.OTHER_KEYS, *RAY)
#: ``axolotl train``'s switches (no value): its own, and common boolean config options (click
#: spells them ``--x/--no-x``).
SWITCHES = frozenset(
    {
        *("use_ray", "debug", "debug_text_only", "shard"),
        *("sample_packing", "eval_sample_packing", "pad_to_sequence_len", "train_on_inputs"),
        *("flash_attention", "flex_attention", "sdp_attention", "xformers_attention"),
        *("load_in_8bit", "load_in_4bit", "strict", "group_by_length", "auto_find_batch_size"),
        "fp16",
    }
)
#: Of them, ``axolotl train``'s own (not config keys).
OWN_SWITCHES = {"use_ray", "debug", "debug_text_only", "shard"}
#: Dashed spellings of launcher flags: not Axolotl options, so click hands them to the launcher.
LAUNCHER_FLAGS = {
    flag.replace("_", "-")
    for launcher in (ACCELERATE, launchers.TORCHRUN)
    for flag in (
        *launcher.per_node,
        *launcher.nodes,
        *launcher.total,
        "--config_file",
        "--multi_gpu",
        "--main_process_port",
        "--standalone",
    )
}
#: Flags of accelerate launch that share a name with an Axolotl key.
ACCELERATE_OWN = {"gradient_accumulation_steps"}


@dataclass(frozen=True)
class CliOverride:
    """One ``--key value`` of the command line."""

    key: str
    """The config key (``micro_batch_size``)."""
    word: Word
    """The flag's own word."""
    value: Word | None
    """Its value; ``None`` for a bare switch (``--sample-packing``)."""


@dataclass
class Command:
    """The program's arguments, as Axolotl's CLI takes them."""

    config: Word | None = None
    """The YAML (the first positional argument)."""
    overrides: list[CliOverride] = field(default_factory=list)
    """The config overrides, in order."""
    launcher: str | None = None
    """``axolotl train``'s launcher (``accelerate``, ``torchrun``, ``python``); ``None`` for the
    module, which the job's own launcher starts."""
    launcher_given: bool = False
    """Whether ``--launcher`` is given (else accelerate, the default)."""
    launcher_args: list[Word] = field(default_factory=list)
    """The words ``axolotl train`` hands to its launcher."""
    handed: list[CliOverride] = field(default_factory=list)
    """Options that look like config overrides but reach the launcher (``--micro_batch_size``)."""
    ray: bool = False
    """``--use-ray``: Ray starts the training workers."""
    cloud: Word | None = None
    """``--cloud FILE``: the training runs on a cloud the job does not show."""
    opaque: list[str] = field(default_factory=list)
    """Unknown words that may hold more options."""


def program(call: Call) -> Reading | None:
    """Axolotl's training from one launch command, or ``None`` when it runs something else."""
    name = call.program.rsplit("/", 1)[-1]
    if call.split.module and call.program == MODULE:
        command = _fire(call.arguments)
    elif not call.split.module and name in TOOLS:
        if not call.arguments or call.arguments[0].text != "train":
            return None
        command = _click(call.arguments[1:])
    elif name == LEGACY and _is_axolotl_yaml(call):
        command = _fire(call.arguments)
    else:
        return None
    reading = Reading(call.path, rules.NAME, call.text)
    reading.opaque = command.opaque
    config = _read_config(reading, call, command.config)
    for override in command.overrides:
        _override(reading, call, override, config)
    for stray in command.handed:
        reading.findings.append(_handed(stray, command, reading, call))
    _unknown_defaults(reading, call, command, config)
    hf_deepspeed.read_named(reading, call)
    _world(reading, call, command)
    return reading


# The command line --------------------------------------------------------------------------


def _fire(words: list[Word]) -> Command:
    """``python -m axolotl.cli.train x.yml --key value``: Fire's reading (``--key value``,
    ``--key=value``, a bare ``--key`` is true; dashes are underscores)."""
    command = Command()
    for arg in flags.scan(words):
        if arg.kind == "flag" and arg.name is not None:
            command.overrides.append(CliOverride(arg.name.replace("-", "_"), arg.word, arg.value))
        elif arg.kind == "positional" and command.config is None and arg.word.text != "--":
            command.config = arg.word  # a lone ``--`` ends the launcher's options, it names none
        elif arg.kind == "unknown":
            command.opaque.append(f"line {arg.word.line}: {arg.word.why_unknown}")
    return command


def _click(words: list[Word]) -> Command:
    """``axolotl train x.yml ...``: click's reading. Its options are the config keys spelt with
    dashes, ``--launcher``, ``--cloud``, ``--sweep`` and a few switches; an option it does not
    have, an extra positional word and everything after ``--`` go to the launcher."""
    command = Command(launcher="accelerate")
    end = next((i for i, w in enumerate(words) if w.text == "--"), len(words))
    for arg in flags.scan(words[:end], SWITCHES):
        if arg.kind == "unknown":
            command.opaque.append(f"line {arg.word.line}: {arg.word.why_unknown}")
            command.launcher_args.append(arg.word)
        elif arg.kind == "positional":
            if command.config is None:
                command.config = arg.word
            else:
                command.launcher_args.append(arg.word)
        elif arg.name is not None:
            _click_option(command, list(arg.stood), arg.name, arg.value)
    command.launcher_args += words[end + 1 :]
    return command


def _click_option(command: Command, stood: list[Word], name: str, value: Word | None) -> None:
    """One ``--option`` of ``axolotl train`` (``stood``: its words)."""
    word, key = stood[0], name.replace("-", "_")
    if name == "launcher" and value is not None:
        command.launcher_given = True
        command.launcher = value.text if value.text is not None else value.why_unknown
    elif name == "cloud":
        command.cloud = value or word
    elif key in OWN_SWITCHES or key.removeprefix("no_") in OWN_SWITCHES:
        command.ray = command.ray or key == "use_ray"
    elif "_" in name or f"--{name}" in LAUNCHER_FLAGS:
        command.launcher_args += stood
        if "_" in name and key in READ:
            command.handed.append(CliOverride(key, word, value))
    elif name.startswith("no-") and value is None:
        command.overrides.append(CliOverride(key[3:], word, Word("false", word.line)))
    else:
        command.overrides.append(CliOverride(key, word, value))


def _handed(stray: CliOverride, command: Command, reading: Reading, call: Call):
    """The error for ``axolotl train ... --micro_batch_size 4``: not an option of click's."""
    launcher = command.launcher or "accelerate"
    dashed = "--" + stray.key.replace("_", "-")
    fate = (
        "takes it as its own flag (used only with --use_deepspeed)"
        if launcher == "accelerate" and stray.key in ACCELERATE_OWN
        else "refuses it (unrecognized arguments)"
    )
    kept = reading.values.get(stray.key)
    stands = (
        f"the YAML's {stray.key} {kept.value} trains"
        if kept is not None and kept.file
        else f"{stray.key} is not overridden"
    )
    return finding(
        "axolotl-option-to-launcher",
        f"{stray.word.text} is not an option of axolotl train (Axolotl's options are spelt with "
        f"dashes: {dashed}), so axolotl hands it to {launcher} as a launcher argument, and "
        f"{launcher} {fate}; {stands}",
        hint=f"write {dashed}",
        where=f"{call.path}:{stray.word.line}",
    )


def _is_axolotl_yaml(call: Call) -> bool:
    """Whether the program's first argument is a YAML that is Axolotl's by its content."""
    first = call.arguments[0].text if call.arguments else None
    if first is None or not first.endswith((".yml", ".yaml")):
        return False
    found, _ = call.locate(first)
    if found is None:
        return False
    text = read_text(found)
    return rules.claims(text) and rules.holds_batch(text)


# The YAML and its overrides ----------------------------------------------------------------


def _read_config(reading: Reading, call: Call, named: Word | None) -> dict | None:
    """The YAML's values (in that file, at their lines), and its mapping; ``None`` when it
    cannot be read (its batch values are then unknown)."""
    why = _unnamed(reading, call, named)
    if why is None:
        assert named is not None and named.text is not None
        opened = read_job_file(
            reading,
            named.text,
            call.locate(named.text),
            lambda text, path: rules.read_yaml(text, path, RAY),
            kind="the Axolotl config",
            reads_as="an Axolotl YAML",
            where=f"{call.path}:{named.line}",
        )
        if not isinstance(opened, str):
            found, (inner, config) = opened
            reading.take(inner.values, str(found), rules.KEYS)
            reading.findings += inner.findings
            return config
        why = opened
    line = named.line if named is not None else call.line
    for key in ("micro_batch_size", "gradient_accumulation_steps"):
        reading.values[key] = Value(None, line, None, why)
    return None


def _unnamed(reading: Reading, call: Call, named: Word | None) -> str | None:
    """Why the YAML cannot be looked for (none is named, its name is unknown, it is remote),
    with the note that says so; ``None`` when it can."""
    if named is None:
        reading.notes.append(Note(call.line, "the command names no Axolotl config"))
        return "unknown: the command names no config"
    if named.text is None:
        reading.notes.append(Note(named.line, f"the Axolotl config is {named.why_unknown}"))
        return f"unknown: the config is {named.why_unknown}"
    if named.text.startswith("https://"):
        reading.notes.append(Note(named.line, f"the remote config {named.text} is not fetched"))
        return f"unknown: the remote config {named.text} is not fetched"
    return None


def _override(reading: Reading, call: Call, override: CliOverride, config: dict | None) -> None:
    """One override over the YAML's value, as ``load_cfg`` applies it."""
    key = override.key
    if key not in READ:
        return
    flag = (override.word.text or f"--{key}").split("=", 1)[0]
    where = f"{call.path}:{override.word.line} {flag}"
    field = rules.KEYS.get(key)
    if config is not None and config.get("strict") is True and key not in config:
        if field is not None:
            why = (
                "strict: true in the YAML, and Axolotl's load_cfg drops an override of a key "
                "the YAML does not set"
            )
            given = True if override.value is None else override.value.text
            reading.sources.append(Source(field, given, where, False, why))
        return
    value = _cast(override, None if config is None else config.get(key), call.text)
    reading.set_later(
        key,
        value,
        field,
        where,
        "a command-line override wins over the YAML (Axolotl's load_cfg)",
        "the last occurrence of an option wins",
    )


def _cast(override: CliOverride, existing: object, script: str) -> Value:
    """An override's value as Axolotl casts it: to the type of the YAML's value, else as YAML
    would read it (a bare switch is true); its span when the script writes it literally."""
    word = override.value
    if word is None:
        return Value(True, override.word.line)
    if word.text is None:
        return Value(None, word.line, None, word.why_unknown or "not known")
    text = word.text
    value: object = text
    lower = text.lower()
    if isinstance(existing, bool):
        value = lower in ("true", "1", "yes")
    elif existing is None and lower in WORDS:
        value = WORDS[lower]
    elif isinstance(existing, int | float) or existing is None:
        digits = text.lstrip("+-")
        if digits.isascii() and digits.isdigit():
            value = int(text)
    return Value(value, word.line, literal_span(word, script))


#: Words YAML reads as booleans or null (Axolotl's cast of an override with no YAML value).
WORDS = {"true": True, "yes": True, "false": False, "no": False, "null": None, "none": None}


def literal_span(word: Word, script: str) -> tuple[int, int] | None:
    """Where the script writes ``word``'s text as one literal (the word's own, or the literal
    of the one variable it comes from, as in ``key=$N``), else ``None``."""
    if word.text is None:
        return None
    if word.span is not None and script[word.span[0] : word.span[1]] == word.text:
        return word.span
    tail = [s for s in word.sources if s[0] >= 0 and script[s[0] : s[1]] == word.text]
    return tail[0] if len(tail) == 1 else None


def _unknown_defaults(reading: Reading, call: Call, command: Command, config: dict | None) -> None:
    """A batch key neither the YAML nor an override sets takes Axolotl's default 1, unless an
    unknown word may hold an override of it: then it is unknown."""
    if config is None or not command.opaque:
        return
    for key in ("micro_batch_size", "gradient_accumulation_steps"):
        if key not in reading.values:
            reading.values[key] = Value(
                None, call.line, None, f"not set, and {command.opaque[0]} may set it"
            )


# The world ---------------------------------------------------------------------------------


def _world(reading: Reading, call: Call, command: Command) -> None:
    """Ray's workers, or the launcher ``axolotl train`` starts; the module's world is its
    launcher's (the job's)."""
    ray = reading.values.get("use_ray")
    if command.ray or (ray is not None and ray.value is True):
        _ray_world(reading, call, command)
        return
    if command.launcher is None:
        return
    if command.cloud is not None:
        shown = command.cloud.text or command.cloud.why_unknown
        reading.world_unknown = Note(
            call.line, f"axolotl train --cloud {shown} runs the training on a cloud machine"
        )
        return
    if command.launcher == "python":
        reading.world_size = 1
        reading.launcher = "python"
        reading.sources.append(
            Source("world_size", 1, f"{call.path}:{call.line} axolotl train --launcher python")
        )
        return
    if command.launcher not in ("accelerate", "torchrun"):
        reading.world_unknown = Note(call.line, f"axolotl train's --launcher is {command.launcher}")
        return
    _launched(reading, call, command)


def _launched(reading: Reading, call: Call, command: Command) -> None:
    """The processes of the launcher ``axolotl train`` runs, counted from the words it hands
    it as the launcher counts them."""
    name = command.launcher
    assert name is not None
    head = [Word(name, call.line)] + ([Word("launch", call.line)] if name == "accelerate" else [])
    sizes = launchers.sizes(
        head + command.launcher_args,
        call.script.variables,
        call.environment,
        known=known_launchers(),
    )
    for role, (key, word) in sizes.words.items():
        reading.values[key] = Value(
            _count(word.text), word.line, word.span if word.text else None, word.why_unknown
        )
        reading.launch_keys[role] = key
    reading.launch_counts = sizes.counts()
    reading.launcher = name
    world, why = sizes.world()
    started = f"axolotl train starts {'accelerate launch' if name == 'accelerate' else name}"
    if not command.launcher_given:
        started += " (its default launcher)"
    config = sizes.config_file
    if world is None and config is not None:
        launcher_config(reading, call, sizes, config)  # its num_processes, as accelerate reads it
        if reading.world_size is not None or reading.world_unknown is not None:
            return
    if world is None:
        reading.world_unknown = Note(call.line, f"{started}, and {why.text if why else ''}")
        return
    reading.world_size = world
    where = "; ".join(f"{call.path}:{word.line} {key}" for key, word in sizes.words.values())
    shown = where or f"{call.path}:{call.line} ({name}'s defaults)"
    reading.sources.append(Source("world_size", world, shown))


def _count(text: str | None) -> object:
    return int(text) if text is not None and text.isascii() and text.isdigit() else text


def _ray_world(reading: Reading, call: Call, command: Command) -> None:
    """Ray Train starts ``ray_num_workers`` workers (Axolotl's default 1), one process each,
    when the training runs in one process (``--use-ray``, ``--launcher python``, ``python
    -m``); under a launcher of several, each of its processes would start its own."""
    one = (
        command.ray
        or command.launcher == "python"
        or (command.launcher is None and call.sizes.launcher == "python")
    )
    if not one:
        launcher = command.launcher or call.sizes.launcher or "the launcher"
        reading.world_unknown = Note(
            call.line,
            f"use_ray is set, but {launcher} starts the training (axolotl train is given no "
            "--use-ray), and each of its processes would start Ray's workers of its own",
        )
        return
    ray_world(reading, call, "Axolotl")
