"""litgpt's own verdict on a config: its command's parser and its own batch arithmetic.

:func:`resolve` builds jsonargparse's parser from the ``setup`` function of the command the
file is for (``litgpt.pretrain.setup``, or that of the first finetune command whose parser
takes it: LoRA's, full's, the adapters'), as ``litgpt pretrain --config FILE`` does, parses the
file with it (an unknown key, a value of the wrong
type, litgpt 0.3's optimizer keys are refused in litgpt's words), builds its ``TrainArgs`` and
asks it for ``batch_size(devices, num_nodes)`` and ``gradient_accumulation_iters(devices,
num_nodes)``; Lightning Fabric's own check of the launch (``TorchElasticEnvironment
.validate_settings``) says whether ``devices × num_nodes`` is the world. litgpt itself floors
silently; the verdict refuses a file whose batch it floors, naming the samples litgpt runs.

litgpt is imported inside the functions only.
"""

from __future__ import annotations

import math
from inspect import signature

from translator.frameworks.litgpt import rules
from translator.frameworks.shared.environ import environ

#: Set while litgpt runs: never reach the Hub; ``torch.compile`` is a no-op (the tiny model
#: would spend longer compiling than training).
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TORCHDYNAMO_DISABLE": "1"}
#: The modules of ``litgpt finetune_<x>`` (``finetune`` is LoRA's): a finetune YAML does not
#: say which it is for, and they count the batch alike.
FINETUNES = ("lora", "full", "adapter", "adapter_v2")


def setup_functions(command: str) -> list:
    """The ``setup`` functions ``litgpt <command>`` may run: pretrain's, or each finetune's."""
    import importlib

    if command == "pretrain":
        return [importlib.import_module("litgpt.pretrain").setup]
    return [importlib.import_module(f"litgpt.finetune.{name}").setup for name in FINETUNES]


def parse(text: str, command: str):
    """The YAML as the command's jsonargparse parser reads it; for a finetune YAML, the first
    finetune command that takes it (else LoRA's refusal)."""
    from jsonargparse import ArgumentParser

    key, stand_in = rules.REQUIRED[command]
    refusals = []
    for setup in setup_functions(command):
        parser = ArgumentParser(exit_on_error=False)
        parser.add_function_arguments(setup, fail_untyped=False)
        parser.set_defaults({key: stand_in})
        try:
            return parser.parse_string(text)
        except Exception as exc:  # jsonargparse's ArgumentError, in litgpt's words
            refusals.append(exc)
    raise refusals[0]


def _world(world: int):
    """A torchelastic launch of ``world`` processes, for Fabric's check of it."""
    return environ({"WORLD_SIZE": str(world), "RANK": "0", "LOCAL_RANK": "0", "GROUP_RANK": "0"})


def resolve(text: str, command: str, world: int) -> dict:
    """litgpt's reading of a YAML for ``command`` on ``world`` processes: its ``TrainArgs``
    values, the devices and nodes, the per-rank batch and accumulation it derives, and the
    samples per optimizer step that makes. litgpt's and Fabric's exceptions propagate."""
    from lightning.fabric.plugins.environments import TorchElasticEnvironment
    from litgpt.args import TrainArgs

    parsed = parse(text, command)
    train = TrainArgs(**parsed.train.as_dict())
    nodes = int(parsed.num_nodes)
    devices = parsed.devices
    if devices in rules.AUTO:  # every GPU of the machine; the launch decides on a cluster
        devices = world // nodes
    devices = int(devices)
    with _world(world):
        TorchElasticEnvironment().validate_settings(devices, nodes)
    # Releases before 0.5.8 take the devices of one node only (the global batch per node).
    sizes = (
        (devices, nodes) if "num_nodes" in signature(train.batch_size).parameters else (devices,)
    )
    try:
        per_rank = train.batch_size(*sizes)
        accumulation = train.gradient_accumulation_iters(*sizes)
    except AssertionError:  # litgpt's bare assert > 0: say what it asserted
        raise AssertionError(
            f"TrainArgs asserts a batch of at least one micro-batch per rank: "
            f"{train.global_batch_size} // {' × '.join(map(str, sizes))} = "
            f"{train.global_batch_size // math.prod(sizes)} per rank, // micro "
            f"{train.micro_batch_size} = {train.global_batch_size // math.prod(sizes) // train.micro_batch_size}"
        ) from None
    return {
        "global_batch_size": train.global_batch_size,
        "micro_batch_size": train.micro_batch_size,
        "devices": devices,
        "num_nodes": nodes,
        "batch_size": per_rank,
        "gradient_accumulation_iters": accumulation,
        "samples_per_step": train.micro_batch_size * accumulation * devices * nodes,
    }


def verdict(inspection, world: int) -> str:
    """litgpt's parser and ``TrainArgs`` on the file (a job: the YAML its words give)."""
    from translator.frameworks.litgpt.program import job_config

    reading = inspection.reading
    said_command = reading.values.get(rules.COMMAND)
    # A file that names neither model_name nor checkpoint_dir (batchspec's own render) is
    # merged into a config of either; both commands count the batch alike: pretrain's is asked.
    command = "pretrain" if said_command is None else str(said_command.value)
    taken = (
        " (taken: the file names no model_name or checkpoint_dir)" if said_command is None else ""
    )
    # A job: the YAML its words give; a litgpt YAML: itself, whole.
    text = reading.text if rules.claims(reading.text) else job_config(reading)
    got = resolve(text, command, world)
    said = (
        f"TrainArgs.batch_size({got['devices']}, {got['num_nodes']}) = {got['batch_size']}, "
        f"gradient_accumulation_iters = {got['gradient_accumulation_iters']}"
    )
    if got["samples_per_step"] != got["global_batch_size"]:
        raise ValueError(
            f"litgpt {command}{taken} floors train.global_batch_size {got['global_batch_size']}: "
            f"{said}, so it runs {got['micro_batch_size']} × {got['gradient_accumulation_iters']}"
            f" × {got['devices'] * got['num_nodes']} = {got['samples_per_step']} samples per "
            "optimizer step"
        )
    return (
        f"litgpt {command}'s parser{taken} and {said}: {got['samples_per_step']} samples per step"
    )
