"""tune on fewer ranks than the job (issue 35: 5): the candidates are the micro-batches that keep
the job's global batch on the job's own world, each probed on the ranks tune has with its
accumulation re-solved; the output names both worlds, the pick is the job's split, and --write
says what it changed."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from paths import ROOT
from test_named_model import TINY

from translator.batch.tuning import Candidate, Probe, Search, budget
from translator.launch import tune
from translator.launch.probes import micro_batches
from translator.launch.request import RunRequest
from translator.words.errors import ConfigError

pytestmark = pytest.mark.framework

ZERO2_AUTO = (
    '{"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto", '
    '"gradient_accumulation_steps": "auto", "zero_optimization": {"stage": 2}}'
)


def job(folder: Path, nodes: int, gpus: int, micro: int, accumulation: int) -> Path:
    """An HF Trainer job under DeepSpeed ZeRO-2 on ``nodes`` × ``gpus``, the tiny model's
    config.json beside it; the current folder must be ``folder`` (the job names ./tiny)."""
    (folder / "tiny").mkdir()
    (folder / "tiny" / "config.json").write_text(json.dumps(TINY))
    (folder / "zero2.json").write_text(ZERO2_AUTO)
    path = folder / "launch.sh"
    path.write_text(
        f"#!/bin/bash\ndeepspeed --num_nodes {nodes} --num_gpus {gpus} train.py \\\n"
        "    --deepspeed zero2.json --model_name_or_path ./tiny \\\n"
        f"    --per_device_train_batch_size {micro} --gradient_accumulation_steps {accumulation} "
        "--output_dir out\n"
    )
    return path


def request(path: Path, nproc: int, write: bool = False) -> tune.Request:
    """``tune PATH --nproc-per-node NPROC --device cpu --seq-len 32 --no-parity`` as the
    command line builds it."""
    run = RunRequest(
        str(path), nproc=nproc, steps=3, seq_len=32, workdir=path.parent / "w", device="cpu"
    )
    return tune.Request(
        run=run, probe_timeout=None, slurm=None, zero_stages=None, threshold=0.03,
        precision=None, attention="flash", sequence_parallel=False, distributed_optimizer=False,
        overhead=None, out_dir=None, targets=None, force=False, write=write, plot_path=None,
        in_allocation=False, as_json=True, parity=False,
    )  # fmt: skip


@pytest.fixture
def sixteen(tmp_path, monkeypatch) -> Path:
    """The issue's job: 2 nodes × 8, micro 8 × accumulation 4 × data-parallel 16 = 512."""
    monkeypatch.chdir(tmp_path)
    return job(tmp_path, 2, 8, 8, 4)


def test_the_candidates_keep_the_global_batch_on_the_jobs_world(sixteen):
    """On 2 ranks, global 512 takes any micro-batch up to 256; on the job's 16 only those up
    to 32 keep it (micro × accumulation × 16 = 512): those are the candidates."""
    setup, _ = tune.prepare(request(sixteen, nproc=2))
    assert (setup.spec.world, setup.spec.global_batch) == (2, 512)
    assert (setup.target.world, setup.target.data_parallel) == (16, 16)
    assert micro_batches(setup.target, setup.spec) == [1, 2, 4, 8, 16, 32]


def test_a_world_that_cannot_keep_the_jobs_global_batch_is_refused_before_any_probe(sixteen):
    """On 3 ranks no micro-batch keeps global 512; before, tune searched global 96 there."""
    with pytest.raises(ConfigError, match="global 512 does not split into micro 8 × DP 3 = 24"):
        tune.prepare(request(sixteen, nproc=3))
    assert not (sixteen.parent / "w").exists()


def ran(micro: int, accumulation: int, tokens: float | None) -> Probe:
    """A probe of the job's split ``micro × accumulation`` on 2 ranks (global 512)."""
    return Probe(
        Candidate(micro, accumulation),
        [] if tokens is None else [512] * 3,
        tokens,
        peak_memory_bytes=None if tokens is None else 700 * 2**20,
        out_of_memory=tokens is None,
        probed_accumulation=512 // (2 * micro),
    )


