"""litgpt: a YAML for ``litgpt pretrain`` / ``litgpt finetune`` (jsonargparse) with the batch
under ``train:`` and the launch at the top:

- ``train.global_batch_size``: samples per optimizer step over every rank;
  ``train.micro_batch_size``: per rank; ``train.max_seq_length`` caps a sample's tokens;
- ``devices`` (a count, ``auto`` or -1: every GPU of the machine) and ``num_nodes`` (1).

Its ``TrainArgs`` derives the accumulation with two floors and no check
(``litgpt/args.py``): ``batch_size = global // (devices × num_nodes)``,
``gradient_accumulation_iters = batch_size // micro``; both only ``assert > 0``. So global 64
on 3 GPUs with micro 4 runs 4 × 5 × 3 = 60 samples per step. Its training has no tensor,
pipeline or context parallelism (FSDP shards the model over data-parallel ranks), so DP is
``devices × num_nodes``. Where a key is missing the command's own default applies: pretrain
512 / 4 on ``devices: auto``, the finetune commands 16 / 1 on one device. What changed between
releases (the global batch per node before 0.5.8): :mod:`.generation`.
"""

from __future__ import annotations

import re

from translator.batch import solve
from translator.frameworks.litgpt import generation
from translator.reading import (
    Launch,
    Note,
    Reading,
    Value,
    invalid_value,
    typo_findings,
    values_at,
)
from translator.spec import BatchSpec
from translator.words import parsing
from translator.words.errors import InputError
from translator.words.findings import Finding, counted, finding

NAME = "litgpt"

GLOBAL, MICRO, SEQUENCE = (
    "train.global_batch_size",
    "train.micro_batch_size",
    "train.max_seq_length",
)
DEVICES, NODES = "devices", "num_nodes"
#: litgpt key -> spec field, for the train keys that shape the batch.
KEYS = {GLOBAL: "global_batch_size", MICRO: "micro_batch_size", SEQUENCE: "sequence_length"}
#: The optimizer's train keys of litgpt 0.3 and before -> where 0.4 and later take them.
OLD_OPTIMIZER = {
    "train.learning_rate": "optimizer.init_args.lr",
    "train.weight_decay": "optimizer.init_args.weight_decay",
    "train.beta1": "optimizer.init_args.betas[0]",
    "train.beta2": "optimizer.init_args.betas[1]",
}
#: Every key read.
READ = (*KEYS, DEVICES, NODES, *OLD_OPTIMIZER)
#: ``TrainArgs`` fields that are no batch key (each alike enough to one to pass for a typo).
TRAIN_FIELDS = {
    *("save_interval", "log_interval", "lr_warmup_steps", "lr_warmup_fraction", "epochs"),
    *("max_tokens", "max_steps", "max_time", "tie_embeddings", "max_norm", "min_lr"),
    *(k.split(".", 1)[1] for k in OLD_OPTIMIZER),
    "epoch_size",  # litgpt 0.2's
}
#: Pseudo-key of a reading: the litgpt command that runs it (``pretrain``, ``finetune``), when
#: the file or the job says.
COMMAND = "(litgpt command)"
#: Each command's defaults: (global batch, micro-batch), and devices.
DEFAULTS: dict[str, tuple[int, int]] = {"pretrain": (512, 4), "finetune": (16, 1)}
DEVICES_DEFAULT: dict[str, int | str] = {"pretrain": "auto", "finetune": 1}
#: Top-level settings only ``litgpt pretrain`` has, and only the finetune commands have.
PRETRAIN_ONLY = {"model_name", "model_config", "initial_checkpoint_dir", "tokenizer_dir"}
FINETUNE_ONLY = {"checkpoint_dir"}
#: Top-level settings of litgpt's training commands that no other framework's YAML has at its
#: top (with ``train:``, they mark a file as litgpt's).
OWN_TOP = PRETRAIN_ONLY | FINETUNE_ONLY | {DEVICES, NODES, "out_dir", "precision", "logger_name"}
#: Values of ``devices`` that mean every GPU of the machine (``parse_devices``).
AUTO = ("auto", -1)

#: The required positional setting of each command, given a stand-in (the batch does not
#: depend on it): what the verdict's parser and a job's config fill in.
REQUIRED = {"pretrain": ("model_name", "pythia-14m"), "finetune": ("checkpoint_dir", "checkpoints")}


