"""nanotron's own code on a config, on the CPU and without a process group.

1. ``get_config_from_dict`` (what ``get_config_from_file`` runs, dacite ``strict=True``): the
   whole ``Config`` for a whole config; for a file of the batch blocks only (what ``render``
   writes), ``ParallelismArgs`` and ``TokensArgs`` each, with ``train_steps`` 1 standing in
   when the blocks do not give it (it is not a batch value).
2. ``ParallelContext.__init__`` at the world size: its size checks come first, and its
   ``set_device`` (CUDA) is where this check stops it.
3. With ``pp > 1`` and 1F1B, the engine's ``train_batch_iter`` on a stand-in pipeline group of
   ``pp`` ranks: its assertion comes first, and reading the batch is where this check stops it.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import yaml

from translator.frameworks.nanotron import native, rules
from translator.plugin.contract import NotEnoughKnown


class _Passed(Exception):
    """Raised where nanotron's checks are behind it and its real work would begin."""


def verdict(inspection, world: int) -> str:
    """nanotron's dataclasses, ``ParallelContext`` and 1F1B engine on the file at ``world``."""
    data = yaml.safe_load(_config_text(inspection.reading))
    if not isinstance(data, dict):
        raise NotEnoughKnown("the file is no YAML mapping")
    nanotron = native.config()
    parallelism, tokens, how = _load(nanotron, data)
    _parallel_context(parallelism, world)
    _one_f_one_b(parallelism, tokens)
    batch = tokens.micro_batch_size * tokens.batch_accumulation_per_replica * parallelism.dp
    return (
        f"{how}; ParallelContext takes world {world}; global batch {batch} "
        f"(micro {tokens.micro_batch_size} × accumulation "
        f"{tokens.batch_accumulation_per_replica} × dp {parallelism.dp}), "
        f"{type(parallelism.pp_engine).__name__}"
    )


def _config_text(reading) -> str:
    """The YAML: the file itself, or for a job the one its ``--config-file`` names."""
    if reading.launcher is None:
        return reading.text
    named = next((v.file for v in reading.values.values() if v.file), None)
    if named is None:
        raise NotEnoughKnown("the job's nanotron config was not read")
    return Path(named).read_text(encoding="utf-8")


def _load(nanotron, data: dict):
    """``(ParallelismArgs, TokensArgs, what was loaded)`` by nanotron's own loader."""
    load = nanotron.get_config_from_dict
    if any(key in data for key in rules.WHOLE):
        config = load(data)
        if config.tokens is None:
            raise NotEnoughKnown("the config has no tokens block")
        return config.parallelism, config.tokens, "get_config_from_dict loads the Config"
    if not isinstance(data.get("parallelism"), dict) or not isinstance(data.get("tokens"), dict):
        raise NotEnoughKnown("the file has no parallelism and tokens blocks")
    tokens = dict(data["tokens"])
    stand_in = "train_steps" not in tokens
    tokens.setdefault("train_steps", 1)
    return (
        load(data["parallelism"], config_class=nanotron.ParallelismArgs),
        load(tokens, config_class=nanotron.TokensArgs),
        "get_config_from_dict loads ParallelismArgs and TokensArgs"
        + (" (train_steps 1 standing in)" if stand_in else ""),
    )


def _parallel_context(parallelism, world: int) -> None:
    """``ParallelContext``'s size checks for ``parallelism`` on ``world`` processes."""
    import inspect

    from nanotron.parallel.context import ParallelContext

    class Checked(ParallelContext):
        def set_device(self):
            raise _Passed

    sizes = {
        "tensor_parallel_size": parallelism.tp,
        "pipeline_parallel_size": parallelism.pp,
        "data_parallel_size": parallelism.dp,
        "expert_parallel_size": parallelism.expert_parallel_size,
        "context_parallel_size": getattr(parallelism, "context_parallel_size", 1),
    }
    named = inspect.signature(ParallelContext.__init__).parameters
    with _world_size(world), contextlib.suppress(_Passed):
        Checked(**{k: v for k, v in sizes.items() if k in named})


@contextlib.contextmanager
def _world_size(world: int):
    """``WORLD_SIZE`` as torchrun would set it, restored after."""
    saved = os.environ.get("WORLD_SIZE")
    os.environ["WORLD_SIZE"] = str(world)
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop("WORLD_SIZE", None)
        else:
            os.environ["WORLD_SIZE"] = saved


class _PipelineGroup:
    """A stand-in process group of ``size`` pipeline stages."""

    def __init__(self, size: int):
        self._size = size

    def size(self) -> int:
        return self._size


class _Batch:
    """Micro-batches that stop the engine when it starts reading them."""

    def __iter__(self):
        raise _Passed


def _one_f_one_b(parallelism, tokens) -> None:
    """The 1F1B engine's micro-batch assertion, when it is the engine and there is a pipeline."""
    from nanotron.parallel.pipeline_parallel.engine import OneForwardOneBackwardPipelineEngine

    engine = parallelism.pp_engine
    if parallelism.pp == 1 or not isinstance(engine, OneForwardOneBackwardPipelineEngine):
        return
    with contextlib.suppress(_Passed):
        engine.train_batch_iter(
            model=None,
            pg=_PipelineGroup(parallelism.pp),
            batch=_Batch(),
            nb_microbatches=tokens.batch_accumulation_per_replica,
            grad_accumulator=None,
        )
