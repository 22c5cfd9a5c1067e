"""The table `plan --world-sizes` prints (or its JSON): every world size that keeps the batch."""

from __future__ import annotations

import math

from pydantic import TypeAdapter, ValidationError

from translator.batch import elastic
from translator.batch.spec_file import FLAGS, WORLD_KEYS, build_spec, describe, load_values
from translator.checks.advice import scaled_learning_rate
from translator.spec import Count
from translator.words.errors import InputError

#: Beyond this many world sizes, the text lists those that do not fit on one line.
MOST_ROWS = 32
#: The batch values a world size does not change (the rest of the spec is validated as is).
SPLIT_KEYS = ("micro_batch_size", "gradient_accumulation_steps")


def plan_world_sizes(
    spec_file: str | None,
    values: dict,
    flags: dict[str, str],
    world_sizes: str,
    max_micro: int | None,
) -> tuple[dict, list[str]]:
    """On which of ``world_sizes`` the spec's global batch splits exactly: the JSON object
    and the text lines."""
    for key in ("world_size", "nodes", "data_parallel_size"):
        if values.get(key) is not None:
            raise InputError(f"--world-sizes replaces {flags.get(key, key)}: give one of them")
    if spec_file:
        raw, where, lines = load_values(spec_file, values)
    else:
        raw, where, lines = {k: v for k, v in values.items() if v is not None}, FLAGS, {}
    per_node = raw.get("gpus_per_node")
    dropped = sorted(k for k in raw.keys() & WORLD_KEYS if k != "gpus_per_node")
    raw = {k: v for k, v in raw.items() if k not in WORLD_KEYS}
    splits = {k: raw.pop(k) for k in SPLIT_KEYS if k in raw}
    if "global_batch_size" not in raw and "effective_batch_size" not in raw:
        raise InputError(f"{where}: --world-sizes needs the global batch to keep (--global-batch)")
    try:
        TypeAdapter(dict[str, Count]).validate_python(
            {"gpus_per_node": per_node, **splits} if per_node is not None else splits
        )
    except ValidationError as exc:
        raise InputError(describe(exc, where, lines)) from None
    model = math.prod(
        v
        for k in ("tensor_parallel_size", "pipeline_parallel_size", "context_parallel_size")
        if isinstance(v := raw.get(k, 1), int)
    )
    spec = build_spec(raw | {"world_size": model}, where, lines, flags)
    worlds = elastic.parse_world_sizes(world_sizes, per_node)
    fits = elastic.fits(
        spec.global_batch,
        worlds,
        model,
        splits.get("micro_batch_size"),
        splits.get("gradient_accumulation_steps"),
        max_micro,
    )
    lr = _rates(spec)
    out = {
        "global_batch_size": spec.global_batch,
        **splits,
        "model_parallel_size": model,
        "gpus_per_node": per_node,
        "replaced": dropped,
        "world_sizes": [_as_dict(f, per_node, lr) for f in fits],
    }
    return out, _lines(spec.global_batch, splits, model, per_node, dropped, fits, lr)


def _rates(spec):
    """The learning rate a global batch needs, as ``(key, value)``: the rate itself when the
    spec says what it was tuned at, else the factor on the user's rate."""
    optimizer = spec.optimizer
    if spec.learning_rate is not None and spec.reference_global_batch_size is not None:
        lr, ref = spec.learning_rate, spec.reference_global_batch_size
        return lambda g: ("learning_rate", scaled_learning_rate(lr, g / ref, optimizer))
    g0 = spec.global_batch
    return lambda g: ("learning_rate_factor", scaled_learning_rate(1.0, g / g0, optimizer))


def _rate_text(key: str, value: float) -> str:
    if key == "learning_rate":
        return f"learning rate {value:.4g}"
    return "learning rate unchanged" if f"{value:.4g}" == "1" else f"learning rate ×{value:.4g}"


def _as_dict(f: elastic.WorldFit, per_node: int | None, lr) -> dict:
    out: dict = {
        "world_size": f.world_size,
        "nodes": f.world_size // per_node if per_node else None,
        "data_parallel_size": f.data_parallel_size,
        "fits": f.fits,
        "splits": [{"micro_batch_size": m, "gradient_accumulation_steps": a} for m, a in f.splits],
        "nearest": [],
    }
    for g in f.nearest:
        key, value = lr(g)
        out["nearest"].append({"global_batch_size": g, key: float(f"{value:.6g}")})
    return out


def _lines(global_batch, splits, model, per_node, dropped, fits, lr) -> list[str]:
    given = ", ".join(
        [f"global batch {global_batch}"]
        + [f"{k.split('_')[0].replace('micro', 'micro-batch')} {v}" for k, v in splits.items()]
        + ([f"model-parallel {model}"] if model > 1 else [])
    )
    lines: list[str] = []
    fitting = [f for f in fits if f.fits]
    lines.append(f"{given}: splits exactly on {len(fitting)} of {len(fits)} world sizes")
    if dropped:
        lines.append(f"  (the spec's {', '.join(dropped)} replaced by --world-sizes)")
    shown = fits if len(fits) <= MOST_ROWS else fitting or fits[:MOST_ROWS]
    head = ("world", "nodes", "DP") if per_node else ("world", "DP")
    rows = [(*head, "micro × accumulation")]
    for f in shown:
        nodes = (str(f.world_size // per_node),) if per_node else ()
        rows.append(
            (str(f.world_size), *nodes, str(f.data_parallel_size or "-"), _split_text(f, model, lr))
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    for row in rows:
        cells = "  ".join(c.rjust(w) for c, w in zip(row, widths))
        lines.append(f"  {cells}  {row[-1]}")
    rest = [f.world_size for f in fits if not f.fits and f not in shown]
    if rest:
        lines.append(
            f"  {len(rest)} other world sizes do not split it: {_ranges(rest)} "
            "(--json gives each with its nearest global batches)"
        )
    return lines


def _split_text(f: elastic.WorldFit, model: int, lr) -> str:
    if f.data_parallel_size is None:
        return f"- (TP × PP × CP = {model} does not divide it)"
    if f.fits:
        return ", ".join(f"{m} × {a}" for m, a in f.splits)
    near = " or ".join(f"{g} ({_rate_text(*lr(g))})" for g in f.nearest)
    return f"- nearest global {near}"


def _ranges(values: list[int]) -> str:
    """``9-15, 17, 19-31`` from sorted whole numbers."""
    runs: list[list[int]] = []
    for v in values:
        if runs and v == runs[-1][-1] + 1:
            runs[-1].append(v)
        else:
            runs.append([v])
    return ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)
