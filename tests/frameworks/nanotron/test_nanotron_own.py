"""nanotron's own code (the ``nanotron`` package, 0.4 from PyPI in CI) on batchspec's files: its
verdict accepts good files and refuses wrong ones, every rendered file is one it accepts, and
the smoke engine's whole config is one its ``Config`` loads."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from paths import ROOT
from run_batchspec import run
from test_named_model import TINY

from translator.checks.verdict import framework_verdict
from translator.frameworks import get
from translator.frameworks.nanotron import generation, native
from translator.inspection import inspect_reading, read_source
from translator.reading import Launch
from translator.render import render
from translator.spec import BatchSpec

pytest.importorskip("nanotron")
pytestmark = pytest.mark.framework

FIXTURES = ROOT / "fixtures" / "nanotron"
nanotron = get("nanotron")


def validate(path, *args) -> tuple[int, dict]:
    result = run("validate", path, "--with-framework", *args, "--json")
    (file,) = json.loads(result.stdout)["files"]
    return result.exit_code, {f["code"]: f for f in file["findings"]}


def test_the_installed_nanotron_is_the_pypi_release_and_its_config_imports():
    assert generation.installed() == "0.4"
    config = native.config()
    assert {"dp", "tp", "pp", "expert_parallel_size"} <= set(
        config.ParallelismArgs.__dataclass_fields__
    )


def test_its_verdict_accepts_a_whole_04_config():
    code, found = validate(FIXTURES / "valid" / "tiny_llama_04.yaml")
    assert code == 0
    assert found["framework-accepts"]["message"] == (
        "nanotron accepts it: get_config_from_dict loads the Config; ParallelContext takes "
        "world 8; global batch 16 (micro 4 × accumulation 2 × dp 2), "
        "OneForwardOneBackwardPipelineEngine"
    )


@pytest.mark.parametrize(
    "name, args, words",
    [
        ("world_mismatch.yaml", ["--world-size", 16], "must be equal to the world size (16)"),
        ("one_f_one_b.yaml", [], "Number of microbatches (2) must be at least PP_SIZE-1=3"),
        ("missing_sequence.yaml", [], 'missing value for field "tokens.sequence_length"'),
        ("typo.yaml", [], "micro_batch_sizes"),
        ("bad_engine.yaml", [], "pp_engine should be a string selected in ['afab', '1f1b']"),
    ],
)
def test_its_verdict_refuses_what_batchspec_refuses(name, args, words):
    code, found = validate(FIXTURES / "invalid" / name, *args)
    assert code == 1
    assert words in found["framework-refuses"]["message"]


def test_its_verdict_refuses_a_current_generation_file_as_the_pypi_release_does():
    code, found = validate(FIXTURES / "valid" / "smollm_style.yaml")
    assert "nanotron-other-generation" in found
    assert "data_stages" in found["framework-refuses"]["message"]


def test_the_batch_blocks_are_checked_with_a_stand_in_train_steps():
    code, found = validate(FIXTURES / "valid" / "batch_blocks.yaml")
    assert code == 0
    assert "(train_steps 1 standing in)" in found["framework-accepts"]["message"]


@settings(max_examples=60, deadline=None)
@given(
    dp=st.integers(1, 16),
    tp=st.sampled_from([1, 2, 4]),
    pp=st.sampled_from([1, 2, 4, 8]),
    micro=st.integers(1, 8),
    accumulation=st.integers(1, 8),
    sequence=st.sampled_from([128, 2048, 4096]),
)
def test_every_rendered_file_is_accepted_by_nanotron(dp, tp, pp, micro, accumulation, sequence):
    """Random layouts (no context parallel: the PyPI release has none) render to batch blocks
    that nanotron's own loader, ParallelContext and 1F1B engine accept at the spec's world."""
    spec = BatchSpec(
        micro_batch_size=micro,
        gradient_accumulation_steps=accumulation,
        world_size=dp * tp * pp,
        tensor_parallel_size=tp,
        pipeline_parallel_size=pp,
        sequence_length=sequence,
    )
    rendered = render(spec, nanotron)
    inspection = inspect_reading(
        nanotron, nanotron.read(rendered.text, rendered.filename), Launch.of(spec)
    )
    found = framework_verdict(inspection)
    assert found.code == "framework-accepts", found.message
    assert f"global batch {spec.global_batch} " in found.message


def test_a_rendered_file_without_a_sequence_length_is_refused_by_nanotron():
    spec = BatchSpec(global_batch_size=8, micro_batch_size=1, world_size=8)
    rendered = render(spec, nanotron)
    inspection = inspect_reading(
        nanotron, nanotron.read(rendered.text, rendered.filename), Launch.of(spec)
    )
    found = framework_verdict(inspection)
    assert found.code == "framework-refuses"
    assert 'missing value for field "sequence_length"' in found.message


def test_the_smoke_engines_whole_config_is_one_nanotron_loads(tmp_path):
    """With the job's model: the tiny Llama of issue 27 written as a nanotron model_config
    (156,480 parameters), chosen as the shape the engine builds and handed to nanotron's own
    LlamaConfig, which carries it whole (nanotron trains on GPUs only, so the model itself is
    not built here)."""
    import dataclasses

    import yaml

    from translator.frameworks.nanotron.engine import refuse_shape, whole_config
    from translator.launch import run_model
    from translator.model.memory import Model
    from translator.rank.context import RunContext

    spec = BatchSpec(global_batch_size=8, micro_batch_size=2, world_size=2, sequence_length=64)
    rendered = render(spec, nanotron)
    job = tmp_path / "job.yaml"
    job.write_text(
        rendered.text
        + "model:\n  model_config:\n"
        + "".join(f"    {k}: {json.dumps(v)}\n" for k, v in TINY_LLAMA.items())
    )
    chosen = run_model.choose(
        str(job), run_model.named_in(read_source(str(job)), None), "nanotron", "smoke", None
    )
    assert chosen.shape.parameters == 156_480 and refuse_shape(chosen.shape) is None
    (tmp_path / "model").mkdir()
    (tmp_path / chosen.file).write_text(json.dumps(chosen.config))
    ctx = RunContext(
        spec=spec,
        config=tmp_path / "nanotron.yaml",
        workdir=tmp_path,
        steps=3,
        model="tiny",
        sequence_length=64,
        rank=0,
        local_rank=0,
        world_size=2,
        model_config=tmp_path / chosen.file,
    )
    config = native.config().get_config_from_dict(whole_config(ctx, yaml.safe_load(rendered.text)))
    assert config.global_batch_size == 8
    assert (config.tokens.train_steps, config.tokens.sequence_length) == (3, 64)
    llama = config.model.model_config
    assert type(llama).__name__ == "LlamaConfig"
    assert {k: getattr(llama, k) for k in TINY_LLAMA} == TINY_LLAMA
    gpt = dataclasses.replace(chosen.shape, gated=False, biases=True)
    assert "a GELU MLP" in str(refuse_shape(gpt))
    assert Model(**chosen.config) == chosen.shape


#: The tiny Llama of issue 27 as a nanotron model_config (its config.json's shape keys).
TINY_LLAMA = {k: v for k, v in TINY.items() if k not in ("architectures", "model_type")}


def test_the_defaults_batchspec_fills_in_are_nanotrons_own():
    from translator.frameworks.nanotron.models import NANOTRON_DEFAULTS

    fields = native.config().LlamaConfig.__dataclass_fields__
    assert {k: fields[k].default for k in NANOTRON_DEFAULTS if k in fields} == {
        k: v for k, v in NANOTRON_DEFAULTS.items() if k in fields
    }
    assert set(NANOTRON_DEFAULTS) - set(fields) <= {"attention_bias"}  # 0.4 has none


def test_smoke_refuses_the_cpu_before_anything_starts(tmp_path):
    config = tmp_path / "nanotron.yaml"
    config.write_text(
        (FIXTURES / "valid" / "batch_blocks.yaml").read_text().replace("dp: 4", "dp: 1")
    )
    workdir = tmp_path / "w"
    result = run("smoke", config, "--nproc", 2, "--device", "cpu", "--workdir", workdir)
    assert result.exit_code == 2, result.output
    assert "nanotron trains on CUDA GPUs only" in result.stderr
    assert not workdir.exists()


def test_its_verdict_on_a_job_is_on_the_yaml_the_job_names_at_the_launchers_world():
    jobs = FIXTURES / "jobs"
    code, found = validate(jobs / "train_torchrun.sh")
    assert "ParallelContext takes world 8" in found["framework-accepts"]["message"]
    code, found = validate(jobs / "too_few_processes.sh")
    assert code == 1 and "world size (4)" in found["framework-refuses"]["message"]
    code, found = validate(jobs / "config_not_found.sh")
    assert "the job's nanotron config was not read" in found["framework-not-run"]["message"]