def command_of(config: dict) -> str | None:
    """``pretrain`` or ``finetune`` by the settings only one of them has, else ``None``."""
    if PRETRAIN_ONLY & set(config):
        return "pretrain"
    if FINETUNE_ONLY & set(config):
        return "finetune"
    return None


# Recognising a file -------------------------------------------------------------------------


def _mapping(text: str) -> dict | None:
    try:
        data = parsing.load_yaml(text, "-").data
    except InputError:
        return None
    return data if isinstance(data, dict) else None


def claims(text: str) -> bool:
    """A ``train:`` mapping beside one of litgpt's own top-level settings, or, with no train
    block (every batch key at the command's default), a setting only one of its commands has
    beside another of its own."""
    config = (
        _mapping(text) if ("train:" in text or "_dir:" in text or "model_name:" in text) else None
    )
    if config is None:
        return False
    own = OWN_TOP & set(config)
    if isinstance(config.get("train"), dict):
        return bool(own)
    return command_of(config) is not None and len(own) > 1 and "batch_size" not in config


def holds_batch(text: str) -> bool:
    """A batch key, ``devices`` or ``num_nodes``, or a command whose defaults make the batch."""
    config = _mapping(text)
    if config is None:
        return False
    train = config.get("train")
    batch = isinstance(train, dict) and bool({"global_batch_size", "micro_batch_size"} & set(train))
    return batch or bool({DEVICES, NODES} & set(config)) or command_of(config) is not None


# Reading ------------------------------------------------------------------------------------


def read(text: str, where: str) -> Reading:
    reading, _ = read_yaml(text, where)
    return reading


def read_yaml(text: str, where: str) -> tuple[Reading, dict]:
    """A litgpt YAML's values (dotted keys), the command it is for, its typos and duplicate
    keys, the world it launches; and the whole mapping."""
    doc = parsing.load_yaml(text, where)
    config = doc.data
    if not isinstance(config, dict):
        raise InputError(
            f"{where}: a litgpt config must be a YAML mapping, not {type(config).__name__}"
        )
    reading = Reading(where, NAME, text)
    reading.values = values_at(doc, READ)
    command = command_of(config)
    if command is not None:
        reading.values[COMMAND] = Value(command)
    train = config.get("train")
    if isinstance(train, dict):
        keys = {f"train.{k}": doc.positions.get(f"train.{k}", (None,))[0] for k in train}
        reading.findings += typo_findings(
            keys, list(KEYS), {f"train.{k}" for k in TRAIN_FIELDS}, where, FATE
        )
    top = {str(k): doc.positions.get(str(k), (None,))[0] for k in config}
    reading.findings += typo_findings(top, [DEVICES, NODES], OWN_TOP | {"train"}, where, FATE)
    reading.findings += [_duplicate(dup, where) for dup in doc.duplicates]
    own_world(reading)
    return reading, config


#: What litgpt does with a key it does not have.
FATE = "so litgpt's command line (jsonargparse) refuses the file"


def _duplicate(dup: parsing.Duplicate, where: str) -> Finding:
    batch = dup.path in READ
    return finding(
        "yaml-duplicate-batch-key" if batch and not dup.same else "yaml-duplicate-key",
        f"{parsing.brief(dup.path, quote='')} is set twice (lines {dup.first} and {dup.again}); "
        "litgpt's YAML loader keeps the last one and says nothing",
        hint=f"delete line {dup.first} or line {dup.again}",
        where=f"{where}:{dup.again}",
    )


