"""A Megatron-Bridge or NeMo 2 training launch in a job.

- Megatron-Bridge's ``scripts/training/run_recipe.py --recipe NAME [options] [KEY=VALUE ...]``
  (and the example scripts that take ``--config-file X.yaml`` then ``KEY=VALUE`` overrides):
  the convenience options (``-gb``, ``-mb``, ``-tp``, ``-pp``, ``-cp``, ``-vp``, ``-ep``,
  ``-sl``) become ``ConfigContainer`` overrides, and a trailing ``KEY=VALUE`` wins over them
  and over the YAML file (``+key=``/``++key=`` as Hydra writes them). The world is the
  launcher's (torchrun, srun).
- NeMo 2's ``nemo llm pretrain|finetune --factory RECIPE [KEY=VALUE ...]`` (NeMo-Run's
  ``data.global_batch_size=...``, ``trainer.strategy.tensor_model_parallel_size=...``); its
  world is ``trainer.devices × trainer.num_nodes`` when the overrides give them.

Any other program counts as this framework's when it is given dotted overrides of these keys
or a ``--config-file`` that is a Megatron-Bridge/NeMo config. What neither the overrides nor
the file set is the Python recipe's: its function's literal where the recipe table holds it,
else unknown (:func:`.rules.interpret`).
"""

from __future__ import annotations

from translator.frameworks.megatron_bridge import rules
from translator.frameworks.shared.overrides import value_span, yaml_value
from translator.plugin.job_files import read_job_file
from translator.reading import Call, Note, Reading, Source, Value
from translator.shell.values import Word
from translator.words import parsing
from translator.words.files import read_text
from translator.words.findings import finding

#: Its command-line tool (NeMo 2's ``nemo llm ...``).
TOOLS = ("nemo",)
#: Megatron-Bridge's recipe runner.
RUNNER = "run_recipe.py"
#: Its performance scripts (``scripts/performance/``), which take the runner's options:
#: ``run_script.py`` runs on its launcher's ranks, ``setup_experiment.py`` is a launcher itself
#: (it submits the run through NeMo-Run on ``--num_gpus`` GPUs).
RUN_SCRIPT, EXPERIMENT = "run_script.py", "setup_experiment.py"
#: ``setup_experiment.py``'s GPU count.
NUM_GPUS = ("-ng", "--num_gpus")
#: The runner's convenience options -> the override each one makes.
OPTIONS = {
    "-gb": "train.global_batch_size",
    "--global_batch_size": "train.global_batch_size",
    "-mb": "train.micro_batch_size",
    "--micro_batch_size": "train.micro_batch_size",
    "-tp": "model.tensor_model_parallel_size",
    "--tensor_model_parallel_size": "model.tensor_model_parallel_size",
    "-pp": "model.pipeline_model_parallel_size",
    "--pipeline_model_parallel_size": "model.pipeline_model_parallel_size",
    "-cp": "model.context_parallel_size",
    "--context_parallel_size": "model.context_parallel_size",
    "-vp": "model.virtual_pipeline_model_parallel_size",
    "--virtual_pipeline_model_parallel_size": "model.virtual_pipeline_model_parallel_size",
    "-ep": "model.expert_model_parallel_size",
    "--expert_model_parallel_size": "model.expert_model_parallel_size",
    "-sl": "dataset.seq_length",
    "--seq_length": "dataset.seq_length",
}
#: Options that name the recipe (its name is shown in messages).
RECIPE = ("--recipe", "--model", "--factory", "-f", "--model_recipe_name", "-mr")
#: Options that name a YAML of ConfigContainer overrides.
CONFIG = ("--config-file", "--config_file")
#: Spec field of each key whose sources are listed.
FIELDS = {k: f for g in rules.GENERATIONS for k, f in g.fields.items()}


def program(call: Call) -> Reading | None:
    """The training launch of one command, or ``None`` when it is not this framework's."""
    name = call.program.rsplit("/", 1)[-1]
    words = list(call.arguments)
    if not call.split.module and name in TOOLS:
        if [w.text for w in words[:1]] != ["llm"]:
            return None
        words = words[2:]
    elif name not in (RUNNER, RUN_SCRIPT, EXPERIMENT) and not _ours(call, words):
        return None
    reading = Reading(call.path, rules.NAME, call.text)
    loose = _arguments(reading, call, words)
    if name == EXPERIMENT:
        _experiment_world(reading, call)
    if name == RUNNER and loose:
        shown = " ".join(w.text or "" for w in loose)
        reading.findings.append(
            finding(
                "megatron-bridge-bad-override",
                f"{parsing.brief(shown)} is not KEY=VALUE: run_recipe.py refuses it (Expected "
                "override in KEY=VALUE form)",
                hint="write each override as key=value (train.global_batch_size=128)",
                where=f"{call.path}:{loose[0].line}",
            )
        )
    if name in TOOLS:
        _nemo_world(reading, call)
    return reading


def _key(text: str) -> str:
    """The override's key as the config takes it (Hydra's ``+``/``++`` prefixes dropped)."""
    return text.split("=", 1)[0].lstrip("+~")


def _ours(call: Call, words: list[Word]) -> bool:
    """Whether a program's arguments are Megatron-Bridge/NeMo overrides or name its config."""
    for i, word in enumerate(words):
        text = word.text or (word.parts[0].text if word.parts and word.parts[0].text else "")
        if "=" in text and _key(text) in rules.KEYS:
            return True
        flag, eq, inline = text.partition("=")
        if flag in CONFIG:
            named = inline if eq else (words[i + 1].text if i + 1 < len(words) else None)
            found = call.locate(named)[0] if named else None
            if found is not None and rules.claims(read_text(found)):
                return True
    return False


