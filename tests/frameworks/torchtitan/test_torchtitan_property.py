"""Random specs render to launches that torchtitan's own config classes and ParallelDims
accept, with the accumulation they were rendered for."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from strategies import specs

from translator.frameworks import get
from translator.frameworks.torchtitan import template, verdict
from translator.inspection import inspect_reading
from translator.reading import Launch
from translator.render import render


@pytest.mark.framework
@pytest.mark.native
@settings(max_examples=200, deadline=None)
@given(specs(pipeline=True))
def test_rendered_specs_are_accepted_by_torchtitan(spec):
    framework = get("torchtitan")
    rendered = render(spec, framework)
    got = inspect_reading(framework, framework.read(rendered.text, "t.sh"), Launch.of(spec))
    assert got.spec is not None and got.spec.accumulation == spec.accumulation
    config, dims = verdict.configured(template.flags(spec), spec.world)
    per_step = verdict.accumulation(config, dims)
    pieces = config.training.local_batch_size // (
        config.parallelism.pipeline_parallel_microbatch_size
        if spec.pipeline_parallel_size > 1
        else config.training.local_batch_size
    )
    assert dims.dp_replicate * dims.dp_shard == spec.data_parallel
    assert per_step * pieces == spec.accumulation
