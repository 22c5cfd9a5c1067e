"""Whether a model's heads and layers split over tensor- and pipeline-parallel ranks, by the
rules of the framework that trains it, and whether a tensor-parallel group stays inside a node.

A framework states its rules as a :class:`SplitRules` (its contract's ``split_rules``); the
model's parts (:class:`ModelParts`) come from the model the job names. A size that a fix offers
is one the rules, the model and the nodes accept (:func:`fits`); the findings that say so are
:mod:`translator.checks.split_advice`'s."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Literal

#: The spec field of each parallel size a rule or a fix names.
SIZES = {"tensor": "tensor_parallel_size", "pipeline": "pipeline_parallel_size"}

#: How a framework splits heads over tensor-parallel ranks: each rank an equal share
#: (``divide``), that or several ranks sharing each head (``divide-or-multiple``: the size
#: divides the heads or is a multiple of them), or shares that may differ (``uneven``).
Split = Literal["divide", "divide-or-multiple", "uneven"]


@dataclass(frozen=True)
class ModelParts:
    """What tensor and pipeline parallelism split of a model."""

    layers: int | None
    """Transformer layers; None when the job does not fix them."""
    heads: int | None
    """Attention (query) heads; None when the job does not fix them."""
    kv_heads: int | None
    """Key/value heads (query groups): the heads themselves without grouped-query attention."""
    where: str
    """Where the job gives them (``run.sh: Megatron flags``), for messages."""


@dataclass(frozen=True)
class SplitRules:
    """How one framework splits a model over tensor- and pipeline-parallel ranks."""

    source: str
    """Whose rule it is, for messages (the class or function that enforces it)."""
    heads: Split = "divide"
    """How the attention heads split over tensor-parallel ranks."""
    kv_heads: Split = "divide"
    """How the key/value heads split over tensor-parallel ranks."""
    pipeline: Literal["even", "uneven", "given"] = "even"
    """``even``: every stage the same number of layers, else the framework refuses; ``uneven``:
    it splits them anyway (the stages named); ``given``: the job sets each stage's layers."""
    pipeline_extra: int = 0
    """Slots the pipeline splits beside the layers (an embedding or loss stage counted)."""
    uneven_fix: str | None = None
    """How a job of this framework gives an uneven split, where the even one fails."""
    tensor_at: str | None = None
    """Where the job sets its tensor-parallel size (``run.sh:12``), for findings about it."""
    pipeline_at: str | None = None
    """Where the job sets its pipeline-parallel size."""

    def tensor_fits(self, parts: ModelParts, tp: int) -> bool:
        """Whether ``tp`` ranks split the heads and key/value heads as this framework must."""
        return all(
            splits(count, tp, rule)
            for count, rule in ((parts.heads, self.heads), (parts.kv_heads, self.kv_heads))
        )

    def pipeline_fits(self, parts: ModelParts, pp: int, virtual: int | None = None) -> bool:
        """Whether ``pp`` stages (of ``virtual`` chunks each) split the layers as it must."""
        if parts.layers is None or self.pipeline != "even":
            return True
        slots = parts.layers + self.pipeline_extra
        return slots % pp == 0 and (slots // pp) % (virtual or 1) == 0

    def even(self) -> SplitRules:
        """These rules with every split even: what a fix offers, even where the framework
        would split unevenly."""
        return replace(
            self,
            heads="divide" if self.heads == "uneven" else self.heads,
            kv_heads="divide" if self.kv_heads == "uneven" else self.kv_heads,
            pipeline="even" if self.pipeline == "uneven" else self.pipeline,
        )


def splits(count: int | None, tp: int, rule: Split) -> bool:
    """Whether ``tp`` ranks split ``count`` heads by ``rule`` (an unknown count: yes)."""
    if count is None or rule == "uneven":
        return True
    return count % tp == 0 or (rule == "divide-or-multiple" and tp % count == 0)


def fits(
    parts: ModelParts | None,
    rules: SplitRules | None,
    gpus_per_node: int | None = None,
    virtual: int | None = None,
) -> Callable[[str, int], bool]:
    """Whether a parallel size (``"tensor"``, ``"pipeline"``...) may be offered: the framework
    splits the model on it evenly (with ``virtual`` chunks per stage), and a tensor-parallel
    group stays inside one node."""
    even = None if rules is None else rules.even()

    def accept(name: str, size: int) -> bool:
        if name == "tensor" and gpus_per_node is not None and gpus_per_node % size:
            return False
        if parts is None or even is None:
            return True
        if name == "tensor":
            return even.tensor_fits(parts, size)
        return name != "pipeline" or even.pipeline_fits(parts, size, virtual)

    return accept
