"""The node layout is part of the job: nodes × processes per node are read from the launch
line (or given with ``--nnodes/--nproc-per-node`` or ``--world-size`` with ``--nproc-per-node``) and written in each
framework's own terms, never flattened onto one node."""

import json
from pathlib import Path

import pytest
from run_batchspec import run

#: A Hugging Face Trainer job on eight nodes of eight, as published torchrun jobs are written.
EIGHT_BY_EIGHT = """#!/bin/bash
torchrun --nnodes 8 --nproc_per_node 8 --node_rank $NODE_RANK train.py \\
    --per_device_train_batch_size 4 --gradient_accumulation_steps 2 --output_dir out
"""


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
        (["--world-size", "16", "--nproc-per-node", "8"], "--nnodes 2 --nproc_per_node 8"),
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
    result = run("inspect", str(config), "--world-size", "12", "--nproc-per-node", "8")
    assert result.exit_code == 2
    assert "--world-size 12 is not whole nodes of --nproc-per-node 8: give 8 or 16" in result.output


#: A DeepSpeed-launched Trainer job on one node of eight (its DeepSpeed JSON fills "auto").
DEEPSPEED_JOB = """#!/bin/bash
deepspeed --num_gpus 8 train.py --deepspeed ds_auto.json \\
    --per_device_train_batch_size 4 --gradient_accumulation_steps 2 --output_dir out
"""
AUTO = (
    '{"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto",\n'
    ' "gradient_accumulation_steps": "auto", "zero_optimization": {"stage": 2}}\n'
)


@pytest.fixture
def deepspeed_job(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ds_auto.json").write_text(AUTO)
    path = tmp_path / "train.sh"
    path.write_text(DEEPSPEED_JOB)
    return path


def test_deepspeed_on_eight_to_sixteen_is_two_nodes_of_eight_with_a_host_file_note(deepspeed_job):
    result = run("update", str(deepspeed_job), "--world-size", "16", "--in-place")
    assert result.exit_code == 0, result.output
    assert deepspeed_job.read_text().splitlines()[1] == (
        "deepspeed --num_nodes 2 --num_gpus 8 train.py --deepspeed ds_auto.json \\"
    )
    assert "note: " in result.output and "one `host slots=8` line each" in result.output
    out = json.loads(run("inspect", str(deepspeed_job), "--json").stdout)
    assert (out["nodes"], out["gpus_per_node"], out["global_batch_size"]) == (2, 8, 64)


def test_deepspeed_given_two_nodes_of_eight_is_not_refused(deepspeed_job):
    args = ["--nnodes", "2", "--nproc-per-node", "8", "--json"]
    result = run("update", str(deepspeed_job), *args)
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert "--num_nodes 2 --num_gpus 8" in out["text"] and out["notes"]


def test_one_node_of_sixteen_is_written_when_asked_for(deepspeed_job):
    result = run("update", str(deepspeed_job), "--world-size", "16", "--nproc-per-node", "16")
    assert result.exit_code == 0, result.output
    assert (
        "deepspeed --num_gpus 16 train.py" in result.stdout and "--num_nodes" not in result.stdout
    )


def test_a_world_that_is_not_whole_nodes_names_the_layouts(deepspeed_job):
    before = deepspeed_job.read_text()
    result = run("update", str(deepspeed_job), "--world-size", "12", "--in-place")
    assert result.exit_code == 2
    assert "runs 8 processes per node, which cannot make world 12 in whole nodes" in result.output
    assert "2 × 6 or 3 × 4" in result.output
    assert deepspeed_job.read_text() == before


#: A spec with tensor parallelism: some frameworks' files cannot carry it.
TENSOR_SPEC = (
    "global_batch_size: 256\nmicro_batch_size: 2\nnodes: 2\ngpus_per_node: 8\n"
    "tensor_parallel_size: 2\n"
)


def test_render_to_all_writes_every_framework_that_can_and_lists_the_others(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(TENSOR_SPEC)
    result = run("render", str(spec), "--to", "all", "--out", str(tmp_path / "out"), "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert set(out["refused"]) == {"hf", "litgpt"}
    assert "tensor 2" in out["refused"]["litgpt"]
    assert {"deepspeed", "megatron", "torchtitan"} <= set(out["files"])
    written = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert written == sorted(Path(p).name for p in out["files"].values())
    assert "torchrun --nnodes 2 --nproc_per_node 8 " in (tmp_path / "out/torchtitan.sh").read_text()


def test_render_strict_writes_nothing_when_one_framework_refuses(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(TENSOR_SPEC)
    result = run("render", str(spec), "--to", "all", "--out", str(tmp_path / "out"), "--strict")
    assert result.exit_code == 1
    assert "litgpt's training has no tensor" in result.output
    assert not (tmp_path / "out").exists()


def test_convert_to_all_lists_the_refusals_in_text(job, tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(TENSOR_SPEC)
    result = run("render", str(spec), "--to", "litgpt,deepspeed", "--out", str(tmp_path / "o"))
    assert result.exit_code == 0, result.output
    assert "not written: litgpt: " in result.output and (tmp_path / "o/deepspeed.json").exists()


def test_one_framework_that_refuses_is_still_an_error(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(TENSOR_SPEC)
    result = run("render", str(spec), "--to", "litgpt", "--out", str(tmp_path / "o"))
    assert result.exit_code == 1 and not (tmp_path / "o").exists()
