"""torchtitan's own model code against batchspec's shapes (issue 27, items 1, 2 and 7): each
llama3 flavor and config function of the installed torchtitan builds, on the meta device (no
memory), the parameters batchspec counts for it; the smoke engine's model, built from a shape
through llama3's own layer builder, counts what the shape counts, and a wrong shape would not."""

from __future__ import annotations

import dataclasses

import pytest

from translator.frameworks.torchtitan import models as coded_models
from translator.model.memory import Model

pytestmark = [pytest.mark.framework, pytest.mark.native]

#: The tiny Llama of issue 27: 2 layers × 64, 4 heads, 2 KV heads, FFN 172, vocab 512, untied.
TINY = Model("tiny-llama", 2, 64, 4, 2, 172, 512, gated=True, tied=False, biases=False)


def built(model_config) -> int:
    """The parameters of torchtitan's model built from ``model_config`` on the meta device."""
    import torch

    with torch.device("meta"):
        return sum(p.numel() for p in model_config.build().parameters())


def test_every_llama3_flavor_of_the_installed_torchtitan_counts_as_batchspec_counts_it():
    from torchtitan.models import llama3

    assert set(llama3.llama3_configs) <= set(coded_models.LLAMA3)
    for flavor in llama3.llama3_configs:
        shape, _ = coded_models.torchtitan_model("llama3", flavor)
        assert shape is not None
        assert built(llama3.model_registry(flavor).model) == shape.parameters, flavor


def test_each_config_function_builds_the_flavor_batchspec_names():
    """Read from each function's source (the float8 and NVFP4 ones refuse to build on a CPU):
    the flavors it asks ``model_registry`` for, and those of the functions it starts from."""
    import inspect
    import re

    from torchtitan.models.llama3 import config_registry

    for function, flavor in coded_models.LLAMA3_CONFIGS.items():
        source = inspect.getsource(getattr(config_registry, function))
        asked = set(re.findall(r'model_registry\(\s*"(\w+)"', source))
        bases = re.findall(r"= (llama3_\w+)\(\)", source)
        assert asked | {coded_models.LLAMA3_CONFIGS[b] for b in bases} == {flavor}, function


@pytest.mark.parametrize(
    "shape",
    [
        TINY,
        dataclasses.replace(TINY, ffn=170),  # the FFN not rounded up: 768 fewer
        dataclasses.replace(TINY, tied=True),
        dataclasses.replace(coded_models.torchtitan_model("llama3", "8B")[0], layers=1),
    ],
    ids=["tiny", "wrong-ffn", "tied", "8B-1-layer"],
)
def test_the_engines_model_counts_what_its_shape_counts(shape):
    from torchtitan.models import llama3

    from translator.frameworks.torchtitan.engine import model_spec

    spec = model_spec(llama3.model_registry("debugmodel"), shape)
    counted = built(spec.model)
    assert counted == shape.parameters
    assert (counted == 156_480) == (shape == TINY)
