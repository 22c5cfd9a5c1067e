"""``smoke A --parity B``: the same global batch run twice on the real engine, split as A says
and as B says, from the same initial weights over the same samples (one launch per side), and
the first optimizer step's loss and update compared within a tolerance.

B is a second config or spec of the same job, or overrides of A (``micro=2``, ``nproc=1``,
``micro=2,nproc=1``) that keep its global batch, accumulation re-solved: a spec's values are
changed, a framework config is edited as ``batchspec update`` edits it. What each rank runs and
writes is :mod:`translator.launch.parity_rank`'s; the comparison is :func:`compare`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from translator import solve
from translator.errors import InputError
from translator.files import write_files
from translator.launch import parity_rank, slurm
from translator.launch import smoke as runs
from translator.launch import workdir as workdirs
from translator.launch.engines import engine, with_option
from translator.launch.progress import Progress
from translator.layouts import spec_values
from translator.spec import BatchSpec

#: The largest relative difference of the loss, and of any parameter's update, that parity
#: accepts, by device: float32 on CPU, bf16 compute on GPU. The README gives the float noise
#: measured on each engine that these bound.
TOLERANCE = {"cpu": 1e-3, "gpu": 3e-2}
#: The keys an override may set, and what they change.
OVERRIDES = {"micro": "the micro-batch", "nproc": "processes per node", "nnodes": "nodes"}


@dataclass(frozen=True)
class Side:
    """One of the two runs."""

    label: str
    """``A`` (FILE) or ``B`` (``--parity``)."""
    source: str
    """What it runs: the file, or A's file with the overrides."""
    prepared: runs.Prepared
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

    @property
    def largest(self) -> tuple[str, float]:
        """The parameter whose update differs most, and by how much."""
        name = max(self.parameters, key=lambda n: self.parameters[n])
        return name, self.parameters[name]


def parse_overrides(text: str) -> dict[str, int]:
    """``micro=2,nproc=1`` -> ``{"micro": 2, "nproc": 1}``; anything else is an input error."""
    out: dict[str, int] = {}
    for part in text.split(","):
        key, sep, value = part.strip().partition("=")
        if not sep or key not in OVERRIDES:
            raise InputError(
                f"--parity {text}: {part.strip()!r} is not an override; give a second file, or "
                f"{', '.join(f'{k}=N ({v})' for k, v in OVERRIDES.items())}, comma-separated"
            )
        if not value.isdigit() or int(value) < 1:
            raise InputError(f"--parity {text}: {key} must be a whole number ≥ 1, not {value!r}")
        out[key] = int(value)
    return out


def is_overrides(text: str) -> bool:
    """Whether ``--parity`` names overrides rather than a file."""
    return "=" in text and not Path(text).exists()


def refusal(name: str, spec: BatchSpec) -> str | None:
    """Why the ``name`` engine cannot check parity on ``spec``'s layout: parity needs an engine
    that writes its loss and update, and every rank holding the whole model."""
    if "parity" not in engine(name).options:
        return (
            f"the {name} engine does not run parity checks; these do: "
            f"{', '.join(with_option('parity'))}"
        )
    model = spec.tensor_parallel_size * spec.pipeline_parallel_size * spec.context_parallel_size
    if model > 1:
        return (
            f"parity runs data parallelism only (every rank holds the whole model), not "
            f"tensor {spec.tensor_parallel_size} × pipeline {spec.pipeline_parallel_size} × "
            f"context {spec.context_parallel_size}"
        )
    return None


