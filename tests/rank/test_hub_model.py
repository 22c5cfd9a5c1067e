"""The job's own model as a rank builds it from its config.json: a parity run compares the two
splits' updates in float32 even when the config says bfloat16, as every published Llama, Qwen
and Gemma config does (in bfloat16, most entries of a correct one-step update round away, and
two right splits were reported to differ by 100 %)."""

import json

import pytest

from translator.rank.context import RunContext
from translator.spec import BatchSpec

TINY_BF16 = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_attention_heads": 2,
    "num_key_value_heads": 2,
    "num_hidden_layers": 1,
    "vocab_size": 64,
    "torch_dtype": "bfloat16",
}


def context(tmp_path, parity: bool) -> RunContext:
    config = tmp_path / "config.json"
    config.write_text(json.dumps(TINY_BF16))
    spec = BatchSpec(global_batch_size=2, micro_batch_size=1, world_size=2)
    return RunContext(
        spec,
        tmp_path / "c",
        tmp_path,
        1,
        "tiny",
        16,
        0,
        0,
        2,
        "cpu",
        model_config=config,
        parity=parity,
    )


@pytest.mark.framework
@pytest.mark.parametrize("parity, dtype", [(True, "float32"), (False, "bfloat16")])
def test_a_parity_run_builds_a_bfloat16_config_in_float32(tmp_path, parity, dtype):
    pytest.importorskip("transformers")
    from translator.rank import hub_model

    built = hub_model.from_config(context(tmp_path, parity))
    assert {str(p.dtype) for p in built.parameters()} == {f"torch.{dtype}"}


@pytest.mark.framework
def test_the_parity_record_names_the_precision_the_step_ran_in(tmp_path):
    """Each run's record says its weights' precision, and the comparison reports both."""
    import torch

    from translator.launch import parity_compare
    from translator.rank import parity_rank

    for side, dtype in (("a", torch.float32), ("b", torch.bfloat16)):
        layer = torch.nn.Linear(2, 2).to(dtype)
        before = parity_rank.snapshot(layer.named_parameters())
        (tmp_path / side).mkdir()
        parity_rank.write(tmp_path / side, 0, 1.0, before, layer.named_parameters())
    a, b = (parity_compare.read(tmp_path / side) for side in "ab")
    assert a is not None and b is not None
    diff = parity_compare.compare(a, b)
    assert diff.dtypes == ("float32", "bfloat16")
