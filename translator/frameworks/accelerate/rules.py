"""Accelerate's config YAML (``accelerate launch --config_file``): the launch, not the batch.

``num_processes`` is the total over all machines; each machine starts ``num_processes //
num_machines`` (floored: uneven machines are impossible). ``deepspeed_config.gradient_accumulation_steps``
and ``deepspeed_config_file`` make the DeepSpeed config the launch hands the program
(:mod:`~translator.frameworks.accelerate.plugin`), whose values the HF Trainer checks against
its own. ``parallelism_config`` sizes must multiply to ``num_processes``;
DP = replicate × shard, and the TP/CP/SP ranks share one batch. The per-device batch lives in
the training code or its TrainingArguments: inspect the two files together and the world size
comes from here.
"""

from __future__ import annotations

import math

from translator.batch import solve
from translator.batch.node_lines import NodeLines
from translator.frameworks.accelerate import plugin
from translator.frameworks.deepspeed.config_json import GAS
from translator.frameworks.shared import yaml_insert
from translator.reading import Launch, Reading, invalid_value, typo_findings, values_at
from translator.spec import BatchSpec
from translator.words import parsing
from translator.words.findings import Finding, finding

NAME = "accelerate"
PARALLEL = "parallelism_config.parallelism_config_"
#: parallelism_config sizes (accelerate's key suffix -> what it is).
SIZES = ("dp_replicate_size", "dp_shard_size", "tp_size", "cp_size", "sp_size")
KEYS = ["num_processes", "num_machines", "deepspeed_config.gradient_accumulation_steps"]
#: Keys whose null is the same as their absence: ``accelerate launch`` copies the null into its
#: ``--gradient_accumulation_steps`` (default None) and exports an accumulation only when that is
#: not None. (A null ``parallelism_config_*_size`` is not: the launch exports the text "None",
#: which the training process's ``ParallelismConfig`` fails to read as an int.)
NULLABLE = frozenset({"deepspeed_config.gradient_accumulation_steps"})
LOOKALIKES = {
    "machine_rank",
    "num_cpu_threads_per_process",
    "gpu_ids",
    "main_process_port",
    "main_process_ip",
    "same_network",
    "rdzv_backend",
    "distributed_type",
    "compute_environment",
    "mixed_precision",
    "use_cpu",
    "debug",
    "downcast_bf16",
    "main_training_function",
    "tpu_env",
    "tpu_use_cluster",
    "tpu_use_sudo",
    "enable_cpu_affinity",
    "fsdp_config",
    "megatron_lm_config",
    "deepspeed_config",
    "dynamo_config",
    "parallelism_config",
    "ipex_config",
    "mpirun_config",
}


def claims(text: str) -> bool:
    return "distributed_type:" in text or "compute_environment:" in text


def holds_batch(text: str) -> bool:
    return "num_processes" in text


def context(spec: BatchSpec) -> dict:
    nodes = spec.nodes or 1
    model = spec.tensor_parallel_size * spec.context_parallel_size
    return {"spec": spec, "nodes": nodes, "parallel": model > 1, "zero_stage": spec.zero_stage}


def read(text: str, where: str) -> Reading:
    doc = parsing.load_mapping(text, where, "an accelerate config")
    config = doc.data
    assert isinstance(config, dict)  # load_mapping refuses anything else
    reading = Reading(where, NAME, text)
    reading.values |= values_at(
        doc,
        (
            *KEYS,
            "distributed_type",
            plugin.FILE,
            *plugin.INLINE,
            *(PARALLEL + size for size in SIZES),
        ),
    )
    lines = {key: doc.positions.get(key, (0,))[0] for key in config}
    reading.findings += typo_findings(
        lines,
        ["num_processes", "num_machines"],
        LOOKALIKES,
        where,
        "so accelerate launch refuses it",
    )
    total, machines = reading.count("num_processes"), reading.count("num_machines") or 1
    if total is not None and _per_machine(total, machines):
        reading.world_size = total  # the file launches its own world, on its machines
        reading.launch_counts = {"total": total, "nodes": machines}
    handed = plugin.plugin_config(reading, config)
    if handed is not None:
        reading.partners.append(handed)
    return reading


def _per_machine(total: int, machines: int) -> int | None:
    """The processes each machine starts, when ``total`` splits evenly over ``machines``
    (accelerate starts ``total // machines`` on each)."""
    per_machine = total // machines
    return per_machine if per_machine and per_machine * machines == total else None


def launch_of(reading: Reading) -> Launch:
    """The launch this config starts, for the TrainingArguments inspected with it."""
    values, _ = interpret(reading, Launch())
    world = values.get("world_size")
    return Launch(
        world,
        values.get("tensor_parallel_size"),
        None,
        values.get("context_parallel_size"),
        None,  # the accumulation is the DeepSpeed config's, which the program checks
        reading.path,
        nodes=None if world is None else reading.count("num_machines") or 1,
        handed=next(iter(reading.partners), None),
    )


