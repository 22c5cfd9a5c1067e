"""A LLaMA-Factory training launch in a job: ``llamafactory-cli train x.yaml [key=value ...]``
(also ``lmf``), and any program given a LLaMA-Factory YAML by content (``torchrun ...
src/train.py x.yaml``, ``accelerate launch ... src/train.py x.yaml``).

The arguments are read as LLaMA-Factory's ``read_args`` reads them: a first argument ending in
``.yaml``/``.yml``/``.json`` is the config, and the words after it are OmegaConf ``key=value``
overrides that win over it (each value read as YAML); otherwise the words are
``HfArgumentParser`` flags (``--key value``, the last one winning). Its batch keys are the HF
Trainer's, with the Trainer's defaults. The ``deepspeed:`` path is opened where the job runs.

``llamafactory-cli train`` starts itself again under ``torchrun --nnodes ${NNODES:-1}
--nproc_per_node ${NPROC_PER_NODE:-<visible GPUs>}`` when ``FORCE_TORCHRUN`` (or ``USE_MCA`` /
``USE_MEGATRON_BRIDGE``) is on or more than one GPU is visible (and ``USE_RAY``/``USE_KT`` are
off); with ``RDZV_ID``, ``MIN_NNODES:MAX_NNODES`` nodes (elastic). Otherwise it trains in its
own process, or in Ray's ``ray_num_workers`` workers with ``USE_RAY``. A variable counts as on
when it is ``true``, ``y`` or ``1`` (its ``is_env_enabled``), as the command's environment
gives it; the visible GPUs are those ``CUDA_VISIBLE_DEVICES`` lists (unknown when it is unset).
"""

from __future__ import annotations

from collections.abc import Mapping

from translator.frameworks.llamafactory import rules
from translator.frameworks.shared import hf_deepspeed
from translator.frameworks.shared import hf_trainer as hf
from translator.frameworks.shared.flags import scan
from translator.frameworks.shared.overrides import unknown_key, value_span, yaml_value
from translator.frameworks.shared.ray_world import ray_world
from translator.plugin.job_files import read_job_file
from translator.reading import Call, Note, Reading, Source, Value, typo_findings
from translator.shell.values import Word
from translator.words import parsing
from translator.words.files import read_text
from translator.words.findings import finding

#: Its command-line tools.
TOOLS = ("llamafactory-cli", "lmf")
#: The endings ``read_args`` takes for a config file.
CONFIGS = (".yaml", ".yml", ".json")
#: Top-level keys read from the config and its overrides.
READ = (
    *hf.KEYS,
    *hf.SEQUENCE_KEYS,
    *rules.MCORE,
    "deepspeed",
    "auto_find_batch_size",
    "ray_num_workers",
)
#: Spec field of each key whose sources are listed.
FIELDS = {
    "per_device_train_batch_size": "micro_batch_size",
    "gradient_accumulation_steps": "gradient_accumulation_steps",
    "cutoff_len": "sequence_length",
    **rules.MCORE,
}
#: Values ``is_env_enabled`` takes as on.
ON = ("true", "y", "1")


def program(call: Call) -> Reading | None:
    """LLaMA-Factory's training from one launch command, or ``None`` when it runs none."""
    name = call.program.rsplit("/", 1)[-1]
    tool = not call.split.module and name in TOOLS
    if tool:
        if not call.arguments or call.arguments[0].text != "train":
            return None
        arguments = call.arguments[1:]
    elif _is_llamafactory_config(call):
        arguments = call.arguments
    else:
        return None
    reading = Reading(call.path, rules.NAME, call.text)
    first = arguments[0] if arguments else None
    if first is not None and (first.text is None or first.text.endswith(CONFIGS)):
        _read_config(reading, call, first)
        loose = [word for word in arguments[1:] if not _override(reading, call, word)]
        if loose:
            reading.findings.append(_not_overrides(loose, call))
    else:
        _flags(reading, call, arguments)
    hf_deepspeed.read_named(reading, call)
    _megatron_path(reading, call)
    if tool:
        _cli_world(reading, call)
    else:
        _program_world(reading, call)
    return reading


