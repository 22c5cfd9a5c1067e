"""A shape against a framework's named models: the one that builds it, else the nearest and how
it differs, in words."""

import dataclasses

from translator.frameworks.litgpt import models as litgpt
from translator.frameworks.torchtitan import template
from translator.model.matching import described, differences, nearest


def test_each_torchtitan_flavor_is_its_own_config_function():
    functions = template.config_functions()
    assert list(functions) == ["llama3_debugmodel", "llama3_8b", "llama3_70b", "llama3_405b"]
    for name, shape in functions.items():
        match = nearest(shape, functions)
        assert match is not None and match.exact and match.name == name


def test_the_nearest_names_each_field_that_differs():
    eight = template.config_functions()["llama3_8b"]
    other = dataclasses.replace(eight, kv_heads=32, biases=True, tied=True, layers=30)
    match = nearest(other, template.config_functions())
    assert match is not None and match.name == "llama3_8b" and not match.exact
    assert match.differences == [
        "layers 30 where llama3_8b has 32",
        "key/value heads 32 where llama3_8b has 8",
        "tied embeddings where llama3_8b has none",
        "biases where llama3_8b has none",
    ]
    assert differences(eight, other, "x")[-1] == "no biases"


def test_configs_of_one_shape_are_named_together():
    shapes = {name: litgpt._config_shape(name) for name in litgpt.CONFIGS}
    match = nearest(shapes["Llama-3.1-8B"], shapes)
    assert match is not None and match.exact
    assert {match.name, *match.same} == {"Llama-3-8B", "Llama-3.1-8B"}


def test_a_shape_in_words():
    eight = template.config_functions()["llama3_8b"]
    assert described(eight) == (
        "32 layers, hidden size 4096, 32 attention heads (8 key/value), FFN width 14336 "
        "(SwiGLU), vocabulary 128256, untied, no biases, 8,030,261,248 parameters"
    )