def own_world(reading: Reading) -> None:
    """The processes litgpt starts itself (Lightning Fabric launches ``devices`` per node):
    ``devices × num_nodes``, unknown for ``devices: auto`` (the machine's GPUs) or when the
    command, whose default it would be, is not known."""
    devices, nodes = device_count(reading)
    if isinstance(devices, int) and nodes is not None:
        reading.world_size, reading.world_unknown = devices * nodes, None
        # Its launch words, as update edits a launcher's: devices and num_nodes, each
        # written when the file lacks it and its value changes (num_nodes' default is 1).
        reading.launcher = NAME
        reading.launch_keys = {"per_node": DEVICES, "nodes": NODES}
        reading.launch_counts = {"per_node": devices, "nodes": nodes}
        return
    reading.world_size = None
    v = reading.values.get(DEVICES)
    line = v.line if v is not None else None
    if devices in AUTO:
        said = "is auto" if v is not None else "is not set (litgpt pretrain's default: auto)"
        reading.world_unknown = Note(
            line, f"devices {said}: litgpt takes every GPU of the machine it runs on"
        )
    elif v is None:
        reading.world_unknown = Note(
            None,
            "devices is not set, and its default is the command's (pretrain: auto, finetune: 1)",
        )
    else:
        reading.world_unknown = Note(line, f"devices is {v.why_unknown or parsing.brief(v.value)}")


def device_count(reading: Reading) -> tuple[int | str | None, int | None]:
    """``(devices, num_nodes)`` as litgpt takes them: a count, ``auto`` (or -1), the command's
    default when unset, else ``None`` (unknown or not valid); nodes default to 1."""
    v = reading.values.get(DEVICES)
    command = reading.values.get(COMMAND)
    if v is None:
        devices = DEVICES_DEFAULT[str(command.value)] if command is not None else None
    elif v.value in AUTO or v.count is not None:
        devices = v.count or v.value  # type: ignore[assignment]
    else:
        devices = None
    n = reading.values.get(NODES)
    nodes = 1 if n is None else n.count
    return devices, nodes


# Interpreting -------------------------------------------------------------------------------


def interpret(reading: Reading, launch: Launch) -> tuple[dict, list[Finding]]:
    """Spec values as litgpt's ``TrainArgs`` computes them on the launch's world: the batch it
    really runs (its floors applied), with a finding for each thing it does silently."""
    findings = list(reading.findings)
    version = generation.installed()
    findings += old_optimizer_keys(reading, version)
    counts, unknown = _counts(reading, findings)
    devices, nodes = device_count(reading)
    world = launch.world_size
    given = reading.values.get(DEVICES)
    if given is not None and given.why_unknown is None and devices is None:
        findings.append(
            invalid_value(
                DEVICES, reading.values[DEVICES], reading.path, "a positive integer or auto"
            )
        )
    if devices in AUTO:
        findings.append(_auto(reading, world))
        devices = world // nodes if world is not None and nodes and world % nodes == 0 else None
    values: dict = {KEYS[k]: counts[k] for k in KEYS if k in counts}
    values |= {KEYS[k]: None for k in unknown}
    if (
        isinstance(devices, int)
        and nodes is not None
        and world is not None
        and devices * nodes != world
    ):
        findings.append(_world_mismatch(reading, devices, nodes, world))
        # Fabric refuses to start before litgpt derives any batch: none is run.
        values |= {"global_batch_size": None, "gradient_accumulation_steps": None}
        return values, findings
    g, micro = counts.get(GLOBAL), counts.get(MICRO)
    if not (isinstance(devices, int) and nodes and g and micro):
        return values, findings
    return _accumulation(reading, values, findings, (g, micro, devices, nodes), version)


def _counts(reading: Reading, findings: list[Finding]) -> tuple[dict[str, int], list[str]]:
    """Each train key's count (the command's default when unset), and the keys left unknown
    (a job's value the script does not fix, a default of an unknown command)."""
    counts: dict[str, int] = {}
    unknown = []
    command = reading.values.get(COMMAND)
    for index, key in enumerate((GLOBAL, MICRO, SEQUENCE, NODES)):
        v = reading.values.get(key)
        if v is None:
            if key in (GLOBAL, MICRO) and command is not None:
                counts[key] = DEFAULTS[str(command.value)][index]
            elif key in (GLOBAL, MICRO):
                unknown.append(key)
                findings.append(_default_unknown(reading, key))
            continue
        if v.count is not None:
            counts[key] = v.count
        elif v.value is None and v.why_unknown is not None:
            if key in KEYS:
                unknown.append(key)
            findings.append(
                finding(
                    "unknown-value",
                    f"{key} is {v.why_unknown}",
                    hint=f"write {key} as a literal",
                    where=reading.where(key),
                )
            )
        elif not (key == SEQUENCE and v.value is None):  # max_seq_length: null is its default
            findings.append(invalid_value(key, v, reading.path))
    return counts, unknown


