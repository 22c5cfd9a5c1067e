"""A world of N nodes × G processes each, in each launcher's own terms: the lines ``plan``
prints (torchrun's and Slurm's here; a framework's own launcher through its ``node_lines``)."""

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


def slurm(nodes: int, per_node: int) -> list[NodeLines]:
    """Slurm by who starts the processes: a launcher under ``srun`` takes one task a node and
    starts the node's processes itself; ``srun`` alone starts one task a GPU."""
    sbatch = (f"#SBATCH --nodes={nodes}", f"#SBATCH --gpus-per-node={per_node}")
    return [
        NodeLines(
            "slurm, torchrun under srun",
            (
                *sbatch,
                "#SBATCH --ntasks-per-node=1",
                f"srun torchrun --nnodes $SLURM_NNODES --nproc-per-node {per_node} ...",
            ),
            "one task a node: torchrun or accelerate launch starts the node's processes",
        ),
        NodeLines(
            "slurm, srun alone",
            (*sbatch, f"#SBATCH --ntasks-per-node={per_node}", "srun python ..."),
            "one task a GPU: each process reads its rank from SLURM_PROCID",
        ),
    ]


def all_lines(nodes: int, per_node: int, frameworks) -> list[NodeLines]:
    """torchrun's lines, each of ``frameworks``' own launcher's, then Slurm's."""
    own = [f.node_lines(nodes, per_node) for f in frameworks if f.node_lines is not None]
    return [torchrun(nodes, per_node), *own, *slurm(nodes, per_node)]