def derived_split(a: BatchSpec, nproc: int, nnodes: int, overrides: dict[str, int], text: str):
    """``(micro, accumulation, nproc, nnodes)`` of B: A's global batch on the overrides' world
    and micro-batch, accumulation re-solved; an input error when that does not divide."""
    nproc, nnodes = overrides.get("nproc", nproc), overrides.get("nnodes", nnodes)
    micro, world, g = overrides.get("micro", a.micro), nproc * nnodes, a.global_batch
    model = a.tensor_parallel_size * a.pipeline_parallel_size * a.context_parallel_size
    if world % model:
        raise InputError(
            f"--parity {text}: {world} processes do not divide into model-parallel groups of "
            f"{model}"
        )
    dp = world // model
    if g % (micro * dp):
        fits = solve.nearest_divisors(g // dp, micro) if g % dp == 0 else []
        hint = (
            f"micro-batches that keep it on {world} processes: {', '.join(map(str, fits))}"
            if fits
            else f"no micro-batch keeps it on {world} processes"
        )
        raise InputError(
            f"--parity {text}: micro-batch {micro} × data-parallel {dp} does not divide the "
            f"global batch {g}, so B would not train on the same batch ({hint})"
        )
    return micro, g // (micro * dp), nproc, nnodes


def derive_file(path: str, a: runs.Prepared, split, folder: Path) -> str:
    """B's file: A's spec with B's split, or A's framework config edited to it (as ``update``
    edits it); written into ``folder``."""
    micro, accumulation, nproc, nnodes = split
    text = Path(path).read_text()
    spec = a.spec
    if spec_values(text, path) is not None:
        fields = spec.model_dump() | {
            "micro_batch_size": micro,
            "gradient_accumulation_steps": accumulation,
            "data_parallel_size": None,
            "world_size": nproc * nnodes,
            "nodes": None,
            "gpus_per_node": None,
        }
        out, new = folder / "spec.json", BatchSpec.model_validate(fields).model_dump_json(indent=2)
    else:
        from translator.update import update_file

        new = update_file(
            path,
            a.plan.framework if a.plan.framework in _frameworks() else None,
            spec.world,
            global_batch=spec.global_batch,
            micro=micro,
            world=nproc * nnodes,
            nodes=None,
            gpus_per_node=None,
            tensor=None,
            pipeline=None,
            context=None,
        ).text
        out = folder / Path(path).name
    write_files([(out, new)], force=True)
    return str(out)


def _frameworks() -> tuple[str, ...]:
    from translator.frameworks import names

    return tuple(names())


def world_of(path: str, nnodes: int, default: int) -> int:
    """Processes per node for a B file: the world its spec fixes, else A's."""
    values = spec_values(Path(path).read_text(), path) or {}
    world = values.get("world_size")
    return world // nnodes if isinstance(world, int) and world % nnodes == 0 else default


def sides(
    path: str, parity: str, prepare: Callable[..., runs.Prepared], nproc: int, nnodes: int, root
) -> tuple[Side, Side]:
    """Both runs, prepared (nothing started): ``prepare(path, nproc, nnodes, workdir)`` is
    :func:`translator.launch.smoke.prepare` with the command's other options."""
    root = Path(root or workdirs.default("parity", "run")).resolve()
    a = _for_parity(prepare(path, nproc, nnodes, root / "a"))
    why = refusal(a.plan.framework, a.spec)
    if why:
        raise InputError(f"{path}: {why} (nothing was started)")
    if is_overrides(parity):
        split = derived_split(a.spec, nproc, nnodes, parse_overrides(parity), parity)
        folder = root / "b-input"
        workdirs.make(root)
        folder.mkdir(parents=True, exist_ok=True)
        b_path, source = derive_file(path, a, split, folder), f"{path} with {parity}"
        b_nproc, b_nnodes = split[2], split[3]
    else:
        b_path, source = parity, parity
        b_nproc, b_nnodes = world_of(parity, nnodes, nproc), nnodes
    b = _for_parity(prepare(b_path, b_nproc, b_nnodes, root / "b"))
    if b.spec.global_batch != a.spec.global_batch:
        raise InputError(
            f"{parity} gives global batch {b.spec.global_batch_size}, {path} gives "
            f"{a.spec.global_batch_size}: parity compares two splits of the same batch"
        )
    if b.plan.framework != a.plan.framework:
        raise InputError(
            f"{parity} runs on the {b.plan.framework} engine, {path} on {a.plan.framework}: "
            "give --framework to run both on one"
        )
    return Side("A", path, a), Side("B", source, b)


def _for_parity(prepared: runs.Prepared) -> runs.Prepared:
    """One optimizer step, with the parity samples and optimizer."""
    plan = dataclasses.replace(prepared.plan, steps=1, parity=True)
    return dataclasses.replace(prepared, plan=plan)


def read(side: Side) -> dict | None:
    """What the side's ranks wrote: the loss (the mean over ranks), rank 0's fingerprint of the
    initial weights and its update of each parameter; None when no rank wrote an update."""
    import torch

    results = side.prepared.plan.results
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
    return Difference(
        la,
        lb,
        abs(lb - la) / abs(la) if la else abs(lb - la),
        parameters,
        a["initial"] == b["initial"],
    )


def problems(diff: Difference, tolerance: float) -> list[str]:
    """Why the two runs are not the same training (empty when they are), the largest
    difference named first."""
    out = []
    if not diff.same_start:
        out.append("the two runs did not start from the same weights")
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
        }
    return {
        "parity": runs_out["parity"],
        "tolerance": tolerance,
        "a": runs_out["a"] | {"source": a.source},
        "b": None if runs_out["b"] is None else runs_out["b"] | {"source": b.source},
        "difference": same,
        "errors": runs_out["errors"],
        "out_of_memory": runs_out.get("out_of_memory"),
    }


@dataclass
class Outcome:
    """A parity check, as the command reports it."""

    output: dict
    """``smoke --parity --json``'s object (:func:`output`)."""
    errors: list[str]
    """Why the two runs are not the same training, or why a run failed (empty: parity holds)."""
    stopped: str | None
    """``timeout`` or ``interrupted`` when a run was stopped, else None."""


def run(
    a: Side,
    b: Side,
    options: slurm.SlurmOptions | None,
    timeout: float | None,
    memory_limit: int | None,
    tolerance: float,
    say: Progress,
) -> Outcome:
    """Run A, then B (here, or under Slurm with ``options``), each a smoke run of one step,
    and compare them; a run that fails ends the check."""
    outputs: dict = {"parity": False, "errors": []}
    records: dict[str, dict] = {}
    for side in (a, b):
        spec = side.prepared.spec
        say(
            f"parity {side.label}: micro-batch {spec.micro} × accumulation {spec.accumulation} "
            f"× data-parallel {spec.data_parallel} ({side.source})"
        )
        done = runs.run(side.prepared, options, timeout, memory_limit, say)
        outputs[side.label.lower()] = done.output
        errors = [f"run {side.label}: {e}" for e in done.report.errors]
        record = None if errors else read(side)
        if record is None and not errors:
            errors = [f"run {side.label}: its ranks wrote no update"]
        if errors or record is None:
            outputs.setdefault("b", None)
            outputs["errors"] = errors
            outputs["out_of_memory"] = side.label if done.report.out_of_memory else None
            return Outcome(output(a, b, outputs, None, tolerance), errors, done.stopped)
        records[side.label] = record
    diff = compare(records["A"], records["B"])
    errors = problems(diff, tolerance)
    outputs |= {"parity": not errors, "errors": errors}
    return Outcome(output(a, b, outputs, diff, tolerance), errors, None)


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