def _default_unknown(reading: Reading, key: str) -> Finding:
    pre, fine = (DEFAULTS[c][key == MICRO] for c in ("pretrain", "finetune"))
    return finding(
        "litgpt-default-unknown",
        f"{key} is not set, and its default is the command's: {pre} for litgpt pretrain, {fine} "
        "for the finetune commands; the file has none of the settings that tell them apart "
        "(model_name for pretrain, checkpoint_dir for finetune)",
        hint=f"write {key} in the file",
        where=reading.path,
    )


def _auto(reading: Reading, world: int | None) -> Finding:
    v = reading.values.get(DEVICES)
    said = "devices is auto" if v is not None else "devices is not set (litgpt pretrain: auto)"
    tail = (
        f"; on this launch's {world} processes that is {world} devices in all"
        if world is not None
        else ""
    )
    return finding(
        "litgpt-devices-auto",
        f"{said}: litgpt takes every GPU of the machine (torch.cuda.device_count()), and "
        f"Lightning Fabric refuses a launch whose world is not devices × num_nodes{tail}",
        hint="write devices as the GPUs per node, so the batch does not depend on the machine",
        where=reading.where(DEVICES),
    )


def _world_mismatch(reading: Reading, devices: int, nodes: int, world: int) -> Finding:
    per_node = reading.launch_counts.get("per_node")
    launched = reading.launch_counts.get("nodes", 1)
    if per_node is not None and per_node * launched == world:
        fix = f"set devices: {per_node} and num_nodes: {launched}, as the launch starts them"
    elif world % nodes == 0:
        fix = f"set devices: {world // nodes}"
    else:
        fix = f"set devices × num_nodes to {world}"
    return finding(
        "litgpt-world-mismatch",
        f"You set `devices={devices}` and `num_nodes={nodes}` in Lightning, but the product "
        f"({devices} * {nodes}) does not match the world size ({world}) (Lightning Fabric's "
        "words): litgpt refuses to start, so no batch runs",
        hint=f"{fix}, or launch {counted(devices * nodes, 'process', 'processes')}",
        where=reading.where(DEVICES),
    )


def _accumulation(
    reading: Reading,
    values: dict,
    findings: list[Finding],
    sizes: tuple[int, int, int, int],
    version: tuple[int, ...] | None,
) -> tuple[dict, list[Finding]]:
    """``TrainArgs.gradient_accumulation_iters`` (the installed release's rule), and the
    global batch it really runs."""
    g, micro, devices, nodes = sizes
    per_node = generation.per_node(version)
    divisor = devices if per_node else devices * nodes
    per_rank = g // divisor
    accumulation = per_rank // micro
    if accumulation == 0:
        findings.append(_too_small(reading, g, micro, divisor))
        values["gradient_accumulation_steps"] = None
        return values, findings
    real = micro * accumulation * devices * nodes
    values |= {"global_batch_size": real, "gradient_accumulation_steps": accumulation}
    if nodes > 1:
        findings.append(_nodes(reading, g, micro, devices, nodes, version))
    if per_rank * divisor != g or accumulation * micro != per_rank:
        findings.append(
            _floor(reading, g, micro, devices, nodes, (per_rank, accumulation, real), divisor)
        )
    return values, findings


def _too_small(reading: Reading, g: int, micro: int, divisor: int) -> Finding:
    what = "batch_size" if g // divisor == 0 else "gradient_accumulation_iters"
    return finding(
        "litgpt-batch-too-small",
        f"{GLOBAL} {g} gives {g} // {divisor} ranks = {g // divisor} per rank, "
        f"{'' if g // divisor == 0 else f'// micro {micro} = 0 micro-batches, '}so litgpt's "
        f"assert in TrainArgs.{what} fails (AssertionError) before training",
        hint=f"set {GLOBAL} to at least {micro * divisor} (micro {micro} × {divisor} ranks)",
        where=reading.where(GLOBAL),
    )