def _arguments(reading: Reading, call: Call, words: list[Word]) -> list[Word]:
    """The options, the config file and the overrides, in order (a later one wins); the words
    that are none of them (positional words the runner refuses)."""
    loose = []
    i = 0
    while i < len(words):
        word, i = words[i], i + 1
        text = word.text
        if text is None:
            _unknown_word(reading, word)
            continue
        flag, eq, inline = text.partition("=")
        if flag.startswith("-") and (
            flag in OPTIONS or flag in RECIPE or flag in CONFIG or flag in NUM_GPUS
        ):
            value: Word | None = Word(inline, word.line, None, sources=word.sources) if eq else None
            if value is None and i < len(words):
                value, i = words[i], i + 1
            if value is None:
                continue
            if flag in CONFIG:
                _config(reading, call, value)
            elif flag in RECIPE:
                named = rules.FACTORY if flag in ("--factory", "-f") else "--recipe"
                reading.values[named] = Value(value.text, value.line)
            elif flag in NUM_GPUS:  # setup_experiment.py's world (:func:`_experiment_world`)
                reading.values[NUM_GPUS[1]] = _parsed(value, None)
            else:
                raw = value.text or ""
                span = value_span(word, inline, call) if eq else value_span(value, raw, call)
                parsed = _parsed(value, span)
                _set(reading, OPTIONS[flag], value.line, parsed, f"{call.path}:{word.line} {flag}")
        elif flag.startswith("-"):
            # the runner's other options (--mode pretrain, --step_func vlm_step, --dry-run)
            if not eq and i < len(words) and _is_option_value(words[i]):
                i += 1
        elif eq:
            key = _key(text)
            if key in rules.READ:
                parsed = Value(yaml_value(inline), word.line, value_span(word, inline, call))
                _set(reading, key, word.line, parsed)
        else:
            loose.append(word)
    return loose


def _is_option_value(word: Word) -> bool:
    """Whether a word after another option is that option's value: neither an option nor an
    override."""
    text = word.text
    return text is not None and not text.startswith("-") and "=" not in text


def _parsed(word: Word, span: tuple[int, int] | None) -> Value:
    if word.text is None:
        return Value(None, word.line, None, word.why_unknown)
    return Value(yaml_value(word.text), word.line, span)


def _unknown_word(reading: Reading, word: Word) -> None:
    """An unknown word: an override whose value is unknown, else a word that may hold more."""
    head = word.parts[0].text if word.parts and word.parts[0].text else ""
    key = _key(head) if "=" in head else None
    if key in rules.READ:
        _set(reading, key, word.line, Value(None, word.line, None, word.why_unknown))
    elif key is None and not word.absent:
        reading.opaque.append(f"line {word.line}: {word.why_unknown}")


def _config(reading: Reading, call: Call, named: Word) -> None:
    """``--config-file X.yaml``: its values (in that file); the overrides after it win."""
    where = f"{call.path}:{named.line}"
    if named.text is None:
        reading.notes.append(Note(named.line, f"the config file is {named.why_unknown}"))
        return
    opened = read_job_file(
        reading,
        named.text,
        call.locate(named.text),
        rules.read,
        kind="the config file",
        reads_as="a Megatron-Bridge config",
        where=where,
    )
    if isinstance(opened, str):
        return
    found, inner = opened
    for key, v in inner.values.items():
        value = Value(v.value, v.line, None, v.why_unknown, str(found))
        _set(reading, key, v.line, value, f"{found}:{v.line} {key}")
    reading.findings += inner.findings


def _set(
    reading: Reading, key: str, line: int | None, value: Value, where: str | None = None
) -> None:
    """A value over the one set before (an option, the config file, an earlier override)."""
    why = "a later override wins (OmegaConf merge, in order)"
    shown = where or f"{reading.path}:{line} {key}"
    reading.set_later(key, value, FIELDS.get(key), shown, why)


def _experiment_world(reading: Reading, call: Call) -> None:
    """``setup_experiment.py``'s world: the ``--num_gpus`` it submits the run on (not the one
    process of the python that runs it); unknown when that is not a count."""
    given = reading.values.get(NUM_GPUS[1])
    if given is None or given.count is None:
        why = "is not given" if given is None else f"is {given.why_unknown or repr(given.value)}"
        reading.world_unknown = Note(
            call.line, f"setup_experiment.py submits the run on --num_gpus GPUs, which {why}"
        )
        return
    reading.world_size = given.count
    shown = f"{call.path}:{given.line} {NUM_GPUS[1]} (setup_experiment.py)"
    reading.sources.append(Source("world_size", reading.world_size, shown))


def _nemo_world(reading: Reading, call: Call) -> None:
    """NeMo 2's world from ``trainer.devices`` and ``trainer.num_nodes`` overrides; when they
    are not given, the recipe's (unknown)."""
    devices, nodes = (reading.values.get(k) for k in rules.TRAINER)
    if devices is None or nodes is None:
        reading.world_unknown = Note(
            call.line,
            "nemo llm runs trainer.devices × trainer.num_nodes processes, and the recipe sets "
            "them (give trainer.devices=N trainer.num_nodes=M, or --world-size)",
        )
        return
    rules.trainer_world(reading, rules.NEMO2)
    if reading.world_size is not None:
        shown = "; ".join(
            f"{call.path}:{v.line} {k}" for k, v in zip(rules.TRAINER, (devices, nodes))
        )
        reading.sources.append(Source("world_size", reading.world_size, shown))
