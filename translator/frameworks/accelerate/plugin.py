"""The DeepSpeed config ``accelerate launch`` hands the training process on a DeepSpeed launch
(``distributed_type: DEEPSPEED``), as accelerate's ``DeepSpeedPlugin`` builds it
(``utils/dataclasses.py``, from the variables ``prepare_deepspeed_cmd_env`` exports):

- with ``deepspeed_config.deepspeed_config_file``: that file, opened from the folder the launch
  runs in (``--run-dir``, :func:`~translator.reading.running_in`; else the current one, then
  the config's own), with ``gradient_accumulation_steps`` 1 where the file has none; beside it accelerate
  refuses the accelerate keys it would ignore (:data:`IGNORED`, ``_deepspeed_config_checks``);
- without: ``train_batch_size`` and ``train_micro_batch_size_per_gpu`` ``"auto"``, the inline
  ``gradient_accumulation_steps`` (else ``"auto"``) and ``zero_stage`` (else 2).

The HF Trainer then fills its ``"auto"`` values and refuses any other that differs from its
TrainingArguments (``propagate_args_to_deepspeed``, ``trainer_config_finalize``); a script with
its own ``Accelerator`` takes the DeepSpeed accumulation over its own.
"""

from __future__ import annotations

import json
from pathlib import Path

from translator.frameworks.deepspeed import config_json as deepspeed
from translator.plugin.job_files import read_job_file
from translator.reading import Reading, Value, run_folders
from translator.words.findings import finding

FILE = "deepspeed_config.deepspeed_config_file"
#: accelerate config key -> the DeepSpeed key it sets when no file is named.
INLINE = {
    "deepspeed_config.gradient_accumulation_steps": deepspeed.GAS,
    "deepspeed_config.zero_stage": "zero_optimization.stage",
}
#: ``deepspeed_config`` keys accelerate refuses beside a ``deepspeed_config_file`` ("When using
#: `deepspeed_config_file`, the following accelerate config variables will be ignored").
IGNORED = (
    "gradient_accumulation_steps",
    "gradient_clipping",
    "zero_stage",
    "offload_optimizer_device",
    "offload_param_device",
    "offload_param_nvme_path",
    "offload_optimizer_nvme_path",
    "zero3_save_16bit_model",
)
#: The ZeRO stage of the plugin when the accelerate config names none.
DEFAULT_STAGE = 2


def plugin_config(reading: Reading, config: dict) -> Reading | None:
    """The DeepSpeed config the launch of ``config`` (the accelerate config ``reading`` read)
    hands over, as a DeepSpeed JSON's reading; ``None`` for a launch without DeepSpeed or a
    file that is not found (a warning then)."""
    if str(config.get("distributed_type", "")).upper() != "DEEPSPEED":
        return None
    block = config.get("deepspeed_config")
    block = block if isinstance(block, dict) else {}
    name = block.get("deepspeed_config_file")
    if isinstance(name, str) and name:
        return _from_file(reading, config, block, name)
    text = json.dumps(
        {
            deepspeed.TBS: "auto",
            deepspeed.MBS: "auto",
            deepspeed.GAS: block.get("gradient_accumulation_steps") or "auto",
            "zero_optimization": {"stage": block.get("zero_stage", DEFAULT_STAGE)},
        },
        indent=2,
    )
    built = deepspeed.read(text, f"{reading.path} (deepspeed_config)")
    for key, v in built.values.items():  # where each value stands: the accelerate config
        built.values[key] = Value(v.value, None, None, None, reading.path)
    for key, ds_key in INLINE.items():
        given = reading.values.get(key)
        if given is not None:
            built.values[ds_key] = Value(given.value, given.line, None, None, reading.path)
    return built


def _from_file(reading: Reading, config: dict, block: dict, name: str) -> Reading | None:
    """The file ``deepspeed_config_file`` names, as the plugin takes it."""
    where = reading.where(FILE)
    refused = [k for k in IGNORED if k in block]
    refused += ["mixed_precision"] if config.get("mixed_precision") is not None else []
    if refused:
        reading.findings.append(
            finding(
                "accelerate-deepspeed-file-and-keys",
                f"deepspeed_config_file {name} beside {', '.join(refused)}: accelerate refuses "
                "it (When using `deepspeed_config_file`, the following accelerate config "
                "variables will be ignored)",
                hint=f"set them in {name} and delete them from {reading.path}",
                where=where,
            )
        )
    here = Path(reading.path).parent if reading.path != "-" else Path()
    bases = [*run_folders(), here] if not Path(name).is_absolute() else [Path()]
    found = next((b / name for b in dict.fromkeys(bases) if (b / name).is_file()), None)
    looked = ", ".join(str(b / name) for b in dict.fromkeys(bases))
    opened = read_job_file(
        reading,
        name,
        (found, looked),
        deepspeed.read,
        kind="the DeepSpeed config",
        reads_as="a DeepSpeed JSON",
        where=where,
    )
    if isinstance(opened, str):
        return None
    found, ds = opened
    if "zero_optimization" not in json.loads(ds.text):
        reading.findings.append(
            finding(
                "accelerate-deepspeed-no-zero",
                f"{found} has no zero_optimization: accelerate's DeepSpeedPlugin refuses it "
                "(Please specify the ZeRO optimization config in the DeepSpeed config.)",
                hint=f'add "zero_optimization": {{"stage": 0}} (or the stage you mean) to {found}',
                where=where,
            )
        )
    if deepspeed.GAS not in ds.values:
        line = reading.values[FILE].line
        ds.values[deepspeed.GAS] = Value(1, line, None, None, reading.path)
        ds.findings.append(
            finding(
                "accelerate-deepspeed-accumulation",
                f"{found} has no {deepspeed.GAS}: accelerate's DeepSpeedPlugin sets it to 1, "
                "which the HF Trainer then requires of its own gradient_accumulation_steps",
                hint=f'set "{deepspeed.GAS}": "auto" in {found} to take the Trainer\'s',
                where=where,
            )
        )
    return ds
