"""``smoke A --parity B``: the same global batch run twice on the real engine, split as A says
and as B says, from the same initial weights over the same samples (one launch per side), and
the first optimizer step's loss and update compared within a tolerance.

B is a second config or spec of the same job, or overrides of A (``micro=2``, ``nproc=1``,
``micro=2,nproc=1``) that keep its global batch, accumulation re-solved: a spec's values are
changed, a framework config is edited as ``batchspec update`` edits it. What each rank runs and
writes is :mod:`translator.rank.parity_rank`'s; the comparison and its report are
:mod:`translator.launch.parity_compare`'s.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from translator.batch.spec_file import spec_values
from translator.edit.update import kept
from translator.launch import parity_compare as compared
from translator.launch import preparing, smoke
from translator.launch import workdir as workdirs
from translator.launch.launcher import Launcher
from translator.launch.parity_compare import Side
from translator.launch.progress import Progress
from translator.launch.request import RunRequest
from translator.rank.engines import engine, with_option
from translator.spec import BatchSpec
from translator.words.errors import InputError
from translator.words.files import read_text

#: The largest relative difference of the loss, and of any parameter's update, that parity
#: accepts, by device: float32 on CPU, bf16 compute on GPU. The README gives the float noise
#: measured on each engine that these bound.
TOLERANCE = {"cpu": 1e-3, "gpu": 3e-2}
#: The keys an override may set, and what they change.
OVERRIDES = {"micro": "the micro-batch", "nproc": "processes per node", "nnodes": "nodes"}


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


def derived_split(
    a: BatchSpec, nproc: int, nnodes: int, overrides: dict[str, int], text: str
) -> tuple[BatchSpec, int, int]:
    """``(spec, nproc, nnodes)`` of B: A's global batch on the overrides' world and
    micro-batch, accumulation re-solved (:func:`translator.edit.update.kept`, refused as
    ``update`` refuses a split that does not keep the global batch)."""
    nproc, nnodes = overrides.get("nproc", nproc), overrides.get("nnodes", nnodes)
    micro = overrides.get("micro", a.micro)
    return kept(a, f"--parity {text}", world=nproc * nnodes, micro=micro), nproc, nnodes


def derive_file(path: str, a: preparing.Prepared, b: BatchSpec, folder: Path) -> str:
    """B's file: B's spec (A's, split as :func:`derived_split` splits it), or A's framework
    config edited to B's split (as ``update`` edits it); written into ``folder``."""
    spec = a.spec
    if spec_values(read_text(path), path) is not None:
        out, new = folder / "spec.json", b.model_dump_json(indent=2)
    else:
        from translator.edit.update import update_file

        updated = update_file(
            path,
            a.plan.framework if a.plan.framework in _frameworks() else None,
            spec.world,
            global_batch=spec.global_batch,
            micro=b.micro,
            world=b.world,
            nodes=None,
            gpus_per_node=None,
            tensor=None,
            pipeline=None,
            context=None,
        )
        if updated.others:  # B would run with A's other files, which the split changes too
            raise InputError(
                f"{path}: B's split changes {', '.join(o.path for o in updated.others)} too, "
                "which --parity does not copy; give B as a file of its own"
            )
        new, out = updated.text, folder / Path(path).name
    workdirs.write(folder, {out: new})
    return str(out)


def _frameworks() -> tuple[str, ...]:
    from translator.plugin.registry import names

    return tuple(names())


def world_of(path: str, nnodes: int, default: int) -> int:
    """Processes per node for a B file: the world its spec fixes, else A's."""
    values = spec_values(Path(path).read_text(), path) or {}
    world = values.get("world_size")
    return world // nnodes if isinstance(world, int) and world % nnodes == 0 else default


def _same_model(b: preparing.Prepared, a: preparing.Prepared) -> preparing.Prepared:
    """B built as A's model (a spec derived for B names none, the file A read does)."""
    if b.model == a.model:
        return b
    config = None if a.model.config is None else b.plan.workdir / a.model.file
    return dataclasses.replace(
        b, model=a.model, plan=dataclasses.replace(b.plan, model=a.plan.model, model_config=config)
    )


def sides(request: RunRequest, parity: str) -> tuple[Side, Side]:
    """Both runs, prepared (nothing started): ``request`` is A's, as the command line asks
    for it; B is the same request on its own file and world. ``request.workdir`` (default
    ``.batchspec-smoke/parity``) holds A's run in ``a/``, B's in ``b/`` and the file derived for
    B in ``b-input/``."""
    path, nnodes = request.file, request.nnodes
    root = workdirs.chosen(request.workdir, "smoke", "parity")
    a = _for_parity(preparing.prepare(dataclasses.replace(request, workdir=root / "a")))
    nproc = a.plan.nproc  # the job's own per node when not given
    why = refusal(a.plan.framework, a.spec)
    if why:
        raise InputError(f"{path}: {why} (nothing was started)")
    if is_overrides(parity):
        b_spec, b_nproc, b_nnodes = derived_split(
            a.spec, nproc, nnodes, parse_overrides(parity), parity
        )
        folder = root / "b-input"
        workdirs.make(root)
        b_path, source = derive_file(path, a, b_spec, folder), f"{path} with {parity}"
    else:
        b_path, source = parity, parity
        b_nproc, b_nnodes = world_of(parity, nnodes, nproc), nnodes
    b_request = dataclasses.replace(
        request, file=b_path, nproc=b_nproc, nnodes=b_nnodes, workdir=root / "b"
    )
    b = _same_model(_for_parity(preparing.prepare(b_request)), a)
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


def _for_parity(prepared: preparing.Prepared) -> preparing.Prepared:
    """One optimizer step, with the parity samples and optimizer."""
    plan = dataclasses.replace(prepared.plan, steps=1, parity=True)
    return dataclasses.replace(prepared, plan=plan)


@dataclass
class ParityOutcome:
    """A parity check, as the command reports it."""

    output: dict
    """``smoke --parity --json``'s object (:func:`translator.launch.parity_compare.output`)."""
    errors: list[str]
    """Why the two runs are not the same training, or why a run failed (empty: parity holds)."""
    stopped: str | None
    """``timeout`` or ``interrupted`` when a run was stopped, else None."""


def run(
    a: Side,
    b: Side,
    launcher: Launcher,
    timeout: float | None,
    memory_limit: int | None,
    tolerance: float,
    say: Progress,
) -> ParityOutcome:
    """Run A, then B (through ``launcher``), each a smoke run of one step,
    and compare them; a run that fails ends the check."""
    outputs: dict = {"parity": False, "errors": []}
    records: dict[str, dict] = {}
    for side in (a, b):
        spec = side.prepared.spec
        say(
            f"parity {side.label}: micro-batch {spec.micro} × accumulation {spec.accumulation} "
            f"× data-parallel {spec.data_parallel} ({side.source})"
        )
        done = smoke.run(side.prepared, launcher, timeout, memory_limit, say)
        outputs[side.label.lower()] = done.output
        errors = [f"run {side.label}: {e}" for e in done.report.errors]
        record = None if errors else compared.read(side.prepared.plan.results)
        if record is None and not errors:
            errors = [f"run {side.label}: its ranks wrote no update"]
        if errors or record is None:
            outputs.setdefault("b", None)
            outputs["errors"] = errors
            outputs["out_of_memory"] = side.label if done.report.out_of_memory else None
            return ParityOutcome(
                compared.output(a, b, outputs, None, tolerance), errors, done.stopped
            )
        records[side.label] = record
    diff = compared.compare(records["A"], records["B"])
    errors = compared.problems(diff, tolerance)
    causes = compared.known_causes(a, b) if errors else []
    errors += [f"known cause: {c['message']} (fix: {c['hint']})" for c in causes]
    outputs |= {"parity": not errors, "errors": errors, "causes": causes}
    return ParityOutcome(compared.output(a, b, outputs, diff, tolerance), errors, None)
