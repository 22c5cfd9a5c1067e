"""smoke: real short runs that count the samples of every optimizer step."""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_named_model import TINY, folder_with

from translator.cli import main
from translator.launch import command, slurm
from translator.launch.smoke import judge, mfu, prepare, verdict
from translator.rank.result import RankResult, merge

SPEC = "global_batch_size: 8\nmicro_batch_size: 2\nsequence_length: 32\n"


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture
def spec(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC)
    return path


def smoke_json(*args, timeout=300):
    """Run batchspec smoke in a subprocess (its own ranks need a real process tree)."""
    done = subprocess.run(
        [sys.executable, "-m", "translator", "smoke", *map(str, args), "--json"],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return done.returncode, json.loads(done.stdout) if done.stdout.strip() else None, done.stderr


def leftovers(marker: str) -> list[str]:
    """Processes whose command line mentions ``marker`` (a test's own workdir)."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if marker in cmd and str(os.getpid()) != proc.name:
                found.append(f"{proc.name}: {cmd}")
    return found


# Pure parts ------------------------------------------------------------------------------------


def test_commands_are_argument_lists(tmp_path):
    plan = command.SmokePlan("deepspeed", 2, 1, 3, "tiny", 32, tmp_path, "deepspeed.json")
    argv = command.local_command(plan)
    assert argv[:5] == [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes"]
    assert argv[argv.index("--engine") + 1] == "deepspeed"
    multi = command.SmokePlan(
        "torch", 8, 4, 3, "tiny", 32, tmp_path, "spec.json", rdzv_endpoint="node1:29500"
    )
    argv = command.local_command(multi)
    assert ["--rdzv-backend", "c10d", "--rdzv-endpoint", "node1:29500"] == argv[7:11]


def test_sbatch_script_quotes_paths_and_names_the_first_node(tmp_path):
    odd = tmp_path / "my runs"
    plan = command.SmokePlan("torch", 4, 2, 3, "tiny", 32, odd, "spec.json")
    text = slurm.script(
        plan,
        slurm.SlurmOptions("gpu", "proj-1", "0:30:00", ["--gpus-per-node=4"], ["module load cuda"]),
    )
    assert "#SBATCH --nodes=2\n" in text and "#SBATCH --partition=gpu\n" in text
    assert "#SBATCH --gpus-per-node=4\n" in text and "\nmodule load cuda\n" in text
    assert f"'{odd}/results'" in text
    assert 'head_node=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)' in text
    assert '--rdzv-endpoint "$head_node:29500"' in text


@pytest.mark.parametrize(
    "flag, value, message",
    [
        ("--partition", "gpu;rm -rf /", "only letters"),
        ("--account", "a b", "only letters"),
        ("--time", "tomorrow", "Slurm time"),
        ("--sbatch", "--gres=gpu:8 --wrap='x'", "one option"),
        ("--sbatch", "--comment=$(id)", "one option"),
    ],
)
def test_values_that_reach_the_script_are_validated(spec, tmp_path, flag, value, message):
    result = run(
        "smoke",
        spec,
        "--slurm",
        "--dry-run",
        "--device",
        "cpu",
        flag,
        value,
        "--workdir",
        tmp_path / "w",
    )
    assert result.exit_code == 2 and message in result.stderr
    assert not (tmp_path / "w").exists()


PAYLOADS = [
    "w\ntouch {m} #",
    "$(touch {m})",
    "`touch {m}`",
    "w;touch {m}",
    "w\rtouch {m}",
    "w\u2028touch {m}",
    "w\x1b]0;title\x07",
]
FIELDS = ["--workdir", "--partition", "--account", "--time", "--sbatch", "--setup"]


def _run_script(text: str, tmp_path: Path) -> None:
    """Run a generated sbatch script in bash with stand-ins for srun and scontrol."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name in ("srun", "scontrol"):
        (bin_dir / name).write_text("#!/bin/sh\necho node0\n")
        (bin_dir / name).chmod(0o755)
    path = tmp_path / "job.sh"
    path.write_text(text)
    env = dict(
        os.environ,
        PATH=f"{bin_dir}:{os.environ['PATH']}",
        SLURM_JOB_NODELIST="node0",
        SLURM_JOB_ID="1",
    )
    subprocess.run(["bash", str(path)], env=env, cwd=tmp_path, capture_output=True, timeout=30)


@pytest.mark.parametrize("field", FIELDS)
@pytest.mark.parametrize("payload", PAYLOADS)
@pytest.mark.parametrize("nnodes", [1, 2])
def test_no_value_injects_a_command_into_the_sbatch_script(spec, tmp_path, field, payload, nnodes):
    """Each value that reaches the script, with a newline, $(), backticks, ; or a carriage
    return: refused with one line and exit 2, or inert when the script runs. Setup lines are
    the user's own shell lines, run as written, but a control character is refused there too."""
    marker = tmp_path / "pwned"
    value = payload.format(m=marker)
    if field == "--workdir":
        value = str(tmp_path / value)
    result = run(
        "smoke",
        spec,
        "--slurm",
        "--dry-run",
        "--device",
        "cpu",
        "--json",
        "--nnodes",
        nnodes,
        "--nproc",
        2,
        field,
        value,
    )
    control = any(ord(c) < 32 or c in "\u2028" for c in value)
    if result.exit_code == 2:
        assert (
            len(result.stderr.strip().splitlines()) == 1
            and "control character" in result.stderr
            or "only letters" in result.stderr
            or "Slurm time" in result.stderr
            or "one option" in result.stderr
        )
        assert not marker.exists()
        return
    assert result.exit_code == 0 and not control, result.stderr
    out = json.loads(result.stdout)
    for line in out["sbatch"].splitlines():
        if line.startswith("#SBATCH"):
            assert re.fullmatch(r"#SBATCH --[a-z-]+=[A-Za-z0-9_.,:+-]+", line), line
    if field == "--setup":
        assert value in out["sbatch"].splitlines()  # the user's own line, exactly one line
        return
    _run_script(out["sbatch"], tmp_path)
    assert not marker.exists()
    if field == "--workdir":
        assert out["submit"][2] == f"--output={value}/slurm-%j.out"


def test_a_percent_in_the_workdir_is_escaped_for_slurm(spec, tmp_path):
    result = run(
        "smoke",
        spec,
        "--slurm",
        "--dry-run",
        "--device",
        "cpu",
        "--json",
        "--workdir",
        tmp_path / "a%jb",
    )
    assert json.loads(result.stdout)["submit"][2] == f"--output={tmp_path}/a%%jb/slurm-%j.out"


def test_dry_run_prints_and_writes_nothing(spec, tmp_path):
    result = run(
        "smoke",
        spec,
        "--nproc",
        2,
        "--framework",
        "deepspeed",
        "--dry-run",
        "--json",
        "--workdir",
        tmp_path / "w",
    )
    out = json.loads(result.stdout)
    assert result.exit_code == 0 and out["command"][:3] == [
        sys.executable,
        "-m",
        "torch.distributed.run",
    ]
    assert out["world_size"] == 2 and out["gradient_accumulation_steps"] == 2
    assert not (tmp_path / "w").exists()
    human = run(
        "smoke",
        spec,
        "--nproc",
        2,
        "--slurm",
        "--dry-run",
        "--device",
        "cpu",
        "--workdir",
        tmp_path / "w",
    )
    assert human.stdout.count("#SBATCH") >= 3
    assert f"submitted as: sbatch --parsable --output={tmp_path}/w/slurm-%j.out" in human.stdout


def test_multi_node_outside_slurm_prints_the_rendezvous_command(spec, tmp_path):
    result = run("smoke", spec, "--nnodes", 2, "--nproc", 2, "--workdir", tmp_path / "w")
    assert result.exit_code == 2 and "starts on every node" in result.stderr
    result = run(
        "smoke",
        spec,
        "--nnodes",
        2,
        "--nproc",
        2,
        "--dry-run",
        "--rdzv-endpoint",
        "node0:29500",
        "--json",
        "--workdir",
        tmp_path / "w",
    )
    argv = json.loads(result.stdout)["command"]
    assert argv[argv.index("--rdzv-endpoint") + 1] == "node0:29500" and "--standalone" not in argv


def test_a_config_for_another_world_is_refused_before_launch(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text("global_batch_size: 64\nmicro_batch_size: 2\nworld_size: 16\n")
    result = run("smoke", path, "--nproc", 2, "--workdir", tmp_path / "w", "--json")
    assert result.exit_code == 1
    assert json.loads(result.stdout)["findings"][0]["code"] == "smoke-world-mismatch"
    assert not (tmp_path / "w").exists()


def test_a_framework_config_that_does_not_fit_the_launch_is_refused(tmp_path):
    ds = tmp_path / "ds.json"
    ds.write_text(
        '{"train_batch_size": 8, "train_micro_batch_size_per_gpu": 2, '
        '"gradient_accumulation_steps": 2}'
    )
    result = run("smoke", ds, "--nproc", 4, "--workdir", tmp_path / "w")
    assert result.exit_code == 1 and "8 != 2 * 2 * 4" in result.stderr


LAYOUT = "global_batch_size: 8\nmicro_batch_size: 1\nsequence_length: 32\n"


@pytest.mark.parametrize(
    "framework, layout, nproc, device, why",
    [
        ("torch", "tensor_parallel_size: 2", 4, "cpu", "data parallelism only, not tensor 2"),
        ("torch", "pipeline_parallel_size: 2", 4, "gpu", "data parallelism only, not pipeline 2"),
        ("deepspeed", "tensor_parallel_size: 2", 4, "gpu", "not tensor 2"),
        (
            "deepspeed",
            "context_parallel_size: 2\npipeline_parallel_size: 2",
            8,
            "cpu",
            "without pipeline parallelism, not with pipeline 2",
        ),
        ("megatron", "pipeline_parallel_size: 2", 4, "cpu", "pipeline 2) need GPUs"),
        ("megatron", "tensor_parallel_size: 2", 4, "cpu", "tensor 2) need GPUs"),
        ("megatron", "context_parallel_size: 2", 4, "cpu", "context 2) need GPUs"),
        ("axolotl", "tensor_parallel_size: 1", 2, "cpu", "runs one process"),
        ("hf", "tensor_parallel_size: 2", 4, "cpu", "data parallelism only, not tensor 2"),
    ],
)
def test_a_layout_an_engine_does_not_run_is_refused_before_launch(
    tmp_path, framework, layout, nproc, device, why
):
    spec = tmp_path / "spec.yaml"
    spec.write_text(LAYOUT + layout + "\n")
    workdir = tmp_path / "w"
    result = run(
        "smoke",
        spec,
        "--framework",
        framework,
        "--nproc",
        nproc,
        "--device",
        device,
        "--workdir",
        workdir,
    )
    assert result.exit_code == 2, result.output
    assert why in result.stderr and "nothing was started" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not workdir.exists()


def test_the_declared_layouts_run(spec, tmp_path):
    """What each engine declares it runs passes the same check (dry run: nothing starts)."""
    for framework, layout, nproc, device in [
        ("deepspeed", "pipeline_parallel_size: 2", 4, "cpu"),
        ("megatron", "tensor_parallel_size: 2", 4, "gpu"),
        ("megatron", "pipeline_parallel_size: 2", 4, "gpu"),
        ("torch", "tensor_parallel_size: 1", 4, "cpu"),
    ]:
        path = tmp_path / f"{framework}.yaml"
        path.write_text(LAYOUT + layout + "\n")
        result = run(
            "smoke",
            path,
            "--framework",
            framework,
            "--nproc",
            nproc,
            "--device",
            device,
            "--dry-run",
        )
        assert result.exit_code == 0, (framework, layout, result.output)


def write_results(folder, per_rank, packed_rows=None):
    folder.mkdir(parents=True)
    for rank, samples in enumerate(per_rank):
        RankResult(
            rank,
            len(per_rank),
            rank,
            True,
            samples,
            [0.1] * len(samples),
            sequence_length=32,
            packed_rows_per_step=packed_rows and packed_rows[rank],
            finished=True,
        ).write(folder)


def test_judge_sums_data_parallel_ranks_and_catches_a_wrong_batch(spec, tmp_path):
    prepared = prepare(str(spec), "torch", 2, 1, 2, "tiny", None, tmp_path)
    write_results(prepared.plan.results, [[4, 4], [4, 4]])
    assert judge(prepared, None, None, []).errors == []
    shutil.rmtree(prepared.plan.results)
    write_results(prepared.plan.results, [[4, 2], [4, 2]])
    (error,) = judge(prepared, None, None, []).errors
    assert error == (
        "samples per optimizer step 8 × 1, 4 × 1 on 2 ranks, expected 8 (the global batch)"
    )


def test_packed_the_global_batch_counts_rows_and_the_samples_are_reported(spec, tmp_path):
    """A packed row holds several samples: the global batch is in rows, the samples vary."""
    prepared = prepare(str(spec), "torch", 2, 1, 2, "tiny", None, tmp_path)
    write_results(prepared.plan.results, [[13, 11], [12, 12]], [[4, 4], [4, 4]])
    report = judge(prepared, None, None, [])
    assert report.errors == []
    assert report.measurement.samples_per_optimizer_step == [25, 23]
    assert verdict(report, prepared.plan) == (
        "ok: 8 packed rows per optimizer step on 2 ranks, as expected, holding samples 25 × 1, "
        "23 × 1"
    )
    # Packed rows, not the samples, are held to the global batch.
    shutil.rmtree(prepared.plan.results)
    write_results(prepared.plan.results, [[4, 4], [4, 4]], [[2, 2], [2, 2]])
    (error,) = judge(prepared, None, None, []).errors
    assert error == "4 packed rows per optimizer step on 2 ranks, expected 8 (the global batch)"


def test_judge_reports_missing_ranks_with_the_last_output(spec, tmp_path):
    prepared = prepare(str(spec), "torch", 2, 1, 2, "tiny", None, tmp_path)
    write_results(prepared.plan.results, [[4, 4]])
    (error,) = judge(prepared, None, None, ["", "Killed"]).errors
    assert error == "rank(s) 1 reported nothing; last output: Killed"


def test_mfu_formula_on_a_known_gpu(spec, tmp_path):
    prepared = prepare(str(spec), "torch", 1, 1, 2, "tiny", None, tmp_path)
    result = RankResult(
        0, 1, 0, True, [8, 8], [1.0, 1.0], device="NVIDIA H200", sequence_length=32, parameters=1000
    )
    report = judge.__globals__["Report"](merge([result]), [], [result])
    value, formula = mfu(report, prepared)
    per_token = 6 * 1000 + 12 * 2 * 64 * 32
    assert value == pytest.approx(8 * 32 * per_token / 989e12) and "PaLM" in formula
    report.measurement.device = "cpu"
    assert mfu(report, prepared)[0] is None


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
    assert out["device"] == "cpu" and out["errors"] == []
    assert err.rstrip().endswith("ok: 8 samples per optimizer step on 2 ranks, as expected")


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

    prepared = prepare(str(spec), "deepspeed", 2, 1, 2, "tiny", None, tmp_path / "w")
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
        # Axolotl's fails it: tests/test_engine_axolotl.py).
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
        cwd=Path(__file__).resolve().parent.parent,
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
    config = Path(__file__).resolve().parent.parent / "fixtures/hf/valid/trl_cli_config.yaml"
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


# What a run says: the verdict, the steps run-length, and what ran before a failure --------------


def test_the_samples_of_each_step_are_summarised_run_length():
    from translator.launch.smoke import run_lengths

    assert run_lengths([8] * 200) == "8 × 200 steps"
    assert run_lengths([8]) == "8 × 1 step"
    assert run_lengths([8, 8, 8, 6]) == "8 × 3, 6 × 1"
    assert run_lengths([8, 6, 8]) == "8 × 1, 6 × 1, 8 × 1"
    assert run_lengths([]) == "-"


def test_the_verdict_is_one_line(spec, tmp_path):
    from translator.launch.smoke import verdict

    prepared = prepare(str(spec), "torch", 2, 1, 2, "tiny", None, tmp_path)
    write_results(prepared.plan.results, [[4, 4], [4, 4]])
    report = judge(prepared, None, None, [])
    assert (
        verdict(report, prepared.plan) == "ok: 8 samples per optimizer step on 2 ranks, as expected"
    )
    shutil.rmtree(prepared.plan.results)
    write_results(prepared.plan.results, [[3, 3], [3, 3]])
    assert verdict(judge(prepared, None, None, []), prepared.plan) == (
        "error: 6 samples per optimizer step on 2 ranks, expected 8 (the global batch)"
    )


@pytest.mark.framework
def test_the_first_line_counts_its_nodes_and_steps_in_words(spec, tmp_path):
    pytest.importorskip("torch")
    done = subprocess.run(
        [sys.executable, "-m", "translator", "smoke", str(spec), "--nproc-per-node", "1"]
        + ["--steps", "1", "--device", "cpu", "--workdir", str(tmp_path / "w")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("smoke: torch on cpu, 1 node × 1, 1 step, global batch 8")


def partial(folder, rank, samples, error=None, **fields):
    """A rank's report as written during the run (after each step), or by a rank that failed."""
    folder.mkdir(parents=True, exist_ok=True)
    RankResult(
        rank,
        2,
        rank,
        True,
        samples,
        [0.1] * len(samples),
        sequence_length=32,
        error=error,
        **fields,
    ).write(folder)


def test_a_rank_that_failed_mid_run_says_how_far_it_got(spec, tmp_path):
    prepared = prepare(str(spec), "torch", 2, 1, 6, "tiny", None, tmp_path)
    partial(prepared.plan.results, 0, [4, 4, 4], error="RuntimeError: boom")
    partial(prepared.plan.results, 1, [4, 4, 4, 4])
    report = judge(prepared, None, None, ["last words"])
    assert report.errors == ["rank 0 failed after 3 optimizer steps: RuntimeError: boom"]
    assert report.measurement.optimizer_steps == 3
    assert report.measurement.samples_per_optimizer_step == [8, 8, 8]
    assert report.measurement.device == "cpu"


def test_an_interrupted_run_says_how_many_steps_ran(spec, tmp_path):
    prepared = prepare(str(spec), "torch", 2, 1, 200, "tiny", None, tmp_path)
    partial(prepared.plan.results, 0, [4] * 39)
    partial(prepared.plan.results, 1, [4] * 38)
    report = judge(prepared, "interrupted", None, [])
    assert report.errors == [
        "interrupted (38 of 200 optimizer steps ran); every process of the run was stopped"
    ]
    assert report.measurement.samples_per_optimizer_step == [8] * 38
    (error,) = judge(prepared, "timeout", 8, []).errors
    assert error.startswith("timed out after 8 s (38 of 200 optimizer steps ran)")


def test_ranks_that_ended_without_a_report_say_where(spec, tmp_path):
    prepared = prepare(str(spec), "torch", 2, 1, 6, "tiny", None, tmp_path)
    partial(prepared.plan.results, 0, [4, 4])
    (error,) = judge(prepared, None, None, ["Killed"]).errors
    assert (
        error
        == "rank(s) 1 reported nothing; rank 0 ended after 2 optimizer steps; last output: Killed"
    )
    assert judge(prepared, None, None, []).measurement.optimizer_steps == 0  # rank 1 ran none


def test_a_replica_not_known_yet_leaves_the_sums_unknown():
    """During a run with model parallelism the engine has not said yet which rank counts for
    its replica: the samples per step are unknown, not a partial sum."""
    ranks = [RankResult(r, 2, None, None, [4, 4], [0.1, 0.1]) for r in range(2)]
    m = merge(ranks, 2)
    assert m.optimizer_steps == 2 and m.samples_per_optimizer_step is None
    assert m.tokens_per_second is None


def test_the_harness_reports_after_every_step(tmp_path, monkeypatch):
    """Each closed step rewrites the rank's report (not finished); with model parallelism
    which rank counts stays unknown until the engine's final report."""
    from translator.rank.context import RunContext
    from translator.rank.harness import FAIL_AT_STEP_ENV, Harness
    from translator.spec import BatchSpec

    def harness(**layout):
        spec = BatchSpec(global_batch_size=8, micro_batch_size=2, world_size=2, **layout)
        ctx = RunContext(spec, tmp_path / "c", tmp_path, 3, "tiny", 32, 1, 1, 2, "cpu")
        return Harness(ctx)

    h = harness()
    h.add(types.SimpleNamespace(shape=(2, 32)))  # a batch of 2 rows
    h.stepped("AdamW")
    (report,) = read_all_results(tmp_path)
    assert (report.samples_per_step, report.finished) == ([2], False)
    assert (report.data_parallel_rank, report.counts_samples, report.stepped_by) == (
        1,
        True,
        "AdamW",
    )
    h = harness(pipeline_parallel_size=2)
    h.stepped("PipelineEngine")
    (report,) = read_all_results(tmp_path)
    assert (report.data_parallel_rank, report.counts_samples) == (None, None)
    monkeypatch.setenv(FAIL_AT_STEP_ENV, "1")
    harness().stepped("AdamW")  # rank 1: the hook is rank 0's


def read_all_results(folder):
    from translator.rank.result import read_all

    return read_all(folder)


def test_a_failed_rank_keeps_the_steps_it_reported(tmp_path):
    from translator.rank.context import RunContext
    from translator.rank.worker import failed
    from translator.spec import BatchSpec

    spec = BatchSpec(global_batch_size=8, micro_batch_size=2, world_size=2)
    ctx = RunContext(spec, tmp_path / "c", tmp_path, 3, "tiny", 32, 0, 0, 2, "cpu")
    nothing = failed(ctx, "RuntimeError: early")
    assert (nothing.samples_per_step, nothing.device, nothing.counts_samples) == ([], None, None)
    partial(tmp_path, 0, [4, 4])
    kept = failed(ctx, "oom")
    assert (kept.samples_per_step, kept.error, kept.micro_batch_size) == ([4, 4], "oom", 2)


# While it runs: progress on stderr --------------------------------------------------------------


class Stream:
    """A stream that says whether it is a terminal."""

    def __init__(self, tty: bool):
        self.text, self.tty = "", tty

    def write(self, text):
        self.text += text

    def flush(self):
        pass

    def isatty(self):
        return self.tty


def step_line(n):
    return f"[batchspec-smoke] rank 0 step {n}"


def test_off_a_terminal_progress_is_plain_lines_at_least_every_few_seconds():
    from translator.launch.progress import Progress

    stream = Stream(tty=False)
    say = Progress(stream, every=0.3, tick=0.05)
    with say.steps(200) as on_line:
        on_line(step_line(1))
        for n in range(2, 101):
            on_line(step_line(n) + " glued to other output")
        time.sleep(0.45)  # a slow step: the log still hears of it
        say("a line of its own")
    lines = stream.text.splitlines()
    assert "\r" not in stream.text
    assert lines[0].startswith("  optimizer step 1/200, 0 s")
    assert any(line.startswith("  optimizer step 100/200") for line in lines[1:-2])
    assert len(lines) <= 5  # not one line per step
    assert lines[-2:] == ["a line of its own", lines[-1]]
    assert re.fullmatch(r"  100 of 200 optimizer steps in \d+ s", lines[-1])


def test_on_a_terminal_progress_is_one_line_rewritten_in_place():
    from translator.launch.progress import Progress

    stream = Stream(tty=True)
    say = Progress(stream, tick=0.05)
    with say.steps(3) as on_line:
        time.sleep(0.12)
        on_line(step_line(1))
        on_line(step_line(2))
        say("a message")
        time.sleep(0.12)
    assert "\r\033[K  optimizer step 0/3" in stream.text
    assert "\r\033[K  optimizer step 2/3" in stream.text and "per step, about" in stream.text
    assert "\r\033[Ka message\n" in stream.text  # the status line is cleared first, then redrawn
    assert stream.text.endswith("\r\033[K  2 of 3 optimizer steps in 0 s\n")


def test_the_progress_line_leaves_the_start_up_out_of_the_time_per_step():
    """Step 1 closes 46 s in (start-up and warm-up); then a step every 1.6 s: the estimate of
    what is left rests on those, not on the 46 s."""
    from translator.launch.progress import _Steps, duration

    run = _Steps(8, start=0.0)
    assert run.status(12.0) == "optimizer step 0/8, 12 s (start-up and the first step)"
    run.closed(1, 46.0)
    assert run.status(47.0) == "optimizer step 1/8, 47 s"
    run.closed(3, 49.2)  # a lost line still counts its step
    assert run.done == 3
    run.times[1] = 47.6
    assert run.status(50.0) == "optimizer step 3/8, 50 s; 1.6 s per step, about 8 s left"
    run.closed(8, 57.2)
    assert run.status(60.0).endswith("per step (finishing)")
    assert run.summary(68.0) == "8 of 8 optimizer steps in 1 min 8 s"
    assert [duration(s) for s in (5, 60, 108, 7500)] == ["5 s", "1 min", "1 min 48 s", "2 h 5 min"]


def test_a_quiet_progress_says_nothing():
    from translator.launch.progress import Progress

    stream = Stream(tty=True)
    say = Progress(stream, quiet=True, tick=0.01)
    with say.steps(2) as on_line:
        on_line(step_line(1))
        say("x")
        time.sleep(0.05)
    assert stream.text == ""


# Before a long run: a warning with the estimate and how to shorten it ---------------------------


def test_a_long_cpu_run_is_warned_about_with_how_to_shorten_it(tmp_path):
    """The HF recipe as is (micro 16 × 2048 tokens): the estimate is over a minute; what
    --seq-len and --steps would make of it is said too."""
    from translator.launch.smoke import estimated_seconds, long_run_warning

    recipe = Path(__file__).resolve().parent.parent / "fixtures/hf/valid/sft_recipe_full.yaml"
    prepared = prepare(str(recipe), None, 1, 1, 3, "tiny", None, tmp_path, device="cpu")
    assert prepared.plan.sequence_length == 2048
    seconds = estimated_seconds(prepared, cores=2)
    assert 60 < seconds < 300
    warning = long_run_warning(prepared, cores=2)
    assert warning.startswith(
        "warning: 3 optimizer steps of micro-batch 16 × accumulation 1 × 2048 tokens per rank "
        "may take about 1 min"
    )
    assert "--seq-len 512 (about " in warning and "--steps 1 (about " in warning
    assert estimated_seconds(prepared, cores=2, sequence_length=512) <= 15
    # More ranks than cores share them: the same steps take longer.
    assert estimated_seconds(prepared, cores=1) == seconds
    crowded = prepare(str(recipe), None, 4, 1, 3, "tiny", None, tmp_path, device="cpu")
    assert estimated_seconds(crowded, cores=2) == pytest.approx(2 * seconds)


def test_a_short_run_or_a_gpu_run_gets_no_warning(spec, tmp_path):
    from translator.launch.smoke import long_run_warning

    assert long_run_warning(prepare(str(spec), "torch", 2, 1, 3, "tiny", None, tmp_path), 2) is None
    gpu = prepare(str(spec), "torch", 2, 1, 3, "tiny", 8192, tmp_path, device="gpu")
    assert long_run_warning(gpu, 2) is None


def test_the_command_warns_before_it_runs(tmp_path, monkeypatch):
    """The warning comes on stderr before the launch (with --json too: stdout keeps the one
    object)."""
    from translator.launch import smoke as runs

    long = tmp_path / "long.yaml"
    long.write_text("global_batch_size: 32\nmicro_batch_size: 16\nsequence_length: 2048\n")
    seen = []

    def fake_run(prepared, options, timeout, limit, say):
        seen.append("run")
        raise SystemExit(0)

    monkeypatch.setattr(runs, "run", fake_run)
    result = run(
        "smoke", long, "--nproc", 2, "--device", "cpu", "--workdir", tmp_path / "w", "--json"
    )
    assert seen == ["run"] and result.stdout == ""
    assert "warning: 3 optimizer steps of micro-batch 16" in result.stderr
    assert "shorter: --seq-len" in result.stderr


# Refused before any process starts: what a CPU rank cannot run ---------------------------------


MEGATRON_LINE = (
    "torchrun --nproc_per_node 2 pretrain_gpt.py --micro-batch-size 2 --global-batch-size 8 "
    "--seq-length 32 {extra}\n"
)


@pytest.mark.parametrize(
    "name, text, partner, why",
    [
        (
            "run.sh",
            MEGATRON_LINE.format(extra="--use-distributed-optimizer"),
            None,
            "--use-distributed-optimizer needs GPUs",
        ),
        (
            "run.sh",
            MEGATRON_LINE.format(extra="--rampup-batch-size 4 4 100"),
            None,
            "--rampup-batch-size is not supported by smoke runs",
        ),
        (
            "ds.json",
            '{"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2, '
            '"fp16": {"enabled": true}}',
            None,
            '"fp16": {"enabled": true} cannot run on this CPU',
        ),
        (
            "args.yaml",
            "per_device_train_batch_size: 2\ngradient_accumulation_steps: 2\ntf32: true\n",
            None,
            "tf32: true needs a GPU",
        ),
        (
            "args.yaml",
            "per_device_train_batch_size: 2\ngradient_accumulation_steps: 2\ndeepspeed: ds.json\n",
            '{"train_batch_size": "auto", "fp16": {"enabled": true}}',
            'its DeepSpeed JSON\'s "fp16": {"enabled": true} cannot run on this CPU',
        ),
        (
            "args.yaml",
            "per_device_train_batch_size: 2\ngradient_accumulation_steps: 2\nfp16: true\n"
            "deepspeed: ds.json\n",
            '{"train_batch_size": "auto", "fp16": {"enabled": "auto"}}',
            'fp16: true (its DeepSpeed JSON\'s fp16 is "auto") cannot run on this CPU',
        ),
    ],
)
def test_a_setting_a_cpu_rank_cannot_run_is_refused_before_launch(
    tmp_path, monkeypatch, name, text, partner, why
):
    """Exit 2, one line naming the setting and the file, nothing written or started (these were
    found by the ranks, exit 1, after their start-up). fp16 is refused on a CPU without it
    (DeepSpeed's CPU accelerator asks oneDNN), whatever CPU runs the test; one with it runs
    fp16 (below)."""
    from translator.frameworks.shared import deepspeed_device

    monkeypatch.setattr(deepspeed_device, "_cpu_has_fp16", lambda: False)
    path = tmp_path / name
    path.write_text(text)
    if partner:
        (tmp_path / "ds.json").write_text(partner)
    workdir = tmp_path / "w"
    result = run("smoke", path, "--nproc", 2, "--device", "cpu", "--workdir", workdir)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"batchspec: error: {path}") and why in result.stderr
    assert "nothing was started" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not workdir.exists()
    # On a GPU these run (the dry run asks the same questions, and starts nothing).
    if "rampup" not in why:
        on_gpu = run("smoke", path, "--nproc", 2, "--device", "gpu", "--dry-run")
        assert on_gpu.exit_code == 0, on_gpu.output
    if "fp16" in why:
        monkeypatch.setattr(deepspeed_device, "_cpu_has_fp16", lambda: True)
        with_fp16 = run("smoke", path, "--nproc", 2, "--device", "cpu", "--dry-run")
        assert with_fp16.exit_code == 0, with_fp16.output


# Work folders ----------------------------------------------------------------------------------


def test_the_default_work_folder_is_the_engines_as_the_help_says(spec, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = run("smoke", spec, "--dry-run", "--json", "--device", "cpu")
    assert json.loads(result.stdout)["workdir"] == str(tmp_path / ".batchspec-smoke" / "torch")
    assert ".batchspec-<command>/<framework>" in run("smoke", "--help").stdout


def test_a_work_folder_made_for_a_run_is_ignored_by_git(spec, tmp_path):
    from translator.launch.smoke import write_workdir

    write_workdir(prepare(str(spec), "torch", 2, 1, 2, "tiny", None, tmp_path / "new" / "w"))
    assert (tmp_path / "new" / "w" / ".gitignore").read_text() == "*\n"
    own = tmp_path / "mine"
    own.mkdir()
    write_workdir(prepare(str(spec), "torch", 2, 1, 2, "tiny", None, own))
    assert not (own / ".gitignore").exists()  # a folder that was there is the user's own
    if shutil.which("git"):
        subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=all"],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert "new/" not in status and "mine/spec.json" in status
