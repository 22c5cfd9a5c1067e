"""What a smoke run says: the report, the progress while it runs, the warning before a long run, refusals before any process starts, and its work folders."""

import json
import re
import shutil
import subprocess
import sys
import time
import types

import pytest
from paths import ROOT
from run_batchspec import run
from smoking import write_results

from translator.launch.judging import judge, verdict
from translator.launch.preparing import prepare
from translator.launch.request import RunRequest
from translator.rank.result import RankResult, merge

# What a run says: the verdict, the steps run-length, and what ran before a failure --------------


def test_the_samples_of_each_step_are_summarised_run_length():
    from translator.launch.judging import run_lengths

    assert run_lengths([8] * 200) == "8 × 200 steps"
    assert run_lengths([8]) == "8 × 1 step"
    assert run_lengths([8, 8, 8, 6]) == "8 × 3, 6 × 1"
    assert run_lengths([8, 6, 8]) == "8 × 1, 6 × 1, 8 × 1"
    assert run_lengths([]) == "-"


def test_the_verdict_is_one_line(spec, tmp_path):

    prepared = prepare(RunRequest(str(spec), "torch", 2, 1, 2, "tiny", None, tmp_path))
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
    said, first = done.stderr.splitlines()[:2]
    assert said == f"smoke: {spec} names no model: the tiny stand-in runs " + (
        "(give --model-config PATH (the model's config.json or its folder), or --model tiny for "
        "the stand-in)"
    )
    assert first.startswith("smoke: torch on cpu, 1 node × 1, 1 step, global batch 8")


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
    prepared = prepare(RunRequest(str(spec), "torch", 2, 1, 6, "tiny", None, tmp_path))
    partial(prepared.plan.results, 0, [4, 4, 4], error="RuntimeError: boom")
    partial(prepared.plan.results, 1, [4, 4, 4, 4])
    report = judge(prepared, None, None, ["last words"])
    assert report.errors == ["rank 0 failed after 3 optimizer steps: RuntimeError: boom"]
    assert report.measurement.optimizer_steps == 3
    assert report.measurement.samples_per_optimizer_step == [8, 8, 8]
    assert report.measurement.device == "cpu"


def test_an_interrupted_run_says_how_many_steps_ran(spec, tmp_path):
    prepared = prepare(RunRequest(str(spec), "torch", 2, 1, 200, "tiny", None, tmp_path))
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
    prepared = prepare(RunRequest(str(spec), "torch", 2, 1, 6, "tiny", None, tmp_path))
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


def test_the_timed_steps_spread_and_each_ranks_allocator_are_kept():
    """The first step is warm-up; the spread is over the timed ones. Rank 1's allocator
    retried: the run is at the memory edge, and each rank's figures are listed apart."""
    ranks = [
        RankResult(r, 2, r, True, [4, 4, 4, 4], [9.0, 1.0, 1.2, 0.9], 100 + r, **gpu)
        for r, gpu in enumerate(
            [
                {"reserved_peak_bytes": 200, "allocator_retries": 0, "device_used_bytes": 300},
                {"reserved_peak_bytes": 210, "allocator_retries": 3, "device_used_bytes": 310},
            ]
        )
    ]
    m = merge(ranks, 2)
    assert m.step_time_seconds == 1.0 and m.step_time_spread == pytest.approx(0.3)
    assert m.at_memory_edge
    assert m.memory_by_rank[1] == {
        "rank": 1,
        "peak_allocated_bytes": 101,
        "peak_reserved_bytes": 210,
        "allocator_retries": 3,
        "device_used_bytes": 310,
    }
    ranks[1].allocator_retries = 0
    assert not merge(ranks, 2).at_memory_edge
    one_timed = [RankResult(0, 1, 0, True, [4, 4], [9.0, 1.0])]
    assert merge(one_timed, 1).step_time_spread is None  # a spread needs two timed steps


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
    from translator.launch.throughput import estimated_seconds, long_run_warning

    recipe = ROOT / "fixtures/hf/valid/sft_recipe_full.yaml"
    prepared = prepare(RunRequest(str(recipe), None, 1, 1, 3, "tiny", None, tmp_path, device="cpu"))
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
    crowded = prepare(RunRequest(str(recipe), None, 4, 1, 3, "tiny", None, tmp_path, device="cpu"))
    assert estimated_seconds(crowded, cores=2) == pytest.approx(2 * seconds)


def test_the_cpu_rate_grows_with_the_models_width_between_the_measured_ones():
    """A 1B-wide model cut to 2 layers ran 151 s a step on 2 CPU ranks where the tiny model's
    5 GFLOP/s said 944 s: wide matrices run at the matrix kernels' rate."""
    from translator.launch.throughput import cpu_flops

    assert cpu_flops(64) == 5e9 and cpu_flops(32) == 5e9
    assert cpu_flops(2048) == pytest.approx(25e9) and cpu_flops(8192) == pytest.approx(25e9)
    widths = [64, 128, 512, 1024, 2048]
    assert [cpu_flops(w) for w in widths] == sorted(cpu_flops(w) for w in widths)


def test_a_short_run_or_a_gpu_run_gets_no_warning(spec, tmp_path):
    from translator.launch.throughput import long_run_warning

    assert (
        long_run_warning(
            prepare(RunRequest(str(spec), "torch", 2, 1, 3, "tiny", None, tmp_path)), 2
        )
        is None
    )
    gpu = prepare(RunRequest(str(spec), "torch", 2, 1, 3, "tiny", 8192, tmp_path, device="gpu"))
    assert long_run_warning(gpu, 2) is None


def test_the_command_warns_before_it_runs(tmp_path, monkeypatch):
    """The warning comes on stderr before the launch (with --json too: stdout keeps the one
    object)."""
    from translator.launch import smoke

    long = tmp_path / "long.yaml"
    long.write_text("global_batch_size: 32\nmicro_batch_size: 16\nsequence_length: 2048\n")
    seen = []

    def fake_run(prepared, options, timeout, limit, say):
        seen.append("run")
        raise SystemExit(0)

    monkeypatch.setattr(smoke, "run", fake_run)
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

    write_workdir(
        prepare(RunRequest(str(spec), "torch", 2, 1, 2, "tiny", None, tmp_path / "new" / "w"))
    )
    assert (tmp_path / "new" / "w" / ".gitignore").read_text() == "*\n"
    own = tmp_path / "mine"
    own.mkdir()
    write_workdir(prepare(RunRequest(str(spec), "torch", 2, 1, 2, "tiny", None, own)))
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
