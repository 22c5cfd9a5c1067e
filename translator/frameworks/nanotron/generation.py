"""nanotron's two config generations, and which one a file and the installed package are.

Both call themselves 0.4: the PyPI release (``nanotron==0.4``, March 2024) and the git main
branch, whose ``pyproject.toml`` still says 0.4. ``get_config_from_dict`` loads a file with
dacite ``strict=True``, so each refuses the keys only the other has:

- **0.4** (PyPI): a top-level ``data`` block; the Adam settings straight under ``optimizer``;
  no context parallelism. ``ParallelContext`` asks for ``tp × pp × ep × dp`` processes (expert
  ranks come on top of the data-parallel ones).
- **current** (git main): ``data_stages``, ``optimizer.optimizer_factory``, ``metrics_logging``,
  ``s3_upload``, ``parallelism.context_parallel_size`` (March 2025), ``recompute_layer``,
  ``tp_recompute_allgather``. ``ParallelContext`` asserts ``TP*CP*DP*PP == WORLD_SIZE`` and lays
  its ranks out as ``(ep, pp, dp, cp, tp)``, so an expert-parallel size above 1 cannot start.

The installed generation is read from the installed package's source, so telling it costs no
import of nanotron (nor of torch).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Collection
from functools import cache
from pathlib import Path
from typing import Literal

Generation = Literal["0.4", "current"]

#: Keys (dotted one level down) only the current generation's dataclasses have.
CURRENT_KEYS = (
    "data_stages",
    "metrics_logging",
    "s3_upload",
    "optimizer.optimizer_factory",
    "parallelism.context_parallel_size",
    "parallelism.recompute_layer",
    "parallelism.tp_recompute_allgather",
)
#: Keys only the PyPI release's dataclasses have.
RELEASE_KEYS = (
    "data",
    "optimizer.adam_beta1",
    "optimizer.adam_beta2",
    "optimizer.adam_eps",
    "optimizer.torch_adam_is_fused",
)
#: How each generation is named in messages.
TITLES: dict[str, str] = {
    "0.4": "nanotron 0.4 (the PyPI release)",
    "current": "nanotron's current generation (git main)",
}


def own_keys(present: Collection[str]) -> tuple[Generation, list[str]] | None:
    """The generation a config is written for and the keys that say so, from the (dotted)
    keys it sets; ``None`` when it has none of them, or keys of both (no nanotron loads it)."""
    current = [k for k in CURRENT_KEYS if k in present]
    release = [k for k in RELEASE_KEYS if k in present]
    if bool(current) == bool(release):
        return None
    return ("current", current) if current else ("0.4", release)


@cache
def installed() -> Generation | None:
    """The installed nanotron's generation, from its ``ParallelismArgs`` source; ``None`` when
    nanotron is not installed."""
    try:
        spec = importlib.util.find_spec("nanotron")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    source = Path(next(iter(spec.submodule_search_locations))) / "config" / "parallelism_config.py"
    try:
        text = source.read_text(encoding="utf-8")
    except OSError:
        return None
    return "current" if "context_parallel_size" in text else "0.4"


def world_of(generation: Generation, sizes: dict[str, int]) -> int:
    """The processes ``ParallelContext`` of ``generation`` asks for (``sizes``: dp, tp, pp,
    context_parallel_size, expert_parallel_size)."""
    model = sizes["tp"] * sizes["pp"] * sizes["dp"]
    if generation == "0.4":
        return model * sizes["expert_parallel_size"]
    return model * sizes["context_parallel_size"]
