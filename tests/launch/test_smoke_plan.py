"""smoke before it runs: commands as argument lists, the sbatch script and what reaches it, dry runs, refusals before launch, and the parent's judgement of the ranks' reports."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from run_batchspec import run
from smoking import write_results

from translator.launch import command, slurm
from translator.launch.judging import RunReport, judge, verdict
from translator.launch.preparing import prepare
from translator.launch.request import RunRequest
from translator.launch.throughput import mfu
from translator.rank.result import RankResult, merge

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


def test_judge_sums_data_parallel_ranks_and_catches_a_wrong_batch(spec, tmp_path):
    prepared = prepare(RunRequest(str(spec), "torch", 2, 1, 2, "tiny", None, tmp_path))
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
    prepared = prepare(RunRequest(str(spec), "torch", 2, 1, 2, "tiny", None, tmp_path))
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
    prepared = prepare(RunRequest(str(spec), "torch", 2, 1, 2, "tiny", None, tmp_path))
    write_results(prepared.plan.results, [[4, 4]])
    (error,) = judge(prepared, None, None, ["", "Killed"]).errors
    assert error == "rank(s) 1 reported nothing; last output: Killed"


def test_mfu_formula_on_a_known_gpu(spec, tmp_path):
    prepared = prepare(RunRequest(str(spec), "torch", 1, 1, 2, "tiny", None, tmp_path))
    result = RankResult(
        0, 1, 0, True, [8, 8], [1.0, 1.0], device="NVIDIA H200", sequence_length=32, parameters=1000
    )
    report = RunReport(merge([result]), [], [result])
    value, formula = mfu(report, prepared)
    per_token = 6 * 1000 + 12 * 2 * 64 * 32
    assert value == pytest.approx(8 * 32 * per_token / 989e12) and "PaLM" in formula
    report.measurement.device = "cpu"
    assert mfu(report, prepared)[0] is None