def test_the_report_names_both_worlds_and_picks_the_jobs_split(sixteen):
    setup, _ = tune.prepare(request(sixteen, nproc=2))
    fastest = ran(32, 1, 2000.0)
    found = Search([fastest, ran(16, 2, 1500.0)], fastest, "the fastest")
    outcome = tune.report(request(sixteen, nproc=2), setup, found, 1.0, None)
    assert outcome.exit_code == 0
    out = outcome.output
    assert (out["divisors"], out["budget"]) == (6, budget(6))
    assert out["candidates_for"] == {
        "global_batch_size": 512, "world_size": 16, "data_parallel_size": 16,
    }  # fmt: skip
    assert out["probed_on"] == {
        "nodes": 1, "nproc_per_node": 2, "world_size": 2, "data_parallel_size": 2,
    }  # fmt: skip
    pick = out["pick"]
    assert (pick["micro_batch_size"], pick["gradient_accumulation_steps"]) == (32, 1)
    assert (pick["world_size"], pick["nodes"], pick["gpus_per_node"]) == (16, 2, 8)
    lines = outcome.text.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:1] == ["micro"])
    assert (
        "candidates: the micro-batches that keep global batch 512 on the job's 16 ranks "
        "(data-parallel 16); probed on 1 node × 2 (data-parallel 2), each with its "
        "accumulation re-solved to keep 512: tokens/s and peak memory are those ranks'"
    ) in lines
    assert lines[header].split()[:5] == ["micro", "accum", "probed", "accum", "recompute"]
    assert lines[header + 1].split()[:4] == ["32", "1", "8", "no"]
    assert "pick: micro-batch 32 × accumulation 1 × data-parallel 16 = 512" in lines


def test_write_prints_the_change_and_nothing_is_written_without_a_pick(sixteen):
    before = sixteen.read_text()
    asked = request(sixteen, nproc=2, write=True)
    setup, _ = tune.prepare(asked)
    nothing = Search([ran(1, 32, None)], None, "no candidate fits: not even micro-batch 1")
    outcome = tune.report(asked, setup, nothing, 1.0, None)
    assert outcome.exit_code == 1 and sixteen.read_text() == before
    assert "written" not in outcome.output and "1 node × 2" in outcome.text
    assert outcome.output["findings"][0]["code"] == "tune-nothing-fits"

    fastest = ran(32, 1, 2000.0)
    outcome = tune.report(asked, setup, Search([fastest], fastest, "ok"), 1.0, None)
    assert outcome.exit_code == 0, outcome.error
    assert "--per_device_train_batch_size 32 --gradient_accumulation_steps 1 " in (
        sixteen.read_text()
    )
    assert outcome.output["changes"] == [
        f"{sixteen}: micro-batch 8 × accumulation 4 → 32 × 1, global batch 512 kept on 16 "
        "ranks (data-parallel 16)",
        f"{sixteen}:4: per_device_train_batch_size 8 → 32",
        f"{sixteen}:4: gradient_accumulation_steps 4 → 1",
    ]


def test_a_job_of_4_ranks_tuned_on_2(tmp_path):
    """The job: 2 nodes × 2, micro 1 × accumulation 2 × 4 = 8. On 2 ranks global 8 keeps
    micro-batches 1, 2 and 4; on the job's 4 only 1 and 2: those two are probed (micro 4 was
    probed first before, and its pick, written into the job, could not keep 8). --write says
    what it changed, on stderr."""
    path = job(tmp_path, 2, 2, 1, 2)
    done = subprocess.run(
        [sys.executable, "-m", "translator", "tune", "launch.sh", "--nproc-per-node", "2",
         "--device", "cpu", "--seq-len", "32", "--steps", "3", "--workdir", "w", "--no-parity",
         "--write"],
        capture_output=True, text=True, timeout=600, cwd=tmp_path,
        env=os.environ | {"PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out, err = done.stdout, done.stderr
    assert "probe 1: micro-batch 2 × accumulation 1 (accumulation 2 on the 2 probed)" in err
    assert "micro-batch 4" not in err
    assert "2 probe(s) of at most 3 (2 micro-batches keep the global batch)" in out
    assert "candidates: the micro-batches that keep global batch 8 on the job's 4 ranks" in out
    pick = next(line for line in out.splitlines() if line.startswith("pick: "))
    micro = int(pick.split()[2])
    assert pick == f"pick: micro-batch {micro} × accumulation {2 // micro} × data-parallel 4 = 8"
    text = path.read_text()
    assert f"--per_device_train_batch_size {micro} --gradient_accumulation_steps {2 // micro} " in (
        text
    )
    said = (
        "launch.sh: micro-batch 1 × accumulation 2 → 2 × 1, global batch 8 kept on 4 ranks "
        "(data-parallel 4)"
        if micro == 2
        else "launch.sh: nothing to change: it already launches 4 processes (2 nodes × 2)"
    )
    assert said in err
