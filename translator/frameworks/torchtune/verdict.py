"""torchtune's own checks on a config (``validate --with-framework``).

torchtune 0.6.1: the distributed recipe's own ``FullFinetuneRecipeDistributed.__init__`` (the
file from the installed torchtune's ``recipes/``), with the process group left out and the
world size it asks for patched in: it refuses a world that ``tensor_parallel_dim`` does not
divide, tensor parallelism without a plan, and ``optimizer_in_bwd`` with accumulation, then
holds its data-parallel size and accumulation. On a torchtune whose ``training`` has
``ParallelDims`` (main), that class is asked instead (the recipe's ``__init__`` builds a device
mesh there, which needs real processes). The config's keys that do not shape the batch are set
so that ``__init__`` runs on this machine: the CPU, fp32, no activation offloading.
"""

from __future__ import annotations

import importlib.util
import tempfile
from pathlib import Path
from unittest import mock

from translator.frameworks.torchtune import program
from translator.words.findings import counted

#: What ``__init__`` reads beyond the batch, set so it runs here (key -> value).
HERE: dict[str, object] = {
    "device": "cpu",
    "dtype": "fp32",
    "enable_activation_offloading": False,
    "enable_async_checkpointing": False,
}
#: What ``__init__`` reads without a default, when the file lacks it (a rendered fragment).
DEFAULTS: dict[str, object] = {
    "resume_from_checkpoint": False,
    "seed": None,
    "epochs": 1,
    "max_steps_per_epoch": None,
    "checkpointer": {"model_type": "LLAMA3"},
    "optimizer": {"_component_": "torch.optim.AdamW"},
}


def config_of(inspection) -> dict:
    """The config as the recipe would get it: the file the batch keys come from, with the
    reading's values (a job's overrides) on top."""
    import yaml

    reading = inspection.reading
    named = next((v.file for v in reading.values.values() if v.file), None)
    if named is None and reading.launcher is not None:  # a job whose config was not read
        data = {}
    else:
        data = yaml.safe_load(Path(named).read_text() if named else reading.text)
    data = data if isinstance(data, dict) else {}
    for key in program.READ:
        value = reading.values.get(key)
        if value is None:
            continue
        block, _, inner = key.rpartition(".")
        holder = data.setdefault(block, {}) if block else data
        if isinstance(holder, dict):
            holder[inner] = value.value
    return data


def verdict(inspection, world: int) -> str:
    from omegaconf import OmegaConf
    from torchtune import training

    cfg = OmegaConf.create(config_of(inspection))
    if hasattr(training, "ParallelDims"):
        dims = training.ParallelDims(
            dp_replicate=cfg.get("data_parallel_replicate_dim", 1),
            dp_shard=cfg.get("data_parallel_shard_dim", -1),
            tp=cfg.get("tensor_parallel_dim", 1),
            cp=cfg.get("context_parallel_dim", 1),
            world_size=world,
        )
        dp, accumulation = dims.dp_replicate * dims.dp_shard, cfg.gradient_accumulation_steps
        who = "training.ParallelDims"
    else:
        dp, accumulation = _recipe_init(cfg, world)
        who = "FullFinetuneRecipeDistributed.__init__"
    micro = cfg.batch_size
    return (
        f"{who} at world {world}: batch_size {micro} × {dp} data-parallel × "
        f"{counted(accumulation, 'accumulation step', 'accumulation steps')} = "
        f"{micro * dp * accumulation} samples per optimizer step (torchtune checks no global)"
    )


def _recipe_init(cfg, world: int) -> tuple[int, int]:
    """The 0.6.1 recipe's ``__init__`` on ``cfg`` at ``world``: its data-parallel size and
    accumulation (its refusals propagate)."""
    import torchtune
    from omegaconf import OmegaConf

    for key, default in DEFAULTS.items():
        if key not in cfg:
            cfg[key] = default
    with tempfile.TemporaryDirectory() as out:
        OmegaConf.update(cfg, "output_dir", out, force_add=True)
        for key, here in HERE.items():
            OmegaConf.update(cfg, key, here, force_add=True)
        module = recipe_module()
        with (
            mock.patch.object(module, "init_process_group", lambda *a, **k: None),
            mock.patch.object(torchtune.utils, "get_world_size_and_rank", lambda: (world, 0)),
        ):
            recipe = module.FullFinetuneRecipeDistributed(cfg)
    return recipe.data_parallel_dim, recipe._gradient_accumulation_steps


def recipe_module():
    """The installed torchtune's ``recipes/full_finetune_distributed.py``, imported."""
    spec = importlib.util.find_spec("torchtune")
    assert spec is not None and spec.origin is not None
    path = Path(spec.origin).parent.parent / "recipes" / "full_finetune_distributed.py"
    loader = importlib.util.spec_from_file_location("_batchspec_torchtune_recipe", path)
    if loader is None or loader.loader is None:
        raise ImportError(f"torchtune's recipe is not at {path}")
    module = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(module)
    return module
