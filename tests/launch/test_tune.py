"""tune: real probes on 2 CPU ranks (the smoke engines and their harness), with a real memory
edge from --memory-limit; one Slurm job for all probes; bad input stops before any probe."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from paths import ROOT
from smoking import leftovers
from test_named_model import TINY, folder_with

pytestmark = pytest.mark.framework

SEQ512 = "global_batch_size: 128\nworld_size: 2\nsequence_length: 512\n"
SEQ64 = "global_batch_size: 64\nworld_size: 2\nsequence_length: 64\n"


def tune(*args, timeout=600, cwd=None, stand_in=True):
    """``batchspec tune``, on the tiny stand-in unless the test names a model or runs the
    job's own (``stand_in`` False; a spec names no model)."""
    named = not stand_in or any(a in ("--model", "--model-config") for a in args)
    model = () if named else ("--model", "tiny")
    done = subprocess.run(
        [sys.executable, "-m", "translator", "tune", *map(str, args), *model],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env=os.environ | {"PYTHONPATH": str(ROOT)},
    )
    out = json.loads(done.stdout) if "--json" in args and done.stdout.strip() else done.stdout
    return done.returncode, out, done.stderr


@pytest.fixture
def spec512(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(SEQ512)
    return path


def test_tune_finds_the_memory_edge_and_every_probe_counts_g(tmp_path, spec512):
    """1.3 GB of address space per rank: micro-batch 32 of 512 tokens runs out of memory for
    real, 8 does not. Every probe that ran consumed exactly 128 samples per optimizer step."""
    code, out, err = tune(
        spec512,
        "--nproc",
        2,
        "--device",
        "cpu",
        "--memory-limit",
        "1300M",
        "--workdir",
        tmp_path / "w",
        "--out",
        tmp_path / "out",
        "--to",
        "deepspeed",
        "--json",
    )
    assert code == 0, err
    probes = out["probes"]
    assert 2 <= out["probes_used"] == len(probes) <= out["budget"] == 5
    ran = [p for p in probes if not p["out_of_memory"]]
    oom = [p for p in probes if p["out_of_memory"]]
    assert oom and ran
    assert all(p["samples_per_optimizer_step"] == [128] * 4 for p in ran)
    # three timed steps after the warm-up: their spread; on CPU no allocator figures
    assert all(p["step_time_spread"] is not None and p["step_time_spread"] >= 0 for p in ran)
    assert all([r["rank"] for r in p["memory_by_rank"]] == [0, 1] for p in ran)
    assert all(r["allocator_retries"] is None for p in ran for r in p["memory_by_rank"])
    assert not any(p["at_memory_edge"] for p in probes)
    assert all(p["mfu"] is None for p in probes)  # no peak FLOP/s for a CPU
    assert max(p["micro_batch_size"] for p in ran) < min(p["micro_batch_size"] for p in oom)
    pick = out["pick"]
    assert pick["global_batch_size"] == 128
    assert pick["micro_batch_size"] * pick["gradient_accumulation_steps"] * 2 == 128
    fastest = max(ran, key=lambda p: p["tokens_per_second"])
    assert pick["micro_batch_size"] == fastest["micro_batch_size"]
    assert all(p["estimated_memory_bytes"] > 0 and p["peak_memory_bytes"] > 0 for p in ran)
    assert out["memory_fit"]["bytes_per_sample"] > 0
    # The stand-in, asked for: its parameters as the probes' ranks counted them.
    assert out["model"]["stand_in"] and out["model"]["source"] == "--model tiny, built in code"
    assert out["model"]["parameters"] == max(p["parameters"] for p in ran) > 0
    written = json.loads(Path(out["files"]["deepspeed"]).read_text())
    assert written["train_micro_batch_size_per_gpu"] == pick["micro_batch_size"]
    assert written["gradient_accumulation_steps"] == pick["gradient_accumulation_steps"]


def test_a_memory_limit_below_one_sample_says_so_and_exits_1(tmp_path, spec512):
    code, out, err = tune(
        spec512,
        "--nproc",
        2,
        "--device",
        "cpu",
        "--memory-limit",
        "400M",
        "--workdir",
        tmp_path / "w",
        "--json",
    )
    assert code == 1
    assert out["pick"] is None and all(p["out_of_memory"] for p in out["probes"])
    assert any(p["micro_batch_size"] == 1 for p in out["probes"])
    assert "not even micro-batch 1 ran without running out of memory" in out["reason"]
    assert out["findings"][0]["code"] == "tune-nothing-fits"


def test_timeout_mid_probe_stops_every_rank_and_prints_the_probes_so_far(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SEQ64)
    workdir = tmp_path / "w"
    code, out, err = tune(
        spec, "--nproc", 2, "--device", "cpu", "--timeout", 10, "--steps", 40, "--workdir", workdir
    )
    assert code == 1
    assert "tune stopped: --timeout reached during probe" in err
    assert "micro" in out and "probe(s) of at most" in out  # the table of what ran
    assert leftovers(str(workdir)) == []


def test_a_human_run_prints_the_table_the_plot_and_the_pick(tmp_path):
    pytest.importorskip("matplotlib")
    spec = tmp_path / "spec.yaml"
    spec.write_text(SEQ64)
    png = tmp_path / "tune.png"
    code, out, err = tune(
        spec, "--nproc", 2, "--device", "cpu", "--workdir", tmp_path / "w", "--plot", png
    )
    assert code == 0, err
    assert "tokens/s by micro-batch" in out and "pick: micro-batch" in out and "why: " in out
    assert png.read_bytes().startswith(b"\x89PNG")
    assert "probe 1: micro-batch 32 × accumulation 1" in err  # the progress display


@pytest.mark.parametrize(
    "args, message, code",
    [
        (["--nproc", 3], "global 64 does not split", 1),
        (
            ["--nproc", 2, "--framework", "torch", "--zero-stages", "0,1"],
            "--zero-stages is for the deepspeed engine, not torch",
            2,
        ),
        (
            ["--nproc", 2, "--framework", "deepspeed", "--zero-stages", "0,5"],
            "--zero-stages '0,5': give stages 0-3",
            2,
        ),
        (
            ["--nproc", 2, "--framework", "deepspeed", "--recompute"],
            "--recompute: the deepspeed engine does not switch recomputation",
            2,
        ),
        (["--nproc", 2, "--memory-limit", "0"], "--memory-limit '0'", 2),
        (["--nproc", 2, "--threshold", "2"], "--threshold", 2),
        (["--nproc", 2, "--steps", "2"], "--steps", 2),  # one timed step has no spread
        (
            [
                "--nproc",
                2,
                "--framework",
                "megatron",
                "--device",
                "cpu",
                "--seq-len",
                64,
                "--memory-limit",
                "1G",
            ],
            None,
            None,
        ),
    ],
)
def test_bad_input_stops_before_any_probe(tmp_path, args, message, code):
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "global_batch_size: 64\nsequence_length: 64\ntensor_parallel_size: 2\n"
        if message is None
        else "global_batch_size: 64\nsequence_length: 64\n"
    )
    workdir = tmp_path / "w"
    got, out, err = tune(spec, "--device", "cpu", "--workdir", workdir, *args)
    if message is None:  # a layout the engine cannot run on CPU: megatron's own refusal
        got, message = 2, "nothing was started"
    else:
        assert got == code
    assert message in err and err.count("batchspec: error") == 1
    assert not list(workdir.glob("probe-*"))


