"""The pre-commit hook (``validate --skip-other-files``) reads a repository's files: each job is
validated with only the files it names. A standalone accelerate config in the repository gave
an unrelated Megatron script its world (TP 3 at world 24 was "world 8 does not divide by
tensor 3", and the real error, 32 heads TP 3 cannot split, vanished), and an accumulation
override to an unrelated Trainer job (a false DeepSpeed mismatch). Files given without
``--skip-other-files`` are still one job."""

from run_batchspec import run

ACCELERATE = (
    "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\nnum_machines: 1\n"
    "num_processes: 8\ngradient_accumulation_steps: 4\n"
)
MEGATRON = """#!/bin/bash
torchrun --nnodes 3 --nproc_per_node 8 pretrain_gpt.py \\
  --tensor-model-parallel-size 3 --num-layers 4 --hidden-size 256 --num-attention-heads 32 \\
  --micro-batch-size 1 --global-batch-size 64 --seq-length 128
"""
TRAINER = """#!/bin/bash
torchrun --nproc_per_node 2 train.py --deepspeed ds.json \\
  --per_device_train_batch_size 2 --gradient_accumulation_steps 2 --output_dir o
"""
DEEPSPEED = '{"train_batch_size": 8, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2}\n'


def repository(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name, text in (
        ("accelerate.yaml", ACCELERATE),
        ("pretrain.sh", MEGATRON),
        ("finetune.sh", TRAINER),
        ("ds.json", DEEPSPEED),
    ):
        (tmp_path / name).write_text(text)


def test_the_hook_judges_the_megatron_script_on_its_own_world(tmp_path, monkeypatch):
    repository(tmp_path, monkeypatch)
    result = run("validate", "--skip-other-files", "--quiet", "accelerate.yaml", "pretrain.sh")
    assert result.exit_code == 1
    assert "model-tensor-heads" in result.output
    assert "world size 8" not in result.output


def test_the_hook_gives_no_job_another_jobs_accumulation(tmp_path, monkeypatch):
    repository(tmp_path, monkeypatch)
    result = run("validate", "--skip-other-files", "accelerate.yaml", "finetune.sh", "ds.json")
    assert "mismatch" not in result.output, result.output
    assert result.exit_code == 0, result.output


def test_files_named_together_without_the_hooks_flag_are_still_one_job(tmp_path, monkeypatch):
    repository(tmp_path, monkeypatch)
    result = run("validate", "--quiet", "accelerate.yaml", "pretrain.sh")
    assert "world size 8 does not divide by tensor 3" in result.output
