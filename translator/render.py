"""The one Jinja environment, and rendering a spec for a framework with a read-back check.

A framework's template lives in its package (``Framework.template``, an absolute path);
batchspec's own (the sbatch script) in ``templates/`` at the top of the source tree, shipped
inside the wheel as ``translator/templates`` (see pyproject.toml). The environment is sandboxed
and uses ``StrictUndefined``: a template naming a value the framework did not provide fails
loudly.
"""

from __future__ import annotations

import functools
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from translator.batch import solve
from translator.batch.node_lines import SlurmJob
from translator.model.matching import source_model
from translator.model.named_model import NamedModel
from translator.plugin.contract import Framework
from translator.reading import Launch
from translator.spec import BatchSpec
from translator.words.errors import ConfigError, InputError, RenderError
from translator.words.findings import Finding, finding, has_errors, located


@dataclass(frozen=True)
class Rendered:
    """One framework's file for a spec."""

    framework: str
    """Registry name of the framework that made it."""
    filename: str
    """File name to write it under (``deepspeed.json``...)."""
    text: str
    """The file's content."""
    findings: list[Finding]
    """What the framework had to say about the spec (no errors: those stop rendering)."""


def template_dir() -> Path:
    """``translator/templates`` in an installed wheel, else the source tree's ``templates/``."""
    here = Path(__file__).resolve().parent
    packaged = here / "templates"
    return packaged if packaged.is_dir() else here.parent / "templates"


@functools.cache
def environment(folder: Path | None = None):
    """The sandboxed environment for batchspec's own templates, or for a framework's ``folder``."""
    from jinja2 import FileSystemLoader, StrictUndefined
    from jinja2.sandbox import SandboxedEnvironment

    return SandboxedEnvironment(
        loader=FileSystemLoader(folder or template_dir()),
        undefined=StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render_template(name: str, context: dict) -> str:
    """Render one template (a name in ``templates/``, or a framework's absolute path); any
    template error names the template file."""
    from jinja2 import TemplateError

    path = Path(name)
    folder, name = (path.parent, path.name) if path.is_absolute() else (None, name)
    try:
        return environment(folder).get_template(name).render(**context)
    except TemplateError as exc:
        raise RenderError(f"template {(folder or template_dir()) / name}: {exc}") from exc


def require_decided(spec: BatchSpec) -> None:
    """A spec to write must say its micro-batch: refused (exit 2) naming the choices."""
    if not spec.is_decided:
        options = solve.decompositions(spec.global_batch, spec.data_parallel)
        raise InputError(
            "the spec leaves the micro-batch open; set micro_batch_size to one of "
            + ", ".join(f"{m} (accumulation {a})" for m, a in options)
        )


def comment_lines(text: str, width: int = 96) -> list[str]:
    """``text`` (which may hold a file's words) as the lines of a comment a template writes
    after its ``#``: broken on whitespace, never a line end of its own."""
    return textwrap.wrap(" ".join(text.split()), width)


def render(
    spec: BatchSpec,
    framework: Framework,
    slurm: SlurmJob | None = None,
    model: NamedModel | None = None,
) -> Rendered:
    """Render ``spec`` for ``framework``, then read the output back; it must give the same spec.
    ``slurm``: the Slurm layout of the job the spec came from, which the template writes in its
    launcher's terms (a shell script's ``#SBATCH`` lines and ``srun``; the template's ``slurm``,
    ``None`` for a job Slurm does not run). ``model``: the model the converted file's source
    trains, which the file names where its framework can (:func:`model_context`)."""
    require_decided(spec)
    findings = framework.check(spec)
    if slurm is not None and slurm.unknown() is not None:
        if framework.filename.endswith(".sh"):
            findings.append(
                finding(
                    "slurm-layout-unknown",
                    f"{framework.filename} cannot keep the job's Slurm layout: {slurm.unknown()}",
                    hint="add #SBATCH --nodes=N and --gpus-per-node=G to the job's #SBATCH "
                    "lines, or give --world-size with --nproc-per-node",
                    where=slurm.at,
                )
            )
        slurm = None
    if has_errors(findings):
        raise ConfigError([f for f in findings if f.severity == "error"])
    named, said = model_context(spec, framework, model)
    findings += said
    context = framework.context(spec) | named | {"slurm": slurm}
    text = render_template(framework.template, context)
    read_back, _ = framework.interpret(framework.read(text, framework.filename), Launch.of(spec))
    wrong = {
        key: (value, getattr(spec, key))
        for key, value in read_back.items()
        if value != getattr(spec, key)
    }
    if wrong:
        detail = ", ".join(f"{k} reads {got}, spec has {want}" for k, (got, want) in wrong.items())
        raise RenderError(f"{framework.filename} does not read back as its spec: {detail}")
    return Rendered(framework.name, framework.filename, text, findings)


def model_context(
    spec: BatchSpec, framework: Framework, model: NamedModel | None
) -> tuple[dict, list[Finding]]:
    """What ``framework``'s template says of the model ``model`` (the source's; None: it names
    none), and the findings that say what it names or why none; a framework whose file holds
    the batch only says that the model is set elsewhere (``model-not-carried``)."""
    if framework.model_context is not None:
        return framework.model_context(spec, model)
    if model is None:
        return {}, []
    return {}, [
        finding(
            "model-not-carried",
            f"{framework.filename} holds the batch only: it does not name the model the source "
            f"trains, {source_model(model)}",
            hint=f"set that model in your {framework.name} config",
        )
    ]


def render_each(
    spec: BatchSpec,
    targets: Sequence[Framework],
    where: str,
    strict: bool = False,
    slurm: SlurmJob | None = None,
    model: NamedModel | None = None,
) -> tuple[list[Rendered], dict[str, str]]:
    """``(rendered, refused)``: ``spec`` rendered for each framework of ``targets`` that can
    take it, and why each other cannot (name -> the first error, naming ``where``, the file
    the batch came from). One framework asked for, every one refusing, or ``strict`` and any
    refusing: the errors are raised instead (exit 1). A spec that leaves the micro-batch open
    is refused for all (exit 2). ``slurm``: the Slurm layout of the job converted, kept by
    each script written; ``model``: the model it trains, named by each file that can."""
    rendered, refused, errors = [], {}, []
    for framework in targets:
        try:
            rendered.append(render(spec, framework, slurm, model))
        except ConfigError as exc:
            found = located(exc.findings, where)
            errors += found
            refused[framework.name] = found[0].message
        except InputError as exc:
            raise InputError(f"{where}: {exc}") from None
    if errors and (strict or not rendered):
        raise ConfigError(errors)
    return rendered, refused
