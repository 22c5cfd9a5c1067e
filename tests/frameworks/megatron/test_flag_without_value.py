"""A Megatron batch or parallel flag given without its value (``--micro-batch-size
--global-batch-size 64``) is an error, as Megatron-LM's argparse refuses it at start (expected
one argument), and the value is unknown, not the default 1: it read "ok" with micro-batch 1."""

import pytest
from run_batchspec import run, run_json

JOB = """#!/bin/bash
torchrun --nproc_per_node 8 pretrain_gpt.py \\
  --num-layers 4 --hidden-size 256 --num-attention-heads 8 \\
  {flags} --seq-length 128
"""


@pytest.mark.parametrize(
    "flags, flag",
    [
        ("--micro-batch-size --global-batch-size 64", "--micro-batch-size"),
        ("--micro-batch-size 2 --global-batch-size 64 --tensor-model-parallel-size", None),
    ],
)
def test_a_flag_without_its_value_is_an_error_and_its_value_unknown(tmp_path, flags, flag):
    path = tmp_path / "job.sh"
    path.write_text(JOB.format(flags=flags))
    result = run("validate", path)
    assert result.exit_code == 1
    assert "has no value" in result.output and "expected one argument" in result.output
    assert "unknown-value" not in result.output
    if flag is not None:
        _, out = run_json("inspect", path)
        assert out["micro_batch_size"] is None and out["global_batch_size"] == 64


def test_the_same_job_with_its_value_is_ok(tmp_path):
    path = tmp_path / "job.sh"
    path.write_text(JOB.format(flags="--micro-batch-size 2 --global-batch-size 64"))
    assert run("validate", path).exit_code == 0
