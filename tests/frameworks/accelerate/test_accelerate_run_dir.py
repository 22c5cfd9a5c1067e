"""accelerate opens ``deepspeed_config_file`` from the folder the launch runs in: with
``--run-dir`` it is looked for there, in a job and in a config read alone, as an Axolotl or
LLaMA-Factory ``deepspeed:`` path is."""

import json
from pathlib import Path

import pytest
from run_batchspec import codes, inspect

#: alignment-handbook's recipes/accelerate_configs/deepspeed_zero3.yaml style, with the
#: DeepSpeed JSON named from the repository's root, where the launch runs.
ACCELERATE = """\
compute_environment: LOCAL_MACHINE
debug: false
deepspeed_config:
  deepspeed_config_file: configs/ds_zero2.json
  zero3_init_flag: false
distributed_type: DEEPSPEED
downcast_bf16: 'no'
machine_rank: 0
main_training_function: main
num_machines: 1
num_processes: 8
rdzv_backend: static
same_network: true
use_cpu: false
"""
DEEPSPEED = {
    "train_batch_size": "auto",
    "train_micro_batch_size_per_gpu": "auto",
    "gradient_accumulation_steps": 4,
    "zero_optimization": {"stage": 2},
}
JOB = """\
#!/bin/bash
accelerate launch --config_file recipes/accelerate_ds.yaml scripts/run_sft.py \\
    --per_device_train_batch_size 2 --gradient_accumulation_steps {gas} --output_dir out
"""


@pytest.fixture
def repo(tmp_path, monkeypatch) -> Path:
    """A repository whose job runs from its root; batchspec runs from elsewhere."""
    root = tmp_path / "repo"
    for folder in ("recipes", "configs", "scripts"):
        (root / folder).mkdir(parents=True)
    (root / "recipes" / "accelerate_ds.yaml").write_text(ACCELERATE)
    (root / "configs" / "ds_zero2.json").write_text(json.dumps(DEEPSPEED))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    return root


def test_the_job_takes_the_deepspeed_accumulation_from_the_run_dir(repo):
    """The Trainer's 2 against DeepSpeed's 4 is transformers' refusal: found only where the
    file is opened from the run dir."""
    job = repo / "scripts" / "train.sh"
    job.write_text(JOB.format(gas=2))
    code, out = inspect(job, "--run-dir", repo)
    assert code == 1
    assert "job-file-not-found" not in codes(out)
    errors = [f for f in out["findings"] if f["severity"] == "error"]
    assert errors and any("ds_zero2.json" in (f["where"] or "") + f["message"] for f in errors)


def test_an_agreeing_job_reads_its_global_batch_through_the_run_dir(repo):
    job = repo / "scripts" / "train.sh"
    job.write_text(JOB.format(gas=4))
    code, out = inspect(job, "--run-dir", repo)
    assert code == 0 and "job-file-not-found" not in codes(out)
    assert (out["world_size"], out["global_batch_size"]) == (8, 8 * 2 * 4)


def test_the_accelerate_config_alone_opens_its_file_from_the_run_dir(repo):
    config = repo / "recipes" / "accelerate_ds.yaml"
    _, alone = inspect(config)
    assert "job-file-not-found" in codes(alone)
    _, from_root = inspect(config, "--run-dir", repo)
    assert "job-file-not-found" not in codes(from_root)
    assert "accelerate-deepspeed-accumulation" in codes(from_root)


def test_an_axolotl_yaml_alone_opens_its_deepspeed_from_the_run_dir(repo, tmp_path):
    """The same rule for Axolotl's deepspeed: read alone, outside the repository's folders."""
    yaml = tmp_path / "elsewhere" / "axolotl.yml"
    yaml.write_text(
        "base_model: NousResearch/Llama-2-7b-hf\nmicro_batch_size: 2\n"
        "gradient_accumulation_steps: 4\ndeepspeed: configs/ds_zero2.json\n"
    )
    _, alone = inspect(yaml)
    assert "missing-file" in codes(alone)
    _, from_root = inspect(yaml, "--run-dir", repo)
    assert "missing-file" not in codes(from_root)
