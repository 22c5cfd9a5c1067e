import dataclasses

import pytest
from hypothesis import given, settings
from strategies import specs

from translator import render as render_mod
from translator.frameworks import FRAMEWORKS, get
from translator.inspection import inspect_reading
from translator.reading import Launch
from translator.render import render, template_dir
from translator.spec import BatchSpec
from translator.words.errors import ConfigError, InputError, RenderError

deepspeed = get("deepspeed")


@settings(max_examples=1000, deadline=None)
@given(specs(pipeline=False))
def test_every_backend_reads_back_what_it_rendered(spec):
    """Every backend that takes the spec (the HF Trainer's file cannot carry TP/CP sizes,
    litgpt has no model parallelism, torchtune 0.6.1 has no context parallelism: they say so)
    renders a file that reads back as it."""
    launch = Launch.of(spec)
    for backend in FRAMEWORKS.values():
        if any(f.severity == "error" for f in backend.check(spec)):
            assert (
                backend.name in ("hf", "llamafactory", "litgpt")
                and (spec.tensor_parallel_size > 1 or spec.context_parallel_size > 1)
            ) or (backend.name == "torchtune" and spec.context_parallel_size > 1)
            continue
        r = render(spec, backend)
        got = inspect_reading(backend, backend.read(r.text, r.filename), launch)
        assert not [f for f in got.findings if f.severity == "error"]
        if backend.name == "accelerate":  # the launch only: the batch is the code's
            assert got.spec is None and got.values["world_size"] == spec.world_size
            continue
        for key in (
            "global_batch_size",
            "micro_batch_size",
            "gradient_accumulation_steps",
            "data_parallel_size",
            "world_size",
            "tensor_parallel_size",
            "pipeline_parallel_size",
            "context_parallel_size",
        ):
            assert getattr(got.spec, key) == getattr(spec, key), (backend.name, key)
        # A spec that does not say its nodes is written on one node (the render says so).
        layout = () if spec.nodes is None else ("nodes", "gpus_per_node")
        assert all(
            got.values[k] == getattr(spec, k)
            for k in got.values
            if k in BatchSpec.model_fields and k not in {"nodes", "gpus_per_node"} - set(layout)
        )


@settings(max_examples=1000, deadline=None)
@given(specs(pipeline=True))
def test_pipeline_specs_render_for_megatron_and_deepspeed(spec):
    for name in ("megatron", "deepspeed"):
        render(spec, FRAMEWORKS[name])


def test_a_backend_whose_output_does_not_read_back_fails_loudly(monkeypatch):
    broken = dataclasses.replace(
        deepspeed, context=lambda s: deepspeed.context(s) | {"gradient_accumulation_steps": 1}
    )
    s = BatchSpec(global_batch_size=64, micro_batch_size=2, world_size=8)
    with pytest.raises(RenderError, match="deepspeed.json does not read back as its spec"):
        render(s, broken)


def test_a_template_naming_an_unknown_value_fails_naming_the_template():
    broken = dataclasses.replace(
        deepspeed,
        check=lambda s: [],
        context=lambda s: {"micro_batch_size": 1},
    )
    s = BatchSpec(global_batch_size=64, micro_batch_size=2, world_size=8)
    with pytest.raises(RenderError, match=r"deepspeed.json.j2: 'train_batch_size' is undefined"):
        render(s, broken)


def test_the_environment_is_sandboxed():
    from jinja2.exceptions import SecurityError

    env = render_mod.environment()
    with pytest.raises(SecurityError):
        env.from_string("{{ spec.__class__.__mro__ }}").render(spec=object())


def test_an_open_micro_batch_is_refused_with_the_options():
    with pytest.raises(
        InputError,
        match=r"set micro_batch_size to one of 8 \(accumulation 1\), 4 \(accumulation 2\)",
    ):
        render(BatchSpec(global_batch_size=64, world_size=8), deepspeed)


def test_backend_errors_stop_rendering():
    s = BatchSpec(global_batch_size=64, micro_batch_size=2, world_size=8, pipeline_parallel_size=2)
    with pytest.raises(ConfigError, match="Axolotl has no pipeline parallelism"):
        render(s, FRAMEWORKS["axolotl"])


def test_templates_exist_for_every_backend():
    for backend in FRAMEWORKS.values():
        assert (template_dir() / backend.template).is_file()
