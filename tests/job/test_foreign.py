"""Configs of frameworks batchspec does not read (issue 28; issue 30, item 2) are named as such,
exit 2, every batch field null: before, Fast-LLM's was read as Axolotl's (global 8, micro 1),
Levanter's and MaxText's as HF TrainingArguments with the Trainer's default micro-batch 8.
The files in tests/foreign/ are written here in the style each framework publishes."""

import json

import pytest
from paths import ROOT, TESTS
from run_batchspec import run

from translator.spec import OUTPUT_KEYS

FOREIGN = TESTS / "foreign"
NAMES = {
    "neox.yml": "GPT-NeoX",
    "levanter.yaml": "Levanter",
    "maxtext.yml": "MaxText",
    "fastllm.yaml": "Fast-LLM",
    "mistral.yaml": "mistral-finetune",
    "fairseq2.yaml": "fairseq2",
    "olmo.yaml": "OLMo",
    "foundry.yaml": "Composer/llm-foundry",
}


@pytest.mark.parametrize("name, framework", NAMES.items())
@pytest.mark.parametrize("command", ["inspect", "validate"])
def test_a_config_of_a_framework_batchspec_does_not_read_is_named(command, name, framework):
    result = run(command, FOREIGN / name, "--world-size", 8, "--json")
    assert result.exit_code == 2, result.output
    out = json.loads(result.stdout)
    assert out["framework"] == framework
    assert all(out[key] is None for key in OUTPUT_KEYS)
    assert f"a config of {framework}, a framework batchspec does not read" in out["error"]


def test_among_other_files_it_is_named_and_the_others_are_read(tmp_path):
    ds = tmp_path / "ds.json"
    ds.write_text('{"train_batch_size": 16, "train_micro_batch_size_per_gpu": 2}')
    result = run("inspect", ds, FOREIGN / "maxtext.yml", "--world-size", 8, "--json")
    assert result.exit_code == 2
    good, foreign = json.loads(result.stdout)["files"]
    assert good["global_batch_size"] == 16 and good["framework"] == "deepspeed"
    assert foreign["framework"] == "MaxText" and foreign["micro_batch_size"] is None


def test_a_framework_given_reads_it_as_that_one(tmp_path):
    """GPT-NeoX hands its DeepSpeed keys to DeepSpeed: --framework deepspeed reads them."""
    neox = tmp_path / "neox.json"
    neox.write_text(
        '{"pipe_parallel_size": 1, "model_parallel_size": 1, '
        '"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2}'
    )
    assert run("inspect", neox, "--world-size", 8).exit_code == 2
    result = run("inspect", neox, "--framework", "deepspeed", "--world-size", 8)
    assert result.exit_code == 0, result.output
    assert "micro batch size             4" in result.output


def test_configs_batchspec_reads_are_not_taken_for_foreign_ones():
    fixtures = ROOT / "fixtures"
    for path in fixtures.glob("*/valid/*"):
        if path.suffix in (".yaml", ".yml", ".json") and path.name != "expected.yaml":
            result = run("inspect", path, "--json")
            assert "a framework batchspec does not read" not in result.output, path


def test_a_batch_nested_in_another_tools_sections_is_not_axolotls(tmp_path):
    """NeMo's T5 fine-tuning config keeps its batch under model.data.train_ds: it was read as
    an Axolotl config (micro-batch 1, Axolotl's default); now no framework claims it."""
    nemo = tmp_path / "t5_finetune.yaml"
    nemo.write_text(
        "name: t5_finetuning\ntrainer:\n  devices: 8\n  num_nodes: 1\nmodel:\n"
        "  tensor_model_parallel_size: 1\n  data:\n    train_ds:\n      global_batch_size: 128\n"
        "      micro_batch_size: 64\n"
    )
    result = run("inspect", nemo, "--json")
    assert result.exit_code == 2 and "cannot tell which framework" in result.stderr
    assert json.loads(result.stdout)["micro_batch_size"] is None
