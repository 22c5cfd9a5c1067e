"""A world of N nodes × G processes each, in each launcher's own terms: the lines ``plan``
prints (torchrun's and Slurm's here; a framework's own launcher through its ``node_lines``),
and the Slurm layout a converted job's shell script carries when the job it came from ran
under Slurm (:class:`SlurmJob`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class NodeLines:
    """How one launcher writes a layout."""

    launcher: str
    """Who starts the processes (``torchrun``, ``slurm, torchrun under srun``...)."""
    lines: tuple[str, ...]
    """What to write: a command line's layout flags, a config's keys, ``#SBATCH`` lines."""
    note: str | None = None
    """What the lines alone do not say (where they go, a hostfile to give)."""

    def as_dict(self) -> dict:
        return {"launcher": self.launcher, "lines": list(self.lines), "note": self.note}


def torchrun(nodes: int, per_node: int) -> NodeLines:
    """``torchrun``: the flags on each node's command line."""
    many = ", on each node with a rendezvous endpoint or --node-rank" if nodes > 1 else ""
    return NodeLines(
        "torchrun",
        (f"torchrun --nnodes {nodes} --nproc-per-node {per_node}",),
        f"{per_node} processes a node{many}",
    )


def sbatch(nodes: int, per_node: int, tasks_per_node: int) -> tuple[str, ...]:
    """The ``#SBATCH`` lines of an allocation of ``nodes`` × ``per_node`` GPUs."""
    return (
        f"#SBATCH --nodes={nodes}",
        f"#SBATCH --ntasks-per-node={tasks_per_node}",
        f"#SBATCH --gpus-per-node={per_node}",
    )


def slurm(nodes: int, per_node: int) -> list[NodeLines]:
    """Slurm by who starts the processes: a launcher under ``srun`` takes one task a node and
    starts the node's processes itself; ``srun`` alone starts one task a GPU."""
    return [
        NodeLines(
            "slurm, torchrun under srun",
            (
                *sbatch(nodes, per_node, 1),
                f"srun torchrun --nnodes $SLURM_NNODES --nproc-per-node {per_node} ...",
            ),
            "one task a node: the launcher (torchrun) starts the node's processes",
        ),
        NodeLines(
            "slurm, srun alone",
            (*sbatch(nodes, per_node, per_node), "srun python ..."),
            "one task a GPU: each process reads its rank from SLURM_PROCID",
        ),
    ]


def all_lines(nodes: int, per_node: int, frameworks) -> list[NodeLines]:
    """torchrun's lines, each of ``frameworks``' own launcher's, then Slurm's."""
    own = [f.node_lines(nodes, per_node) for f in frameworks if f.node_lines is not None]
    return [torchrun(nodes, per_node), *own, *slurm(nodes, per_node)]


@dataclass(frozen=True)
class SlurmJob:
    """A job Slurm runs, as a converted shell script writes it (the template's ``slurm``): its
    ``#SBATCH`` allocation, and ``srun`` starting the framework's launcher as one task a node,
    which starts the node's processes and meets the other nodes at the first node's host."""

    nodes: int | None
    """Nodes of the job; ``None`` when the job does not say (then no script can be written)."""
    per_node: int | None
    """Processes (GPUs) a node; ``None`` when the job does not say."""
    at: str
    """Where the job it came from shows that Slurm runs it (``job.sh:2``)."""

    #: The shell line that names the rendezvous host: the allocation's first node.
    head = 'head_node=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)'
    #: torchrun's flags that meet there (every node's launcher, one rendezvous).
    rendezvous = (("--rdzv_backend", "c10d"), ("--rdzv_endpoint", '"$head_node:29500"'))

    @property
    def sbatch(self) -> tuple[str, ...]:
        """The allocation's ``#SBATCH`` lines: one task a node, its GPUs."""
        assert self.nodes is not None and self.per_node is not None
        return sbatch(self.nodes, self.per_node, 1)

    def unknown(self) -> str | None:
        """Why no script can carry the layout (what the job leaves unknown), else ``None``."""
        missing = [n for n, v in (("nodes", self.nodes), ("GPUs a node", self.per_node)) if not v]
        if not missing:
            return None
        return (
            f"the job runs under Slurm (line {self.at.rsplit(':', 1)[1]}) and does not say its "
            f"{' and '.join(missing)}, so no #SBATCH line can be written for it"
        )
