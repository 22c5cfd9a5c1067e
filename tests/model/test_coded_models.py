"""The models torchtitan and nanotron define in their own code, resolved at read time (issue 27,
item 1): torchtitan's llama3 flavors and config functions, nanotron's ``model_config`` with its
class's defaults; every job of theirs in ``fixtures/`` names its model in ``inspect`` or says
why not. (The flavors checked against torchtitan's own code: tests/frameworks/torchtitan.)"""

import json

import pytest
from click.testing import CliRunner
from paths import ROOT
from test_named_model import TINY

from translator.cli import main
from translator.model import coded_models

#: Published parameter counts of the architectures the flavors are (Llama 3.1 and 3.2).
PUBLISHED = {
    "1B": 1_235_814_400,
    "3B": 3_212_749_824,
    "8B": 8_030_261_248,
    "70B": 70_553_706_496,
    "405B": 405_853_388_800,
}
#: nanotron's LlamaConfig defaults are Llama 2 7B's shape: its published count.
LLAMA_2_7B = 6_738_415_616


def model_of(path, *extra) -> dict:
    result = CliRunner().invoke(main, ["inspect", str(path), "--json", *map(str, extra)])
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)["model"]


@pytest.mark.parametrize("flavor", sorted(PUBLISHED))
def test_each_llama3_flavor_counts_as_the_published_architecture(flavor):
    shape, architecture = coded_models.torchtitan_model("llama3", flavor)
    assert shape is not None and shape.parameters == PUBLISHED[flavor], architecture


def test_the_ffn_width_is_derived_as_torchtitan_derives_it():
    """Two thirds of 4 × dim, scaled, rounded up: 8B's 4096 × 1.3 on 1024 is 14336, and dim 64
    on 4 is int(2 × 256 / 3) = 170 rounded up to 172, the tiny Llama's."""
    assert coded_models.ffn_hidden_dim(4096, 1024, 1.3) == 14336
    assert coded_models.ffn_hidden_dim(64, 4) == 172
    assert coded_models.ffn_hidden_dim(64, 1) == 170  # no rounding: not the tiny Llama's


@pytest.mark.parametrize(
    "job, named, parameters",
    [
        # ≤ 0.2.2: a TOML without [model] trains JobConfig's default, llama3 debugmodel.
        ("jobs/debug_model.toml", "(torchtitan's default)", 6_163_712),
        ("jobs/run_train.sh", "(torchtitan's default)", 6_163_712),
        (
            "jobs/multinode_python_config.slurm",
            "--module llama3 --config llama3_8b",
            PUBLISHED["8B"],
        ),
        ("jobs/tokens_launch.sh", "--config llama3_8b", PUBLISHED["8B"]),
        ("valid/llama3_8b_fsdp.toml", "[model] llama3 8B", PUBLISHED["8B"]),
        ("valid/llama3_70b_tp_pp.toml", "[model] llama3 70B", PUBLISHED["70B"]),
    ],
)
def test_every_torchtitan_job_names_its_model(job, named, parameters):
    """The jobs named no model before: smoke ran the stand-in and tune refused them."""
    model = model_of(ROOT / "fixtures" / "torchtitan" / job, "--world-size", 8)
    assert named in model["named"] and model["parameters"] == parameters, model


def test_a_flag_picks_the_flavor_over_the_toml_and_an_unknown_one_says_why(tmp_path):
    (tmp_path / "debug_model.toml").write_text("[training]\nlocal_batch_size = 2\n")
    job = tmp_path / "run.sh"
    launch = "torchrun --nproc_per_node 8 -m torchtitan.train --job.config_file debug_model.toml"
    job.write_text(f"{launch} --model.flavor 70B\n")
    assert model_of(job)["parameters"] == PUBLISHED["70B"]
    job.write_text(f"{launch} --model.name qwen3 --model.flavor 0.6B\n")
    model = model_of(job)
    assert model["parameters"] is None and "qwen3 0.6B is not a torchtitan flavor" in model["why"]


@pytest.mark.parametrize(
    "config, why",
    [
        ("my_llama", "a Python function batchspec does not run"),
        ("llama3_debugmodel_float8_emulate_lora", "a Python function batchspec does not run"),
        ("$CONFIG", "$CONFIG"),
    ],
)
def test_a_config_function_batchspec_does_not_know_is_unknown_with_why(tmp_path, config, why):
    job = tmp_path / "run.sh"
    job.write_text(
        "torchrun --nproc_per_node 8 -m torchtitan.train --module llama3 "
        f"--config {config} --training.local_batch_size 2\n"
    )
    model = model_of(job)
    assert model["parameters"] is None and why in model["why"], model


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
