"""A torchtune training launch in a job: ``tune run [TORCHRUN-OPTIONS] RECIPE --config CONFIG
[key=value ...]``, and a recipe script given a torchtune config (``torchrun ...
recipes/full_finetune_distributed.py --config x.yaml``).

``tune run`` reads its words as torchrun's parser does: options up to the recipe, then the
recipe's arguments. With any torchrun option it starts torchrun (``--nnodes``,
``--nproc_per_node``, one process when neither is given); with none it runs the recipe in its
own process. ``--config`` is a file, or the name of one of torchtune's built-in configs
(``llama3_2/1B_full``), which is read from the installed torchtune's ``recipes/configs``. The
recipe's other arguments are ``key=value`` overrides (OmegaConf's dotlist, ``~key`` removes a
key) that win over the config; any other word is refused ("Command-line overrides must be in
the form of key=value").
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import yaml

from translator.frameworks.shared.overrides import unknown_key, value_span, yaml_value
from translator.frameworks.torchtune import generation, rules
from translator.plugin.job_files import read_job_file
from translator.reading import Call, Note, Reading, Source, Value
from translator.shell import launchers
from translator.shell.values import Word
from translator.words import parsing
from translator.words.files import read_text
from translator.words.findings import finding

#: Its command-line tool.
TOOLS = ("tune",)
#: The keys read from the config and its overrides.
READ = (*rules.KEYS, *rules.OTHER_KEYS)
#: Endings of a config file (anything else is a built-in config's name).
CONFIGS = (".yaml", ".yml")
#: The overrides of the model's builder and its arguments (``model._component_=...``).
MODEL = "model."
#: torchrun's options that take no value.
SWITCHES = launchers.TORCHRUN.switches | {"--run-path", "--run_path", "--virtual-local-rank"}


def program(call: Call) -> Reading | None:
    """torchtune's training from one launch command, or ``None`` when it runs none."""
    name = call.program.rsplit("/", 1)[-1]
    if not call.split.module and name in TOOLS:
        if not call.arguments or call.arguments[0].text != "run":
            return None
        options, recipe, arguments = _split_run(call.arguments[1:])
    elif name.endswith(".py") and _is_torchtune_config(call):
        options, recipe, arguments = None, None, call.arguments
    else:
        return None
    reading = Reading(call.path, rules.NAME, call.text)
    config, overrides = _config_of(arguments)
    _read_config(reading, call, config)
    loose = [word for word in overrides if not _override(reading, call, word)]
    if loose:
        reading.findings.append(_not_overrides(loose, call))
    if options is not None:
        _world(reading, call, options, recipe)
    return reading


def _split_run(words: list[Word]) -> tuple[list[Word], Word | None, list[Word]]:
    """``tune run``'s words: torchrun's options, the recipe, the recipe's arguments."""
    i = 0
    while i < len(words):
        text = _known_start(words[i])
        if text is None or not text.startswith("-"):
            return words[:i], words[i], words[i + 1 :]
        i += 1 if "=" in text or text in SWITCHES else 2
    return words, None, []


def _known_start(word: Word) -> str | None:
    """A word's text, or for an unknown word its known leading text: ``--node_rank=$RANK`` is
    still an option whose value rides in the word."""
    if word.text is not None:
        return word.text
    if word.parts and word.parts[0].text:
        return word.parts[0].text
    return None


def _config_of(arguments: list[Word]) -> tuple[Word | None, list[Word]]:
    """The word after ``--config`` (or ``--config=X``), and the other words."""
    for i, word in enumerate(arguments):
        if word.text == "--config" and i + 1 < len(arguments):
            return arguments[i + 1], arguments[:i] + arguments[i + 2 :]
        if word.text is not None and word.text.startswith("--config="):
            value = word.text.split("=", 1)[1]
            return Word(value, word.line), arguments[:i] + arguments[i + 1 :]
    return None, arguments


def _is_torchtune_config(call: Call) -> bool:
    config, _ = _config_of(call.arguments)
    if config is None or config.text is None or not config.text.endswith(CONFIGS):
        return False
    found, _ = call.locate(config.text)
    return found is not None and rules.claims(read_text(found))


def builtin(name: str) -> Path | None:
    """A built-in config of the installed torchtune (its ``recipes/configs/NAME.yaml``, where
    ``tune run`` finds it), or None."""
    spec = importlib.util.find_spec("torchtune")
    if spec is None or spec.origin is None:
        return None
    path = Path(spec.origin).parent.parent / "recipes" / "configs" / f"{name}.yaml"
    return path if path.is_file() else None


# The config and its overrides --------------------------------------------------------------


def _read_config(reading: Reading, call: Call, named: Word | None) -> None:
    """The config's values (in that file, at their lines); unknown when it cannot be read."""
    where = f"{call.path}:{named.line if named is not None else call.line}"
    why = None
    if named is None:
        why = "unknown: the command names no --config"
        reading.findings.append(
            finding(
                "torchtune-missing-key",
                "tune run names no --config (torchtune: The '--config' argument is required.)",
                hint="add --config <your config.yaml>",
                where=where,
            )
        )
    elif named.text is None:
        reading.notes.append(Note(named.line, f"the torchtune config is {named.why_unknown}"))
        why = f"unknown: the config is {named.why_unknown}"
    else:
        found, looked = call.locate(named.text)
        named_builtin = found is None and not named.text.endswith(CONFIGS)
        if named_builtin:
            found = builtin(named.text)
        if named_builtin and found is None:
            why = f"unknown: {named.text} is a built-in config this torchtune does not have"
            reading.findings.append(_no_builtin(named.text, where))
        else:
            why = _take_file(reading, named.text, (found, looked), where)
    if why is not None:  # a config not read may set the tensor-parallel size as well
        for key in (*rules.REQUIRED, "tensor_parallel_dim"):
            reading.values[key] = Value(None, named.line if named else call.line, None, why)


