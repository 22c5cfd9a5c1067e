"""One name per idea across the commands: ``--nproc-per-node`` for processes per node (the old
spellings kept working, hidden), ``--slurm-gpus-per-node`` for Slurm's GPU request, ``--to``
and ``--for`` listing every registered framework (and ``all``), ``--out -`` for stdout."""

import json
import re
import subprocess
import sys

import pytest
from paths import ROOT
from run_batchspec import run

from translator import frameworks
from translator.cli import main

SPEC = "global_batch_size: 64\nmicro_batch_size: 2\nworld_size: 8\n"
DS = '{"train_batch_size": 64, "train_micro_batch_size_per_gpu": 2}\n'


def helps():
    return {name: run(name, "--help").stdout for name in main.commands}


def test_processes_per_node_is_nproc_per_node_in_every_command_that_takes_it():
    texts = helps()
    takes = {"plan", "estimate", "inspect", "validate", "convert", "update", "smoke", "tune"}
    assert {name for name, text in texts.items() if "--nproc-per-node " in text} == takes
    for name, text in texts.items():
        assert not re.search(r"(?<![\w-])--gpus-per-node\b", text), name
        assert not re.search(r"--nproc(?![\w-])", text), name


def test_old_spellings_still_work_in_plan_and_estimate():
    new = run("plan", "--global-batch", 64, "--nnodes", 2, "--nproc-per-node", 4, "--json")
    old = run("plan", "--global-batch", 64, "--nnodes", 2, "--gpus-per-node", 4, "--json")
    assert new.exit_code == old.exit_code == 0
    assert json.loads(new.stdout) == json.loads(old.stdout)
    assert json.loads(new.stdout)["world_size"] == 8
    args = ["estimate", "--micro-batch", 1, "--global-batch", 8, "--nnodes", 2, "--json"]
    args += ["--model", "125m"]
    new, old = run(*args, "--nproc-per-node", 4), run(*args, "--gpus-per-node", 4)
    assert new.exit_code == old.exit_code == 0 and new.stdout == old.stdout


@pytest.mark.parametrize("command", ["plan", "estimate"])
def test_a_world_given_by_flags_is_refused_in_the_flags_words(command):
    """A world the flags give is refused naming the flags, not the spec's keys."""
    half = run(command, "--global-batch", 64, "--nnodes", 2)
    assert half.exit_code == 2
    assert half.stderr.strip() == (
        "batchspec: error: give both --nnodes and --nproc-per-node, or --world-size alone"
    )
    mismatch = run(
        command, "--global-batch", 64, "--nnodes", 2, "--nproc-per-node", 4, "--world-size", 6
    )
    assert mismatch.exit_code == 1
    assert mismatch.stderr.strip() == (
        "batchspec: error: --world-size 6 ≠ --nnodes 2 × --nproc-per-node 4 = 8 "
        "(fix: drop --world-size or set it to 8)"
    )


def test_a_world_given_by_flags_beside_a_file_is_refused_in_the_flags_words(tmp_path):
    path = tmp_path / "ds.json"
    path.write_text('{"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4}')
    half = run("estimate", path, "--nnodes", 2)
    assert half.exit_code == 2 and half.stderr.strip() == (
        "batchspec: error: give both --nnodes and --nproc-per-node, or --world-size alone"
    )
    mismatch = run("estimate", path, "--nnodes", 2, "--nproc-per-node", 4, "--world-size", 6)
    assert mismatch.exit_code == 2 and mismatch.stderr.strip() == (
        "batchspec: error: --world-size 6 ≠ --nnodes 2 × --nproc-per-node 4 = 8 "
        "(fix: drop --world-size or set it to 8)"
    )


def test_a_world_a_spec_file_gives_is_refused_in_its_keys(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text("global_batch_size: 64\nnodes: 2\n")
    result = run("plan", path)
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        f"batchspec: error: {path}: give both nodes and gpus_per_node, or world_size alone"
    )


def test_old_spellings_still_work_in_smoke(tmp_path, fake_sinfo):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    common = ["smoke", spec, "--nnodes", 2, "--dry-run", "--slurm", "--workdir", tmp_path / "w"]
    new = run(*common, "--nproc-per-node", 4, "--slurm-gpus-per-node", 8)
    old = run(*common, "--nproc", 4, "--gpus-per-node", 8)
    assert new.exit_code == old.exit_code == 0, new.output
    assert new.stdout == old.stdout
    assert "--nproc_per_node 4" in new.stdout and "#SBATCH --gpus-per-node=8\n" in new.stdout


