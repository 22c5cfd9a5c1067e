"""``smoke JOB`` runs what the job runs: its engine with the DeepSpeed config the job gives it
(the Trainer's own, or the one ``accelerate launch`` hands it), on the job's processes per
node, or on fewer when asked, keeping the job's global batch (the accumulation re-solved)."""

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from translator.cli import main
from translator.launch.request import RunRequest

ACCELERATE = (
    "compute_environment: LOCAL_MACHINE\ndistributed_type: DEEPSPEED\ndeepspeed_config:\n"
    "  zero_stage: 2\nnum_machines: 1\nnum_processes: 2\n"
)
TRAIN = "train.py --output_dir o --per_device_train_batch_size 2 --gradient_accumulation_steps 2"


def dry(tmp_path, monkeypatch, script: str, *args) -> dict:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "job.sh").write_text("#!/bin/bash\n" + script)
    result = CliRunner().invoke(
        main, ["smoke", "job.sh", "--dry-run", "--json", "--device", "cpu", *args]
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_a_deepspeed_job_smokes_on_its_own_processes_under_its_zero_stage(tmp_path, monkeypatch):
    (tmp_path / "ds.json").write_text('{"zero_optimization": {"stage": 3}}')
    out = dry(tmp_path, monkeypatch, f"deepspeed --num_gpus 4 {TRAIN} --deepspeed ds.json\n")
    assert out["engine"] == {"framework": "hf", "deepspeed_zero_stage": 3}
    assert out["world_size"] == 4 and out["global_batch_size"] == 16
    assert out["command"][out["command"].index("--nproc_per_node") + 1] == "4"


def test_an_accelerate_deepspeed_job_smokes_under_the_plugins_config(tmp_path, monkeypatch):
    """No DeepSpeed file: accelerate's plugin builds one at the inline zero_stage, which the
    Trainer runs; the run gets it as its deepspeed.json."""
    (tmp_path / "acc.yaml").write_text(ACCELERATE)
    out = dry(tmp_path, monkeypatch, f"accelerate launch --config_file acc.yaml {TRAIN}\n")
    assert out["engine"] == {"framework": "hf", "deepspeed_zero_stage": 2}
    assert out["world_size"] == 2


def test_a_plain_job_runs_no_deepspeed(tmp_path, monkeypatch):
    out = dry(tmp_path, monkeypatch, f"torchrun --nproc_per_node 2 {TRAIN}\n")
    assert out["engine"] == {"framework": "hf", "deepspeed_zero_stage": None}


@pytest.mark.parametrize("nproc, accumulation", [(1, 8), (2, 4)])
def test_on_fewer_processes_the_jobs_global_batch_is_kept(
    tmp_path, monkeypatch, nproc, accumulation
):
    """The job: 2 × 2 × DP 4 = 16. On fewer processes the micro-batch stays 2 and the
    accumulation is re-solved (16 / (2 × nproc)), as parity re-solves it; a finding says so."""
    out = dry(
        tmp_path,
        monkeypatch,
        f"torchrun --nproc_per_node 4 {TRAIN}\n",
        "--nproc-per-node",
        str(nproc),
    )
    assert out["global_batch_size"] == 16 and out["world_size"] == nproc
    assert (out["micro_batch_size"], out["gradient_accumulation_steps"]) == (2, accumulation)


def test_the_batch_the_smaller_run_takes_is_said(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "job.sh").write_text(f"#!/bin/bash\ntorchrun --nproc_per_node 4 {TRAIN}\n")
    from translator.launch.preparing import prepare

    prepared = prepare(RunRequest("job.sh", None, 1, 1, 1, "tiny", 16, tmp_path / "w"))
    (said,) = [f for f in prepared.findings if f.code == "smoke-other-world"]
    assert "global batch 16 on 4 processes" in said.message
    assert "micro 2 × accumulation 8 × data-parallel 1 = global 16" in said.message


def test_a_global_batch_that_does_not_split_on_fewer_processes_says_what_runs(
    tmp_path, monkeypatch
):
    """Micro 2 × accumulation 1 × DP 3 = 6 does not keep 6 on 2 processes with micro 2: the
    file's split runs there instead, and the finding says the global batch that is."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "job.sh").write_text(
        "#!/bin/bash\ntorchrun --nproc_per_node 3 train.py --output_dir o "
        "--per_device_train_batch_size 2 --gradient_accumulation_steps 1\n"
    )
    from translator.launch.preparing import prepare

    prepared = prepare(RunRequest("job.sh", None, 2, 1, 1, "tiny", 16, tmp_path / "w"))
    (said,) = [f for f in prepared.findings if f.code == "smoke-other-world"]
    assert prepared.spec.global_batch_size == 4
    assert "global 4, not the job's global batch" in said.message


def test_a_run_of_another_global_batch_is_no_proof_of_the_job(tmp_path, monkeypatch):
    """The same job on 2 processes: its steps consumed 4 samples, as that run's split says, but
    the job runs 6. The run is judged an error naming both (before, it said ok); asked for with
    --expect-global 4, that batch is what it proves."""
    from smoking import write_results

    from translator.launch.judging import judge
    from translator.launch.preparing import prepare

    monkeypatch.chdir(tmp_path)
    (tmp_path / "job.sh").write_text(
        "#!/bin/bash\ntorchrun --nproc_per_node 3 train.py --output_dir o "
        "--per_device_train_batch_size 2 --gradient_accumulation_steps 1\n"
    )
    prepared = prepare(RunRequest("job.sh", None, 2, 1, 1, "tiny", 16, tmp_path / "w"))
    assert prepared.job_global == 6
    write_results(prepared.plan.results, [[2], [2]])
    (error,) = judge(prepared, None, None, []).errors
    assert error.startswith("4 samples per optimizer step on 2 ranks, not the job's global batch 6")
    assert "--expect-global 4" in error
    prepared.expect_global = 4
    assert judge(prepared, None, None, []).errors == []


def test_a_run_that_keeps_the_jobs_batch_is_its_proof(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "job.sh").write_text(f"#!/bin/bash\ntorchrun --nproc_per_node 4 {TRAIN}\n")
    from smoking import write_results

    from translator.launch.judging import judge
    from translator.launch.preparing import prepare

    prepared = prepare(RunRequest("job.sh", None, 2, 1, 1, "tiny", 16, tmp_path / "w"))
    assert (prepared.job_global, prepared.spec.global_batch_size) == (16, 16)
    write_results(prepared.plan.results, [[8], [8]])
    assert judge(prepared, None, None, []).errors == []


@pytest.mark.framework
def test_an_accelerate_deepspeed_job_on_one_process_runs_deepspeed_with_the_jobs_batch(tmp_path):
    """The accelerate job (2 processes, ZeRO-2 inline, 2 × 2 × 2 = 8) smoked on 1 process: the
    Trainer steps through DeepSpeed at stage 2, 8 samples per step (accumulation 4)."""
    pytest.importorskip("deepspeed")
    (tmp_path / "acc.yaml").write_text(ACCELERATE)
    job = tmp_path / "job.sh"
    job.write_text(f"accelerate launch --config_file {tmp_path / 'acc.yaml'} {TRAIN}\n")
    done = subprocess.run(
        [sys.executable, "-m", "translator", "smoke", str(job), "--nproc-per-node", "1"]
        + ["--steps", "2", "--seq-len", "16", "--device", "cpu", "--workdir", str(tmp_path / "w")]
        + ["--json"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["engine"] == {"framework": "hf", "deepspeed_zero_stage": 2}
    assert out["samples_per_optimizer_step"] == [8, 8] and out["gradient_accumulation_steps"] == 4
    assert out["stepped_by"] == "Trainer (DeepSpeedEngine)"


def test_on_fewer_processes_the_arguments_files_batch_is_kept_too(tmp_path, monkeypatch):
    """The batch stands in the arguments file the program reads (a recipe's config.yaml), which
    update does not edit from the job: the engine's TrainingArguments take the re-solved
    accumulation all the same (8 ranks × 4 × 4 = 128 on 2 ranks is 4 × 16)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "acc.yaml").write_text(
        "distributed_type: DEEPSPEED\ndeepspeed_config:\n  zero_stage: 3\nnum_processes: 1\n"
    )
    (tmp_path / "config.yaml").write_text(
        "model_name_or_path: m\nper_device_train_batch_size: 4\ngradient_accumulation_steps: 4\n"
        "output_dir: o\n"
    )
    (tmp_path / "job.sh").write_text(
        "#!/bin/bash\naccelerate launch --config_file acc.yaml --num_processes 8 "
        "run_sft.py config.yaml\n"
    )
    from translator.launch.preparing import prepare

    prepared = prepare(RunRequest("job.sh", None, 2, 1, 1, "tiny", 16, tmp_path / "w"))
    assert (prepared.spec.global_batch_size, prepared.spec.gradient_accumulation_steps) == (128, 16)
    assert "gradient_accumulation_steps: 16" in prepared.config_text
    assert "deepspeed: deepspeed.json" in prepared.config_text


def test_the_dry_runs_text_says_it_runs_deepspeed_and_writes_its_json(tmp_path, monkeypatch):
    """The accelerate YAML points at a DeepSpeed JSON: the text of --dry-run names the engine
    and the JSON the run is handed (before: only spec.json and the Trainer's YAML, as DDP)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ds.json").write_text(
        '{"zero_optimization": {"stage": 2}, "gradient_accumulation_steps": "auto"}'
    )
    (tmp_path / "acc.yaml").write_text(
        "distributed_type: DEEPSPEED\ndeepspeed_config:\n  deepspeed_config_file: ds.json\n"
        "num_machines: 1\nnum_processes: 2\n"
    )
    (tmp_path / "job.sh").write_text(f"accelerate launch --config_file acc.yaml {TRAIN}\n")
    result = CliRunner().invoke(main, ["smoke", "job.sh", "--dry-run", "--device", "cpu"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "# engine: hf (DeepSpeed ZeRO-2)"
    assert lines[1].startswith("# would write ") and lines[1].endswith("/deepspeed.json")


def test_a_job_that_writes_its_global_batch_keeps_it_on_fewer_processes(tmp_path, monkeypatch):
    """Megatron writes the global batch, not the accumulation: smoked on 2 of its 4 processes
    it runs global 64 (before: its accumulation was written at the job's world, global 128
    on 2, said to keep the global batch)."""
    out = dry(
        tmp_path,
        monkeypatch,
        "torchrun --nproc_per_node 4 pretrain_gpt.py --micro-batch-size 2 "
        "--global-batch-size 64 --num-layers 2 --hidden-size 64 --num-attention-heads 4 "
        "--seq-length 64 --max-position-embeddings 64 --vocab-size 128\n",
        "--nproc-per-node",
        "2",
    )
    assert (out["global_batch_size"], out["world_size"]) == (64, 2)
    assert (out["micro_batch_size"], out["gradient_accumulation_steps"]) == (2, 16)


def test_a_skypilot_tasks_envs_give_the_batch_smoke_keeps(tmp_path, monkeypatch):
    """Issue 35, item 2: the accumulation of a SkyPilot task comes from its ``envs:``; smoke on
    two processes keeps the task's global 512 (micro 2 × accumulation 16 × 16 ranks), the
    accumulation re-solved to 128, not the 2 × 1 × 2 of flags taken as absent."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "task.yaml").write_text(
        "resources:\n  accelerators: A100:8\nnum_nodes: 2\nenvs:\n  ACCUM: 16\n  MICRO: 2\n"
        "run: |\n  torchrun --nnodes $SKYPILOT_NUM_NODES \\\n"
        "    --nproc_per_node $SKYPILOT_NUM_GPUS_PER_NODE train.py --output_dir o \\\n"
        "    --per_device_train_batch_size $MICRO --gradient_accumulation_steps $ACCUM\n"
    )
    result = CliRunner().invoke(
        main,
        ["smoke", "task.yaml", "--dry-run", "--json", "--device", "cpu", "--nproc", "2"],
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert (out["global_batch_size"], out["micro_batch_size"]) == (512, 2)
    assert out["gradient_accumulation_steps"] == 128


FSDP = (
    "compute_environment: LOCAL_MACHINE\ndistributed_type: FSDP\nfsdp_config:\n"
    "  fsdp_sharding_strategy: FULL_SHARD\nnum_machines: 1\nnum_processes: 2\n"
)


def test_an_fsdp_job_is_said_to_run_unsharded_and_estimated_so(tmp_path, monkeypatch):
    """Issue 35, item 3: the Trainer here runs plain DDP for a job that shards with FSDP; smoke
    says so, and the estimate beside its peak counts no sharding (not the job's ZeRO-3-like
    FULL_SHARD); a DeepSpeed job's own stage stays the estimate's."""
    from translator.launch.preparing import prepare

    monkeypatch.chdir(tmp_path)
    (tmp_path / "acc.yaml").write_text(FSDP)
    (tmp_path / "job.sh").write_text(
        f"#!/bin/bash\naccelerate launch --config_file acc.yaml {TRAIN}\n"
    )
    prepared = prepare(RunRequest("job.sh", None, 2, 1, 1, "tiny", 16, tmp_path / "w"))
    (said,) = [f for f in prepared.findings if f.code == "smoke-sharding-not-run"]
    assert "FSDP" in said.message and said.severity == "warning"
    assert "zero_stage" not in prepared.trains
    (tmp_path / "ds.json").write_text('{"zero_optimization": {"stage": 3}}')
    (tmp_path / "job.sh").write_text(
        f"#!/bin/bash\ndeepspeed --num_gpus 2 {TRAIN} --deepspeed ds.json\n"
    )
    prepared = prepare(RunRequest("job.sh", None, 2, 1, 1, "tiny", 16, tmp_path / "w"))
    assert not [f for f in prepared.findings if f.code == "smoke-sharding-not-run"]
    assert prepared.trains.get("zero_stage") == 3
