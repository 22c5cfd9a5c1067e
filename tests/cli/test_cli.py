import importlib.abc
import importlib.util
import json
import os
import subprocess
import sys

import pytest
from run_batchspec import run, run_json

# plan ------------------------------------------------------------------------------------------


def test_plan_done_when_example():
    result, out = run_json(
        "plan", "--global-batch", 128, "--micro-batch", 4, "--world-size", 16, "--tp", 2
    )
    assert result.exit_code == 0
    assert out["gradient_accumulation_steps"] == 4 and out["data_parallel_size"] == 8
    assert out["findings"] == []


def test_plan_that_does_not_divide_exits_1_naming_96_and_128():
    result = run("plan", "--global-batch", 100, "--micro-batch", 4, "--world-size", 8)
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        "batchspec: error: global 100 does not split into micro 4 × DP 8 = 32: nearest are 96 "
        "(accumulation 3) and 128 (accumulation 4) (fix: use global 96 or 128, or world size 5 "
        "or 25; no micro-batch gives global 100 with DP 8)"
    )
    assert result.stdout == ""


def test_plan_json_error_is_one_object_with_the_finding():
    result, out = run_json("plan", "--global-batch", 100, "--micro-batch", 4, "--world-size", 8)
    assert result.exit_code == 1
    assert out["findings"][0]["code"] == "global-not-divisible" and out["exit_code"] == 1


def test_plan_without_micro_lists_every_pair_largest_first():
    result, out = run_json("plan", "--global-batch", 64, "--world-size", 8)
    assert result.exit_code == 0 and out["micro_batch_size"] is None
    assert [(o["micro_batch_size"], o["gradient_accumulation_steps"]) for o in out["options"]] == [
        (8, 1),
        (4, 2),
        (2, 4),
        (1, 8),
    ]
    human = run("plan", "--global-batch", 64, "--world-size", 8)
    assert "8×1, 4×2, 2×4, 1×8" in human.stdout


def test_plan_reads_a_spec_file_and_flags_override_it(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "effective_batch_size: 256\nmicro_batch_size: 2\nnodes: 2\ngpus_per_node: 8\n"
        "sequence_length: 4096\n"
    )
    result, out = run_json("plan", spec)
    assert (out["world_size"], out["gradient_accumulation_steps"], out["tokens_per_step"]) == (
        16,
        8,
        256 * 4096,
    )
    result, out = run_json("plan", spec, "--world-size", 32)
    assert (out["world_size"], out["gradient_accumulation_steps"]) == (32, 4)


def test_plan_output_is_a_valid_spec(tmp_path):
    _, out = run_json("plan", "--global-batch", 64, "--micro-batch", 2, "--world-size", 8)
    (tmp_path / "plan.json").write_text(json.dumps(out))
    result, again = run_json("plan", tmp_path / "plan.json")
    assert result.exit_code == 0 and again == out


def test_plan_for_a_backend_adds_its_quirks_and_errors_exit_1():
    result, out = run_json(
        "plan",
        "--global-batch",
        64,
        "--micro-batch",
        2,
        "--world-size",
        8,
        "--pp",
        2,
        "--for",
        "axolotl,megatron",
    )
    assert result.exit_code == 1
    assert [f["code"] for f in out["findings"]] == [
        "axolotl-no-pipeline",
        "megatron-accumulation-implied",
    ]


def test_plan_warnings_exit_0():
    result, out = run_json(
        "plan",
        "--global-batch",
        256,
        "--micro-batch",
        2,
        "--world-size",
        8,
        "--lr",
        3e-4,
        "--lr-batch",
        128,
    )
    assert result.exit_code == 0 and out["findings"][0]["code"] == "lr-scaling"


def test_bad_flags_exit_2():
    assert run("plan", "--global-batch", 0, "--world-size", 8).exit_code == 2
    assert run("plan", "--global-batch", "many").exit_code == 2
    result = run("plan", "--global-batch", 64)
    assert result.exit_code == 2 and "not enough to solve" in result.stderr


# render ----------------------------------------------------------------------------------------


