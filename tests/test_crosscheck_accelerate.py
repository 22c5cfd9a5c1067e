"""The accelerate backend against accelerate's own code: load_config_from_file loads what
batchspec renders with the world it was given, ParallelismConfig agrees on the sizes, and a
TrainingArguments file inspected with its accelerate config takes the world from it."""

import re
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from strategies import specs

from translator.cli.inspect import inspect_all
from translator.frameworks import FRAMEWORKS
from translator.reading import Launch, Reading
from translator.render import render

pytest.importorskip("accelerate")
from translator.frameworks.accelerate.verdict import load, parallelism_total  # noqa: E402

pytestmark = pytest.mark.framework
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "accelerate"


@settings(max_examples=60, deadline=None)
@given(specs(pipeline=False))
def test_accelerate_loads_the_rendered_config_with_its_world(spec):
    text = render(spec, FRAMEWORKS["accelerate"]).text
    config = load(Reading("accelerate.yaml", "accelerate", text))
    assert config.num_processes == spec.world_size
    assert config.num_machines * (spec.world_size // config.num_machines) == spec.world_size
    total = parallelism_total(config)
    if spec.tensor_parallel_size * spec.context_parallel_size > 1:
        assert total == spec.world_size
    else:
        assert total is None


@pytest.mark.parametrize(
    "name, agrees", [("valid/tp_hsdp.yaml", True), ("invalid/parallel_sizes_mismatch.yaml", False)]
)
def test_parallelism_sizes_checked_as_accelerate_does(name, agrees):
    path = FIXTURES / name
    config = load(Reading(str(path), "accelerate", path.read_text()))
    assert (parallelism_total(config) == config.num_processes) is agrees


def test_trainingarguments_take_the_world_and_accumulation_from_accelerate(tmp_path):
    args = tmp_path / "sft.yaml"
    args.write_text("per_device_train_batch_size: 4\ngradient_accumulation_steps: 8\n")
    accelerate = FIXTURES / "valid" / "deepspeed_zero2.yaml"
    done, unusable = inspect_all([str(accelerate), str(args)], None, Launch())
    assert not unusable
    hf = next(i for i in done if i.reading.framework == "hf")
    # 8 processes from the accelerate file; its DeepSpeed accumulation 4 wins over the 8
    assert (hf.spec.world_size, hf.spec.gradient_accumulation_steps, hf.spec.global_batch_size) == (
        8,
        4,
        128,
    )
    assert any(
        f.code == "accelerate-accumulation-override" and f.where.startswith(str(args))
        for f in hf.findings
    )


@settings(max_examples=60, deadline=None)
@given(spec=specs(pipeline=False), override=st.none() | st.integers(1, 64))
def test_the_files_together_give_the_batch_accelerate_launch_runs(tmp_path_factory, spec, override):
    """A rendered TrainingArguments file inspected with the rendered accelerate config, as
    `accelerate launch --config_file A train.py --config T` runs them: the world is
    accelerate's own ``num_processes`` (as its loader reads it), and an accumulation in its
    ``deepspeed_config`` replaces the file's, so the global batch is micro × that × DP."""
    assume(override is None or spec.tensor_parallel_size * spec.context_parallel_size == 1)
    folder = tmp_path_factory.mktemp("together")
    accelerate_yaml = render(spec, FRAMEWORKS["accelerate"]).text
    if override is not None:
        accelerate_yaml = accelerate_yaml.replace(
            "distributed_type: MULTI_GPU",
            f"distributed_type: DEEPSPEED\ndeepspeed_config:\n"
            f"  gradient_accumulation_steps: {override}",
        )
        accelerate_yaml = re.sub(
            r"(deepspeed_config:\n(?:  .*\n)*?  gradient_accumulation_steps:)"
            r" \d+",
            rf"\1 {override}",
            accelerate_yaml,
        )
    (folder / "accelerate.yaml").write_text(accelerate_yaml)
    # (hf.yaml written by hand: render refuses TP/CP in a TrainingArguments file)
    (folder / "hf.yaml").write_text(
        f"per_device_train_batch_size: {spec.micro_batch_size}\n"
        f"gradient_accumulation_steps: "
        f"{spec.gradient_accumulation_steps}\n"
    )
    config = load(Reading("accelerate.yaml", "accelerate", accelerate_yaml))
    done, unusable = inspect_all(
        [str(folder / "accelerate.yaml"), str(folder / "hf.yaml")], None, Launch()
    )
    assert not unusable
    hf = next(i for i in done if i.reading.framework == "hf")
    runs_with = (
        (config.deepspeed_config or {}).get("gradient_accumulation_steps")
        if override is not None
        else spec.gradient_accumulation_steps
    )
    dp = config.num_processes // (spec.tensor_parallel_size * spec.context_parallel_size)
    assert hf.spec.world_size == config.num_processes == spec.world_size
    assert hf.spec.gradient_accumulation_steps == runs_with
    assert hf.spec.global_batch_size == spec.micro_batch_size * runs_with * dp


def test_split_batches_divides_over_the_data_parallel_ranks_of_the_accelerate_mesh(tmp_path):
    """split_batches with accelerate's TP 2 × dp_shard 2 on 4 processes: the 8 rows of a
    micro-step split over DP 2, so 4 per device, and the global batch stays 8 × 2."""
    (tmp_path / "a.yaml").write_text(
        "distributed_type: FSDP\nnum_machines: 1\nnum_processes: 4\nparallelism_config:\n"
        "  parallelism_config_dp_shard_size: 2\n  parallelism_config_tp_size: 2\n"
    )
    (tmp_path / "t.yaml").write_text(
        "per_device_train_batch_size: 8\n"
        "gradient_accumulation_steps: 2\n"
        "accelerator_config:\n  split_batches: true\n"
    )
    done, _ = inspect_all([str(tmp_path / "a.yaml"), str(tmp_path / "t.yaml")], None, Launch())
    hf = next(i for i in done if i.reading.framework == "hf")
    assert (hf.spec.micro_batch_size, hf.spec.data_parallel_size, hf.spec.global_batch_size) == (
        4,
        2,
        16,
    )
