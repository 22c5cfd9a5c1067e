"""A litgpt training launch in a job: ``litgpt pretrain|finetune[_lora|_full|_adapter|_adapter_v2]
[POSITIONAL] [--config x.yaml] [--train.global_batch_size 64 ...]``, also as ``python -m
litgpt ...`` and, as releases before the ``litgpt`` command ran them, ``python
litgpt/pretrain.py ...`` and ``python litgpt/finetune/lora.py ...``.

The arguments are read as jsonargparse reads them: in order, each ``--config FILE`` loading its
YAML where it stands, each ``--key value`` (or ``--key=value``) setting one key, the later
winning. Keys are spelt as litgpt's settings are, dotted for a nested one
(``--train.micro_batch_size``); jsonargparse refuses any other spelling
(``--global_batch_size``, ``--train.global-batch-size``). A key no word sets keeps the
command's default, unless an unknown word may set it.

The world: run alone, litgpt starts ``devices`` processes per node itself (Lightning Fabric's
launch), so the reading sets its own world, ``devices × num_nodes``; under a launcher
(``srun``, ``torchrun``), the launcher's world is the job's, and Fabric refuses to start
when it is not ``devices × num_nodes``.
"""

from __future__ import annotations

import yaml

from translator.batch.node_lines import NodeLines
from translator.frameworks.litgpt import rules
from translator.frameworks.shared import flags
from translator.frameworks.shared.overrides import value_span, yaml_value
from translator.plugin.job_files import read_job_file
from translator.reading import Call, Note, Reading, Source, Value
from translator.shell.values import Word
from translator.words.findings import Finding, finding

#: litgpt's command-line tool.
TOOLS = ("litgpt",)
#: Its training commands -> the command whose defaults they take.
COMMANDS = {
    "pretrain": "pretrain",
    **{
        c: "finetune"
        for c in (
            "finetune",
            "finetune_lora",
            "finetune_full",
            "finetune_adapter",
            "finetune_adapter_v2",
        )
    },
}
#: The scripts releases before the ``litgpt`` command ran directly -> their command.
SCRIPTS = {
    "litgpt/pretrain.py": "pretrain",
    **{f"litgpt/finetune/{s}.py": "finetune" for s in ("lora", "full", "adapter", "adapter_v2")},
}
#: The settings that name the model a command trains.
MODEL_KEYS = ("model_name", "model_config", "checkpoint_dir")
#: The finetune's positional setting.
FOLDER = "checkpoint_dir"
#: Spec field of each key whose sources are listed.
FIELDS = {**rules.KEYS, rules.DEVICES: "devices", rules.NODES: "num_nodes"}
#: Batch keys a user may write without their block (jsonargparse refuses them).
BARE = {key.split(".", 1)[1]: key for key in rules.KEYS}


def program(call: Call) -> Reading | None:
    """litgpt's training from one launch command, or ``None`` when it runs something else."""
    arguments = list(call.arguments)
    name = call.program
    if name in TOOLS and (call.split.module or not name.endswith(".py")):
        first = arguments[0].text if arguments else None
        if first not in COMMANDS:
            return None
        command, arguments = COMMANDS[first], arguments[1:]
    else:
        script = next((s for s in SCRIPTS if name == s or name.endswith("/" + s)), None)
        if script is None:
            return None
        command = SCRIPTS[script]
    reading = Reading(call.path, rules.NAME, call.text)
    reading.values[rules.COMMAND] = Value(command, call.line)
    _arguments(reading, call, arguments)
    _world(reading, call)
    return reading


def _arguments(reading: Reading, call: Call, words: list[Word]) -> None:
    """Each argument in order, as jsonargparse applies it."""
    args = list(flags.scan(words))
    first = args[0] if args else None
    for arg in args:
        word = arg.word
        if word.text is None:
            if not word.absent:
                reading.opaque.append(f"line {word.line}: {word.why_unknown}")
            continue
        if arg.kind == "positional":
            if arg is first:  # the model name (pretrain) or checkpoint folder (finetune)
                key = "model_name" if reading.values[rules.COMMAND].value == "pretrain" else FOLDER
                _model(reading, call.path, {key: str(word.text)})
            continue
        if arg.kind != "flag" or arg.name is None:
            continue
        key, value = arg.name, arg.value
        if value is not None and value.text is not None and len(arg.stood) == 1:  # --key=value
            value = Word(value.text, word.line, value_span(word, value.text, call))
        if key == "config":
            _config(reading, call, word, value)
        elif key.split(".", 1)[0] in MODEL_KEYS and value is not None and value.text is not None:
            _model_flag(reading, call.path, key, value.text)
        elif key in rules.READ:
            _set(reading, call, key, word, value)
        elif key in BARE or key.replace("-", "_") in rules.READ or key.replace("-", "_") in BARE:
            reading.findings.append(_refused(call, word, key))
    _unknown_defaults(reading, call)


def _refused(call: Call, word: Word, key: str) -> Finding:
    spelt = key.replace("-", "_")
    right = BARE.get(spelt, spelt)
    return finding(
        "litgpt-not-an-option",
        f"--{key} is not an option of litgpt's command line: jsonargparse refuses it "
        f"(error: Unrecognized arguments) and nothing trains; the key is --{right}",
        hint=f"write --{right}",
        where=f"{call.path}:{word.line}",
    )


