"""The model a litgpt config trains, read without torch: ``model_config`` written in the file
(litgpt's defaults for the rest), ``model_name`` of litgpt's configs, a finetune's local
``checkpoint_dir``; a job's ``--model_name``/positional/``--model_config.*``; what it cannot
read is unknown, saying why."""

import pytest
from paths import ROOT
from run_batchspec import model_of

FIXTURES = sorted((ROOT / "fixtures" / "litgpt").glob("*/*"))


@pytest.mark.parametrize("path", [p for p in FIXTURES if p.name != "expected.yaml"], ids=str)
def test_every_fixture_resolves_its_model_or_says_why_not(path):
    model = model_of(path)
    assert model is not None
    assert model["parameters"] or model["why"], model


@pytest.mark.parametrize(
    "name, parameters",  # litgpt 0.5.13's GPT on the meta device counts these
    [
        ("pythia-160m", 162_322_944),
        ("Llama-3.1-8B-Instruct", 8_030_261_248),  # an instruct tune: its base's shape
        ("Llama-3.2-1B", 1_498_482_688),  # litgpt never ties the head
        ("Qwen2.5-7B", 7_615_616_512),
        ("phi-2", 2_779_683_840),  # one norm a layer, a bias on the head
    ],
)
def test_a_model_name_counts_as_litgpt_builds_it(tmp_path, name, parameters):
    config = tmp_path / "c.yaml"
    config.write_text(f"model_name: {name}\ntrain:\n  micro_batch_size: 1\n")
    assert model_of(config)["parameters"] == parameters


def test_model_config_wins_over_model_name_with_litgpts_defaults(tmp_path):
    """pretrain builds ``model_config`` when given; unset fields take Config's defaults
    (GptNeoxMLP, LayerNorm, biases, 4 × n_embd, vocab 50254 padded to 50688)."""
    config = tmp_path / "c.yaml"
    config.write_text(
        "model_name: pythia-160m\nmodel_config:\n  n_layer: 1\n  n_embd: 64\n  n_head: 4\n"
        "train:\n  micro_batch_size: 1\n"
    )
    h, vocab = 64, 50688
    layer = 4 * h * h + 2 * h * 4 * h + 2 * 2 * h + (3 * h + h + 4 * h + h)
    assert model_of(config)["parameters"] == layer + 2 * vocab * h + 2 * h


def test_a_local_checkpoint_is_read_and_an_absent_one_is_unknown(tmp_path):
    folder = tmp_path / "checkpoints" / "tiny"
    folder.mkdir(parents=True)
    config = tmp_path / "c.yaml"
    config.write_text("checkpoint_dir: checkpoints/tiny\ntrain:\n  micro_batch_size: 1\n")
    model = model_of(config)
    assert model["parameters"] is None and "model_config.yaml is not here" in model["why"]
    (folder / "model_config.yaml").write_text(
        (ROOT / "fixtures/litgpt/valid/tiny_llama_pretrain.yaml")
        .read_text()
        .split("model_config:\n")[1]
        .split("out_dir")[0]
        .replace("\n  ", "\n")
        .lstrip()
    )
    assert model_of(config)["parameters"] == 156_480


def test_an_unknown_name_or_an_uncountable_config_is_unknown_with_why(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("model_name: my-own-7b\ntrain:\n  micro_batch_size: 1\n")
    assert "my-own-7b is not one of the litgpt configs" in model_of(config)["why"]
    config.write_text(
        "model_config:\n  n_layer: 2\n  mlp_class_name: LLaMAMLP\n  norm_class_name: RMSNorm\n"
        "  bias: false\ntrain:\n  micro_batch_size: 1\n"
    )
    assert "needs intermediate_size" in model_of(config)["why"]


def test_a_jobs_flags_name_the_model_the_later_winning(tmp_path):
    (tmp_path / "p.yaml").write_text("model_name: pythia-160m\ntrain:\n  micro_batch_size: 1\n")
    job = tmp_path / "job.sh"
    job.write_text("litgpt pretrain --config p.yaml --model_name pythia-14m\n")
    assert model_of(job)["parameters"] == 14_067_712
    job.write_text("litgpt pretrain pythia-410m --train.micro_batch_size 1\n")
    assert model_of(job)["parameters"] == 405_334_016
    job.write_text("litgpt pretrain --config p.yaml --model_config.n_layer 2\n")
    assert "model_config" in model_of(job)["named"]
