import pytest
from pydantic import ValidationError

from translator.batch.spec_file import build_spec
from translator.spec import OUTPUT_KEYS, BatchSpec
from translator.words.errors import ConfigError, InputError


def test_done_when_example_accumulation_4_and_dp_8():
    spec = BatchSpec(
        global_batch_size=128, micro_batch_size=4, world_size=16, tensor_parallel_size=2
    )
    assert (spec.gradient_accumulation_steps, spec.data_parallel_size) == (4, 8)


def test_effective_batch_size_is_an_alias():
    spec = BatchSpec(effective_batch_size=64, micro_batch_size=2, world_size=8)
    assert spec.global_batch_size == 64 and spec.gradient_accumulation_steps == 4


def test_nodes_times_gpus_give_the_world():
    spec = BatchSpec(
        global_batch_size=64, micro_batch_size=2, nodes=2, gpus_per_node=8, pipeline_parallel_size=2
    )
    assert (spec.world_size, spec.data_parallel_size, spec.gradient_accumulation_steps) == (
        16,
        8,
        4,
    )


def test_world_and_nodes_that_disagree():
    with pytest.raises(ConfigError, match=r"world_size 8 ≠ nodes 2 × gpus_per_node 8 = 16") as err:
        BatchSpec(global_batch_size=64, world_size=8, nodes=2, gpus_per_node=8)
    assert err.value.findings[0].code == "world-nodes-mismatch"


def test_nodes_without_gpus_per_node():
    with pytest.raises(InputError, match="both nodes and gpus_per_node"):
        BatchSpec(global_batch_size=64, nodes=2)


def test_data_parallel_size_may_replace_the_world():
    spec = BatchSpec(
        global_batch_size=64, micro_batch_size=2, data_parallel_size=4, tensor_parallel_size=2
    )
    assert (spec.world_size, spec.gradient_accumulation_steps) == (8, 8)
    with pytest.raises(ConfigError, match=r"data_parallel_size 3 ≠ world 8"):
        BatchSpec(global_batch_size=48, world_size=8, data_parallel_size=3)


def test_world_without_micro_leaves_the_split_open():
    spec = BatchSpec(global_batch_size=64, world_size=8)
    assert not spec.is_decided and spec.data_parallel_size == 8


def test_the_int_views_of_the_batch_counts():
    spec = BatchSpec(global_batch_size=64, micro_batch_size=2, nodes=2, gpus_per_node=4)
    assert (spec.global_batch, spec.micro, spec.accumulation, spec.data_parallel, spec.world) == (
        64,
        2,
        4,
        8,
        8,
    )
    open_split = BatchSpec(global_batch_size=64, world_size=8)
    assert (open_split.global_batch, open_split.data_parallel, open_split.world) == (64, 8, 8)
    for name in ("micro", "accumulation"):
        with pytest.raises(InputError, match="leaves the micro-batch open"):
            getattr(open_split, name)


@pytest.mark.parametrize(
    "field, value",
    [
        ("micro_batch_size", "4"),
        ("micro_batch_size", 4.0),
        ("micro_batch_size", True),
        ("micro_batch_size", 0),
        ("micro_batch_size", -2),
        ("micro_batch_size", 10**60),
        ("micro_batch_size", [4]),
        ("learning_rate", float("nan")),
        ("learning_rate", -1.0),
        ("learning_rate", float("inf")),
        ("zero_stage", 4),
        ("optimizer", "lion"),
        ("adam_beta2", 1.0),
        ("deepspeed_autotp", "yes"),
    ],
)
def test_wrong_types_and_ranges_are_refused(field, value):
    values = {"global_batch_size": 64, "world_size": 8, field: value}
    with pytest.raises(ValidationError) as err:
        BatchSpec(**values)
    assert err.value.errors()[0]["loc"] == (field,)


def test_unknown_keys_are_refused():
    with pytest.raises(ValidationError, match="extra_forbidden|Extra inputs"):
        BatchSpec(global_batch_size=64, world_size=8, global_bach_size=64)


def test_output_has_the_design_keys_in_order_then_set_extras():
    spec = BatchSpec(
        global_batch_size=64,
        micro_batch_size=2,
        world_size=8,
        sequence_length=4096,
        learning_rate=3e-4,
        reference_global_batch_size=128,
    )
    out = spec.output()
    assert tuple(out)[: len(OUTPUT_KEYS)] == OUTPUT_KEYS
    assert out["tokens_per_step"] == 64 * 4096 and out["learning_rate"] == 3e-4
    assert "zero_stage" not in out
    assert build_spec(out, "plan output").output() == out, "a plan output is a valid spec"


def test_every_field_has_a_docstring_in_the_schema():
    props = BatchSpec.model_json_schema()["properties"]
    missing = [name for name, p in props.items() if not p.get("description")]
    assert not missing


@pytest.mark.parametrize(
    "text, message",
    [
        (
            "learning_rate: 3e-4\n",
            "spec.yaml:3: learning_rate is the text '3e-4', not a number (YAML reads 3e-4 as text: "
            "a float needs a dot and a signed exponent): write 0.0003 or 3.0e-4",
        ),
        (
            'global_batch_size: "64"\n',
            "spec.yaml:1: global_batch_size is the text '64', not a number: write 64",
        ),
    ],
)
def test_a_number_written_as_text_says_so_and_how_to_write_it(tmp_path, monkeypatch, text, message):
    """PyYAML (YAML 1.1) reads 3e-4 as a string, as the Axolotl and Trainer YAMLs people copy
    from write it; pydantic's union error named 'learning_rate.float' and '2 more'."""
    from click.testing import CliRunner

    from translator.cli import main

    monkeypatch.chdir(tmp_path)
    base = "global_batch_size: 64\nworld_size: 8\n"
    if text.startswith("global_batch_size"):
        base = "world_size: 8\n"
    (tmp_path / "spec.yaml").write_text(
        (text + base if text.startswith("global") else base + text)
        + "reference_global_batch_size: 32\n"
    )
    result = CliRunner().invoke(main, ["plan", "spec.yaml"])
    assert result.exit_code == 2
    assert result.stderr.strip() == f"batchspec: error: {message}"