def _floor(
    reading: Reading,
    g: int,
    micro: int,
    devices: int,
    nodes: int,
    derived: tuple[int, int, int],
    divisor: int,
) -> Finding:
    per_rank, accumulation, real = derived
    ranks = devices * nodes
    ways = (
        f"{g} // {divisor} {'devices' if divisor == devices and nodes > 1 else 'ranks'} = "
        f"{per_rank} per rank, // micro {micro} = accumulation {accumulation}"
    )
    return finding(
        "litgpt-floor",
        f"litgpt floors silently: {GLOBAL} {g} → {ways}, so it runs micro {micro} × "
        f"accumulation {accumulation} × {ranks} ranks = {real} samples per optimizer step, "
        f"not {g}",
        hint=solve.alternatives(g, {"micro": micro, "DP": ranks}, False, 1)
        .replace("use global", f"set {GLOBAL} to", 1)
        .replace("world size", "devices × num_nodes"),
        where=reading.where(GLOBAL),
    )


def _nodes(
    reading: Reading, g: int, micro: int, devices: int, nodes: int, version: tuple[int, ...] | None
) -> Finding:
    """What the node count does to the global batch in the installed release and the other."""
    old = micro * ((g // devices) // micro) * devices * nodes
    where = reading.where(NODES)
    if generation.per_node(version):
        assert version is not None
        return finding(
            "litgpt-per-node-batch",
            f"litgpt {generation.shown(version)} (installed here) divides {GLOBAL} by the "
            f"devices of one node, as every release before 0.5.8 does: on {nodes} nodes it "
            f"runs {old} samples per step; litgpt 0.5.8 and later run {g} with this file",
            hint=(
                f"on this litgpt write {GLOBAL}: {g // nodes} for a global batch of {g}, or "
                "upgrade to litgpt 0.5.8 or later"
                if g % nodes == 0
                else "upgrade to litgpt 0.5.8 or later, where the global batch counts every node"
            ),
            where=where,
        )
    now = (
        f"litgpt {generation.shown(version)} (installed here)"
        if version is not None
        else "litgpt 0.5.8 and later (read as such: litgpt is not installed here)"
    )
    return finding(
        "litgpt-global-since-058",
        f"{now} divides {GLOBAL} {g} over devices × num_nodes = {devices * nodes} ranks; "
        f"litgpt before 0.5.8 divided it by the {devices} devices of one node and ran {old} "
        f"samples per step on {nodes} nodes with this same file",
        where=where,
    )


def old_optimizer_keys(reading: Reading, version: tuple[int, ...] | None) -> list[Finding]:
    """The optimizer's settings under ``train:`` (litgpt 0.3 and before): refused by 0.4 and
    later (and by the release batchspec's extra installs, when litgpt is not installed here)."""
    old = [k for k in OLD_OPTIMIZER if k in reading.values]
    if not old or (version is not None and version < generation.OPTIMIZER_BLOCK):
        return []
    release = (
        f"litgpt {generation.shown(version)} (installed here)"
        if version is not None
        else "litgpt 0.4.0 and later"
    )
    moves = ", ".join(f"{k} → {OLD_OPTIMIZER[k]}" for k in old)
    return [
        finding(
            "litgpt-old-optimizer-keys",
            f"{', '.join(old)} {'is' if len(old) == 1 else 'are'} litgpt 0.3's (the optimizer's "
            f"settings under train:); {release} has them in an optimizer: block and its "
            "command line refuses the file",
            hint=f"move them: {moves} (optimizer: {{class_path: torch.optim.AdamW, init_args: ...}})",
            where=reading.where(old[0]),
        )
    ]


# Checking and writing -----------------------------------------------------------------------


def check(spec: BatchSpec) -> list[Finding]:
    sizes = {
        "tensor": spec.tensor_parallel_size,
        "pipeline": spec.pipeline_parallel_size,
        "context": spec.context_parallel_size,
    }
    bigger = {k: v for k, v in sizes.items() if v > 1}
    if not bigger:
        return []
    dp = spec.world
    g, micro = spec.global_batch, spec.micro
    keep = (
        f"on {dp} data-parallel ranks accumulation {g // (micro * dp)} keeps global {g}"
        if g % (micro * dp) == 0
        else f"on {dp} data-parallel ranks "
        + solve.alternatives(g, {"micro": micro, "DP": dp}, False, 1)
    )
    return [
        finding(
            "litgpt-no-model-parallel",
            f"litgpt's training has no tensor, pipeline or context parallelism (FSDP shards the "
            f"model over data-parallel ranks), but the batch layout has "
            f"{', '.join(f'{k} {v}' for k, v in bigger.items())}",
            hint=f"for litgpt make every size 1 (every rank data-parallel): {keep}",
        )
    ]


def context(spec: BatchSpec) -> dict:
    nodes = spec.nodes or 1
    return {"spec": spec, "devices": spec.world // nodes, "nodes": nodes}


def edits(reading: Reading, spec: BatchSpec) -> dict:
    """New values for litgpt's train keys (one ``train`` block written when the file has
    none). ``devices`` and ``num_nodes`` are its launch words (:func:`own_world`): update
    edits them as a launcher's; ``devices: auto`` stays. In a job, the words litgpt is given
    (a key its YAML sets is edited there, or refused)."""
    config = _mapping(reading.text)  # None for a job's script
    if config is not None and "train" not in config:
        return {
            "train": {
                "global_batch_size": spec.global_batch_size,
                "micro_batch_size": spec.micro_batch_size,
            }
        }
    out: dict = {GLOBAL: spec.global_batch_size, MICRO: spec.micro_batch_size}
    if SEQUENCE in reading.values and spec.sequence_length is not None:
        out[SEQUENCE] = spec.sequence_length
    return out | _follow_launcher(reading, spec)


def _follow_launcher(reading: Reading, spec: BatchSpec) -> dict:
    """Under another launcher (``srun``, ``torchrun``), the ``devices`` and ``num_nodes`` a job
    gives litgpt follow the launcher's new world (Fabric refuses any other)."""
    if reading.launcher in (None, NAME):
        return {}
    nodes = spec.nodes or reading.count(NODES) or 1
    out = {NODES: nodes} if NODES in reading.values else {}
    if reading.count(DEVICES) is not None and spec.world % nodes == 0:
        out[DEVICES] = spec.world // nodes
    return out


def insertion(reading: Reading, key: str) -> tuple[int, int]:
    """Where ``update`` writes a key the YAML lacks: a train key after the other batch key of
    the ``train:`` block (else after its first line), a top-level one after ``devices`` or
    ``num_nodes`` (else at the end)."""
    from translator.frameworks.shared import yaml_insert

    if key == DEVICES and NODES not in reading.values:
        # After the line of the command's own setting (a train block goes at the end).
        found = _COMMAND_LINE.search(reading.text)
        if found is not None:
            return found.end(), found.end()
    if not key.startswith("train."):
        return yaml_insert.after_key(reading, key, NODES if key == DEVICES else DEVICES)
    for other in (MICRO, GLOBAL):
        if other != key and reading.values.get(other) is not None and reading.values[other].span:
            return yaml_insert.after_key(reading, key, other)
    line = _block_line(reading.text)
    if line is None:
        raise InputError(f"{reading.path}: {key} is not in the file; add it under train: by hand")
    return line, line


def _block_line(text: str) -> int | None:
    """The offset just after the ``train:`` line of a block mapping, else ``None``."""
    found = _TRAIN_BLOCK.search(text)
    return None if found is None else found.end()


#: The top-level line of a setting only one command has, with its line end.
_COMMAND_LINE = re.compile(r"^(?:model_name|checkpoint_dir):[ \t]*[^\s#][^\n]*\n", re.M)
#: A ``train:`` line that opens a block mapping (a comment may follow), with its line end.
_TRAIN_BLOCK = re.compile(r"^train:[ \t]*(?:#[^\n]*)?\r?\n", re.M)


def inserted(reading: Reading, key: str, value: object) -> str:
    """The line(s) ``update`` writes for a key the YAML lacks: a train key indented as the
    block's others, a whole ``train:`` block, or ``key: value`` at the top."""
    if key == "train" and isinstance(value, dict):
        return "train:\n" + "\n".join(f"  {k}: {v}" for k, v in value.items())
    if not key.startswith("train."):
        return f"{key}: {value}"
    indent = "  "
    for other in KEYS:
        v = reading.values.get(other)
        if v is not None and v.line is not None:
            text = reading.text.splitlines()[v.line - 1]
            indent = text[: len(text) - len(text.lstrip())] or indent
            break
    return f"{indent}{key.split('.', 1)[1]}: {value}"