def test_existing_out_files_stop_the_tune_before_it_starts(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SEQ64)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "deepspeed.json").write_text("{}")
    code, out, err = tune(
        spec,
        "--nproc",
        2,
        "--device",
        "cpu",
        "--workdir",
        tmp_path / "w",
        "--out",
        tmp_path / "out",
        "--to",
        "deepspeed",
    )
    assert code == 2 and "deepspeed.json exists; use --force" in err
    assert (tmp_path / "out" / "deepspeed.json").read_text() == "{}"
    assert not (tmp_path / "w").exists()


def test_a_link_out_of_the_out_folder_stops_the_tune_before_it_starts(tmp_path):
    """--out DIR --force never writes through a link that leads out of DIR: refused before
    any probe runs, not after them."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(SEQ64)
    outside = tmp_path / "precious.json"
    outside.write_text("{}")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "deepspeed.json").symlink_to(outside)
    code, out, err = tune(
        spec,
        "--nproc",
        2,
        "--device",
        "cpu",
        "--workdir",
        tmp_path / "w",
        "--out",
        tmp_path / "out",
        "--to",
        "deepspeed",
        "--force",
    )
    assert code == 2 and f"is a symlink to {outside}, outside" in err
    assert outside.read_text() == "{}"
    assert not (tmp_path / "w").exists()


HF_DEEPSPEED_JOB = """#!/bin/bash
deepspeed --num_gpus 2 train.py \\
    --deepspeed zero2.json \\
    --model_name_or_path ./tiny \\
    --per_device_train_batch_size 1 \\
    --gradient_accumulation_steps 2 \\
    --learning_rate 1e-5
