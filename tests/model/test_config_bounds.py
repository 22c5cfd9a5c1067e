"""A model's config.json and the Hugging Face cache's refs/main, read bounded (issue 37: 8 and
9): each is read as every input is (at most 4 MiB: a 5 GiB config.json was read whole), and a
config.json that cannot be a model's is one line naming it, exit 2, where it was an internal
error: a model_type that is a list, nesting 100,000 deep, a lone surrogate, a width of 10**300;
a model name of 5,000 characters is not found in a job, and one line given as --model or
--model-config, where it was an internal error too."""

import json
from pathlib import Path

import pytest
from run_batchspec import inspected, run
from test_named_model import TINY

JOB = (
    "#!/bin/bash\ntorchrun --nproc_per_node 8 train.py --per_device_train_batch_size 2 "
    "--gradient_accumulation_steps 1 --model_name_or_path {name}\n"
)


@pytest.mark.parametrize(
    "text, says",
    [
        (json.dumps(TINY | {"model_type": ["llama"]}), "model_type is ['llama'], not a name"),
        ('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply"),
        (json.dumps(TINY)[:-1] + ', "architectures": ["\\ud800"]}', "a surrogate"),
        (json.dumps(TINY | {"hidden_size": 10**300}), "hidden_size is 1000"),
        (json.dumps(TINY | {"pad": "x" * (5 << 20)}), "larger than 4 MiB"),
    ],
    ids=["model_type", "nesting", "surrogate", "width", "size"],
)
def test_a_config_json_that_is_no_model_is_one_line_naming_it(tmp_path, text, says):
    config = tmp_path / "m" / "config.json"
    config.parent.mkdir()
    config.write_text(text)
    (tmp_path / "job.sh").write_text(JOB.format(name="./m"))
    layout = ["--micro-batch", 1, "--accumulation", 1, "--world-size", 8]
    for args in (
        ["--model", config, *layout],
        ["--model", config.parent, *layout],
        [tmp_path / "job.sh", "--model-config", config],
    ):
        result = run("estimate", *args, "--seq-len", 64)
        lines = result.output.strip().splitlines()
        assert result.exit_code == 2 and len(lines) == 1, result.output
        assert lines[0].startswith(f"batchspec: error: {config}: ") and says in lines[0]
        assert len(lines[0]) < 400


def test_a_config_json_a_job_names_that_is_no_model_leaves_the_model_unknown(tmp_path):
    config = tmp_path / "m" / "config.json"
    config.parent.mkdir()
    config.write_text(json.dumps(TINY | {"model_type": {"llama": 1}}))
    (tmp_path / "job.sh").write_text(JOB.format(name="./m"))
    model = inspected(tmp_path / "job.sh")["model"]
    assert model["parameters"] is None and "model_type is {'llama': 1}" in model["why"]


def test_a_model_name_no_file_can_have_is_not_found(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    (tmp_path / "job.sh").write_text(JOB.format(name="a" * 5000))
    model = inspected(tmp_path / "job.sh")["model"]
    assert model["parameters"] is None and "not found here" in model["why"]


def cache_with(tmp_path: Path, ref: str) -> Path:
    """A hub cache holding acme/tiny in one snapshot, its refs/main holding ``ref``."""
    repo = tmp_path / "hub" / "models--acme--tiny"
    (repo / "snapshots" / "abc123").mkdir(parents=True)
    (repo / "snapshots" / "abc123" / "config.json").write_text(json.dumps(TINY))
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(ref)
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "config.json").write_text(json.dumps(TINY | {"hidden_size": 128}))
    return tmp_path / "hub"


@pytest.mark.parametrize(
    "ref", ["0" * (5 << 20), "../../../elsewhere", ""], ids=["large", "a path", "empty"]
)
def test_a_ref_that_names_no_snapshot_is_passed_over(tmp_path, monkeypatch, ref):
    """A refs/main past 4 MiB is not read whole (it was, and then named a path too long to
    open); one that is a path is not followed out of the cache's snapshots."""
    monkeypatch.setenv("HF_HUB_CACHE", str(cache_with(tmp_path, ref)))
    (tmp_path / "job.sh").write_text(JOB.format(name="acme/tiny"))
    model = inspected(tmp_path / "job.sh")["model"]
    assert model["parameters"] == 156_480 and "abc123" in model["source"]


@pytest.mark.parametrize(
    "args",
    [["--model", "a" * 5000], ["--model", "a" * 5000 + ".json"], ["--model-config", "a" * 5000]],
    ids=["model", "model json", "model-config"],
)
def test_a_model_path_no_file_can_have_is_one_line(tmp_path, args):
    (tmp_path / "job.sh").write_text(JOB.format(name="./m"))
    layout = ["--micro-batch", 1, "--accumulation", 1, "--world-size", 8]
    given = [tmp_path / "job.sh", *args] if args[0] == "--model-config" else [*args, *layout]
    result = run("estimate", *given, "--seq-len", 64)
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1, result.output
    assert "File name too long" in lines[0] and len(lines[0]) < 200
