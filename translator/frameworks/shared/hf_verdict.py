"""transformers' own code on a TrainingArguments file: ``HfArgumentParser`` +
``TrainingArguments`` (types and combinations), and ``HfTrainerDeepSpeedConfig`` (the "auto"
fill and the mismatch check) for the DeepSpeed JSON it names, at a given world size."""

from __future__ import annotations

import json

from translator.reading import Reading


def training_arguments(reading: Reading, world: int):
    """The file (for a job: the TrainingArguments its flags give) parsed the way
    ``HfArgumentParser.parse_dict`` parses it (extra keys, such as TRL's, allowed); the DeepSpeed JSON is checked as the Trainer checks it at ``world``
    processes and its mismatch raised in transformers' words."""
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
    for partner in reading.partners:
        deepspeed_mismatch(json.loads(partner.text), args, world)
    return args


def deepspeed_mismatch(config: dict, args, world: int) -> dict:
    """``HfTrainerDeepSpeedConfig.trainer_config_process`` + ``trainer_config_finalize``'s
    check on ``config`` for ``args`` at ``world`` processes: the filled config, or transformers'
    ValueError naming each mismatch."""
    from transformers.integrations.deepspeed import HfTrainerDeepSpeedConfig

    class AtWorld:  # the real TrainingArguments, as the processes of the launch see it
        world_size = world

        def __getattr__(self, name):
            return getattr(args, name)

    ds = HfTrainerDeepSpeedConfig(config)
    ds.trainer_config_process(AtWorld())
    if ds.mismatches:
        mismatches = "\n".join(ds.mismatches)
        raise ValueError(
            "Please correct the following DeepSpeed config values that mismatch "
            f"TrainingArguments values:\n{mismatches}\nThe easiest method is to "
            "set these DeepSpeed config values to 'auto'."
        )
    return ds.config


def verdict(inspection, world: int) -> str:
    """transformers' own ``TrainingArguments`` (and ``HfTrainerDeepSpeedConfig`` for a
    DeepSpeed JSON) on the file's values."""

    args = training_arguments(inspection.reading, world)
    total = args.per_device_train_batch_size * args.gradient_accumulation_steps * world
    return (
        f"TrainingArguments: per_device_train_batch_size {args.per_device_train_batch_size}"
        f", gradient_accumulation_steps {args.gradient_accumulation_steps}; the Trainer's "
        f"total train batch size at world {world}: {total}"
    )