"""
ZERO2_AUTO = (
    '{"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto", '
    '"gradient_accumulation_steps": "auto", "zero_optimization": {"stage": 2}}'
)


def test_an_hf_deepspeed_job_is_tuned_on_its_own_processes_under_deepspeed(tmp_path):
    """No --nproc-per-node: the job's own 2 processes, its global batch 4 kept; each probe is
    the job itself at the candidate's micro-batch (the HF Trainer under DeepSpeed ZeRO-2, the
    job's model built from its config.json). Before, tune ran 1 process of plain DDP on a
    global batch of 2 it made up."""
    folder_with(tmp_path, "tiny", TINY)
    (tmp_path / "zero2.json").write_text(ZERO2_AUTO)
    job = tmp_path / "job.sh"
    job.write_text(HF_DEEPSPEED_JOB)
    code, out, err = tune(
        job, "--device", "cpu", "--seq-len", 32, "--steps", 3, "--workdir", tmp_path / "w",
        "--no-parity", "--write", "--json", cwd=tmp_path, stand_in=False,
    )  # fmt: skip
    assert code == 0, err
    assert out["engine"] == {"framework": "hf", "deepspeed_zero_stage": 2}
    assert out["model"]["parameters"] == 156_480 and not out["model"]["stand_in"]
    assert out["pick"]["global_batch_size"] == 4 and out["pick"]["world_size"] == 2
    assert sorted(p["micro_batch_size"] for p in out["probes"]) == [1, 2]
    for p in out["probes"]:
        assert p["samples_per_optimizer_step"] == [4] * 3
        results = tmp_path / "w" / f"probe-m{p['micro_batch_size']}" / "results"
        assert json.loads((results / "rank-0.json").read_text())["stepped_by"] == (
            "Trainer (DeepSpeedEngine)"
        )
    pick = out["pick"]["micro_batch_size"]
    assert f"--per_device_train_batch_size {pick} " in job.read_text() or pick == 1


def test_a_probe_edits_the_deepspeed_json_that_writes_the_batch_with_the_job(tmp_path, monkeypatch):
    """A job whose DeepSpeed JSON writes the batch (not "auto"): a probe's micro-batch goes
    into the JSON the engine is handed as into the launch line, as update edits both; before,
    the JSON kept micro 1 × accumulation 2 and the Trainer refused the probe as a mismatch."""
    from translator.inspection import read_source
    from translator.launch.preparing import _engine_config, on_world

    monkeypatch.chdir(tmp_path)
    (tmp_path / "zero2.json").write_text(
        '{"train_batch_size": 4, "train_micro_batch_size_per_gpu": 1, '
        '"gradient_accumulation_steps": 2, "zero_optimization": {"stage": 2}}'
    )
    (tmp_path / "job.sh").write_text(HF_DEEPSPEED_JOB)
    probe, nproc, _ = on_world(read_source("job.sh"), None, 1, micro=2)
    assert nproc == 2 and (probe.spec.micro, probe.spec.accumulation) == (2, 1)
    assert [f.code for f in probe.findings if f.severity == "error"] == []
    _, _, partners, _ = _engine_config("hf", "hf", "", probe.spec, probe)
    handed = json.loads(partners["deepspeed.json"])
    assert (handed["train_micro_batch_size_per_gpu"], handed["gradient_accumulation_steps"]) == (
        2,
        1,
    )
    assert 'train_micro_batch_size_per_gpu": 1' in (tmp_path / "zero2.json").read_text()


def test_write_is_for_a_config_or_a_job_not_a_spec(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SEQ64)
    code, out, err = tune(spec, "--nproc", 2, "--model", "tiny", "--write", "--json")
    assert code == 2 and "--write edits a framework's config or job" in err


def test_under_slurm_all_probes_run_in_one_allocation(tmp_path, slurm_cluster):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SEQ64)
    workdir = tmp_path / "w"
    code, out, err = tune(
        spec, "--nproc", 2, "--device", "cpu", "--slurm", "--workdir", workdir, "--json"
    )
    assert code == 0, err
    job = out["slurm_job"]
    assert out["probes_used"] >= 2 and out["pick"]["global_batch_size"] == 64
    log = (workdir / f"slurm-{job}.out").read_text()
    assert log.count(f"(job step of {job})") == out["probes_used"]
    assert len(list(workdir.glob("slurm-*.out"))) == 1  # one job, whatever the probes


def test_ctrl_c_mid_probe_stops_every_rank_and_prints_the_probes_so_far(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SEQ64)
    workdir = tmp_path / "w"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "translator",
            "tune",
            str(spec),
            "--nproc",
            "2",
            "--device",
            "cpu",
            "--steps",
            "100000",
            "--model",
            "tiny",
            "--workdir",
            str(workdir),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 120
    while not leftovers(str(workdir)) or not list(workdir.glob("probe-*/results")):
        assert time.monotonic() < deadline, "the first probe never started"
        time.sleep(0.5)
    time.sleep(3)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert "tune stopped: interrupted during probe 1" in err
    assert "probe(s) of at most" in out
    assert leftovers(str(workdir)) == []


def test_a_probe_past_its_deadline_is_stopped_whole_and_ends_the_tune(tmp_path):
    """A probe of 100,000 steps (as a rank that hangs) is stopped at --probe-timeout, every
    process of it, long before the tune's own --timeout."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(SEQ64)
    workdir = tmp_path / "w"
    began = time.monotonic()
    code, out, err = tune(
        spec, "--nproc", 2, "--device", "cpu", "--steps", 100_000, "--probe-timeout", 20,
        "--timeout", 300, "--workdir", workdir, "--json",
    )  # fmt: skip
    assert code == 1 and out["stopped"] == "probe-timeout", err
    assert "probe 1 did not end within --probe-timeout 20 s" in err
    assert time.monotonic() - began < 120 and leftovers(str(workdir)) == []


def test_a_job_step_past_its_deadline_is_cancelled(tmp_path, slurm_cluster):
    """Inside an allocation a probe is an srun step: the step itself is cancelled by name
    (killing srun on this node does not reach its tasks on the others)."""
    script = tmp_path / "job.sh"
    script.write_text(
        "#!/bin/bash\n"
        "srun --job-name=batchspec-probe-x sleep 300 &\n"
        "until squeue --steps --jobs $SLURM_JOB_ID -h -o %j | grep -q batchspec-probe-x; do\n"
        "  sleep 0.5; done\n"
        f"{sys.executable} -c 'from translator.launch.probes import cancel_step; "
        'cancel_step("batchspec-probe-x")\'\n'
        "wait; echo step ended\n"
    )
    began = time.monotonic()
    done = subprocess.run(
        ["sbatch", "--wait", "--output", str(tmp_path / "out.txt"), str(script)],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
        env=os.environ | {"PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "step ended" in (tmp_path / "out.txt").read_text()
    assert time.monotonic() - began < 60  # not the step's 300 s
