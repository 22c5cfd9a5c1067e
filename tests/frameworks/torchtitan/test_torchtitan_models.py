"""The models torchtitan defines in its own code, resolved at read time: its llama3 flavors and
config functions; every torchtitan job in ``fixtures/`` names its model in ``inspect`` or says
why not. (The flavors checked against torchtitan's own code: test_torchtitan_model.py.)"""

import pytest
from paths import ROOT
from run_batchspec import model_of

from translator.frameworks.torchtitan import models

#: Published parameter counts of the architectures the flavors are (Llama 3.1 and 3.2).
PUBLISHED = {
    "1B": 1_235_814_400,
    "3B": 3_212_749_824,
    "8B": 8_030_261_248,
    "70B": 70_553_706_496,
    "405B": 405_853_388_800,
}


@pytest.mark.parametrize("flavor", sorted(PUBLISHED))
def test_each_llama3_flavor_counts_as_the_published_architecture(flavor):
    shape, architecture = models.torchtitan_model("llama3", flavor)
    assert shape is not None and shape.parameters == PUBLISHED[flavor], architecture


def test_the_ffn_width_is_derived_as_torchtitan_derives_it():
    """Two thirds of 4 × dim, scaled, rounded up: 8B's 4096 × 1.3 on 1024 is 14336, and dim 64
    on 4 is int(2 × 256 / 3) = 170 rounded up to 172, the tiny Llama's."""
    assert models.ffn_hidden_dim(4096, 1024, 1.3) == 14336
    assert models.ffn_hidden_dim(64, 4) == 172
    assert models.ffn_hidden_dim(64, 1) == 170  # no rounding: not the tiny Llama's


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