@pytest.fixture
def spec_file(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(
        "global_batch_size: 128\nmicro_batch_size: 4\nworld_size: 16\n"
        "tensor_parallel_size: 2\nsequence_length: 2048\n"
    )
    return path


def test_render_writes_one_file_per_backend(tmp_path, spec_file):
    out_dir = tmp_path / "out" / "nested"
    result, out = run_json(
        "render", spec_file, "--to", "deepspeed,axolotl,megatron", "--out", out_dir
    )
    assert result.exit_code == 0
    assert sorted(os.listdir(out_dir)) == ["axolotl.yaml", "deepspeed.json", "megatron.sh"]
    assert out["files"]["deepspeed"] == str(out_dir / "deepspeed.json")
    assert json.loads((out_dir / "deepspeed.json").read_text())["gradient_accumulation_steps"] == 4


def test_render_never_overwrites_without_force(tmp_path, spec_file):
    (tmp_path / "megatron.sh").write_text("mine\n")
    result = run("render", spec_file, "--to", "deepspeed,megatron", "--out", tmp_path)
    assert result.exit_code == 2 and "megatron.sh: exists; use --force" in result.stderr
    assert (tmp_path / "megatron.sh").read_text() == "mine\n"
    assert not (tmp_path / "deepspeed.json").exists(), "nothing is written when one file is refused"
    assert run("render", spec_file, "--to", "megatron", "--out", tmp_path, "--force").exit_code == 0
    assert "--global-batch-size 128" in (tmp_path / "megatron.sh").read_text()
    assert sorted(os.listdir(tmp_path)) == ["megatron.sh", "spec.yaml"], "no temporary files left"


def test_render_with_a_backend_error_writes_the_others_and_strict_writes_nothing(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "global_batch_size: 64\nmicro_batch_size: 2\nworld_size: 8\npipeline_parallel_size: 2\n"
    )
    args = ["render", spec, "--to", "megatron,axolotl", "--out", tmp_path / "out"]
    strict = run(*args, "--strict")
    assert strict.exit_code == 1 and "Axolotl has no pipeline parallelism" in strict.stderr
    assert not (tmp_path / "out").exists()
    result = run(*args)
    assert result.exit_code == 0
    assert "not written: axolotl: Axolotl has no pipeline parallelism" in result.stdout
    assert os.listdir(tmp_path / "out") == ["megatron.sh"]


def test_render_reads_stdin(tmp_path):
    result = run(
        "render",
        "-",
        "--to",
        "deepspeed",
        "--out",
        tmp_path,
        stdin='{"global_batch_size": 32, "micro_batch_size": 4, "world_size": 8}',
    )
    assert result.exit_code == 0 and (tmp_path / "deepspeed.json").exists()


def test_render_unknown_backend(tmp_path, spec_file):
    result = run("render", spec_file, "--to", "fsdp", "--out", tmp_path)
    assert result.exit_code == 2 and "unknown framework fsdp" in result.stderr


def test_render_into_a_file_path_is_an_input_error(tmp_path, spec_file):
    result = run("render", spec_file, "--to", "deepspeed", "--out", spec_file / "sub")
    assert result.exit_code == 2 and "cannot write" in result.stderr


# schema ----------------------------------------------------------------------------------------


def test_schema_is_json_with_every_field():
    result, out = run_json("schema")
    assert result.exit_code == 0 and "global_batch_size" in out["properties"]


# smoke and tune: an engine whose package is missing is refused before anything starts ----------

MISSING = (
    "batchspec: error: the deepspeed engine needs deepspeed, which is not installed here: "
    "pip install 'batchspec[deepspeed]' (nothing was started)"
)


class _NoTorch(importlib.abc.MetaPathFinder):
    """Fails at any look-up of torch: nothing may touch it before the refusal."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "torch":
            raise AssertionError(f"{name} was looked up before the engine was refused")
        return None


@pytest.fixture
def deepspeed_missing(monkeypatch):
    """The deepspeed engine's package is not installed here; looking torch up, or starting a
    process, would fail the command. Yields the processes started (none)."""
    from translator.plugin import contract

    monkeypatch.setattr(contract, "_installed", lambda package: package != "deepspeed")
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.setattr(sys, "meta_path", [_NoTorch(), *sys.meta_path])
    started = []

    def popen(*args, **kwargs):
        started.append(args)
        raise AssertionError("a process was started")

    monkeypatch.setattr(subprocess, "Popen", popen)
    return started


@pytest.mark.parametrize("command", ["smoke", "tune"])
@pytest.mark.parametrize(
    "file, args",
    [
        ("spec.yaml", ["--framework", "deepspeed"]),
        ("ds.json", []),  # the engine is the config's own framework
        ("ds.json", ["--slurm", "--partition", "gpu"]),
    ],
)
def test_an_engine_whose_package_is_missing_is_refused_before_anything_starts(
    tmp_path, deepspeed_missing, command, file, args
):
    (tmp_path / "spec.yaml").write_text("global_batch_size: 8\nsequence_length: 32\n")
    (tmp_path / "ds.json").write_text(
        '{"train_batch_size": 8, "train_micro_batch_size_per_gpu": 2, '
        '"gradient_accumulation_steps": 2}'
    )
    workdir = tmp_path / "w"
    result = run(command, tmp_path / file, "--nproc", 2, "--workdir", workdir, *args)
    assert result.exit_code == 2, result.output
    assert result.stderr.strip() == MISSING
    assert deepspeed_missing == [] and not workdir.exists()
