"""A job Slurm runs is converted into one Slurm runs alike: the converted shell scripts carry
its nodes and GPUs a node as ``#SBATCH`` lines, and ``srun`` starts the launcher on each node
(one task a node, meeting at the first node); a layout the job does not say is refused for the
scripts, naming the line, while the configs are still written."""

import json
import re
from pathlib import Path

import pytest
from run_batchspec import run

#: torchtitan's multinode_trainer.slurm style: torchrun under srun, the nodes from #SBATCH.
TORCHRUN_UNDER_SRUN = """#!/bin/bash
#SBATCH --job-name=llama3-8b
#SBATCH --nodes 4
#SBATCH --ntasks-per-node=1
#SBATCH --gpus-per-task=8

nodes=( $( scontrol show hostnames $SLURM_JOB_NODELIST ) )
head_node_ip=$(srun --nodes=1 --ntasks=1 -w "${nodes[0]}" hostname --ip-address)
srun torchrun --nnodes $SLURM_NNODES --nproc_per_node 8 --rdzv_id 101 \\
    --rdzv_backend c10d --rdzv_endpoint "$head_node_ip:29500" \\
    -m torchtitan.train --job.config_file ./llama3_8b.toml \\
    --training.local_batch_size 2 --training.global_batch_size 512 --training.seq_len 8192
"""
#: A TOML beside it, as torchtitan's train_configs hold them.
TOML = """[model]
name = "llama3"
flavor = "8B"

[training]
local_batch_size = 1
global_batch_size = 256
seq_len = 8192

[parallelism]
data_parallel_shard_degree = -1
"""
#: Megatron-LM's sbatch style: srun alone starts one task a GPU.
SRUN_ALONE = """#!/bin/bash
#SBATCH --nodes=4
#SBATCH --ntasks-per-node=8
#SBATCH --gpus-per-node=8
#SBATCH --exclusive

export MASTER_ADDR=$(scontrol show hostnames $SLURM_JOB_NODELIST | head -n 1)
export MASTER_PORT=6000
srun python pretrain_gpt.py --tensor-model-parallel-size 2 \\
    --num-layers 32 --hidden-size 4096 --num-attention-heads 32 --seq-length 4096 \\
    --micro-batch-size 1 --global-batch-size 256 --lr 3e-4 --train-iters 1000
"""
SCRIPTS = ("torchtitan", "megatron")


def convert(job: Path, out: Path, *flags) -> dict[str, str]:
    result = run("convert", job, "--to", "torchtitan,megatron,torchtune", "--out", out, *flags)
    assert result.exit_code == 0, result.output
    return {p.stem: p.read_text() for p in out.iterdir()}


@pytest.fixture(params=["torchrun under srun", "srun alone"])
def slurm_job(request, tmp_path) -> Path:
    (tmp_path / "llama3_8b.toml").write_text(TOML)
    job = tmp_path / "job.slurm"
    job.write_text(TORCHRUN_UNDER_SRUN if request.param == "torchrun under srun" else SRUN_ALONE)
    return job


def test_the_converted_scripts_carry_the_slurm_layout(slurm_job, tmp_path):
    files = convert(slurm_job, tmp_path / "out")
    for name in SCRIPTS:
        text = files[name]
        sbatch = [line for line in text.splitlines() if line.startswith("#SBATCH")]
        # torchrun under srun: one task a node, its eight GPUs
        assert sbatch == [
            "#SBATCH --nodes=4",
            "#SBATCH --ntasks-per-node=1",
            "#SBATCH --gpus-per-node=8",
        ], name
        assert re.search(r"^srun torchrun ", text, re.M), name
        # every node's torchrun meets at the first node
        assert "--rdzv_endpoint" in text and "scontrol show hostnames" in text, name
    assert "# srun tune run --nnodes $SLURM_NNODES --nproc_per_node 8 " in files["torchtune"]
    assert "# #SBATCH --nodes=4" in files["torchtune"]


@pytest.mark.parametrize("name", SCRIPTS)
def test_the_converted_script_reads_as_the_same_layout_and_updates_with_the_allocation(
    slurm_job, tmp_path, name
):
    script = tmp_path / "out" / f"{name}.sh"
    convert(slurm_job, tmp_path / "out")
    out = json.loads(run("inspect", script, "--json").stdout)
    assert (out["world_size"], out["nodes"], out["gpus_per_node"]) == (32, 4, 8)
    assert run("update", script, "--world-size", 64, "--in-place").exit_code == 0
    text = script.read_text()
    assert "#SBATCH --nodes=8\n" in text and "--nnodes $SLURM_NNODES" in text


def test_a_job_slurm_does_not_run_gets_no_slurm_lines(tmp_path):
    job = tmp_path / "train.sh"
    job.write_text(
        "torchrun --nnodes 4 --nproc_per_node 8 pretrain_gpt.py --micro-batch-size 1 "
        "--global-batch-size 256 --seq-length 4096\n"
    )
    files = convert(job, tmp_path / "out")
    assert not any("#SBATCH" in text or "srun" in text for text in files.values())
    assert "torchrun --nnodes 4 --nproc_per_node 8 " in files["torchtitan"]


def test_a_slurm_job_without_its_nodes_is_refused_for_the_scripts_naming_the_line(tmp_path):
    job = tmp_path / "job.sbatch"
    job.write_text(
        SRUN_ALONE.replace("#SBATCH --nodes=4\n#SBATCH --ntasks-per-node=8\n", "").replace(
            "#SBATCH --gpus-per-node=8\n", "#SBATCH --ntasks=32\n"
        )
    )
    result = run("convert", job, "--to", "torchtitan,megatron,torchtune", "--out", tmp_path / "o")
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == ["torchtune.yaml"]
    for name in SCRIPTS:
        assert (
            f"not written: {name}: {name}.sh cannot keep the job's Slurm layout: the job runs "
            "under Slurm (line 7) and does not say its nodes and GPUs a node" in result.stdout
        )
    # torchtune's launch line says the nodes are not known, instead of one node of 32
    assert "--nnodes N --nproc_per_node G" in (tmp_path / "o" / "torchtune.yaml").read_text()
    given = convert(job, tmp_path / "o2", "--world-size", 32, "--nproc-per-node", 8)
    assert "#SBATCH --nodes=4\n" in given["torchtitan"]


def test_the_world_of_srun_alone_is_sourced_at_its_sbatch_lines(tmp_path):
    job = tmp_path / "job.slurm"
    job.write_text(SRUN_ALONE)
    out = json.loads(run("inspect", job, "--json").stdout)
    where = next(s["where"] for s in out["sources"] if s["field"] == "world_size")
    # before: ":0" for a line the #SBATCH variables did not keep
    assert f"{job}:3 #SBATCH SLURM_NTASKS_PER_NODE" in where
    assert f"{job}:2 #SBATCH SLURM_NNODES" in where