def _is_llamafactory_config(call: Call) -> bool:
    """Whether the program's first argument is a config that is LLaMA-Factory's by content."""
    first = call.arguments[0].text if call.arguments else None
    if first is None or not first.endswith(CONFIGS):
        return False
    found, _ = call.locate(first)
    return found is not None and rules.claims(read_text(found))


# The config and its overrides --------------------------------------------------------------


def _read_config(reading: Reading, call: Call, named: Word) -> None:
    """The config's values (in that file, at their lines); unknown when it cannot be read."""
    why = None
    if named.text is None:
        reading.notes.append(Note(named.line, f"the LLaMA-Factory config is {named.why_unknown}"))
        why = f"unknown: the config is {named.why_unknown}"
    else:
        opened = read_job_file(
            reading,
            named.text,
            call.locate(named.text),
            rules.read,
            kind="the LLaMA-Factory config",
            reads_as="a LLaMA-Factory config",
            where=f"{call.path}:{named.line}",
        )
        if isinstance(opened, str):
            why = opened
        else:
            found, inner = opened
            _take(reading, inner, str(found))
    if why is not None:
        for key in hf.KEYS:
            reading.values[key] = Value(None, named.line, None, why)


def _take(reading: Reading, inner: Reading, found: str) -> None:
    """The config reader's values and findings. The DeepSpeed JSON it found is not taken: as
    run, LLaMA-Factory opens the path from where it runs, and an override may name another
    (:func:`_deepspeed` looks for it again)."""
    ds_where = inner.where("deepspeed")
    reading.take(inner.values, found, FIELDS)
    reading.findings += [
        f for f in inner.findings if not (f.code == "missing-file" and f.where == ds_where)
    ]


def _override(reading: Reading, call: Call, word: Word) -> bool:
    """One OmegaConf ``key=value`` word after the config: it wins over the config's value.
    Whether the word is one (a word without ``=`` becomes a key of its own)."""
    text = word.text
    if text is None:
        key = unknown_key(reading, word, READ)
        if key is not None:
            _set(reading, call, key, word, Value(None, word.line, None, word.why_unknown))
        return True
    key, eq, raw = text.partition("=")
    if not eq:
        return False
    reading.findings += typo_findings(
        {key: word.line},
        list(hf.KEYS),
        hf.LOOKALIKES,
        call.path,
        "so LLaMA-Factory refuses it (Some keys are not used by the HfArgumentParser)",
    )
    if key in READ:
        _set(
            reading, call, key, word, Value(yaml_value(raw), word.line, value_span(word, raw, call))
        )
    return True


def _not_overrides(words: list[Word], call: Call):
    """The error for words after the config that are not ``key=value`` (``--key value``)."""
    shown = " ".join(w.text or "" for w in words)
    return finding(
        "llamafactory-bad-override",
        f"{parsing.brief(shown)} after the config is not key=value overrides: OmegaConf makes "
        "each word a key of its own, and LLaMA-Factory refuses them (Some keys are not used by "
        "the HfArgumentParser)",
        hint="write the overrides as key=value (per_device_train_batch_size=4)",
        where=f"{call.path}:{words[0].line}",
    )


def _flags(reading: Reading, call: Call, words: list[Word]) -> None:
    """``llamafactory-cli train --key value ...``: HfArgumentParser's flags, dashes or
    underscores, the last occurrence winning; a batch flag not given is the Trainer's
    default."""
    for arg in scan(words):
        word, value = arg.word, arg.value
        if arg.kind == "unknown":
            reading.opaque.append(f"line {word.line}: {word.why_unknown}")
            continue
        key = (arg.name or "").replace("-", "_")
        if arg.kind != "flag" or key not in READ:
            continue
        if value is None:
            parsed = Value(True, word.line)
        elif value.text is None:
            parsed = Value(None, value.line, None, value.why_unknown)
        else:
            span = value_span(arg.stood[-1], value.text, call)  # the flag's word when inline
            parsed = Value(yaml_value(value.text), value.line, span)
        _set(reading, call, key, word, parsed, flag=True)
    if reading.opaque:
        for key in hf.KEYS:
            if key not in reading.values:
                why = f"not given, and {reading.opaque[0]} may give it"
                reading.values[key] = Value(None, call.line, None, why)


