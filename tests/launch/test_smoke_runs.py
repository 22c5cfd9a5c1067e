"""smoke's real short runs: every engine counts the samples of each optimizer step, on CPU ranks here and through Slurm; timeouts, signals, dead ranks and out-of-memory; what Slurm is asked for."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from run_batchspec import run
from smoking import SPEC, leftovers, smoke_json
from test_named_model import TINY, folder_with

from translator.launch import command
from translator.launch.judging import judge
from translator.launch.preparing import prepare
from translator.launch.request import RunRequest
from translator.rank.result import RankResult

# Real runs -------------------------------------------------------------------------------------


@pytest.mark.framework
@pytest.mark.parametrize("framework", ["deepspeed", "torch"])
def test_two_cpu_ranks_take_two_steps_of_exactly_the_global_batch(spec, tmp_path, framework):
    """On the job's model, the tiny Llama of issue 27, as its config.json (156,480 parameters
    counted on the model the ranks built), the estimate of its model states beside the peak."""
    pytest.importorskip("deepspeed" if framework == "deepspeed" else "torch")
    model = folder_with(tmp_path, "tiny-llama", TINY)
    code, out, err = smoke_json(
        spec,
        *("--framework", framework, "--nproc", 2, "--steps", 2, "--workdir", tmp_path / "w"),
        *("--model-config", model),
    )
    assert code == 0, err
    assert out["model"]["parameters"] == 156_480 and not out["model"]["stand_in"]
    assert out["model"]["source"] == str(model)
    # fp32 on CPU: 4 bytes of weights, 4 of gradients and 8 of Adam's states per parameter.
    assert out["estimated_memory"]["model_states_bytes"] == 16 * 156_480
    assert out["optimizer_steps"] == 2 and out["samples_per_optimizer_step"] == [8, 8]
    assert out["tokens_per_second"] > 0 and out["peak_memory_bytes"] > 0
    # the process before the model (Python, torch, the framework): in the peak, in no estimate
    assert 0 < out["baseline_memory_bytes"] < out["peak_memory_bytes"]
    assert out["device"] == "cpu" and out["errors"] == []
    assert err.rstrip().endswith("ok: 8 samples per optimizer step on 2 ranks, as expected")


@pytest.mark.framework
def test_a_model_whose_config_says_bfloat16_is_estimated_as_built(spec, tmp_path):
    """A Hub config.json with ``torch_dtype: bfloat16`` is built in bfloat16 by from_config,
    on CPU too, and trained so by torch's AdamW: the estimate counts 2 bytes of weights, 2 of
    gradients and 4 of Adam's moments per parameter, not fp32's 16 (issue 35, item 1)."""
    model = folder_with(tmp_path, "tiny-llama", TINY | {"torch_dtype": "bfloat16"})
    code, out, err = smoke_json(
        spec,
        *("--framework", "torch", "--nproc", 2, "--steps", 1, "--workdir", tmp_path / "w"),
        *("--model-config", model),
    )
    assert code == 0, err
    assert out["estimated_memory"]["model_states_bytes"] == 8 * 156_480


@pytest.mark.framework
def test_deepspeed_pipeline_engine_runs_accumulation_micro_batches_per_step(tmp_path):
    pytest.importorskip("deepspeed")
    spec = tmp_path / "pp.yaml"
    spec.write_text(SPEC + "pipeline_parallel_size: 2\n")
    code, out, err = smoke_json(
        spec, "--framework", "deepspeed", "--nproc", 2, "--steps", 2, "--workdir", tmp_path / "w"
    )
    assert code == 0, err
    assert (out["data_parallel_size"], out["gradient_accumulation_steps"]) == (1, 4)
    assert out["samples_per_optimizer_step"] == [8, 8]
    # A spec names no model: the stand-in runs, said first, its count per rank not the model's.
    assert out["model"]["stand_in"] and out["model"]["parameters"] is None
    assert "names no model: the tiny stand-in runs" in err.splitlines()[0]


@pytest.mark.framework
def test_a_users_own_launch_script_runs_on_megatron_as_written(tmp_path):
    """Its model too: the tiny Llama as Megatron's flags give it (GQA, SwiGLU, RMSNorm, rotary,
    untied, no biases), built by megatron-core as a TransformerConfig, 156,480 parameters."""
    pytest.importorskip("megatron.core")
    script = tmp_path / "train.sh"
    script.write_text(
        "GPUS=${GPUS:-2}\nMBS=2\nARGS=(\n  --micro-batch-size $MBS\n"
        "  --global-batch-size $((MBS * 4))\n  --seq-length 32\n"
        "  --num-layers 2 --hidden-size 64 --num-attention-heads 4 --group-query-attention\n"
        "  --num-query-groups 2 --ffn-hidden-size 172 --vocab-size 512 --swiglu\n"
        "  --normalization RMSNorm --position-embedding-type rope --disable-bias-linear\n"
        "  --untie-embeddings-and-output-weights\n)\n"
        'torchrun --nproc_per_node $GPUS pretrain_gpt.py "${ARGS[@]}"\n'
    )
    code, out, err = smoke_json(
        script, "--nproc", 2, "--steps", 2, "--expect-global", 8, "--workdir", tmp_path / "w"
    )
    assert code == 0, err
    assert out["framework"] == "megatron" and out["samples_per_optimizer_step"] == [8, 8]
    assert (tmp_path / "w" / "megatron.sh").read_text() == script.read_text()
    assert out["model"]["parameters"] == 156_480
    assert out["model"]["architecture"] == "GPT (Megatron flags)"


@pytest.mark.framework
def test_a_framework_that_steps_differently_is_caught(spec, tmp_path):
    """The engine feeds DeepSpeed the config in the workdir; if DeepSpeed accumulates
    differently from the spec, the measured samples per step say so."""
    pytest.importorskip("deepspeed")
    from translator.launch import runner
    from translator.launch.smoke import environment, write_workdir

    prepared = prepare(RunRequest(str(spec), "deepspeed", 2, 1, 2, "tiny", None, tmp_path / "w"))
    write_workdir(prepared)
    (tmp_path / "w" / "deepspeed.json").write_text(
        '{"train_batch_size": 4, "train_micro_batch_size_per_gpu": 2, '
        '"gradient_accumulation_steps": 1}'
    )
    env = environment(prepared.plan.framework, None)
    outcome = runner.run(command.local_command(prepared.plan), env, 300)
    (error,) = judge(prepared, outcome.stopped, None, outcome.log_tail).errors
    assert error == "4 samples per optimizer step on 2 ranks, expected 8 (the global batch)"


@pytest.mark.framework
def test_timeout_stops_the_run_and_leaves_no_process(spec, tmp_path):
    pytest.importorskip("torch")
    workdir = tmp_path / "timeout-run"
    start = time.monotonic()
    code, out, err = smoke_json(
        spec, "--nproc", 2, "--steps", 100000, "--timeout", 8, "--workdir", workdir
    )
    assert code == 1 and "timed out after 8 s" in err
    assert time.monotonic() - start < 60
    assert leftovers(str(workdir)) == []


def start_smoke(spec, workdir, *args):
    """batchspec smoke (text output) of a run that goes on until stopped."""
    return subprocess.Popen(
        [sys.executable, "-m", "translator", "smoke", str(spec), "--nproc", "2", "--steps"]
        + ["100000", "--workdir", str(workdir), *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_steps(workdir, ranks=2):
    """Until every rank has reported a step (a report is written after each one)."""
    deadline = time.monotonic() + 120
    while len(list((workdir / "results").glob("rank-*.json"))) < ranks:
        assert time.monotonic() < deadline, "the ranks never stepped"
        time.sleep(0.5)


def assert_shows_what_ran(out: str, asked: int) -> int:
    """The text output of a run that stopped: how many steps ran of how many, the samples of
    each (run-length), and no unknowns; returns the steps."""
    assert "what ran before it stopped" in out
    steps = int(re.search(rf"optimizer steps +(\d+) of {asked}\n", out).group(1))
    assert steps >= 1 and re.search(rf"samples per step +8 × {steps} steps?\n", out), out
    assert "unknown" not in out and "?" not in out and " 0 of" not in out
    return steps


@pytest.mark.framework
@pytest.mark.parametrize("sig, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_ctrl_c_or_sigterm_stops_the_whole_group_and_shows_what_ran(spec, tmp_path, sig, status):
    """Ctrl-C, or SIGTERM (``timeout``, ``kill``, a scheduler), stops every rank and says what
    ran; before, SIGTERM ended batchspec alone, silently, and left the ranks to themselves."""
    pytest.importorskip("torch")
    workdir = tmp_path / "interrupted-run"
    proc = start_smoke(spec, workdir)
    wait_for_steps(workdir)
    time.sleep(2)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == status and "interrupted" in err
    steps = assert_shows_what_ran(out, 100000)
    assert f"batchspec: error: interrupted ({steps} of 100000 optimizer steps ran)" in err
    assert leftovers(str(workdir)) == []


@pytest.mark.framework
def test_a_rank_that_dies_mid_run_shows_what_ran(spec, tmp_path):
    """SIGKILL one rank mid-run: the other stops too; the output is what ran until then."""
    pytest.importorskip("torch")
    workdir = tmp_path / "killed-run"
    proc = start_smoke(spec, workdir)
    wait_for_steps(workdir)
    rank1 = [
        int(line.split(":")[0])
        for line in leftovers(str(workdir / "results"))
        if "translator.rank.worker" in line
        and b"RANK=1\0" in Path(f"/proc/{line.split(':')[0]}/environ").read_bytes()
    ]
    assert len(rank1) == 1
    os.kill(rank1[0], signal.SIGKILL)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, err
    assert_shows_what_ran(out, 100000)
    assert "batchspec: error: rank" in err
    assert leftovers(str(workdir)) == []


@pytest.mark.framework
def test_a_run_that_fails_after_a_few_steps_shows_them_not_a_table_of_zeros(spec, tmp_path):
    """Rank 0 raises once step 3 closed (the harness's test hook): the text says 3 of 6 steps
    ran, 8 samples each, and where it stopped; the progress said each step on the way."""
    pytest.importorskip("torch")
    workdir = tmp_path / "w"
    done = subprocess.run(
        [sys.executable, "-m", "translator", "smoke", str(spec), "--nproc", "2", "--steps", "6"]
        + ["--device", "cpu", "--workdir", str(workdir)],
        capture_output=True,
        text=True,
        timeout=300,
        env=os.environ | {"BATCHSPEC_FAIL_AT_STEP": "3"},
    )
    assert done.returncode == 1, done.stderr
    assert assert_shows_what_ran(done.stdout, 6) == 3
    assert (
        "batchspec: error: rank 0 failed after 3 optimizer steps: RuntimeError: stopped after "
        "step 3, as BATCHSPEC_FAIL_AT_STEP asks" in done.stderr
    )
    assert "  optimizer step 1/6," in done.stderr and "  3 of 6 optimizer steps in" in done.stderr
    rank0 = RankResult.read(workdir / "results" / "rank-0.json")
    assert rank0.samples_per_step == [4, 4, 4] and not rank0.finished and rank0.device == "cpu"


@pytest.mark.framework
def test_out_of_memory_is_reported_with_the_fix(tmp_path):
    """An honest OOM: each rank's address space is capped at 2 GiB (setrlimit), which runs
    micro-batch 2 fine and cannot hold micro-batch 512 at 256 tokens."""
    pytest.importorskip("torch")
    small, big = tmp_path / "small.yaml", tmp_path / "big.yaml"
    small.write_text("global_batch_size: 8\nmicro_batch_size: 2\nsequence_length: 256\n")
    big.write_text("global_batch_size: 1024\nmicro_batch_size: 512\nsequence_length: 256\n")
    code, out, err = smoke_json(
        small, "--nproc", 2, "--steps", 1, "--memory-limit", "2G", "--workdir", tmp_path / "a"
    )
    assert code == 0, err
    code, out, err = smoke_json(
        big, "--nproc", 2, "--steps", 1, "--memory-limit", "2G", "--workdir", tmp_path / "b"
    )
    assert code == 1
    assert (
        "out of memory at micro-batch 512 on rank 0; fix: micro-batch 256 with accumulation "
        "2 keeps the global batch 1024" in err
    )


@pytest.mark.framework
@pytest.mark.parametrize("framework", ["deepspeed", "torch"])
def test_through_slurm(spec, tmp_path, framework, slurm_cluster):
    code, out, err = smoke_json(
        spec,
        "--framework",
        framework,
        "--slurm",
        "--device",
        "cpu",
        "--nnodes",
        1,
        "--nproc",
        2,
        "--steps",
        2,
        "--workdir",
        tmp_path / "w",
        "--timeout",
        240,
    )
    assert code == 0, err
    assert out["slurm_job"] and out["samples_per_optimizer_step"] == [8, 8]
    state = subprocess.run(
        ["scontrol", "show", "job", "-o", out["slurm_job"]], capture_output=True, text=True
    ).stdout
    assert "JobState=COMPLETED" in state


@pytest.mark.framework
def test_slurm_timeout_cancels_the_job(spec, tmp_path, slurm_cluster):
    code, out, err = smoke_json(
        spec,
        "--slurm",
        "--device",
        "cpu",
        "--nproc",
        2,
        "--steps",
        100000,
        "--workdir",
        tmp_path / "w",
        "--timeout",
        15,
    )
    assert code == 1 and "timed out" in err
    job = out["slurm_job"]
    for _ in range(60):
        state = subprocess.run(
            ["scontrol", "show", "job", "-o", job], capture_output=True, text=True
        ).stdout
        if "JobState=CANCELLED" in state or "JobState=COMPLETED" in state:
            break
        time.sleep(0.5)
    assert "JobState=CANCELLED" in state
    assert leftovers(str(tmp_path / "w")) == []


@pytest.mark.gpu
@pytest.mark.parametrize("framework", ["torch", "deepspeed"])
def test_gpu_smoke_of_the_125m_model_in_bf16(spec, tmp_path, framework):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    code, out, err = smoke_json(
        spec,
        "--framework",
        framework,
        "--model",
        "125m",
        "--steps",
        3,
        "--seq-len",
        1024,
        "--workdir",
        tmp_path / "w",
    )
    assert code == 0, err
    assert out["device"] != "cpu" and out["mfu"] is not None and out["peak_memory_bytes"] > 0


# Asking Slurm for GPUs --------------------------------------------------------------------------


def test_slurm_asks_for_a_gpu_per_rank_by_default(spec, tmp_path, fake_sinfo):
    result = run(
        "smoke", spec, "--slurm", "--dry-run", "--nproc", 4, "--json", "--workdir", tmp_path / "w"
    )
    assert result.exit_code == 0, result.output
    text = json.loads(result.stdout)["sbatch"]
    assert "#SBATCH --gpus-per-node=4\n" in text
    assert "#SBATCH --cpus-per-task=64\n" in text and "export OMP_NUM_THREADS=16\n" in text
    assert "--device gpu" in text


def test_slurm_cpu_runs_ask_for_no_gpu(spec, tmp_path, fake_sinfo):
    result = run(
        "smoke",
        spec,
        "--slurm",
        "--dry-run",
        "--device",
        "cpu",
        "--nproc",
        4,
        "--cpus-per-task",
        8,
        "--json",
        "--workdir",
        tmp_path / "w",
    )
    text = json.loads(result.stdout)["sbatch"]
    assert "--gpus-per-node" not in text and "#SBATCH --cpus-per-task=8\n" in text


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--gpus-per-node", "16"],
            "--slurm-gpus-per-node 16: the nodes of the default partition have 8",
        ),
        (
            ["--nproc", "4", "--gpus-per-node", "2"],
            "--slurm-gpus-per-node 2 is fewer than --nproc-per-node 4",
        ),
        (["--device", "cpu", "--gpus-per-node", "2"], "--slurm-gpus-per-node with --device cpu"),
        (["--expect-global", "0"], "--expect-global"),
        (["--expect-global", "eight"], "--expect-global"),
    ],
)
def test_bad_resource_requests_are_one_line_errors(spec, tmp_path, fake_sinfo, args, message):
    workdir = tmp_path / "w"
    result = run("smoke", spec, "--slurm", "--dry-run", *args, "--workdir", workdir)
    assert result.exit_code == 2 and message in result.stderr, result.output
    assert len(result.stderr.strip().splitlines()) == 1
    assert not workdir.exists()


def test_a_slurm_dry_run_needs_no_engine_here_and_a_run_does(spec, fake_sinfo, monkeypatch):
    """A login machine without deepspeed prints the job it would submit, with a warning that
    the nodes' Python must have it; anything that runs here still refuses first."""
    import translator.plugin.contract
    import translator.rank.engines

    def absent(packages):
        return [p for p in packages if p == "deepspeed"]

    monkeypatch.setattr(translator.plugin.contract, "missing", absent)
    monkeypatch.setattr(translator.rank.engines, "missing", absent)
    args = ["smoke", spec, "--framework", "deepspeed", "--nproc-per-node", 2, "--device", "cpu"]
    dry = run(*args, "--slurm", "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert "#SBATCH --nodes=1" in dry.stdout
    assert dry.stderr.startswith(
        "warning: framework-not-installed: the deepspeed engine needs deepspeed, not installed "
        "here: the nodes' Python must have it"
    )
    here = run(*args, "--dry-run")
    assert here.exit_code == 2 and "which is not installed here" in here.stderr


def test_gpu_requests_need_slurm(spec, tmp_path):
    result = run("smoke", spec, "--gpus-per-node", 8, "--dry-run")
    assert result.exit_code == 2 and "with --slurm" in result.stderr
