"""The model a nanotron job trains, resolved at read time: its ``model_config`` with its class's
defaults; every nanotron job in ``fixtures/`` names its model in ``inspect`` or says why not."""

import json

import pytest
from paths import ROOT
from run_batchspec import model_of
from test_named_model import TINY

#: nanotron's LlamaConfig defaults are Llama 2 7B's shape: its published count.
LLAMA_2_7B = 6_738_415_616


def test_nanotrons_default_llama_is_counted_where_the_old_reading_found_no_hidden_size():
    """``model_config: {is_llama_config: true}`` trains LlamaConfig's defaults (Llama 2 7B's
    shape); the YAML and the job that names it say so."""
    for path in ("config_dp4_tp2.yaml", "train_torchrun.sh"):
        model = model_of(ROOT / "fixtures" / "nanotron" / "jobs" / path, "--world-size", 8)
        assert (
            model["parameters"] == LLAMA_2_7B and model["architecture"] == "LlamaConfig (nanotron)"
        )
        assert model["source"].endswith("config_dp4_tp2.yaml")


def test_a_nanotron_model_config_without_tie_word_embeddings_is_untied(tmp_path):
    """nanotron's default is untied, where a Hugging Face config.json's is tied: read with the
    Hugging Face default, the tiny Llama counted its head once (123,712, not 156,480)."""
    config = {k: v for k, v in TINY.items() if k not in ("architectures", "tie_word_embeddings")}
    path = tmp_path / "nanotron.yaml"
    path.write_text(
        "model:\n  model_config:\n    is_llama_config: true\n"
        + "".join(f"    {k}: {json.dumps(v)}\n" for k, v in config.items())
        + "parallelism: {dp: 1, tp: 1, pp: 1}\n"
        + "tokens: {micro_batch_size: 1, batch_accumulation_per_replica: 1, sequence_length: 32}\n"
    )
    assert model_of(path)["parameters"] == 156_480


@pytest.mark.parametrize(
    "model_config, why",
    [
        ("{is_starcoder2_config: true, hidden_size: 64}", "is_starcoder2_config: not a model"),
        ("{is_mamba_config: true, d_model: 64}", "is_mamba_config: not a model class"),
        ("{is_qwen2_config: true, moe_config: {num_experts: 8}}", "mixture of experts"),
    ],
)
def test_a_nanotron_model_batchspec_does_not_count_is_unknown_with_why(tmp_path, model_config, why):
    path = tmp_path / "nanotron.yaml"
    path.write_text(
        f"model:\n  model_config: {model_config}\nparallelism: {{dp: 1, tp: 1, pp: 1}}\n"
        "tokens: {micro_batch_size: 1, batch_accumulation_per_replica: 1, sequence_length: 8}\n"
    )
    model = model_of(path)
    assert model["parameters"] is None and why in model["why"]


@pytest.mark.parametrize(
    "path, why",
    [
        ("jobs/config_not_found.sh", "configs/missing.yaml is not found"),
        ("valid/batch_blocks.yaml", "no model.model_config block"),
    ],
)
def test_a_nanotron_file_without_its_model_says_why(path, why):
    model = model_of(ROOT / "fixtures" / "nanotron" / path, "--world-size", 8)
    assert model["parameters"] is None and why in model["why"], model