def _set(
    reading: Reading, call: Call, key: str, word: Word, value: Value, flag: bool = False
) -> None:
    """A value of the command line, over the config's (or an earlier flag's)."""
    shown = (word.text or "").split("=", 1)[0] or key
    reading.set_later(
        key,
        value,
        FIELDS.get(key),
        f"{call.path}:{word.line} {shown}",
        "a key=value override wins over the config (OmegaConf.merge in LLaMA-Factory's read_args)",
        "the last occurrence wins",
    )


# The world ---------------------------------------------------------------------------------


def _megatron_path(reading: Reading, call: Call) -> None:
    """The Megatron path the environment picks (``USE_MCA`` first, as LLaMA-Factory checks)."""
    for name in rules.PATHS:
        if _on(call.environment, name):
            reading.values[name] = Value(True, call.environment[name].line)
            return


def _on(environment: Mapping[str, Word], name: str) -> bool | None:
    """Whether the variable is on (``is_env_enabled``); ``None`` when its value is unknown."""
    word = environment.get(name)
    if word is None or getattr(word, "absent", False):
        return False
    if word.text is None:
        return None
    return word.text.lower() in ON


def _visible(call: Call) -> tuple[int | None, str]:
    """GPUs ``CUDA_VISIBLE_DEVICES`` lists (``0`` for an empty list), or why not known."""
    visible = call.sizes.visible
    if visible is not None and visible.text is not None and not visible.text.strip(", "):
        return 0, ""
    count, why = call.sizes.visible_count()
    return count, why


def _cli_world(reading: Reading, call: Call) -> None:
    """The processes ``llamafactory-cli train`` trains in: torchrun's, Ray's, or its own."""
    env = call.environment
    forced = [_on(env, n) for n in ("FORCE_TORCHRUN", "USE_MCA", "USE_MEGATRON_BRIDGE")]
    ray, kt = _on(env, "USE_RAY"), _on(env, "USE_KT")
    count, why_count = _visible(call)
    if True in forced:
        torchrun: bool | None = True
    elif None in forced:
        torchrun = None
    elif count is None:
        torchrun = False if ray is True or kt is True else None
    else:
        torchrun = count > 1 and ray is False and kt is False
        if count > 1 and (ray is None or kt is None):
            torchrun = None
    if torchrun is None:
        why = why_count or "a variable that decides it is not known"
        reading.world_unknown = Note(
            call.line,
            "llamafactory-cli train runs torchrun over the visible GPUs when FORCE_TORCHRUN is "
            f"on or more than one GPU is visible, else one process, and {why}",
        )
        return
    if torchrun:
        _torchrun_world(reading, call, count, why_count)
    elif ray:
        ray_world(reading, call, "LLaMA-Factory")
    else:
        _one_process(reading, call, "llamafactory-cli train without FORCE_TORCHRUN")


