"""torchtune's own code on batchspec's files: the 0.6.1 recipe's __init__ (validate
--with-framework) and the real full_finetune_distributed recipe (smoke). Run in the native venv:
pytest -m native tests/frameworks/torchtune/test_torchtune_framework.py."""

import json
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from paths import ROOT

from translator.frameworks import get
from translator.inspection import inspect_reading
from translator.reading import Launch
from translator.render import render
from translator.spec import BatchSpec

pytestmark = [pytest.mark.framework, pytest.mark.native]

torchtune = get("torchtune")


def verdict_of(text: str, world: int) -> str:
    from translator.frameworks.torchtune.verdict import verdict

    inspection = inspect_reading(torchtune, torchtune.read(text, "cfg.yaml"), Launch(world))
    return verdict(inspection, world)


def test_the_installed_torchtune_is_the_release_batchspec_counts_for():
    import torchtune as tt  # noqa: F401

    from translator.frameworks.torchtune import generation

    assert generation.installed() == "0.6.1"
    assert generation.counts_parallel_dims([]) == (False, "the installed torchtune 0.6.1")


def test_the_recipe_accepts_a_good_file_and_counts_its_batch():
    said = verdict_of("batch_size: 4\ngradient_accumulation_steps: 8\n", 8)
    assert "batch_size 4 × 8 data-parallel × 8 accumulation steps = 256" in said


@pytest.mark.parametrize(
    "text, world, error, words",
    [
        (
            "batch_size: 2\ngradient_accumulation_steps: 1\ntensor_parallel_dim: 4\n"
            "tensor_parallel_plan:\n  _component_: torchtune.models.llama3.base_llama_tp_plan\n",
            6,
            ValueError,
            "world_size 6 must be divisible by tensor_parallel_dim 4",
        ),
        (
            "batch_size: 2\ngradient_accumulation_steps: 4\noptimizer_in_bwd: true\n",
            8,
            RuntimeError,
            "Gradient accumulation is not supported with optimizer in bwd",
        ),
        (
            "batch_size: 2\ngradient_accumulation_steps: 1\ntensor_parallel_dim: 2\n",
            8,
            ValueError,
            "Tensor Parallel plan needs to be provided",
        ),
    ],
)
def test_the_recipe_refuses_what_batchspec_refuses(text, world, error, words):
    with pytest.raises(error, match=words):
        verdict_of(text, world)
    got = inspect_reading(torchtune, torchtune.read(text, "cfg.yaml"), Launch(world))
    assert any(f.severity == "error" for f in got.findings)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    micro=st.integers(1, 8),
    accumulation=st.integers(1, 8),
    dp=st.integers(1, 8),
    tp=st.sampled_from([1, 2, 4]),
)
def test_rendered_files_are_accepted_by_the_recipe_with_the_same_batch(micro, accumulation, dp, tp):
    spec = BatchSpec(
        global_batch_size=micro * accumulation * dp,
        micro_batch_size=micro,
        world_size=dp * tp,
        tensor_parallel_size=tp,
    )
    said = verdict_of(render(spec, torchtune).text, spec.world_size)
    assert f"= {spec.global_batch_size} samples per optimizer step" in said


#: issue 27's tiny Llama as the llama3_2 component builder's arguments (156,480 parameters).
TINY_LLAMA = ROOT / "fixtures" / "torchtune" / "valid" / "tiny_llama_builder.yaml"


def smoke(tmp_path, *args):
    config = tmp_path / "torchtune.yaml"
    config.write_text(TINY_LLAMA.read_text())
    proc = subprocess.run(
        [sys.executable, "-m", "translator", "smoke", str(config), "--json", "--device", "cpu"]
        + [
            "--nproc-per-node",
            "2",
            "--steps",
            "2",
            "--workdir",
            str(tmp_path / "w"),
            "--seq-len",
            "32",
            *map(str, args),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    return proc.returncode, json.loads(proc.stdout), proc.stderr


def test_smoke_runs_the_recipe_on_two_cpu_ranks_and_counts_the_global_batch(tmp_path):
    """On the config's own model, built by torchtune's llama3_2 builder with random weights:
    156,480 parameters counted on the recipe's model (the stand-in, 4 KV heads and 4h wide,
    counts 196,928)."""
    code, out, err = smoke(tmp_path)
    assert code == 0, err
    assert out["samples_per_optimizer_step"] == [4, 4]
    assert out["stepped_by"] == "AdamW"
    assert out["model"]["parameters"] == 156_480 and out["model"]["stand_in"] is False
    assert out["model"]["estimated_parameters"] == 156_480


def test_smoke_fails_when_the_file_gives_another_batch_than_expected(tmp_path):
    code, out, err = smoke(tmp_path, "--expect-global", 8)
    assert code == 1, err
    assert out["samples_per_optimizer_step"] == [4, 4]


def test_the_recipe_judges_a_job_by_its_config_and_overrides(tmp_path, monkeypatch):
    from translator.frameworks.torchtune.verdict import verdict
    from translator.inspection import inspect_file

    monkeypatch.chdir(tmp_path)
    (tmp_path / "cfg.yaml").write_text("batch_size: 4\ngradient_accumulation_steps: 8\n")
    (tmp_path / "train.sh").write_text(
        "tune run --nproc_per_node 4 full_finetune_distributed --config cfg.yaml "
        "gradient_accumulation_steps=2\n"
    )
    inspection = inspect_file(str(tmp_path / "train.sh"))
    assert "= 32 samples per optimizer step" in verdict(inspection, 4)


@pytest.mark.parametrize("builder", ["llama3_2_1b", "qwen2_5_7b_base"])
def test_a_named_model_cut_to_one_layer_builds_through_torchtunes_builder(tmp_path, builder):
    """A builder a job names, cut to one layer (``--layers 1``): the engine's model section
    builds torchtune's model on the meta device with the analytic count of the cut shape."""
    import dataclasses
    from types import SimpleNamespace

    import torch
    from torchtune.config._utils import _get_component_from_path

    from translator.frameworks.torchtune.engine import model_config
    from translator.frameworks.torchtune.models import from_mapping

    config = {"model": {"_component_": f"torchtune.models.x.{builder}"}}
    shape = dataclasses.replace(from_mapping(config, "test", tmp_path).model, layers=1)
    (tmp_path / "shape.json").write_text(json.dumps(dataclasses.asdict(shape)))
    section = model_config(
        SimpleNamespace(model_config=tmp_path / "shape.json", sequence_length=64)
    )
    with torch.device("meta"):
        built = _get_component_from_path(section.pop("_component_"))(**section)
    assert sum(p.numel() for p in built.parameters()) == shape.parameters