@pytest.mark.parametrize("flag", ["--slurm-gpus-per-node", "--gpus-per-node"])
def test_the_slurm_gpu_request_without_slurm_names_its_new_name(tmp_path, flag):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    result = run("smoke", spec, flag, 8, "--nproc-per-node", 8, "--dry-run")
    assert result.exit_code == 2
    assert "--slurm-gpus-per-node and --cpus-per-task are requests to Slurm" in result.stderr


def test_tune_takes_the_old_spelling(tmp_path):
    missing = tmp_path / "missing.yaml"
    for flag in ("--nproc-per-node", "--nproc"):
        result = run("tune", missing, flag, 2)
        assert result.exit_code == 2
        assert "No such option" not in result.stderr and "missing.yaml" in result.stderr


def test_tune_records_the_new_name_for_the_job_it_submits():
    from translator.cli.run_options import engine_options

    @engine_options
    def probe(**params):
        pass

    nproc = next(o for o in probe.__click_params__ if o.name == "nproc")
    assert nproc.opts[0] == "--nproc-per-node"  # what given_options writes for the Slurm job


def test_to_and_for_list_every_framework_and_all():
    texts = helps()
    for name in ("render", "convert", "tune", "plan"):
        flag = "--for" if name == "plan" else "--to"
        # Help is wrapped to the terminal, a name with a hyphen (megatron-bridge) at its hyphen.
        text = " ".join(texts[name].split()).replace("- ", "-")
        at = text.index(f"{flag} FRAMEWORKS")
        listed = text[at : at + 600]
        assert "or all," in listed, name
        for framework in frameworks.names():
            assert framework in listed, (name, framework)


def test_a_plugin_framework_is_listed_without_being_imported(tmp_path):
    dist = tmp_path / "batchspec_fake-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: batchspec-fake\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[batchspec.frameworks]\nfakeframework = batchspec_fake_absent:FRAMEWORK\n"
    )
    root = ROOT
    result = subprocess.run(
        [sys.executable, "-m", "translator", "plan", "--help"],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": f"{tmp_path}:{root}", "PATH": ""},
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert "fakeframework" in result.stdout


def test_to_all_renders_every_framework(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    result = run("render", spec, "--to", "all", "--out", tmp_path / "out", "--json")
    assert result.exit_code == 0, result.output
    assert set(json.loads(result.stdout)["files"]) == set(frameworks.names())
    assert len(list((tmp_path / "out").iterdir())) == len(frameworks.names())


def test_out_dash_writes_the_one_file_on_stdout_and_nothing_else(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC)
    folder = run("render", spec, "--to", "megatron", "--out", tmp_path / "out")
    assert folder.exit_code == 0
    result = run("render", spec, "--to", "megatron", "--out", "-")
    assert result.exit_code == 0, result.output
    assert result.stdout == (tmp_path / "out" / "megatron.sh").read_text()
    assert "megatron-accumulation-implied" in result.stderr  # the findings, on stderr
    as_json = run("render", spec, "--to", "megatron", "--out", "-", "--json")
    out = json.loads(as_json.stdout)
    assert out["text"] == result.stdout and out["files"] == {"megatron": "-"}


def test_out_dash_with_several_files_is_refused_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "spec.yaml").write_text(SPEC)
    (tmp_path / "ds.json").write_text(DS)
    for args in (
        ["render", "spec.yaml", "--to", "deepspeed,axolotl", "--out", "-"],
        ["convert", "ds.json", "--to", "all", "--out", "-", "--world-size", 8],
        ["tune", "spec.yaml", "--out", "-"],
    ):
        result = run(*args)
        assert result.exit_code == 2, (args, result.output)
        assert result.stdout == ""
        assert result.stderr.startswith("batchspec: error: ") and "--out" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds.json", "spec.yaml"]


def test_convert_and_update_write_to_stdout_with_a_dash(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ds.json").write_text(DS)
    result = run("convert", "ds.json", "--to", "axolotl", "--out", "-", "--world-size", 8)
    assert result.exit_code == 0, result.output
    assert (
        "micro_batch_size: 2" in result.stdout and "gradient_accumulation_steps: 4" in result.stdout
    )
    args = ["update", "ds.json", "--from-world-size", 8, "--world-size", 32, "--micro-batch", 1]
    printed, dashed = run(*args), run(*args, "-o", "-")
    assert dashed.exit_code == printed.exit_code == 0, dashed.output
    assert (
        dashed.stdout == printed.stdout and '"train_micro_batch_size_per_gpu": 1' in dashed.stdout
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds.json"]
