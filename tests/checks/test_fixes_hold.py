"""A fix a finding proposes is one that holds: when a world does not divide by the parallel
sizes, every world and every parallel size the hint names, applied to the job, builds a spec
whose model splits (heads and layers, megatron-core's rule). TP 3 with 32 heads at world 32
was offered "world 24 or 48", on which TP 3 still cannot split the heads."""

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from translator.checks import split_advice
from translator.model.model_split import ModelParts, SplitRules
from translator.spec import BatchSpec
from translator.words.errors import ConfigError

RULES = SplitRules("megatron-core")
SIZE = {"tensor": "tensor_parallel_size", "pipeline": "pipeline_parallel_size"}


def build(values: dict, parts: ModelParts) -> BatchSpec:
    return BatchSpec.model_validate(values, context={"model": (parts, RULES)})


def proposals(hint: str) -> list[tuple[str, int]]:
    """``(field, value)`` for each world and parallel size a ``use ...`` hint names."""
    out = []
    worlds = re.search(r"a world size of ([\d or]+)", hint)
    if worlds:
        out += [("world_size", int(w)) for w in worlds[1].split(" or ")]
    for name, sizes in re.findall(r"(tensor|pipeline)-parallel size ([\d or]+)", hint):
        out += [(SIZE[name], int(s)) for s in sizes.split(" or ")]
    return out


def holds(values: dict, parts: ModelParts) -> bool:
    try:
        spec = build(values, parts)
    except ConfigError:
        return False
    found = split_advice.findings(spec, parts, RULES)
    return not any(f.severity == "error" for f in found)


@settings(max_examples=300, deadline=None)
@given(
    heads=st.sampled_from([8, 12, 16, 24, 32, 40, 48, 64]),
    groups=st.sampled_from([1, 2, 4, 8]),
    layers=st.sampled_from([12, 16, 24, 32, 40]),
    tensor=st.integers(1, 8),
    pipeline=st.integers(1, 4),
    world=st.integers(1, 128),
    micro=st.sampled_from([1, 2, 4]),
    global_batch=st.sampled_from([64, 128, 256, 512, 1024]),
)
def test_every_world_and_size_a_hint_names_builds_a_spec_the_model_splits_on(
    heads, groups, layers, tensor, pipeline, world, micro, global_batch
):
    parts = ModelParts(layers, heads, heads // groups if heads % groups == 0 else heads, "model")
    values = {
        "world_size": world,
        "tensor_parallel_size": tensor,
        "pipeline_parallel_size": pipeline,
        "micro_batch_size": micro,
        "global_batch_size": global_batch,
    }
    try:
        build(values, parts)
    except ConfigError as exc:
        refused = [f for f in exc.findings if f.code == "world-not-divisible"]
    else:
        return
    for f in refused:
        for field, value in proposals(f.hint or ""):
            assert holds(values | {field: value}, parts), (f.hint, field, value)


def test_tp_3_on_32_heads_is_not_offered_a_world_it_still_cannot_split():
    parts = ModelParts(32, 32, 32, "the model")
    values = {"world_size": 32, "tensor_parallel_size": 3, "micro_batch_size": 1}
    with pytest.raises(ConfigError) as caught:
        build(values | {"global_batch_size": 64}, parts)
    (f,) = [f for f in caught.value.findings if f.code == "world-not-divisible"]
    assert "world size of" not in (f.hint or "")
    assert proposals(f.hint or "") == [("tensor_parallel_size", 2), ("tensor_parallel_size", 4)]
