"""The node layout is part of the job: nodes × processes per node are read from the launch
line (or given with ``--nnodes/--nproc-per-node`` or ``--gpus-per-node``) and written in each
framework's own terms, never flattened onto one node."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from translator.cli import main

#: A Hugging Face Trainer job on eight nodes of eight, as published torchrun jobs are written.
EIGHT_BY_EIGHT = """#!/bin/bash
torchrun --nnodes 8 --nproc_per_node 8 --node_rank $NODE_RANK train.py \\
    --per_device_train_batch_size 4 --gradient_accumulation_steps 2 --output_dir out
"""


def run(*args: str):
    return CliRunner().invoke(main, list(args))


@pytest.fixture
def job(tmp_path) -> Path:
    path = tmp_path / "train.sh"
    path.write_text(EIGHT_BY_EIGHT)
    return path


def test_inspect_carries_the_launch_lines_nodes(job):
    out = json.loads(run("inspect", str(job), "--json").stdout)
    assert (out["world_size"], out["nodes"], out["gpus_per_node"]) == (64, 8, 8)


def test_convert_keeps_eight_nodes_of_eight_for_torchtitan(job):
    result = run("convert", str(job), "--to", "torchtitan", "--out", "-")
    assert result.exit_code == 0, result.output
    assert "torchrun --nnodes 8 --nproc_per_node 8 " in result.stdout


def test_convert_keeps_eight_nodes_of_eight_for_litgpt(job):
    result = run("convert", str(job), "--to", "litgpt", "--out", "-")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert "devices: 8" in lines and "num_nodes: 8" in lines


@pytest.mark.parametrize(
    ("flags", "launch"),
    [
        (["--world-size", "16", "--gpus-per-node", "8"], "--nnodes 2 --nproc_per_node 8"),
        (["--nnodes", "4", "--nproc-per-node", "4"], "--nnodes 4 --nproc_per_node 4"),
    ],
)
def test_a_config_converted_on_a_given_layout_launches_it(tmp_path, flags, launch):
    config = tmp_path / "ds.json"
    config.write_text('{"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4}')
    result = run("convert", str(config), "--to", "torchtitan", "--out", "-", *flags)
    assert result.exit_code == 0, result.output
    assert f"torchrun {launch} " in result.stdout


def test_gpus_per_node_that_does_not_split_the_world_is_refused(tmp_path):
    config = tmp_path / "ds.json"
    config.write_text('{"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4}')
    result = run("inspect", str(config), "--world-size", "12", "--gpus-per-node", "8")
    assert result.exit_code == 2
    assert "--world-size 12 is not whole nodes of --gpus-per-node 8: give 8 or 16" in result.output
