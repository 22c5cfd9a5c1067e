"""Pure batch arithmetic: ``global = micro x accumulation x data_parallel``.

No I/O, no flooring. Every value that does not divide raises a :class:`ConfigError` whose
message names the nearest valid values on both sides.
"""

from __future__ import annotations

import math

from translator.errors import ConfigError, InputError
from translator.findings import finding


def nearest_multiples(value: int, unit: int) -> list[int]:
    """The valid values nearest a ``value`` that is not a multiple of ``unit``: the multiple of
    ``unit`` just below it (left out when that is 0, which is no batch and no world) and the one
    just above, in that order. Every message that names "the nearest" values takes them here."""
    lower = value // unit * unit
    return [v for v in (lower, lower + unit) if v > 0]


def _product_text(factors: dict[str, int]) -> str:
    text = " × ".join(f"{name} {value}" for name, value in factors.items())
    if len(factors) > 1:
        text += f" = {math.prod(factors.values())}"
    return text


def split_error(code: str, subject: str, value: int, factors: dict[str, int], free: str):
    """The error for ``value`` that is not a multiple of the product of ``factors``.

    ``free`` names the quantity that would be ``value / product`` if it divided.
    """
    unit = math.prod(factors.values())
    near = nearest_multiples(value, unit)
    options = [f"{v} ({free} {v // unit})" for v in near]
    return ConfigError(
        [
            finding(
                code,
                f"{subject} {value} does not split into {_product_text(factors)}: "
                f"nearest are {' and '.join(options)}",
                hint=f"use {subject} {' or '.join(map(str, near))}, or change the {free}",
            )
        ]
    )


def data_parallel_size(world: int, tensor: int = 1, pipeline: int = 1, context: int = 1) -> int:
    """``world / (tensor x pipeline x context)``; an error naming nearby valid worlds otherwise."""
    model = tensor * pipeline * context
    if world % model:
        near = " or ".join(map(str, nearest_multiples(world, model)))
        raise ConfigError(
            [
                finding(
                    "world-not-divisible",
                    f"world size {world} does not divide by tensor {tensor} × pipeline {pipeline} × "
                    f"context {context} = {model}",
                    hint=f"use a world size of {near}, or change the parallel sizes",
                )
            ]
        )
    return world // model


def complete(
    global_batch: int | None, micro: int | None, accumulation: int | None, data_parallel: int | None
) -> tuple[int, int | None, int | None, int]:
    """Fill the missing one of the four numbers, or check all four.

    Returns ``(global, micro, accumulation, data_parallel)``. With only the global batch and
    the data-parallel size known, micro and accumulation stay ``None`` (see
    :func:`decompositions`). Fewer known values raise :class:`InputError`.
    """
    g, m, a, dp = global_batch, micro, accumulation, data_parallel
    if dp is None:
        if g is None or m is None or a is None:
            raise InputError(
                "not enough to solve: give the world size (or data-parallel size) and two of "
                "global batch, micro-batch, accumulation"
            )
        if g % (m * a):
            raise split_error(
                "global-not-divisible", "global", g, {"micro": m, "accumulation": a}, "DP"
            )
        return g, m, a, g // (m * a)
    if g is None:
        if m is None or a is None:
            raise InputError(
                "not enough to solve: give the global batch, or both the micro-batch and the "
                "accumulation"
            )
        return m * a * dp, m, a, dp
    if m is None:
        if a is None:
            if g % dp:
                raise split_error(
                    "global-not-divisible", "global", g, {"DP": dp}, "micro × accumulation"
                )
            return g, None, None, dp
        if g % (a * dp):
            raise split_error(
                "global-not-divisible", "global", g, {"accumulation": a, "DP": dp}, "micro"
            )
        return g, g // (a * dp), a, dp
    if g % (m * dp):
        raise split_error(
            "global-not-divisible", "global", g, {"micro": m, "DP": dp}, "accumulation"
        )
    implied = g // (m * dp)
    if a is not None and a != implied:
        raise ConfigError(
            [
                finding(
                    "global-not-divisible",
                    f"global {g} ≠ micro {m} × accumulation {a} × DP {dp} = {m * a * dp}",
                    hint=f"use accumulation {implied} for global {g}, or global {m * a * dp}",
                )
            ]
        )
    return g, m, implied, dp


def decompositions(global_batch: int, data_parallel: int) -> list[tuple[int, int]]:
    """Every ``(micro, accumulation)`` with ``micro x accumulation x DP = global``, largest micro first."""
    if global_batch % data_parallel:
        raise split_error(
            "global-not-divisible",
            "global",
            global_batch,
            {"DP": data_parallel},
            "micro × accumulation",
        )
    per_rank = global_batch // data_parallel
    return [(m, per_rank // m) for m in range(per_rank, 0, -1) if per_rank % m == 0]
