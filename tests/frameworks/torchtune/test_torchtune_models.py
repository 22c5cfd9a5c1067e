"""The model a torchtune config builds, read without torch: a model builder's shape, a component
builder's arguments, LoRA builders as their base, a job's config and its ``model.*``
overrides; what it cannot read is unknown, saying why."""

import pytest
from paths import ROOT
from run_batchspec import model_of

from translator.frameworks.torchtune.models import BUILDERS, scaled_mlp
from translator.model.memory import PRESETS

FIXTURES = sorted((ROOT / "fixtures" / "torchtune").glob("*/*"))


@pytest.mark.parametrize("path", [p for p in FIXTURES if p.name != "expected.yaml"], ids=str)
def test_every_fixture_resolves_its_model_or_says_why_not(path):
    model = model_of(path, "--world-size", 8)
    assert model is not None
    assert model["parameters"] or model["why"], model


@pytest.mark.parametrize(
    "builder, parameters",
    [
        ("llama3_1.llama3_1_8b", PRESETS["llama3-8b"].parameters),  # 8,030,261,248
        ("llama3_2.llama3_2_1b", PRESETS["llama3-1b"].parameters),  # tied: 1,235,814,400
        ("llama3_2.lora_llama3_2_3b", 3_212_749_824),  # tied, its base's shape
        ("llama3_3.qlora_llama3_3_70b", 70_553_706_496),  # llama3_1_70b's
        ("qwen2_5.qwen2_5_0_5b", 494_032_768),  # tied, q/k/v biases
        ("qwen2_5.lora_qwen2_5_72b_instruct", 72_706_203_648),
        ("llama2.llama2_7b", 6_738_415_616),  # intermediate_dim from embed_dim: 11008
    ],
)
def test_a_builder_names_its_architectures_count(tmp_path, builder, parameters):
    config = tmp_path / "c.yaml"
    config.write_text(f"model:\n  _component_: torchtune.models.{builder}\nbatch_size: 1\n")
    assert model_of(config, "--world-size", 1)["parameters"] == parameters


def test_llama2s_missing_intermediate_dim_is_torchtunes_scaled_width():
    assert scaled_mlp(4096) == 11008 and BUILDERS["llama2_7b"][6] is None


def test_a_component_builder_without_a_size_is_unknown_naming_it(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text(
        "model:\n  _component_: torchtune.models.qwen2.qwen2\n  vocab_size: 512\n"
        "  num_layers: 2\n  num_heads: 4\n  num_kv_heads: 2\n  embed_dim: 64\nbatch_size: 1\n"
    )
    model = model_of(config, "--world-size", 1)
    assert model["parameters"] is None and "model.intermediate_dim" in model["why"]


def test_an_unknown_builder_is_unknown_with_why(tmp_path):
    config = tmp_path / "c.yaml"
    config.write_text("model:\n  _component_: my_models.build_mine\nbatch_size: 1\n")
    model = model_of(config, "--world-size", 1)
    assert (
        model["parameters"] is None
        and "build_mine is not a torchtune model builder" in model["why"]
    )


def test_a_jobs_model_overrides_win_over_its_config(tmp_path):
    """``tune run ... model._component_=...`` builds the override's model, as torchtune merges it."""
    (tmp_path / "c.yaml").write_text(
        "model:\n  _component_: torchtune.models.llama3_2.llama3_2_1b\n"
        "batch_size: 1\ngradient_accumulation_steps: 1\n"
    )
    job = tmp_path / "job.sh"
    job.write_text(
        "tune run --nproc_per_node 2 full_finetune_distributed --config c.yaml "
        "model._component_=torchtune.models.llama3_1.llama3_1_8b\n"
    )
    model = model_of(job)
    assert model["parameters"] == PRESETS["llama3-8b"].parameters
    assert model["named"].endswith(
        "c.yaml: model._component_ torchtune.models.llama3_1.llama3_1_8b"
    )
