"""The comparison of a parity check's two runs (:mod:`translator.launch.parity`): what their
ranks wrote (:mod:`translator.rank.parity_rank`), the relative difference of the loss and
of each parameter's update, why they are not the same training, and the report (``--json``'s
object, the table, the line of a check that passed)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from translator.rank import parity_rank

if TYPE_CHECKING:
    from translator.launch import preparing


@dataclass(frozen=True)
class Side:
    """One of the two runs."""

    label: str
    """``A`` (FILE) or ``B`` (``--parity``)."""
    source: str
    """What it runs: the file, or A's file with the overrides."""
    prepared: preparing.Prepared
    """Its smoke run, one optimizer step, with the parity samples and optimizer."""


@dataclass(frozen=True)
class Difference:
    """How far B's first step is from A's."""

    loss_a: float
    """A's loss of the step, as its engine computed it (the mean over its ranks)."""
    loss_b: float
    """B's, the same way."""
    loss: float
    """``|loss B - loss A| / |loss A|``."""
    parameters: dict[str, float]
    """Each parameter's ``max |update B - update A| / max |update A|``."""
    same_start: bool
    """Both runs started from the same weights (their fingerprints agree)."""
    samples: tuple[int, int] | None = None
    """How many samples A's step and B's held, when they held different ones; None when they
    held the same, or when the engine does not say."""
    dtypes: tuple[str | None, str | None] = (None, None)
    """The precision of A's weights and B's in the step (``float32``; None: not said)."""

    @property
    def largest(self) -> tuple[str, float]:
        """The parameter whose update differs most, and by how much."""
        name = max(self.parameters, key=lambda n: self.parameters[n])
        return name, self.parameters[name]


def read(results: Path) -> dict | None:
    """What a run's ranks wrote into ``results``: the loss (the mean over ranks), rank 0's
    fingerprint of the initial weights and its update of each parameter; None when no rank
    wrote an update."""
    import torch

    records = [
        torch.load(p, weights_only=True)
        for p in sorted(results.glob(parity_rank.FILE.format(rank="*")))
    ]
    first = next((r for r in records if "update" in r), None)
    if first is None:
        return None
    return {
        "loss": sum(r["loss"] for r in records) / len(records),
        "initial": first["initial"],
        "update": first["update"],
        "samples": first.get("samples"),
        "dtype": first.get("dtype"),
    }


def compare(a: dict, b: dict) -> Difference:
    """B's loss and update against A's (what :func:`read` gives for each)."""
    names = sorted(set(a["update"]) | set(b["update"]))
    parameters = {}
    for name in names:
        ua, ub = a["update"].get(name), b["update"].get(name)
        if ua is None or ub is None or ua.shape != ub.shape:
            parameters[name] = float("inf")  # a parameter only one run has: not the same model
            continue
        scale = float(ua.abs().max())
        gap = float((ub - ua).abs().max())
        parameters[name] = gap / scale if scale > 0 else (0.0 if gap == 0 else float("inf"))
    la, lb = a["loss"], b["loss"]
    held_a, held_b = a.get("samples"), b.get("samples")
    counts = None
    if held_a is not None and held_b is not None and held_a != held_b:
        counts = (held_a["count"], held_b["count"])
    return Difference(
        la,
        lb,
        abs(lb - la) / abs(la) if la else abs(lb - la),
        parameters,
        a["initial"] == b["initial"],
        counts,
        (a.get("dtype"), b.get("dtype")),
    )


def problems(diff: Difference, tolerance: float) -> list[str]:
    """Why the two runs are not the same training (empty when they are), the largest
    difference named first."""
    out = []
    if not diff.same_start:
        out.append("the two runs did not start from the same weights")
    if diff.samples is not None:
        out.append(
            f"the two runs' steps held different samples (A {diff.samples[0]}, B "
            f"{diff.samples[1]}): the split changed what a step trains on"
        )
    name, largest = diff.largest
    if largest > tolerance:
        out.append(
            f"the update of {name} differs by {_percent(largest)} of A's (tolerance "
            f"{_percent(tolerance)})"
        )
    if diff.loss > tolerance:
        out.append(
            f"the loss differs by {_percent(diff.loss)} ({diff.loss_a:.6g} against "
            f"{diff.loss_b:.6g}; tolerance {_percent(tolerance)})"
        )
    return out


def known_causes(a: Side, b: Side) -> list[dict]:
    """The known reasons the engine's loss depends on the split (``loss-normalisation``
    findings of either run, each with the flag or release that fixes it), once each."""
    found = {
        f.message: {"message": f.message, "hint": f.hint, "where": f.where}
        for side in (a, b)
        for f in side.prepared.findings
        if f.code == "loss-normalisation"
    }
    return list(found.values())


def _percent(x: float) -> str:
    return f"{x:.3g}" if x == float("inf") else f"{x * 100:.3g}%"


def output(a: Side, b: Side, runs_out: dict, diff: Difference | None, tolerance: float) -> dict:
    """``smoke --parity --json``'s object: both runs (smoke's objects), the differences, and
    which run ran out of memory (``A``, ``B`` or None)."""
    same = None
    if diff is not None:
        name, largest = diff.largest
        same = {
            "loss": {"a": diff.loss_a, "b": diff.loss_b, "relative_difference": diff.loss},
            "update": {
                "largest": {"parameter": name, "relative_difference": largest},
                "parameters": diff.parameters,
            },
            "same_initial_weights": diff.same_start,
            "dtype": dict(zip("ab", diff.dtypes, strict=True)),
            "different_samples": (
                None if diff.samples is None else dict(zip("ab", diff.samples, strict=True))
            ),
        }
    return {
        "parity": runs_out["parity"],
        "tolerance": tolerance,
        "a": runs_out["a"] | {"source": a.source},
        "b": None if runs_out["b"] is None else runs_out["b"] | {"source": b.source},
        "difference": same,
        "errors": runs_out["errors"],
        "causes": runs_out.get("causes", []),
        "out_of_memory": runs_out.get("out_of_memory"),
    }


def _split(out: dict) -> str:
    return (
        f"micro-batch {out['micro_batch_size']} × accumulation "
        f"{out['gradient_accumulation_steps']} × data-parallel {out['data_parallel_size']}"
    )


def rows(out: dict) -> list[tuple[str, object]]:
    """:func:`output`'s object as the table ``smoke --parity`` prints."""
    diff = out["difference"]
    name, largest = diff["update"]["largest"].values()
    loss = diff["loss"]
    return [
        ("global batch", out["a"]["global_batch_size"]),
        ("A", f"{_split(out['a'])} ({out['a']['source']})"),
        ("B", f"{_split(out['b'])} ({out['b']['source']})"),
        (
            "loss",
            f"{loss['a']:.6g} against {loss['b']:.6g} "
            f"(relative difference {loss['relative_difference']:.2g})",
        ),
        ("update", f"largest relative difference {largest:.2g} ({name})"),
        ("same start", "yes" if diff["same_initial_weights"] else "no"),
        *(
            []
            if not diff.get("different_samples")
            else [
                ("samples", "A {a}, B {b}: different samples".format(**diff["different_samples"]))
            ]
        ),
        ("tolerance", f"{out['tolerance']:g}"),
    ]


def summary(out: dict) -> str:
    """The line of a check that passed."""
    diff = out["difference"]
    largest = max(
        diff["loss"]["relative_difference"], diff["update"]["largest"]["relative_difference"]
    )
    return (
        f"parity holds: {_split(out['a'])} and {_split(out['b'])} train the same step "
        f"(largest relative difference {largest:.2g}, tolerance {out['tolerance']:g})"
    )
