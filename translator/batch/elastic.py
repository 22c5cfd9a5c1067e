"""Elastic planning: on which world sizes a global batch splits exactly, and how.

``plan --world-sizes 8-128`` asks, for every world size, whether ``global = micro ×
accumulation × DP`` holds in whole numbers with DP = world / (TP × PP × CP), and for a world
on which it does not, names the nearest global batches that do (with the learning-rate change
each needs, when the spec has one). Pure arithmetic, no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from translator.batch import solve
from translator.words.errors import InputError

#: The most world sizes one request may name (a typo like 8-1000000 stays quick).
MOST_WORLDS = 100_000


@dataclass(frozen=True)
class WorldFit:
    """What one world size does with the global batch."""

    world_size: int
    """Processes in all."""
    data_parallel_size: int | None
    """world / (TP × PP × CP); None when the model-parallel size does not divide the world."""
    splits: tuple[tuple[int, int], ...]
    """Every (micro-batch, accumulation) that makes the global batch on this world, largest
    micro-batch first; empty when none does."""
    nearest: tuple[int, ...]
    """When none does: the nearest global batches that split on this world (below, above)."""

    @property
    def fits(self) -> bool:
        """Whether the global batch splits exactly on this world."""
        return bool(self.splits)


def parse_world_sizes(text: str, per_node: int | None = None) -> list[int]:
    """World sizes from ``8-128``, ``8,16,32`` or both (``8-32,64``), sorted, each once. With
    ``per_node``, a range keeps only whole nodes (its multiples of ``per_node``), and a listed
    size that is not a whole number of nodes is an error."""
    worlds: set[int] = set()
    for part in (p.strip() for p in text.split(",")):
        match = re.fullmatch(r"(\d+)(?:\s*-\s*(\d+))?", part)
        if match is None:
            raise InputError(
                f"--world-sizes {text!r}: {part!r} is not a world size or a range like 8-128"
            )
        low = int(match.group(1))
        high = int(match.group(2)) if match.group(2) else low
        if low < 1 or high < low:
            raise InputError(f"--world-sizes {text!r}: {part!r} is not a range of sizes ≥ 1")
        if high - low >= MOST_WORLDS:
            raise InputError(f"--world-sizes {text!r}: at most {MOST_WORLDS:,} sizes at once")
        if per_node is None:
            worlds.update(range(low, high + 1))
        elif match.group(2):
            first = -(-low // per_node) * per_node
            worlds.update(range(first, high + 1, per_node))
        elif low % per_node:
            raise InputError(
                f"--world-sizes {text!r}: {low} is not a whole number of nodes of {per_node}"
            )
        else:
            worlds.add(low)
    if not worlds:
        raise InputError(f"--world-sizes {text!r} holds no whole node of {per_node}")
    return sorted(worlds)


def fit(
    global_batch: int,
    world_size: int,
    model_parallel: int = 1,
    micro_batch: int | None = None,
    accumulation: int | None = None,
    max_micro: int | None = None,
) -> WorldFit:
    """How ``global_batch`` splits on ``world_size`` ranks with ``model_parallel`` = TP × PP ×
    CP; ``micro_batch``/``accumulation`` fix that factor, ``max_micro`` caps the micro-batch."""
    if world_size % model_parallel:
        return WorldFit(world_size, None, (), ())
    dp = world_size // model_parallel
    splits = tuple(
        (m, a)
        for m, a in (solve.decompositions(global_batch, dp) if global_batch % dp == 0 else [])
        if (micro_batch is None or m == micro_batch)
        and (accumulation is None or a == accumulation)
        and (max_micro is None or m <= max_micro)
    )
    if splits:
        return WorldFit(world_size, dp, splits, ())
    unit = dp * (micro_batch or 1) * (accumulation or 1)
    if micro_batch is not None and accumulation is not None:  # one global batch makes it
        return WorldFit(world_size, dp, (), (unit,))
    return WorldFit(world_size, dp, (), tuple(solve.nearest_multiples(global_batch, unit)))


def fits(
    global_batch: int,
    world_sizes: list[int],
    model_parallel: int = 1,
    micro_batch: int | None = None,
    accumulation: int | None = None,
    max_micro: int | None = None,
) -> list[WorldFit]:
    """:func:`fit` for every world size, in order."""
    return [
        fit(global_batch, w, model_parallel, micro_batch, accumulation, max_micro)
        for w in world_sizes
    ]