def _torchrun_world(reading: Reading, call: Call, count: int | None, why_count: str) -> None:
    """``torchrun --nnodes ${NNODES:-1} --nproc_per_node ${NPROC_PER_NODE:-<visible>}``, or
    ``--nnodes MIN_NNODES:MAX_NNODES`` for an elastic launch."""
    env = call.environment
    reading.launcher = "torchrun"
    nodes, why_nodes = _count_of(env, "NNODES", 1)
    if "RDZV_ID" in env and "MIN_NNODES" in env and "MAX_NNODES" in env:
        low, why_low = _count_of(env, "MIN_NNODES", None)
        high, why_high = _count_of(env, "MAX_NNODES", None)
        nodes, why_nodes = (low, "") if low is not None and low == high else (None, "")
        if nodes is None:
            shown = f"{env['MIN_NNODES'].text}:{env['MAX_NNODES'].text}"
            why_nodes = why_low or why_high or f"elastic: torchrun --nnodes {shown} (RDZV_ID)"
    per_node, why_per = _count_of(env, "NPROC_PER_NODE", count)
    if "NPROC_PER_NODE" not in env and count is None:
        why_per = f"NPROC_PER_NODE is not set, so it is the visible GPU count, and {why_count}"
    for role, name in (("nodes", "NNODES"), ("per_node", "NPROC_PER_NODE")):
        word = env.get(name)
        if word is not None:
            reading.values[name] = Value(
                _int(word.text), word.line, word.span if word.text else None, word.why_unknown
            )
            reading.launch_keys[role] = name
    if "NPROC_PER_NODE" not in env and count is not None and call.sizes.visible is not None:
        reading.values["CUDA_VISIBLE_DEVICES"] = Value(
            count, call.sizes.visible.line, None, f"the count of {call.sizes.visible_key}"
        )
        reading.launch_keys["per_node"] = "CUDA_VISIBLE_DEVICES"
    reading.launch_counts = {
        k: v for k, v in (("nodes", nodes), ("per_node", per_node)) if v is not None
    }
    if nodes is None or per_node is None:
        reading.world_unknown = Note(
            call.line,
            f"llamafactory-cli train runs torchrun, and {why_nodes if nodes is None else why_per}",
        )
        return
    reading.world_size = nodes * per_node
    given = [(k, env[k].line) for k in ("NNODES", "NPROC_PER_NODE") if k in env]
    if "NPROC_PER_NODE" not in env and call.sizes.visible is not None:
        given.append((call.sizes.visible_key, call.sizes.visible.line))
    where = "; ".join(f"{call.path}:{line} {k}" for k, line in given)
    reading.sources.append(Source("world_size", reading.world_size, where))


def _count_of(env: Mapping[str, Word], name: str, default: int | None) -> tuple[int | None, str]:
    """A variable's count, else ``default`` when it is not set; or why it is not known."""
    word = env.get(name)
    if word is None or getattr(word, "absent", False):
        return default, "" if default is not None else f"{name} is not set"
    if word.text is None:
        return None, f"{name} is {word.why_unknown}"
    value = _int(word.text)
    if isinstance(value, int) and value >= 1:
        return value, ""
    return None, f"{name} is {word.text!r}"


def _int(text: str | None) -> object:
    return int(text) if text is not None and text.isascii() and text.isdigit() else text


def _one_process(reading: Reading, call: Call, how: str) -> None:
    """One training process: LLaMA-Factory refuses DeepSpeed there, and (for a program that
    plain ``python`` runs on several visible GPUs) the HF Trainer's DataParallel."""
    reading.world_size = 1
    reading.launcher = reading.launcher or "python"
    reading.sources.append(Source("world_size", 1, f"{call.path}:{call.line} {how}"))
    ds = reading.values.get("deepspeed")
    if ds is not None and ds.value:
        reading.findings.append(
            finding(
                "llamafactory-deepspeed-one-process",
                f"{how} trains in one process, and LLaMA-Factory refuses DeepSpeed there "
                "(Please use `FORCE_TORCHRUN=1` to launch DeepSpeed training.)",
                hint="set FORCE_TORCHRUN=1 for the command",
                where=f"{call.path}:{call.line}",
            )
        )


def _program_world(reading: Reading, call: Call) -> None:
    """A program given the config: the launcher's world (the job's), except plain ``python``:
    one process, which LLaMA-Factory refuses on several visible GPUs (DataParallel)."""
    if call.sizes.launcher != "python":
        return
    _one_process(reading, call, f"python {call.program}")
    count, _ = _visible(call)
    if count is not None and count > 1:
        reading.findings.append(
            finding(
                "llamafactory-not-distributed",
                f"python {call.program} on the {count} GPUs CUDA_VISIBLE_DEVICES lists would be "
                "the HF Trainer's DataParallel, which LLaMA-Factory refuses (Please launch "
                "distributed training with `llamafactory-cli` or `torchrun`.)",
                hint="launch it with llamafactory-cli train or torchrun",
                where=f"{call.path}:{call.line}",
            )
        )
