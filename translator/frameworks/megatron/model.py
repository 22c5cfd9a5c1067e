"""What Megatron's flags say about the model: how megatron-core (or Megatron-DeepSpeed) splits
its heads and layers over the ranks, and how it trains as far as the memory estimate goes."""

from __future__ import annotations

from typing import Literal

from translator.frameworks.shared import flags
from translator.model.memory import Setting, Settings
from translator.model.model_split import SplitRules
from translator.reading import Reading

# How the model splits ----------------------------------------------------------------------------

#: Flags that set the layers of each pipeline stage themselves (uneven pipeline parallelism).
STAGE_LAYER_FLAGS = {
    "--decoder-first-pipeline-num-layers",
    "--decoder-last-pipeline-num-layers",
    "--pipeline-model-parallel-layout",
}
#: Flags that count the embedding or the loss as one more layer of the pipeline split.
PIPELINE_SLOT_FLAGS = {
    "--account-for-embedding-in-pipeline-split",
    "--account-for-loss-in-pipeline-split",
}


def given_flags(reading: Reading) -> set[str]:
    """The flags among the program's arguments (a job's reading; none for a snippet)."""
    return {flags.flag_of(w) for w in reading.arguments}


def split_rules(reading: Reading, values: dict) -> SplitRules:
    """megatron-core's: ``TransformerConfig`` refuses attention heads that the tensor-parallel
    size does not divide, and query groups it neither divides nor is a multiple of;
    ``get_num_layers_to_build`` asserts the layers (with an embedding or loss slot counted)
    divide by the pipeline stages and each stage's layers by the virtual stages, unless the
    job sets the first and last stages' layers. Megatron-DeepSpeed (``--deepspeed``, or its
    ``--num-key-value-heads``) divides the key/value heads by the tensor-parallel size
    (``core.utils.divide``), and its DeepSpeed pipeline balances the layers over the stages,
    unevenly where they do not divide (``--no-pipeline-parallel`` turns it off)."""
    given = given_flags(reading)
    fork = bool(given & {"--deepspeed", "--num-key-value-heads"})
    pipeline: Literal["even", "uneven", "given"] = "even"
    if given & STAGE_LAYER_FLAGS:
        pipeline = "given"
    elif "--deepspeed" in given and "--no-pipeline-parallel" not in given:
        pipeline = "uneven"
    return SplitRules(
        "Megatron-DeepSpeed" if fork else "megatron-core",
        heads="divide",
        kv_heads="divide" if fork else "divide-or-multiple",
        pipeline=pipeline,
        pipeline_extra=len(given & PIPELINE_SLOT_FLAGS),
        uneven_fix=None
        if fork
        else "give the first and last stages their own layers with "
        "--decoder-first-pipeline-num-layers and --decoder-last-pipeline-num-layers",
        tensor_at=_at(reading, "--tensor-model-parallel-size"),
        pipeline_at=_at(reading, "--pipeline-model-parallel-size"),
    )


def _at(reading: Reading, key: str) -> str | None:
    """Where the reading sets ``key``, when it does."""
    return reading.where(key) if key in reading.values else None


# The memory estimate's settings ---------------------------------------------------------------

#: ``--data-parallel-sharding-strategy`` of Megatron FSDP -> the ZeRO stage it shards as
#: (Megatron-LM's default is ``optim_grads_params``).
FSDP_STAGES = {"no_shard": 0, "optim": 1, "optim_grads": 2, "optim_grads_params": 3}


def memory_settings(reading: Reading) -> Settings:
    """What Megatron's flags say about memory: the ZeRO stage its distributed optimizer or FSDP
    shards as, the optimizer's CPU offload, sequence parallelism and recomputation."""
    given, unused = [], []

    def at(flag: str) -> str:
        return f"{reading.where(flag)} {flag}"

    def value(flag: str) -> object:
        v = reading.values.get(flag)
        if v is not None and v.value is None:
            why = v.why_unknown or "not known"
            unused.append(f"{at(flag)} is {why}, unknown until the script runs")
        return None if v is None else v.value

    strategy = FSDP_STAGES.get(
        str(value("--data-parallel-sharding-strategy") or "optim_grads_params")
    )
    deepspeed_stage = value("zero_optimization.stage")  # a Megatron-DeepSpeed job's JSON
    if value("--use-megatron-fsdp") and strategy is not None:
        given.append(Setting("zero_stage", strategy, at("--use-megatron-fsdp")))
    elif value("--use-torch-fsdp2"):
        stage = 2 if value("--torch-fsdp2-no-reshard-after-forward") else 3
        given.append(Setting("zero_stage", stage, at("--use-torch-fsdp2")))
    elif value("--use-distributed-optimizer"):
        # megatron-core's DistributedOptimizer shards the fp32 main weights and Adam states
        # over DP; every rank keeps the whole gradient buffer: ZeRO 1.
        given.append(Setting("zero_stage", 1, at("--use-distributed-optimizer")))
    elif type(deepspeed_stage) is int and deepspeed_stage in (0, 1, 2, 3):
        given.append(Setting("zero_stage", deepspeed_stage, at("zero_optimization.stage")))
    instances = value("--num-distributed-optimizer-instances")
    if isinstance(instances, int) and instances > 1:
        unused.append(
            f"{at('--num-distributed-optimizer-instances')} {instances}: the optimizer is "
            "sharded over DP / instances, and the estimate divides by DP"
        )
    if value("--optimizer-cpu-offload"):
        fraction = value("--optimizer-offload-fraction")
        if fraction in (None, 1, "1", "1.0"):
            given.append(
                Setting("offload", frozenset({"optimizer"}), at("--optimizer-cpu-offload"))
            )
        else:
            unused.append(
                f"{at('--optimizer-offload-fraction')} {fraction}: part of the optimizer is "
                "offloaded, which the estimate does not count"
            )
    if value("--bf16") and value("--grad-reduce-in-bf16"):
        # megatron-core's gradient buffer takes the weights' dtype unless grad_reduce_in_fp32
        given.append(Setting("gradient_bytes", 2, at("--grad-reduce-in-bf16")))
    for flag in ("--fp8-format", "--fp8-param-gather"):
        if value(flag) is not None:
            unused.append(f"{at(flag)}: FP8 is not counted, the estimate takes bf16 weights")
            break
    if value("--sequence-parallel"):
        given.append(Setting("sequence_parallel", True, at("--sequence-parallel")))
    _recompute(value, at, given, unused)
    return Settings(tuple(given), tuple(unused))


def _recompute(value, at, given: list, unused: list) -> None:
    """``--recompute-activations`` (selective) or ``--recompute-granularity``, and the
    ``--recompute-method`` / ``--recompute-num-layers`` that the estimate cannot follow."""
    granularity = value("--recompute-granularity")
    if granularity in ("full", "selective"):
        given.append(Setting("recompute", granularity, at("--recompute-granularity")))
    elif value("--recompute-activations"):
        given.append(Setting("recompute", "selective", at("--recompute-activations")))
    method, layers = value("--recompute-method"), value("--recompute-num-layers")
    if granularity == "full" and (method, layers) != ("uniform", 1) and method is not None:
        unused.append(
            f"{at('--recompute-method')} {method} with --recompute-num-layers {layers}: the "
            "estimate counts full recomputation of every layer on its own (uniform, 1)"
        )
