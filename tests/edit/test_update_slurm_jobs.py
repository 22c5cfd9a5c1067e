"""Slurm jobs as teams publish them, moved to another world: the alignment-handbook style
``launch.slurm`` (``#SBATCH --nodes``, read through ``$SLURM_NNODES`` for both accelerate's
``--num_machines`` and ``--num_processes``, inside ``srun bash -c "$LAUNCHER $CMD"``)."""

from pathlib import Path

import pytest
from run_batchspec import run

#: The handbook's launch.slurm, its arguments positional as in its first releases.
LAUNCH = """\
#!/bin/bash
#SBATCH --job-name=handbook
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --exclusive
#SBATCH --gres=gpu:8
#SBATCH --output=./logs/%x-%j.out

set -x -e

MODEL=$1
TASK=$2
PRECISION=$3
ACCELERATOR=$4
OPTIONAL_ARGS=$5

CONFIG_FILE=recipes/$MODEL/$TASK/config_$PRECISION.yaml
GRAD_ACC_STEPS=$(grep 'gradient_accumulation_steps' $CONFIG_FILE | awk '{print $2}')

NUM_NODES=$SLURM_NNODES
GPUS_PER_NODE=8
WORLD_SIZE=$(($NUM_NODES*$GPUS_PER_NODE))
MASTER_ADDR=$(scontrol show hostnames $SLURM_JOB_NODELIST | head -n 1)
MASTER_PORT=6000

export CMD=" \\
    scripts/run_$TASK.py $CONFIG_FILE $OPTIONAL_ARGS
    "
export LAUNCHER="HF_HUB_ENABLE_HF_TRANSFER=1 ACCELERATE_LOG_LEVEL=info accelerate launch \\
    --config_file recipes/accelerate_configs/$ACCELERATOR.yaml  \\
    --gradient_accumulation_steps $GRAD_ACC_STEPS \\
    --num_machines $NUM_NODES \\
    --num_processes $WORLD_SIZE \\
    --main_process_ip $MASTER_ADDR \\
    --main_process_port $MASTER_PORT \\
    --machine_rank \\$SLURM_PROCID \\
    --max_restarts 1 \\
    --tee 3 \\
    "

SRUN_ARGS=" \\
    --wait=60 \\
    --kill-on-bad-exit=1 \\
    "

clear; srun $SRUN_ARGS --jobid $SLURM_JOB_ID bash -c "$LAUNCHER --role \\$SLURMD_NODENAME: $CMD" 2>&1
"""
RECIPE = """\
model_name_or_path: meta-llama/Llama-3.2-1B
bf16: true
per_device_train_batch_size: 4
gradient_accumulation_steps: 2
output_dir: data/llama-sft
"""
ACCELERATE = """\
compute_environment: LOCAL_MACHINE
deepspeed_config:
  deepspeed_multinode_launcher: standard
  zero3_init_flag: true
  zero_stage: 3
distributed_type: DEEPSPEED
machine_rank: 0
main_training_function: main
mixed_precision: bf16
num_machines: 1
num_processes: 8
"""
ARGS = ["--", "llama", "sft", "full", "deepspeed_zero3"]


@pytest.fixture
def handbook(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    for path, text in (
        ("recipes/launch.slurm", LAUNCH),
        ("recipes/llama/sft/config_full.yaml", RECIPE),
        ("recipes/accelerate_configs/deepspeed_zero3.yaml", ACCELERATE),
    ):
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        Path(path).write_text(text)
    return Path("recipes/launch.slurm")


def test_the_shared_nodes_literal_moves_the_whole_launch(handbook):
    """``#SBATCH --nodes`` feeds --num_machines and (× 8) --num_processes: editing it to 4
    gives both their new values, so it is edited; the recipe's accumulation keeps global 128."""
    result = run("update", handbook, "--world-size", 32, "--in-place", *ARGS)
    assert result.exit_code == 0, result.output
    assert handbook.read_text() == LAUNCH.replace("--nodes=2", "--nodes=4")
    recipe = Path("recipes/llama/sft/config_full.yaml").read_text()
    assert recipe == RECIPE.replace(
        "gradient_accumulation_steps: 2", "gradient_accumulation_steps: 1"
    )
    moved = run("inspect", handbook, "--json", *ARGS)
    assert '"world_size": 32' in moved.stdout and '"global_batch_size": 128' in moved.stdout


def test_a_literal_that_also_feeds_another_word_is_still_refused(handbook):
    """The same literal behind a word update does not move (--max_restarts) stays refused."""
    handbook.write_text(LAUNCH.replace("--max_restarts 1", "--max_restarts $NUM_NODES"))
    result = run("update", handbook, "--world-size", 32, *ARGS)
    assert result.exit_code == 1
    assert "--max_restarts" in result.stderr and "written once and also used by" in result.stderr