def _no_builtin(name: str, where: str):
    return finding(
        "torchtune-builtin-config",
        f"--config {name} names one of torchtune's built-in configs, and the torchtune here "
        "has none by that name (or none is installed), so its batch keys are unknown",
        hint=f"tune cp {name} . and give the copy to --config (or install torchtune here)",
        where=where,
    )


def _take_file(
    reading: Reading, name: str, located: tuple[Path | None, str], where: str
) -> str | None:
    """The config's values and findings; why they are unknown when it is not found or does not
    read."""
    opened = read_job_file(
        reading,
        name,
        located,
        rules.read,
        kind="the torchtune config",
        reads_as="a torchtune config",
        where=where,
    )
    if isinstance(opened, str):
        return opened
    found, inner = opened
    reading.take(inner.values, str(found), rules.KEYS)
    reading.findings += inner.findings
    data = parsing.load_yaml(inner.text, str(found)).data
    if isinstance(data, dict) and isinstance(data.get("model"), dict):
        reading.model_settings = (str(found), {"model": dict(data["model"])})
    return None


def _override(reading: Reading, call: Call, word: Word) -> bool:
    """One word after the config: ``key=value`` wins over the config, ``~key`` removes it.
    Whether it is one (torchtune refuses any other word)."""
    text = word.text
    if text is None:
        key = unknown_key(reading, word, READ)
        if key is not None:
            _set(reading, call, key, word, Value(None, word.line, None, word.why_unknown))
        return True
    if text.startswith("~"):
        key = text[1:].split("=")[0]
        if key in reading.values:
            del reading.values[key]
            field = rules.KEYS.get(key)
            reading.sources = [s for s in reading.sources if s.name != field]
        return True
    parts = text.split("=")
    if len(parts) != 2:
        return False
    key, raw = parts
    if key.startswith(MODEL) and reading.model_settings is not None:
        reading.model_settings[1]["model"][key[len(MODEL) :]] = yaml_value(raw, ("None",))
    if key in READ:
        _set(
            reading,
            call,
            key,
            word,
            Value(yaml_value(raw, ("None",)), word.line, value_span(word, raw, call)),
        )
    return True


def _not_overrides(words: list[Word], call: Call):
    """The error for the words that are not ``key=value`` (torchtune stops at the first)."""
    shown = " ".join(w.text or "" for w in words)
    return finding(
        "torchtune-bad-override",
        f"{parsing.brief(shown)}: Command-line overrides must be in the form of key=value, got "
        f"{words[0].text} (torchtune's words)",
        hint="write each override as key=value (batch_size=4)",
        where=f"{call.path}:{words[0].line}",
    )


def _set(reading: Reading, call: Call, key: str, word: Word, value: Value) -> None:
    """A value of the command line, over the config's (or an earlier override's)."""
    reading.set_later(
        key,
        value,
        rules.KEYS.get(key),
        f"{call.path}:{word.line} {key}",
        "a key=value override wins over the config (torchtune's _merge_yaml_and_cli_args)",
        "the last override wins",
    )


# The world ---------------------------------------------------------------------------------


def _world(reading: Reading, call: Call, options: list[Word], recipe: Word | None) -> None:
    """``tune run``'s processes: torchrun's when any torchrun option is given, else one."""
    if recipe is not None and recipe.text is not None:
        reading.values[rules.RECIPE] = Value(recipe.text, recipe.line)
    if options and recipe is not None and recipe.text in generation.SINGLE_DEVICE:
        reading.findings.append(
            finding(
                "torchtune-single-device",
                f"Recipe {recipe.text} does not support distributed training. Please run "
                "without torchrun commands. (tune run's words: it starts nothing)",
                hint=f"drop the torchrun options, or run the distributed twin of {recipe.text}",
                where=f"{call.path}:{recipe.line}",
            )
        )
    if not options:
        reading.world_size = 1
        reading.launcher = "tune run"
        reading.sources.append(Source("world_size", 1, f"{call.path}:{call.line} tune run"))
        shown = recipe.text if recipe is not None else None
        if shown and "distributed" in shown and "RANK" not in call.environment:
            reading.findings.append(
                finding(
                    "torchtune-one-process",
                    f"tune run {shown} with no torchrun option runs the recipe in this process, "
                    "without torchrun, and the recipe's init_process_group stops (environment "
                    "variable RANK expected, but not set)",
                    hint="give tune run --nproc_per_node N (and --nnodes) before the recipe",
                    where=f"{call.path}:{call.line}",
                )
            )
        return
    sizes = launchers.sizes(
        [Word("torchrun", call.line), *options],
        {},
        dict(call.environment),
        known=launchers.LAUNCHERS,
    )
    reading.launcher = "torchrun"
    for role, (flag, word) in sizes.words.items():
        reading.values[flag] = Value.of_word(word)
        reading.launch_keys[role] = flag
    reading.launch_counts = sizes.counts()
    world, why = sizes.world()
    if world is None:
        reading.world_unknown = why
        return
    reading.world_size = world
    given = "; ".join(f"{call.path}:{w.line} {flag}" for flag, w in sizes.words.values())
    reading.sources.append(
        Source("world_size", world, given or f"{call.path}:{call.line} tune run")
    )


def job_config(reading: Reading) -> str:
    """The top-level keys a job's config and overrides give, as the YAML the engine runs
    (values the job leaves unknown are left out)."""
    given = {
        k: v.value
        for k, v in reading.values.items()
        if k in READ and "." not in k and v.value is not None
    }
    return yaml.safe_dump(given, sort_keys=False)
