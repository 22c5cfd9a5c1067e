"""smoke's check can fail: --expect-global, the HF Trainer's and DeepSpeed's jobs run as written, and what they would refuse stopped before launch."""

import json
import os
import subprocess
import sys

import pytest
from paths import ROOT
from smoking import SPEC, smoke_json
from test_named_model import TINY, folder_with

# The check can fail: --expect-global ------------------------------------------------------------


@pytest.mark.framework
@pytest.mark.parametrize(
    "framework, name, text, nproc, real",
    [
        ("torch", "spec.yaml", SPEC, 2, 8),
        # A DeepSpeed JSON with accumulation 2 on 2 ranks: 2 x 2 x 2 = 8 per step, not 16.
        (
            "deepspeed",
            "ds.json",
            '{"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2}',
            2,
            8,
        ),
        # The comparison is the parent's, the same for every engine: the engines' own counts
        # are each one's tests (Megatron's and the HF Trainer's pass --expect-global right;
        # Axolotl's fails it: tests/frameworks/axolotl/test_engine_axolotl.py).
    ],
)
def test_a_batch_other_than_the_expected_one_exits_1_naming_both(
    tmp_path, framework, name, text, nproc, real
):
    path = tmp_path / name
    path.write_text(text)
    code, out, err = smoke_json(
        path,
        "--framework",
        framework,
        "--nproc",
        nproc,
        "--steps",
        2,
        "--device",
        "cpu",
        "--expect-global",
        16,
        "--workdir",
        tmp_path / "w",
        timeout=600,
    )
    assert code == 1, err
    assert out["samples_per_optimizer_step"] == [real, real]
    assert f"{framework} consumed {real} samples per optimizer step, not the 16 expected" in err


