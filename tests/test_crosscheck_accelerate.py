"""The accelerate backend against accelerate's own code: load_config_from_file loads what
batchspec renders with the world it was given, ParallelismConfig agrees on the sizes, and a
TrainingArguments file inspected with its accelerate config takes the world from it."""

from pathlib import Path

import pytest
from hypothesis import given, settings

from strategies import specs
from translator.backends import BACKENDS
from translator.cli.inspect import inspect_all
from translator.reading import Launch, Reading
from translator.render import render

pytest.importorskip("accelerate")
from translator.crosscheck.accelerate import load, parallelism_total  # noqa: E402

pytestmark = pytest.mark.framework
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "accelerate"


@settings(max_examples=60, deadline=None)
@given(specs(pipeline=False))
def test_accelerate_loads_the_rendered_config_with_its_world(spec):
    text = render(spec, BACKENDS["accelerate"]).text
    config = load(Reading("accelerate.yaml", "accelerate", text))
    assert config.num_processes == spec.world_size
    assert config.num_machines * (spec.world_size // config.num_machines) == spec.world_size
    total = parallelism_total(config)
    if spec.tensor_parallel_size * spec.context_parallel_size > 1:
        assert total == spec.world_size
    else:
        assert total is None


@pytest.mark.parametrize("name, agrees", [("valid/tp_hsdp.yaml", True),
                                          ("invalid/parallel_sizes_mismatch.yaml", False)])
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
    assert (hf.spec.world_size, hf.spec.gradient_accumulation_steps,
            hf.spec.global_batch_size) == (8, 4, 128)
    assert any(f.code == "accelerate-accumulation-override" and f.where.startswith(str(args))
               for f in hf.findings)
