"""``plan`` takes a spec or flags: a framework's config or a job given to it is said to be one,
with the commands that take it (it was "expected a mapping of keys to values, got str")."""

import pytest
from run_batchspec import run

JOB = (
    "#!/bin/bash\ntorchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 4 --hidden-size 256 "
    "--num-attention-heads 8 --micro-batch-size 1 --global-batch-size 64 --seq-length 128\n"
)
DEEPSPEED = '{"train_batch_size": 64, "train_micro_batch_size_per_gpu": 2}\n'


@pytest.mark.parametrize(
    "name, text, said",
    [("job.sh", JOB, "a megatron job"), ("ds.json", DEEPSPEED, "a deepspeed config")],
)
@pytest.mark.parametrize("extra", [[], ["--world-sizes", "8-16"]])
def test_a_framework_file_is_named_as_one(tmp_path, name, text, said, extra):
    path = tmp_path / name
    path.write_text(text)
    result = run("plan", path, *extra)
    assert result.exit_code == 2
    assert f"is {said}, not a batchspec spec" in result.stderr
    assert f"batchspec inspect {path}" in result.stderr


def test_a_spec_still_plans(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text("global_batch_size: 64\nmicro_batch_size: 2\nworld_size: 8\n")
    result = run("plan", path)
    assert result.exit_code == 0 and "gradient accumulation steps  4" in result.output
