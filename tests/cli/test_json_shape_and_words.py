"""Issue 28, item 8: one JSON shape whatever happened (an exit-2 answer carries every batch
field as null; ``validate --json`` the resolved batch), and the words of two messages."""

import json

import pytest
from run_batchspec import run

from translator.checks.elastic_report import _rate_text
from translator.rank.engines import _listed
from translator.spec import OUTPUT_KEYS


@pytest.fixture
def files(tmp_path):
    (tmp_path / "ds.json").write_text(
        '{"train_batch_size": 32, "train_micro_batch_size_per_gpu": 2}'
    )
    (tmp_path / "bad.yaml").write_text("nope: [\n")
    return tmp_path


@pytest.mark.parametrize("command", ["inspect", "validate", "convert"])
def test_an_unusable_file_answers_in_the_batch_shape_with_nulls(files, command):
    extra = ["--to", "axolotl", "--out", files / "o"] if command == "convert" else []
    result = run(command, files / "bad.yaml", "--json", *extra)
    assert result.exit_code == 2
    out = json.loads(result.stdout)
    assert all(key in out and out[key] is None for key in OUTPUT_KEYS), out
    assert "not valid YAML" in out["error"]


@pytest.mark.parametrize("command", ["inspect", "validate"])
def test_a_good_and_a_bad_file_answer_in_one_shape(files, command):
    result = run(command, files / "ds.json", files / "bad.yaml", "--world-size", 8, "--json")
    assert result.exit_code == 2
    good, bad = json.loads(result.stdout)["files"]
    assert set(OUTPUT_KEYS) <= set(good) and set(OUTPUT_KEYS) <= set(bad)
    assert good["gradient_accumulation_steps"] == 2 and good["data_parallel_size"] == 8
    assert bad["global_batch_size"] is None and bad["file"].endswith("bad.yaml")


def test_validate_json_carries_the_resolved_batch(files):
    result = run("validate", files / "ds.json", "--world-size", 8, "--json")
    assert result.exit_code == 0
    (only,) = json.loads(result.stdout)["files"]
    assert (only["global_batch_size"], only["micro_batch_size"]) == (32, 2)
    assert only["gradient_accumulation_steps"] == 2 and only["findings"] == []


@pytest.mark.parametrize(
    "names, said",
    [
        (["torch"], "torch"),
        (["torch", "deepspeed"], "torch and deepspeed"),
        (list("abc"), "a, b and c"),
    ],
)
def test_a_list_of_packages_reads_as_english(names, said):
    assert _listed(names) == said


def test_a_factor_of_one_is_no_change():
    assert _rate_text("learning_rate_factor", 1.00001) == "learning rate unchanged"
    assert _rate_text("learning_rate_factor", 0.9682) == "learning rate ×0.9682"


def test_rendered_scripts_are_executable_and_configs_are_not(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text("global_batch_size: 16\nmicro_batch_size: 2\nworld_size: 8\n")
    result = run("render", spec, "--to", "megatron,deepspeed", "--out", tmp_path / "r")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "r" / "megatron.sh").stat().st_mode & 0o111
    assert not (tmp_path / "r" / "deepspeed.json").stat().st_mode & 0o111
