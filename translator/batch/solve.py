"""Pure batch arithmetic: ``global = micro x accumulation x data_parallel``.

No I/O, no flooring. Every value that does not divide raises a :class:`ConfigError` whose
message names the nearest valid values on both sides.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from translator.words.errors import ConfigError, InputError
from translator.words.findings import finding


def nearest_multiples(value: int, unit: int) -> list[int]:
    """The valid values nearest a ``value`` that is not a multiple of ``unit``: the multiple of
    ``unit`` just below it (left out when that is 0, which is no batch and no world) and the one
    just above, in that order. Every message that names "the nearest" values takes them here."""
    lower = value // unit * unit
    return [v for v in (lower, lower + unit) if v > 0]


def nearest_divisors(
    value: int, target: float, accept: Callable[[int], bool] | None = None
) -> list[int]:
    """The divisors of ``value`` nearest ``target`` (``target`` itself left out): the largest
    below it (when there is one) and the smallest above it (when there is one), in that order.
    ``accept``, when given, says which divisors may be named."""
    below, above = 0, 0
    for d in range(1, math.isqrt(value) + 1):
        if value % d:
            continue
        for x in (d, value // d):
            if accept is not None and not accept(x):
                continue
            if x < target:
                below = max(below, x)
            elif x > target and (not above or x < above):
                above = x
    return [v for v in (below, above) if v]


def whole_nodes(world: int, per_node: int, world_name: str, per_node_name: str) -> int:
    """The nodes of ``per_node`` processes that make ``world``: the one rule for a world given
    with its processes per node (``--world-size 16 --nproc-per-node 8`` is 2 nodes). A world
    that is not whole nodes is an :class:`InputError` naming the nearest worlds that are."""
    if world % per_node:
        raise InputError(
            f"{world_name} {world} is not whole nodes of {per_node_name} {per_node}: give "
            + " or ".join(map(str, nearest_multiples(world, per_node)))
        )
    return world // per_node


def _product_text(factors: dict[str, int]) -> str:
    text = " × ".join(f"{name} {value}" for name, value in factors.items())
    if len(factors) > 1:
        text += f" = {math.prod(factors.values())}"
    return text


#: How a hint names each factor of the global batch.
_NAMES = {"micro": "micro-batch", "accumulation": "accumulation", "DP": "data-parallel size"}


def alternatives(
    global_batch: int, factors: dict[str, int], exact: bool, model_parallel: int | None = None
) -> str:
    """The fix for a ``global_batch`` that ``factors`` (the known ones of micro, accumulation
    and DP, by those names) do not make: each one value to change, the others kept.

    ``exact``: all four are known, so each changed value is the one that makes the global
    batch; otherwise a changed value need only let the global batch split (its neighbours are
    named), and a factor no value of which works is said so. With ``model_parallel`` a DP is
    named as the world size it takes."""
    g, unit = global_batch, math.prod(factors.values())
    globals_ = [unit] if exact else nearest_multiples(g, unit)
    options = [f"global {' or '.join(map(str, globals_))}"]
    impossible = []
    for name, value in factors.items():
        others = {k: v for k, v in factors.items() if k != name}
        rest = math.prod(others.values())
        label, scale = _NAMES[name], 1
        if name == "DP" and model_parallel is not None:
            label, scale = "world size", model_parallel
        if g % rest == 0:
            values = [g // rest] if exact else nearest_divisors(g // rest, value)
            options.append(f"{label} {' or '.join(str(v * scale) for v in values)}")
        elif not exact:  # the one that cannot help, lest it be tried
            impossible.append(f"no {label} gives global {g} with {_product_text(others)}")
    return "use " + ", or ".join(options) + "".join(f"; {x}" for x in impossible)


def split_error(
    global_batch: int, factors: dict[str, int], free: str, model_parallel: int | None = None
) -> ConfigError:
    """The error for a ``global_batch`` that is not a multiple of the product of ``factors``.

    ``free`` names the quantity that would be ``global / product`` if it divided; the hint
    names, for each value the user gave, what it could be instead (:func:`alternatives`).
    """
    unit = math.prod(factors.values())
    near = nearest_multiples(global_batch, unit)
    options = [f"{v} ({free} {v // unit})" for v in near]
    return ConfigError(
        [
            finding(
                "global-not-divisible",
                f"global {global_batch} does not split into {_product_text(factors)}: "
                f"nearest are {' and '.join(options)}",
                hint=alternatives(global_batch, factors, False, model_parallel),
            )
        ]
    )


def data_parallel_size(
    world: int,
    tensor: int = 1,
    pipeline: int = 1,
    context: int = 1,
    batch: tuple[int, int] | None = None,
    accept: Callable[[str, int], bool] | None = None,
    per_node: int | None = None,
) -> int:
    """``world / (tensor x pipeline x context)``; otherwise an error naming the nearest worlds
    that divide, and for each parallel size above 1 the nearest sizes that divide this world.

    ``batch``: ``(global, micro x accumulation)`` as far as they are known; the worlds and sizes
    named are then those whose data-parallel size splits that global batch too (unless none
    does: the split's own error then follows). ``accept(name, size)``, when given, says which
    sizes may be named (those the model splits on, a tensor-parallel group inside a node);
    ``per_node``, the GPUs of a node when known, makes each world named whole nodes."""
    model = tensor * pipeline * context
    if world % model == 0:
        return world // model
    g, unit = batch or (0, 1)
    replicas = g // unit if g and g % unit == 0 else None  # DP must divide this
    node = per_node or 1
    sizes = {"tensor": tensor, "pipeline": pipeline, "context": context}
    # Sizes the model does not split on: only another size of that one parallelism fixes them.
    refused = [n for n, s in sizes.items() if s > 1 and accept is not None and not accept(n, s)]
    if refused:
        worlds = []
    elif replicas is None:
        worlds = nearest_multiples(world, math.lcm(model, node))
    else:
        worlds = [
            dp * model
            for dp in nearest_divisors(replicas, world / model, lambda dp: dp * model % node == 0)
        ]
    options = [f"a world size of {' or '.join(map(str, worlds))}"] if worlds else []
    for name, size in sizes.items():
        rest = model // size
        if size == 1 or world % rest or refused not in ([], [name]):
            continue
        per_model = world // rest  # the size s leaves data-parallel per_model / s

        def splits(s: int, per_model: int = per_model, name: str = name) -> bool:
            if accept is not None and not accept(name, s):
                return False
            return replicas is None or replicas % (per_model // s) == 0

        near = nearest_divisors(per_model, size, splits)
        if near:
            options.append(f"{name}-parallel size {' or '.join(map(str, near))}")
    raise ConfigError(
        [
            finding(
                "world-not-divisible",
                f"world size {world} does not divide by tensor {tensor} × pipeline {pipeline} × "
                f"context {context} = {model}",
                hint="use " + ", or ".join(options)
                if options
                else f"choose {' and '.join(refused)}-parallel sizes the model splits on"
                if refused
                else f"change the global batch: no world of whole {node}-GPU nodes splits it "
                "with these parallel sizes",
            )
        ]
    )


def complete(
    global_batch: int | None,
    micro: int | None,
    accumulation: int | None,
    data_parallel: int | None,
    model_parallel: int | None = None,
) -> tuple[int, int | None, int | None, int]:
    """Fill the missing one of the four numbers, or check all four.

    Returns ``(global, micro, accumulation, data_parallel)``. With only the global batch and
    the data-parallel size known, micro and accumulation stay ``None`` (see
    :func:`decompositions`). Fewer known values raise :class:`InputError`. ``model_parallel``
    (tensor x pipeline x context), when the data-parallel size comes from a world size, makes
    a hint name world sizes rather than data-parallel sizes.
    """
    g, m, a, dp = global_batch, micro, accumulation, data_parallel
    if dp is None:
        if g is None or m is None or a is None:
            raise InputError(
                "not enough to solve: give the world size (or data-parallel size) and two of "
                "global batch, micro-batch, accumulation"
            )
        if g % (m * a):
            raise split_error(g, {"micro": m, "accumulation": a}, "DP")
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
                raise split_error(g, {"DP": dp}, "micro × accumulation", model_parallel)
            return g, None, None, dp
        if g % (a * dp):
            raise split_error(g, {"accumulation": a, "DP": dp}, "micro", model_parallel)
        return g, g // (a * dp), a, dp
    if a is not None:
        if g != m * a * dp:
            factors = {"micro": m, "accumulation": a, "DP": dp}
            raise ConfigError(
                [
                    finding(
                        "global-not-divisible",
                        f"global {g} ≠ {_product_text(factors)}",
                        hint=alternatives(g, factors, True, model_parallel),
                    )
                ]
            )
        return g, m, a, dp
    if g % (m * dp):
        raise split_error(g, {"micro": m, "DP": dp}, "accumulation", model_parallel)
    return g, m, g // (m * dp), dp


def decompositions(global_batch: int, data_parallel: int) -> list[tuple[int, int]]:
    """Every ``(micro, accumulation)`` with ``micro x accumulation x DP = global``, largest micro first."""
    if global_batch % data_parallel:
        raise split_error(global_batch, {"DP": data_parallel}, "micro × accumulation")
    per_rank = global_batch // data_parallel
    return [(m, per_rank // m) for m in range(per_rank, 0, -1) if per_rank % m == 0]
