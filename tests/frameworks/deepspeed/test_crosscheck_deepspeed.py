"""Rendered DeepSpeed JSON fed to DeepSpeed's own DeepSpeedConfig gives the intended triple."""

import json

import pytest
from hypothesis import given, settings
from strategies import specs

from translator.frameworks import get
from translator.render import render
from translator.spec import BatchSpec
from translator.words.errors import ConfigError

pytest.importorskip("deepspeed")
from translator.frameworks.deepspeed.verdict import resolve  # noqa: E402

pytestmark = pytest.mark.framework
backend = get("deepspeed")


def launched(spec):
    """What DeepSpeed sees at launch: every rank from torch.distributed, plus the data-parallel
    size from a model-parallel unit when Megatron-style tensor/pipeline parallelism is used."""
    mpu_dp = None
    if not spec.deepspeed_autotp and spec.tensor_parallel_size * spec.pipeline_parallel_size > 1:
        mpu_dp = spec.data_parallel_size
    return spec.world_size, mpu_dp


@settings(max_examples=300, deadline=None)
@given(specs())
def test_deepspeed_derives_the_intended_triple(spec):
    config = json.loads(render(spec, backend).text)
    got = resolve(config, *launched(spec))
    tp_factor = spec.tensor_parallel_size if spec.deepspeed_autotp else 1
    assert got["train_batch_size"] == spec.global_batch_size * tp_factor
    assert got["train_micro_batch_size_per_gpu"] == spec.micro_batch_size
    assert got["gradient_accumulation_steps"] == spec.gradient_accumulation_steps
    # Samples per optimizer step: DeepSpeed's triple over the ranks that see distinct data.
    assert got["train_batch_size"] // tp_factor == spec.global_batch_size


def test_autotp_trap_deepspeed_refuses_the_data_parallel_triple():
    spec = BatchSpec(
        global_batch_size=64,
        micro_batch_size=2,
        world_size=8,
        tensor_parallel_size=2,
        deepspeed_autotp=True,
    )
    naive = {
        "train_batch_size": 64,
        "train_micro_batch_size_per_gpu": 2,
        "gradient_accumulation_steps": 8,
        "tensor_parallel": {"autotp_size": 2},
    }
    with pytest.raises(AssertionError, match="train_batch_size is not equal to"):
        resolve(naive, spec.world_size)
    resolve(json.loads(render(spec, backend).text), spec.world_size)


def test_deepspeed_floors_where_batchspec_refuses():
    # DeepSpeed derives gas = 31 // 4 // 2 = 3 and then fails its own check; we refuse first.
    with pytest.raises(AssertionError, match=r"31 != 4 \* 3 \* 2"):
        resolve({"train_batch_size": 31, "train_micro_batch_size_per_gpu": 4}, 2)
    with pytest.raises(ConfigError, match="nearest are 24 .* and 32"):
        BatchSpec(global_batch_size=31, micro_batch_size=4, world_size=2)


def test_deepspeed_reads_back_what_the_reader_expects():
    for config, world, triple in [
        ({"train_batch_size": 64, "train_micro_batch_size_per_gpu": 2}, 8, (64, 2, 4)),
        ({"train_batch_size": 64, "gradient_accumulation_steps": 2}, 8, (64, 4, 2)),
        ({"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2}, 8, (32, 2, 2)),
    ]:
        got = resolve(config, world)
        assert (
            got["train_batch_size"],
            got["train_micro_batch_size_per_gpu"],
            got["gradient_accumulation_steps"],
        ) == triple
