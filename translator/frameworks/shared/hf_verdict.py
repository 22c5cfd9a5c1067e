"""transformers' own code on a TrainingArguments file: ``HfArgumentParser`` +
``TrainingArguments`` (types and combinations), and ``HfTrainerDeepSpeedConfig`` (the "auto"
fill and the mismatch check) for the DeepSpeed JSON it names, at a given world size."""

from __future__ import annotations

import json
from types import SimpleNamespace
from typing import Any

from translator.frameworks.shared.hf_deepspeed import of_launch
from translator.reading import Launch, Reading


def training_arguments(reading: Reading, world: int) -> tuple[Any, dict | None]:
    """The file (for a job: the TrainingArguments its flags give) parsed the way
    ``HfArgumentParser.parse_dict`` parses it (extra keys, such as TRL's, allowed); the DeepSpeed JSON is checked as the Trainer checks it at ``world``
    processes and its mismatch raised in transformers' words. Returns the arguments and that
    DeepSpeed config as the Trainer fills it (``None`` without one)."""
    import yaml
    from transformers import HfArgumentParser, TrainingArguments

    text = reading.text
    if reading.launcher is not None:  # a job: the TrainingArguments its flags and files give
        from translator.frameworks import get

        job_config = get(reading.framework).job_config
        text = job_config(reading) if job_config is not None else text
    data = (json.loads(text) if text.lstrip().startswith("{") else yaml.safe_load(text)) or {}
    data = {k: v for k, v in data.items() if k != "deepspeed"} | {
        "use_cpu": True,
        "report_to": "none",
    }
    # transformers types DataClassType as NewType("DataClassType", Any): no class matches it.
    parser = HfArgumentParser(TrainingArguments)  # type: ignore[arg-type]
    (args,) = parser.parse_dict(data, allow_extra_keys=True)
    partners, _ = of_launch(reading, reading.launch or Launch())
    configs = [
        json.loads(p.text) if p in reading.partners else plugin_config(p.text) for p in partners
    ]
    filled = [deepspeed_mismatch(config, args, world) for config in configs]
    return args, (filled[0] if filled else None)


def plugin_config(text: str) -> dict:
    """The DeepSpeed config accelerate's own ``DeepSpeedPlugin`` hands the Trainer for the
    config ``text`` a DeepSpeed launch of ``accelerate launch`` names (what
    ``prepare_deepspeed_cmd_env`` exports: the file, and that DeepSpeed is on)."""
    import os
    import tempfile
    from unittest import mock

    from accelerate.utils import DeepSpeedPlugin

    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as tmp:
        tmp.write(text)
    launched = {"ACCELERATE_USE_DEEPSPEED": "true", "ACCELERATE_DEEPSPEED_CONFIG_FILE": tmp.name}
    try:
        with mock.patch.dict(os.environ, launched):
            return dict(DeepSpeedPlugin().hf_ds_config.config)
    finally:
        os.unlink(tmp.name)


def deepspeed_mismatch(config: dict, args, world: int) -> dict:
    """``HfTrainerDeepSpeedConfig.trainer_config_process`` + ``trainer_config_finalize``'s
    check on ``config`` for ``args`` at ``world`` processes: the filled config, or transformers'
    ValueError naming each mismatch."""
    from transformers.integrations.deepspeed import HfTrainerDeepSpeedConfig

    ds = HfTrainerDeepSpeedConfig(config)
    ds.trainer_config_process(_AtWorld(args, world))
    if ds.mismatches:
        mismatches = "\n".join(ds.mismatches)
        raise ValueError(
            "Please correct the following DeepSpeed config values that mismatch "
            f"TrainingArguments values:\n{mismatches}\nThe easiest method is to "
            "set these DeepSpeed config values to 'auto'."
        )
    return ds.config


class _AtWorld:
    """The real TrainingArguments, as the processes of a launch of ``world`` see them."""

    def __init__(self, args, world: int):
        self._args, self.world_size = args, world

    def __getattr__(self, name):
        return getattr(self._args, name)


def total_train_batch_size(args, config: dict | None, world: int) -> int:
    """``Trainer.get_total_train_batch_size`` on ``args`` at ``world`` processes, the DeepSpeed
    ``config`` the Trainer filled (its AutoTP size divides the world), run on a stand-in for
    the Trainer that holds only what the method reads; per device × accumulation × world where
    transformers has no such method."""
    from transformers import Trainer
    from transformers.integrations.deepspeed import HfTrainerDeepSpeedConfig

    count = getattr(Trainer, "get_total_train_batch_size", None)
    if count is None:
        return args.per_device_train_batch_size * args.gradient_accumulation_steps * world

    class Counting:  # a Trainer built by that launch, without a model of its own TP plan
        model = accelerator = None
        is_deepspeed_enabled = config is not None
        _train_batch_size = args.per_device_train_batch_size

    stand_in = Counting()
    for name in ("get_tp_size", "get_cp_size", "get_sp_size"):
        if hasattr(Trainer, name):
            setattr(Counting, name, getattr(Trainer, name))
    ds = None if config is None else HfTrainerDeepSpeedConfig(config)
    stand_in.args = SimpleNamespace(hf_deepspeed_config=ds)  # type: ignore[attr-defined]
    return count(stand_in, _AtWorld(args, world))


def verdict(inspection, world: int) -> str:
    """transformers' own ``TrainingArguments`` (and ``HfTrainerDeepSpeedConfig`` for a
    DeepSpeed JSON) on the file's values."""

    args, config = training_arguments(inspection.reading, world)
    total = total_train_batch_size(args, config, world)
    return (
        f"TrainingArguments: per_device_train_batch_size {args.per_device_train_batch_size}"
        f", gradient_accumulation_steps {args.gradient_accumulation_steps}; the Trainer's "
        f"total train batch size at world {world}: {total}"
    )
