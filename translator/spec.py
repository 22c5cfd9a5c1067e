"""The canonical batch spec: one place that says how many samples an optimizer step sees.

``global_batch_size = micro_batch_size x gradient_accumulation_steps x data_parallel_size`` and
``data_parallel_size = world_size / (tensor x pipeline x context)``. Give any three of global,
micro, accumulation and world (or data-parallel) size; the fourth is solved, never floored.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    ValidationInfo,
    model_validator,
)

from translator.batch import solve
from translator.model import model_split
from translator.words.errors import ConfigError, InputError
from translator.words.findings import finding

#: Upper bound for any count: far beyond any real cluster, low enough to catch 10**60 typos.
MAX_COUNT = 1 << 40

Count = Annotated[StrictInt, Field(ge=1, le=MAX_COUNT)]
Rate = Annotated[StrictFloat | StrictInt, Field(gt=0, allow_inf_nan=False)]

#: The keys every resolved-spec output carries, in this order (docs/architecture.md).
OUTPUT_KEYS = (
    "global_batch_size",
    "micro_batch_size",
    "gradient_accumulation_steps",
    "data_parallel_size",
    "world_size",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "context_parallel_size",
    "sequence_length",
    "tokens_per_step",
)


class BatchSpec(BaseModel):
    """A batch layout. After validation it is consistent; micro and accumulation may stay
    undecided (``None``) when only the global batch and the data-parallel size are known.

    The five batch fields are ``int | None`` because the input may leave any of them out.
    Code that computes with them reads them as ints through :attr:`global_batch`,
    :attr:`data_parallel` and :attr:`world` (always known after validation) and
    :attr:`micro` and :attr:`accumulation` (known once :attr:`is_decided`)."""

    model_config = ConfigDict(
        extra="forbid", use_attribute_docstrings=True, title="batchspec BatchSpec"
    )

    global_batch_size: Count | None = Field(
        None, validation_alias=AliasChoices("global_batch_size", "effective_batch_size")
    )
    """Samples per optimizer step, all ranks together (alias: ``effective_batch_size``)."""
    micro_batch_size: Count | None = None
    """Samples in one forward/backward pass on one rank."""
    gradient_accumulation_steps: Count | None = None
    """Micro-batches each rank runs per optimizer step."""
    data_parallel_size: Count | None = None
    """Model replicas: ``world_size / (tensor x pipeline x context)``. Solved when not given."""
    world_size: Count | None = None
    """All processes (GPUs) of the job. Give it, or ``nodes`` and ``gpus_per_node``."""
    nodes: Count | None = None
    """Number of nodes; with ``gpus_per_node`` gives the world size."""
    gpus_per_node: Count | None = None
    """Processes (GPUs) per node."""
    tensor_parallel_size: Count = 1
    """Ranks that split each layer's matrices (Megatron TP, or DeepSpeed AutoTP)."""
    pipeline_parallel_size: Count = 1
    """Pipeline stages; each holds a slice of the layers."""
    context_parallel_size: Count = 1
    """Ranks that split each sequence (Megatron CP, DeepSpeed Ulysses sequence parallel)."""
    expert_parallel_size: Count = 1
    """Ranks the experts of a mixture-of-experts layer are spread over; does not shrink DP."""
    num_experts: Count | None = None
    """Experts per MoE layer; must divide by ``expert_parallel_size``."""
    virtual_pipeline_stages: Count | None = None
    """Megatron interleaved schedule: model chunks per pipeline rank (needs pipeline > 1)."""
    microbatch_group_size_per_vp_stage: Count | None = None
    """Megatron interleaved schedule: micro-batches per group (default: the pipeline size)."""
    sequence_length: Count | None = None
    """Tokens per sample; left out of rendered configs when not given."""
    zero_stage: Literal[0, 1, 2, 3] | None = None
    """DeepSpeed ZeRO stage to write into the DeepSpeed config, when wanted."""
    deepspeed_autotp: StrictBool = False
    """Tensor parallelism is DeepSpeed AutoTP (``tensor_parallel.autotp_size``), not Megatron's."""
    learning_rate: Rate | None = None
    """The learning rate that was tuned at ``reference_global_batch_size``."""
    reference_global_batch_size: Count | None = None
    """The global batch the learning rate was tuned for; differing from it gives LR advice."""
    optimizer: Literal["adam", "sgd"] = "adam"
    """Optimizer family, which decides the LR scaling rule (square root for Adam, linear for SGD)."""
    adam_beta2: Annotated[StrictFloat, Field(gt=0, lt=1)] | None = None
    """Adam's beta2 at the reference batch; advice keeps its half-life in tokens fixed."""

    @model_validator(mode="after")
    def _solve(self, info: ValidationInfo) -> BatchSpec:
        world = self._world_from_nodes((info.context or {}).get("names", {}))
        parts, rules = (info.context or {}).get("model", (None, None))
        dp = self.data_parallel_size
        if world is not None:
            known = (self.micro_batch_size or 1) * (self.gradient_accumulation_steps or 1)
            from_world = solve.data_parallel_size(
                world,
                self.tensor_parallel_size,
                self.pipeline_parallel_size,
                self.context_parallel_size,
                None if self.global_batch_size is None else (self.global_batch_size, known),
                model_split.fits(parts, rules, self.gpus_per_node, self.virtual_pipeline_stages),
                self.gpus_per_node,
            )
            if dp is not None and dp != from_world:
                raise ConfigError(
                    [
                        finding(
                            "world-not-divisible",
                            f"data_parallel_size {dp} ≠ world {world} / (tensor {self.tensor_parallel_size}"
                            f" × pipeline {self.pipeline_parallel_size} × context "
                            f"{self.context_parallel_size}) = {from_world}",
                            hint=f"drop data_parallel_size or set it to {from_world}",
                        )
                    ]
                )
            dp = from_world
        g, m, a, dp = solve.complete(
            self.global_batch_size,
            self.micro_batch_size,
            self.gradient_accumulation_steps,
            dp,
            self.model_parallel_size if world is not None else None,  # hints then name worlds
        )
        self.global_batch_size, self.micro_batch_size = g, m
        self.gradient_accumulation_steps, self.data_parallel_size = a, dp
        self.world_size = dp * self.model_parallel_size
        return self

    def _world_from_nodes(self, names: dict[str, str]) -> int | None:
        """The world the nodes give, or ``world_size`` (split in nodes of ``gpus_per_node``
        when that is given too); messages call each key by its name in ``names`` (the flag
        that gave it) or its own."""
        nodes, per_node = self.nodes, self.gpus_per_node
        n, g, w = (names.get(k, k) for k in ("nodes", "gpus_per_node", "world_size"))
        if per_node is not None and nodes is None and self.world_size is not None:
            self.nodes = solve.whole_nodes(self.world_size, per_node, w, g)
            return self.world_size
        if nodes is None or per_node is None:
            if per_node is not None:
                raise InputError(f"give {n} or {w} with {g}")
            if nodes is not None:
                raise InputError(f"give both {n} and {g}, or {w} alone")
            return self.world_size
        world = nodes * per_node
        if self.world_size is not None and self.world_size != world:
            raise ConfigError(
                [
                    finding(
                        "world-nodes-mismatch",
                        f"{w} {self.world_size} ≠ {n} {nodes} × {g} {per_node} = {world}",
                        hint=f"drop {w} or set it to {world}",
                    )
                ]
            )
        return world

    # The batch counts as ints ------------------------------------------------------------

    @property
    def global_batch(self) -> int:
        """``global_batch_size``: validation always solves it."""
        return _solved(self.global_batch_size, "global_batch_size")

    @property
    def data_parallel(self) -> int:
        """``data_parallel_size``: validation always solves it."""
        return _solved(self.data_parallel_size, "data_parallel_size")

    @property
    def world(self) -> int:
        """``world_size``: validation always solves it."""
        return _solved(self.world_size, "world_size")

    @property
    def micro(self) -> int:
        """``micro_batch_size``; an :class:`InputError` while the spec is undecided."""
        return _decided(self.micro_batch_size)

    @property
    def accumulation(self) -> int:
        """``gradient_accumulation_steps``; an :class:`InputError` while the spec is undecided."""
        return _decided(self.gradient_accumulation_steps)

    @property
    def model_parallel_size(self) -> int:
        """Ranks that hold one model replica: tensor x pipeline x context."""
        return self.tensor_parallel_size * self.pipeline_parallel_size * self.context_parallel_size

    @property
    def is_decided(self) -> bool:
        """True once micro-batch and accumulation are known (rendering needs that)."""
        return self.micro_batch_size is not None

    @property
    def tokens_per_step(self) -> int | None:
        """Tokens per optimizer step: global batch x sequence length, when the length is known."""
        if self.sequence_length is None:
            return None
        return self.global_batch * self.sequence_length

    @property
    def batch_scale(self) -> float | None:
        """Global batch / reference batch, when a reference is given."""
        if self.reference_global_batch_size is None:
            return None
        return self.global_batch / self.reference_global_batch_size

    def output(self) -> dict:
        """The resolved-spec keys (docs/architecture.md), then any optional field that was set."""
        data = {key: getattr(self, key) for key in OUTPUT_KEYS}
        extras = self.model_dump(exclude_defaults=True, exclude=set(OUTPUT_KEYS))
        return data | extras


def _solved(value: int | None, name: str) -> int:
    if value is None:  # only a spec built without validation (model_construct) lacks it
        raise TypeError(f"BatchSpec.{name} is unset: the spec was not validated")
    return value


def _decided(value: int | None) -> int:
    if value is None:
        raise InputError(
            "the spec leaves the micro-batch open; set micro_batch_size or "
            "gradient_accumulation_steps"
        )
    return value


def spec_fields() -> set[str]:
    """Every key a spec file may hold (aliases included)."""
    return set(BatchSpec.model_fields) | {"effective_batch_size"}
