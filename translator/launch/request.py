"""What a real run is asked for: the options ``smoke``, each side of ``smoke --parity`` and
each of ``tune``'s probes share, built once from the command line and handed down. A side or a
probe is the same request with its own file, world or folder (``dataclasses.replace``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from translator.inspection import FileRead, read_source
from translator.launch.run_model import RunModel, choose
from translator.model.named_model import NamedModel


@dataclass(frozen=True)
class RunRequest:
    """One real run as the command line asks for it."""

    file: str
    """The spec, framework config or job whose batch is run."""
    framework: str | None = None
    """The engine (``--framework``); None: the file's own framework, torch for a spec."""
    nproc: int | None = None
    """Processes per node (``--nproc-per-node``); None: the job's own per node, else 1."""
    nnodes: int = 1
    """Nodes (``--nnodes``)."""
    steps: int = 3
    """Optimizer steps (``--steps``)."""
    model: str | RunModel | None = None
    """The stand-in built in code (``tiny``, ``125m``), a model chosen already (a probe's), or
    None for the job's own (``--model``)."""
    seq_len: int | None = None
    """Tokens per sample (``--seq-len``); None: the config's, else the stand-in's default."""
    workdir: Path | None = None
    """The run's folder (``--workdir``); None: ``.batchspec-<command>/<engine>``."""
    rdzv_endpoint: str | None = None
    """The rendezvous of a multi-node run started outside a scheduler (``--rdzv-endpoint``)."""
    device: str | None = "cpu"
    """``gpu``, ``cpu``, or None for a GPU when there is one (``--device``; see
    :func:`translator.launch.preparing.resolve_device`)."""
    expect_global: int | None = None
    """The global batch the user believes the file gives (``--expect-global``)."""
    recompute: bool = False
    """Activation recomputation on (a tune probe's ``--recompute`` candidate)."""
    remote: bool = False
    """The ranks run on other machines (Slurm, Kubernetes): their Python, not this one's."""
    dry_run: bool = False
    """Print what would run; run nothing (``--dry-run``)."""
    model_config: str | None = None
    """The job's model's ``config.json`` or its folder (``--model-config``)."""
    layers: int | None = None
    """Cut the job's model to this many layers (``--layers``)."""
    timeout: float | None = None
    """Seconds before the run (the whole tune) is stopped (``--timeout``)."""
    memory_limit: int | None = None
    """Each rank's address-space cap in bytes (``--memory-limit``)."""
    micro: int | None = None
    """A tune probe's micro-batch, run in place of the file's own (the global batch kept);
    None: the file's."""
    source: FileRead | None = None
    """:attr:`file` read already (a tune's probes share one reading); None, or another file's
    (a request replaced with another file): read when the run is prepared."""

    def read(self) -> FileRead:
        """:attr:`file`, read: :attr:`source` when it is that file's, else read now."""
        if self.source is not None and self.source.path == self.file:
            return self.source
        return read_source(self.file)

    def run_model(
        self, named: NamedModel | None, framework: str, command: str, ranks_here: int | None
    ) -> RunModel:
        """The model this run builds: the one chosen already (a tune probe's), else the one
        :func:`~translator.launch.run_model.choose` picks for its file."""
        if isinstance(self.model, RunModel):
            return self.model
        return choose(
            self.file,
            named,
            framework,
            command,
            self.model,
            self.layers,
            self.model_config,
            ranks_here,
        )
