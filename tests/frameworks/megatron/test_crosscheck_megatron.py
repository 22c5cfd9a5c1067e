"""Rendered Megatron args fed to megatron-core's micro-batch calculator give the intended
number of micro-batches (the accumulation Megatron has no flag for)."""

import pytest
from hypothesis import given, settings
from strategies import specs

from translator.frameworks import get
from translator.render import render
from translator.spec import BatchSpec
from translator.words.errors import ConfigError

pytest.importorskip("megatron.core")
from translator.frameworks.megatron.verdict import num_microbatches  # noqa: E402

pytestmark = pytest.mark.framework
backend = get("megatron")


@settings(max_examples=500, deadline=None)
@given(specs())
def test_megatron_runs_the_intended_number_of_microbatches(spec):
    args = backend.read(render(spec, backend).text, backend.filename)
    model = (
        args.count("--tensor-model-parallel-size")
        * args.count("--pipeline-model-parallel-size")
        * args.count("--context-parallel-size")
    )
    data_parallel = spec.world_size // model
    glob, micro = args.count("--global-batch-size"), args.count("--micro-batch-size")
    m = num_microbatches(glob, micro, data_parallel)
    assert m == spec.gradient_accumulation_steps
    assert glob == m * micro * data_parallel == spec.global_batch_size


def test_megatron_and_batchspec_refuse_the_same_split():
    with pytest.raises(
        AssertionError,
        match=r"global batch size \(60\) is not divisible by micro "
        r"batch size \(2\) times data parallel size \(4\)",
    ):
        num_microbatches(60, 2, 4)
    with pytest.raises(ConfigError, match="nearest are 56 .* and 64"):
        BatchSpec(global_batch_size=60, micro_batch_size=2, world_size=4)


def test_calculator_is_reusable_between_checks():
    assert [num_microbatches(64, 2, 4), num_microbatches(64, 4, 4)] == [8, 4]