def test_the_gpu_check_script_says_so_when_there_is_no_gpu(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is here: run scripts/gpu_check.sh itself")
    done = subprocess.run(
        ["bash", "scripts/gpu_check.sh", str(tmp_path / "out")],
        cwd=ROOT,
        env=os.environ | {"PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert "no CUDA GPU visible; nothing to check" in done.stderr


@pytest.mark.framework
def test_the_hf_trainer_runs_a_published_style_config_as_written(tmp_path):
    """A TRL-style config (its own keys beside TrainingArguments') on 2 CPU ranks: 2 per
    device × accumulation 8 × 2 = 32 samples per step, counted at the model. Its model
    (Qwen/Qwen2.5-0.5B) is not here: the tiny Llama's config.json is given, and the Trainer
    trains it as from_config built it."""
    config = ROOT / "fixtures/hf/valid/trl_cli_config.yaml"
    code, out, err = smoke_json(
        config,
        "--model-config",
        folder_with(tmp_path, "tiny-llama", TINY),
        "--nproc",
        2,
        "--steps",
        2,
        "--seq-len",
        16,
        "--device",
        "cpu",
        "--expect-global",
        32,
        "--workdir",
        tmp_path / "w",
        timeout=600,
    )
    assert code == 0, err
    assert out["framework"] == "hf" and out["samples_per_optimizer_step"] == [32, 32]
    assert out["model"]["parameters"] == 156_480


@pytest.mark.framework
def test_an_hf_trainer_launch_script_runs_through_the_hf_engine(tmp_path):
    """A torchrun launch of a Trainer program: the TrainingArguments its flags give run in the
    real Trainer on 2 CPU ranks, 2 per device × accumulation 3 × 2 = 12 samples per step."""
    job = tmp_path / "train.sh"
    job.write_text(
        "#!/bin/bash\ntorchrun --nproc_per_node 2 train.py --output_dir out \\\n"
        "    --per_device_train_batch_size 2 --gradient_accumulation_steps 3\n"
    )
    code, out, err = smoke_json(
        job,
        "--nproc",
        2,
        "--steps",
        2,
        "--seq-len",
        16,
        "--device",
        "cpu",
        "--workdir",
        tmp_path / "w",
        timeout=600,
    )
    assert code == 0, err
    assert out["framework"] == "hf" and out["samples_per_optimizer_step"] == [12, 12]


@pytest.mark.framework
def test_an_hf_launch_script_runs_the_deepspeed_json_it_names(tmp_path):
    """``deepspeed --num_gpus 2 train.py --deepspeed ds.json``: on the job's own 2 processes
    (no --nproc given), the Trainer steps through DeepSpeed's engine at the JSON's ZeRO stage,
    its "auto" values filled from the flags: 2 × 2 × 2 = 8 per step."""
    (tmp_path / "ds.json").write_text(
        '{"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto", '
        '"gradient_accumulation_steps": "auto", "zero_optimization": {"stage": 1}}'
    )
    job = tmp_path / "train.sh"
    job.write_text(
        f"deepspeed --num_gpus 2 train.py --deepspeed {tmp_path / 'ds.json'} --output_dir o "
        "--per_device_train_batch_size 2 --gradient_accumulation_steps 2\n"
    )
    code, out, err = smoke_json(
        job,
        "--steps",
        2,
        "--seq-len",
        16,
        "--device",
        "cpu",
        "--workdir",
        tmp_path / "w",
        timeout=600,
    )
    assert code == 0, err
    assert out["samples_per_optimizer_step"] == [8, 8] and out["world_size"] == 2
    assert out["stepped_by"] == "Trainer (DeepSpeedEngine)"
    assert out["engine"] == {"framework": "hf", "deepspeed_zero_stage": 1}
    assert "smoke: hf (DeepSpeed ZeRO-1) on cpu" in err


@pytest.mark.framework
def test_deepspeed_ulysses_counts_each_sequence_group_once(tmp_path):
    """4 CPU ranks, sequence parallel 2 (DeepSpeed-Ulysses on a data × sequence mesh): the two
    ranks of a group take the same samples, each half of the sequence, and count once, so a step
    is micro 2 × accumulation 2 × DP 2 = 8, not 16."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "global_batch_size: 8\nmicro_batch_size: 2\ncontext_parallel_size: 2\nsequence_length: 32\n"
    )
    code, out, err = smoke_json(
        spec,
        "--framework",
        "deepspeed",
        "--nproc",
        4,
        "--steps",
        2,
        "--device",
        "cpu",
        "--workdir",
        tmp_path / "w",
        timeout=600,
    )
    assert code == 0, err
    assert out["samples_per_optimizer_step"] == [8, 8] and out["data_parallel_size"] == 2
    results = [
        json.loads(p.read_text()) for p in sorted((tmp_path / "w" / "results").glob("rank-*.json"))
    ]
    assert [r["counts_samples"] for r in results] == [True, False, True, False]
    assert [r["data_parallel_rank"] for r in results] == [0, 0, 1, 1]


@pytest.mark.framework
def test_the_hf_trainer_runs_the_deepspeed_json_its_file_names(tmp_path):
    """A TrainingArguments file naming a DeepSpeed JSON of "auto" values (ZeRO 3): the Trainer
    steps through DeepSpeed's engine on 2 CPU ranks, 2 × 2 × 2 = 8 samples per step; the same
    run, expecting 16, fails naming both numbers. Its model, the tiny Llama, is partitioned
    over the ranks and counted whole (156,480), its model states estimated over DP 2."""
    (tmp_path / "ds.json").write_text(
        json.dumps(
            {
                "train_micro_batch_size_per_gpu": "auto",
                "gradient_accumulation_steps": "auto",
                "train_batch_size": "auto",
                "zero_optimization": {"stage": 3},
            }
        )
    )
    args = tmp_path / "args.yaml"
    args.write_text(
        "per_device_train_batch_size: 2\ngradient_accumulation_steps: 2\ndeepspeed: ds.json\n"
    )
    code, out, err = smoke_json(
        args,
        "--nproc",
        2,
        "--steps",
        2,
        "--seq-len",
        16,
        "--device",
        "cpu",
        "--expect-global",
        16,
        "--model-config",
        folder_with(tmp_path, "tiny-llama", TINY),
        "--workdir",
        tmp_path / "w",
        timeout=600,
    )
    assert code == 1, err
    assert out["samples_per_optimizer_step"] == [8, 8]
    assert out["stepped_by"] == "Trainer (DeepSpeedEngine)"
    assert out["model"]["parameters"] == 156_480
    assert out["estimated_memory"]["model_states_bytes"] == 16 * 156_480 // 2
    assert "hf consumed 8 samples per optimizer step, not the 16 expected" in err


def test_a_deepspeed_json_the_hf_trainer_would_refuse_stops_before_launch(tmp_path):
    """The JSON's explicit accumulation 4 against the file's 2 is HF's mismatch error (in its
    words): exit 1 naming the JSON, and no process started (no rank report)."""
    (tmp_path / "ds.json").write_text('{"gradient_accumulation_steps": 4}')
    args = tmp_path / "args.yaml"
    args.write_text(
        "per_device_train_batch_size: 2\ngradient_accumulation_steps: 2\ndeepspeed: ds.json\n"
    )
    code, out, err = smoke_json(
        args, "--nproc", 2, "--steps", 2, "--device", "cpu", "--workdir", tmp_path / "w"
    )
    assert code == 1
    assert "ds.json: Please correct the following DeepSpeed config values" in err
    assert not list((tmp_path / "w").rglob("rank-*.json"))


def test_a_deepspeed_json_left_auto_is_refused_before_deepspeed_dies_on_it(tmp_path):
    """A JSON whose accumulation is "auto" run by DeepSpeed alone: DeepSpeed's own config
    raises a TypeError on it (each rank died 14 s in); smoke refuses it first, naming every
    "auto" key and what fills it, and starts nothing. Handed to the Trainer by a TrainingArguments
    file, the same JSON runs (the Trainer fills it)."""
    (tmp_path / "ds.json").write_text(
        '{"train_batch_size": 16, "train_micro_batch_size_per_gpu": 4, '
        '"gradient_accumulation_steps": "auto", "zero_optimization": {"stage": 1, '
        '"reduce_bucket_size": "auto"}}'
    )
    code, out, err = smoke_json(
        tmp_path / "ds.json", "--nproc", 2, "--device", "cpu", "--workdir", tmp_path / "w"
    )
    assert code == 2, err
    assert 'gradient_accumulation_steps, zero_optimization.reduce_bucket_size are "auto"' in err
    assert "nothing was started" in err and not (tmp_path / "w").exists()
    args = tmp_path / "args.yaml"
    args.write_text(
        "per_device_train_batch_size: 4\ngradient_accumulation_steps: 2\ndeepspeed: ds.json\n"
    )
    code, out, err = smoke_json(args, "--nproc", 2, "--device", "cpu", "--dry-run")
    assert code == 0, err


def test_the_json_says_the_sequence_length_that_ran(tmp_path, spec):
    """--seq-len 48 over the spec's 32: the output's sequence_length and tokens_per_step are the
    run's (48, 8 × 48), as its tokens/s are."""
    code, out, err = smoke_json(
        spec,
        "--nproc",
        2,
        "--steps",
        2,
        "--seq-len",
        48,
        "--device",
        "cpu",
        "--workdir",
        tmp_path / "w",
    )
    assert code == 0, err
    assert out["sequence_length"] == 48 and out["tokens_per_step"] == 8 * 48


def test_an_hf_job_under_deepspeed_names_both_extras_when_deepspeed_is_missing(
    tmp_path, monkeypatch
):
    """The Trainer steps through DeepSpeed when its file names a DeepSpeed JSON: without
    DeepSpeed installed, the hint names both extras before anything starts (it named the hf
    extra alone, and both ranks died 14 s in on ModuleNotFoundError)."""
    from translator.launch.preparing import prepare
    from translator.launch.request import RunRequest
    from translator.plugin import contract
    from translator.words.errors import InputError

    (tmp_path / "ds.json").write_text('{"zero_optimization": {"stage": 2}}')
    args = tmp_path / "args.yaml"
    args.write_text(
        "per_device_train_batch_size: 2\ngradient_accumulation_steps: 2\ndeepspeed: ds.json\n"
        "output_dir: o\n"
    )
    real = contract.missing
    monkeypatch.setattr(
        "translator.rank.engines.missing",
        lambda names: [n for n in names if n == "deepspeed"] or real(names),
    )
    with pytest.raises(InputError) as caught:
        prepare(RunRequest(str(args), None, 2, 1, 1, "tiny", 16, tmp_path / "w"))
    assert "under ZeRO-2, which needs deepspeed" in str(caught.value)
    assert "pip install 'batchspec[hf,deepspeed]'" in str(caught.value)
    assert not (tmp_path / "w").exists()
