"""The HF Trainer backend against transformers' own code: HfArgumentParser loads what batchspec
renders, TrainingArguments' field list bounds the typo check, and HfTrainerDeepSpeedConfig
agrees with batchspec on which DeepSpeed JSONs the Trainer refuses."""

import dataclasses
import json

import pytest
import yaml
from hypothesis import given, settings
from strategies import specs

from translator.frameworks import FRAMEWORKS
from translator.inspection import inspect_file
from translator.reading import Launch
from translator.render import render

transformers = pytest.importorskip("transformers")
from transformers import HfArgumentParser, TrainingArguments  # noqa: E402

from translator.frameworks.shared.hf_verdict import deepspeed_mismatch  # noqa: E402

pytestmark = pytest.mark.framework


@pytest.mark.parametrize("name", ["hf", "llamafactory"])
@settings(max_examples=60, deadline=None)
@given(spec=specs(pipeline=False))
def test_the_trainer_loads_the_rendered_yaml_and_counts_the_spec(tmp_path_factory, name, spec):
    """Both files are TrainingArguments to transformers (LLaMA-Factory's are a subclass's),
    beside LLaMA-Factory's own ``stage`` (its FinetuningArguments field) in its file."""
    if spec.tensor_parallel_size > 1 or spec.context_parallel_size > 1:
        return  # refused by the backend (tests/test_render.py)
    path = tmp_path_factory.mktemp(name) / f"{name}.yaml"
    text = render(spec, FRAMEWORKS[name]).text
    path.write_text(text)
    own = {"stage"} if name == "llamafactory" else set()
    assert (
        set(yaml.safe_load(text)) - {f.name for f in dataclasses.fields(TrainingArguments)} == own
    )
    (args,) = HfArgumentParser(TrainingArguments).parse_yaml_file(str(path), allow_extra_keys=True)
    assert args.per_device_train_batch_size == spec.micro_batch_size
    assert args.gradient_accumulation_steps == spec.gradient_accumulation_steps
    # Trainer.get_total_train_batch_size: per device × accumulation × DP (= world here)
    assert (
        args.per_device_train_batch_size * args.gradient_accumulation_steps * spec.world_size
    ) == spec.global_batch_size
    assert args.auto_find_batch_size is False


def test_no_real_training_argument_is_called_a_typo():
    import dataclasses

    fields = {f.name for f in dataclasses.fields(TrainingArguments)}
    text = "\n".join(f"{name}: 1" for name in sorted(fields)) + "\n"
    reading = FRAMEWORKS["hf"].read(text, "all.yaml")
    assert [f.message for f in reading.findings if f.code == "batch-key-typo"] == []
    typo = FRAMEWORKS["hf"].read("per_device_train_batchsize: 4\n", "t.yaml")
    assert [f.code for f in typo.findings] == ["batch-key-typo"]


def write(tmp_path, yaml_text: str, ds: dict):
    (tmp_path / "ds.json").write_text(json.dumps(ds))
    path = tmp_path / "sft.yaml"
    path.write_text(yaml_text)
    return path


YAML = "per_device_train_batch_size: 4\ngradient_accumulation_steps: 8\ndeepspeed: ds.json\n"


@pytest.mark.parametrize(
    "ds, refused",
    [
        (
            {
                "train_batch_size": "auto",
                "train_micro_batch_size_per_gpu": "auto",
                "gradient_accumulation_steps": "auto",
            },
            False,
        ),
        ({"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 8}, False),
        ({"train_batch_size": 256, "train_micro_batch_size_per_gpu": 4}, False),  # 8 × 4 × 8
        ({"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 8}, True),
        ({"train_batch_size": 128, "gradient_accumulation_steps": "auto"}, True),  # DP, not world
        ({"gradient_accumulation_steps": "8"}, True),  # a JSON string
    ],
)
def test_batchspec_and_transformers_refuse_the_same_deepspeed_jsons(tmp_path, ds, refused):
    path = write(tmp_path, YAML, ds)
    found = inspect_file(str(path), launch=Launch(world_size=8))
    ours = [f for f in found.findings if f.code == "hf-deepspeed-mismatch"]
    (args,) = HfArgumentParser(TrainingArguments).parse_dict(
        {
            "per_device_train_batch_size": 4,
            "gradient_accumulation_steps": 8,
            "use_cpu": True,
            "report_to": "none",
        }
    )
    if refused:
        with pytest.raises(ValueError, match="mismatch TrainingArguments values") as theirs:
            deepspeed_mismatch(ds, args, world=8)
        assert ours, "transformers refuses, batchspec did not"
        key = next(iter(k for k in ds if k in str(theirs.value)))
        assert key in ours[0].message
    else:
        deepspeed_mismatch(ds, args, world=8)
        assert not ours


def test_split_batches_and_auto_find_are_named(tmp_path):
    path = tmp_path / "args.yaml"
    path.write_text(
        "per_device_train_batch_size: 32\ngradient_accumulation_steps: 2\n"
        "auto_find_batch_size: true\naccelerator_config:\n  split_batches: true\n"
    )
    found = inspect_file(str(path), launch=Launch(world_size=8))
    codes = {f.code for f in found.findings}
    assert {"hf-split-batches", "hf-auto-find-batch-size"} <= codes
    assert (found.spec.global_batch_size, found.spec.micro_batch_size) == (64, 4)