def interpret(reading: Reading, launch: Launch) -> tuple[dict, list[Finding]]:
    findings = list(reading.findings)
    values: dict = {}
    counts: dict[str, int] = {}
    for key, v in reading.values.items():
        if key in ("distributed_type", plugin.FILE, "deepspeed_config.zero_stage"):
            continue
        if key in NULLABLE and v.value is None:
            continue  # not set: accelerate launch exports no accumulation
        if key == "num_processes" and v.value in (-1, None):
            # null as -1: a --num_processes flag wins over either, and without one the launch
            # fails (-1 in accelerate's words; null when torchrun gets nproc_per_node "None")
            findings.append(
                finding(
                    "accelerate-processes-from-command-line",
                    f"num_processes is {'null' if v.value is None else -1}: accelerate launch "
                    "needs --num_processes on the command line",
                    hint="give --world-size",
                    where=reading.where(key),
                )
            )
            continue
        if v.count is None:
            findings.append(invalid_value(key, v, reading.path))
            continue
        counts[key] = v.count
    total, machines = counts.get("num_processes"), counts.get("num_machines", 1)
    if total is not None:
        if _per_machine(total, machines) is None:
            per_machine = total // machines
            findings.append(
                finding(
                    "accelerate-uneven-machines",
                    f"num_processes {total} over num_machines {machines}: accelerate starts "
                    f"{total} // {machines} = {per_machine} per machine, "
                    f"{per_machine * machines} in all (num_processes is the total over machines)",
                    hint="use num_processes "
                    + " or ".join(map(str, solve.nearest_multiples(total, machines)))
                    + f" ({machines} machines × the processes each starts)",
                    where=reading.where("num_processes"),
                )
            )
        else:
            values["world_size"] = total
    findings += _parallelism(reading, counts, total, values)
    findings += _deepspeed_accumulation(reading, values)
    findings.append(
        finding(
            "accelerate-batch-elsewhere",
            "an accelerate config gives the launch, not the batch: the per-device batch is in "
            + (
                ", ".join(launch.launches)
                if launch.launches
                else "the training code or its TrainingArguments"
            ),
            hint=None if launch.launches else "inspect the two files together",
            where=reading.path,
        )
    )
    return values, findings


def _deepspeed_accumulation(reading: Reading, values: dict) -> list[Finding]:
    """The accumulation of the DeepSpeed config the launch hands over (inline, or its
    ``deepspeed_config_file``'s), which the program must agree with."""
    ds = next(iter(reading.partners), None)
    if ds is None:
        return []
    gas = ds.count(GAS)
    if gas is None:
        return list(ds.findings)
    values["gradient_accumulation_steps"] = gas
    return [
        *ds.findings,
        finding(
            "accelerate-deepspeed-accumulation",
            f"the DeepSpeed config of this launch sets {GAS} {gas} ({ds.where(GAS)}): the HF "
            "Trainer refuses TrainingArguments whose gradient_accumulation_steps differs "
            "(trainer_config_finalize); a script with its own Accelerator takes it over its own "
            '(accelerate: "Using DeepSpeed\'s value")',
            where=ds.where(GAS),
        ),
    ]


def _parallelism(reading: Reading, counts: dict, total: int | None, values: dict) -> list:
    sizes = {s: counts.get(PARALLEL + s, 1) for s in SIZES}
    if not any(PARALLEL + s in counts for s in SIZES):
        return []
    values["tensor_parallel_size"] = sizes["tp_size"]
    values["context_parallel_size"] = sizes["cp_size"] * sizes["sp_size"]
    product = math.prod(sizes.values())
    if total is not None and product != total:
        return [
            finding(
                "accelerate-parallel-sizes",
                f"parallelism_config sizes multiply to {product} "
                f"({' × '.join(f'{k} {v}' for k, v in sizes.items())}), but num_processes is "
                f"{total}: ParallelismConfig refuses it",
                hint="make dp_replicate × dp_shard × tp × cp × sp equal num_processes",
                where=reading.where(PARALLEL + "tp_size"),
            )
        ]
    return []


def check(spec: BatchSpec) -> list[Finding]:
    if spec.pipeline_parallel_size > 1:
        return [
            finding(
                "hf-no-pipeline",
                f"accelerate's launch has no pipeline parallelism (pipeline "
                f"{spec.pipeline_parallel_size})",
                hint="render this spec for Megatron or DeepSpeed",
            )
        ]
    return []


def launch_edits(reading: Reading, launch: Launch) -> dict:
    """The launch keys for a new world alone: ``num_processes`` is the total over the
    machines, ``num_machines`` the nodes (written when the file has it or it is not 1)."""
    out: dict[str, int | None] = {"num_processes": launch.world_size}
    if "num_machines" in reading.values or (launch.nodes or 1) != 1:
        out["num_machines"] = launch.nodes or 1
    return out


def insertion(reading: Reading, key: str) -> tuple[int, int]:
    """Where ``update`` writes ``num_machines`` a one-machine config lacks: after
    ``num_processes``."""
    return yaml_insert.after_key(reading, key, "num_processes")


def edits(reading: Reading, spec: BatchSpec) -> dict:
    out = launch_edits(reading, Launch.of(spec))
    if "deepspeed_config.gradient_accumulation_steps" in reading.values:
        out["deepspeed_config.gradient_accumulation_steps"] = spec.gradient_accumulation_steps
    return out


def node_lines(nodes: int, per_node: int) -> NodeLines:
    """accelerate's config (or ``accelerate launch``'s flags): ``num_processes`` counts every
    machine's processes."""
    return NodeLines(
        "accelerate",
        (f"num_machines: {nodes}", f"num_processes: {nodes * per_node}"),
        f"num_processes counts every machine's, {nodes} × {per_node}; as flags: accelerate "
        f"launch --num_machines {nodes} --num_processes {nodes * per_node}"
        + (", --machine_rank on each machine" if nodes > 1 else ""),
    )