def _set(reading: Reading, call: Call, key: str, word: Word, value: Word | None) -> None:
    """``--key value`` over what was set before (a config loaded earlier, an earlier flag)."""
    where = f"{call.path}:{word.line} --{key}"
    if value is None or value.text is None:
        why = "not given" if value is None else value.why_unknown or "not known"
        got = Value(None, word.line, None, why)
    else:
        span = (
            value.span
            if value.span and call.text[value.span[0] : value.span[1]] == value.text
            else None
        )
        got = Value(_scalar(value.text), value.line, span or value_span(value, value.text, call))
    _record(reading, key, got, where)


def _scalar(text: str) -> object:
    """A command-line value as jsonargparse gives it to an int or ``auto`` setting."""
    stripped = text.strip()
    if stripped.lstrip("-").isdigit() and stripped.isascii():
        return int(stripped)
    return stripped


def _record(reading: Reading, key: str, got: Value, where: str) -> None:
    """``key`` set to ``got`` over what was set before (a config, an earlier flag)."""
    why = "jsonargparse applies its arguments in order: the later wins"
    reading.set_later(key, got, FIELDS.get(key), where, why)


def _config(reading: Reading, call: Call, word: Word, named: Word | None) -> None:
    """``--config FILE``: its values where it stands; unknown when it cannot be read."""
    if named is None or named.text is None:
        why = "not given" if named is None else named.why_unknown or "not known"
        reading.notes.append(Note(word.line, f"the litgpt config is {why}"))
        _unknown(reading, word.line, f"unknown: the config is {why}")
        return
    opened = read_job_file(
        reading,
        named.text,
        call.locate(named.text),
        rules.read_yaml,
        kind="the litgpt config",
        reads_as="a litgpt YAML",
        where=f"{call.path}:{named.line}",
    )
    if isinstance(opened, str):
        _unknown(reading, named.line, opened)
        return
    found, (inner, data) = opened
    reading.findings += inner.findings
    given = {k: data[k] for k in MODEL_KEYS if k in data}
    if given:
        _model(reading, str(found), given)
    for key, v in inner.values.items():
        if key == rules.COMMAND:
            continue
        _record(
            reading,
            key,
            Value(v.value, v.line, None, v.why_unknown, str(found)),
            f"{found}:{v.line} {key}",
        )


def _model(reading: Reading, where: str, given: dict) -> None:
    """Settings that name the model, over those set before (the later wins)."""
    before = reading.model_settings[1] if reading.model_settings is not None else {}
    reading.model_settings = (where, before | given)


def _model_flag(reading: Reading, where: str, key: str, text: str) -> None:
    """``--model_name X``, ``--checkpoint_dir X`` or ``--model_config.n_layer 2``."""
    top, _, inner = key.partition(".")
    if not inner:
        _model(reading, where, {top: text})
        return
    before = reading.model_settings[1] if reading.model_settings is not None else {}
    carried = dict(before.get(top) or {}) | {inner: yaml_value(text)}
    _model(reading, where, {top: carried})


def _unknown(reading: Reading, line: int | None, why: str) -> None:
    for key in (rules.GLOBAL, rules.MICRO, rules.DEVICES):
        reading.values[key] = Value(None, line, None, why)


def _unknown_defaults(reading: Reading, call: Call) -> None:
    """A key no word sets takes the command's default, unless an unknown word may set it."""
    if not reading.opaque:
        return
    for key in (rules.GLOBAL, rules.MICRO, rules.DEVICES, rules.NODES):
        if key not in reading.values:
            reading.values[key] = Value(
                None, call.line, None, f"not set, and {reading.opaque[0]} may set it"
            )


def _world(reading: Reading, call: Call) -> None:
    """litgpt's own world when it runs alone (or under plain python); the launcher's under a
    launcher that starts processes."""
    if call.sizes.launcher in (None, "python"):
        rules.own_world(reading)
        if reading.world_size is not None:
            where = "; ".join(
                s.where for s in reading.sources if s.won and s.name in ("devices", "num_nodes")
            )
            reading.sources.append(
                Source(
                    "world_size", reading.world_size, where or f"{call.path}:{call.line} (defaults)"
                )
            )
        reading.launcher = "litgpt"


def job_config(reading: Reading) -> str:
    """The litgpt YAML a job's words give (its config with the overrides applied, the
    command's defaults where nothing is set, its command's required setting with a stand-in),
    for the smoke engine and the verdict."""
    command = reading.values.get(rules.COMMAND)
    defaults = rules.DEFAULTS[str(command.value)] if command is not None else None
    devices, nodes = rules.device_count(reading)
    train = {}
    for index, key in enumerate((rules.GLOBAL, rules.MICRO)):
        v = reading.values.get(key)
        value = v.value if v is not None else (defaults[index] if defaults else None)
        if value is not None:
            train[key.split(".", 1)[1]] = value
    seq = reading.values.get(rules.SEQUENCE)
    if seq is not None and seq.value is not None:
        train["max_seq_length"] = seq.value
    config: dict = {}
    if command is not None:  # the setting that tells the command (the batch needs no value)
        key, stand_in = rules.REQUIRED[str(command.value)]
        config[key] = stand_in
    if devices is not None:
        config["devices"] = devices
    if nodes is not None:
        config["num_nodes"] = nodes
    config["train"] = train
    return yaml.safe_dump(config, sort_keys=False)


def node_lines(nodes: int, per_node: int) -> NodeLines:
    """litgpt's keys (or ``--devices``/``--num_nodes``): ``devices`` counts one node's."""
    return NodeLines(
        "litgpt",
        (f"devices: {per_node}", f"num_nodes: {nodes}"),
        f"devices counts one node's; as flags: litgpt pretrain --devices {per_node} "
        f"--num_nodes {nodes}",
    )
