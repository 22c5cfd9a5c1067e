import json
from pathlib import Path

import pytest
import yaml
from run_batchspec import code_list

from translator.frameworks import FRAMEWORKS, get, get_many
from translator.reading import Launch
from translator.render import render
from translator.spec import BatchSpec
from translator.words.errors import InputError

axolotl = get("axolotl")
deepspeed = get("deepspeed")
megatron = get("megatron")


def spec(**kw):
    base = dict(global_batch_size=128, micro_batch_size=2, world_size=16)
    return BatchSpec(**(base | kw))


def test_registry_lists_every_backend_with_the_contract():
    for name, module in FRAMEWORKS.items():
        assert module.name == name
        assert Path(module.template).is_file() and module.filename
        assert all(callable(f) for f in (module.context, module.read, module.check))


def test_unknown_backend_names_the_choices():
    with pytest.raises(
        InputError, match="unknown framework fsdp; choose from accelerate, axolotl, deepspeed"
    ):
        get_many("deepspeed,fsdp")
    assert [b.name for b in get_many("megatron, megatron,axolotl")] == ["megatron", "axolotl"]


# DeepSpeed -------------------------------------------------------------------------------------


def test_deepspeed_json_holds_a_consistent_triple():
    config = json.loads(render(spec(), deepspeed).text)
    assert config == {
        "train_batch_size": 128,
        "train_micro_batch_size_per_gpu": 2,
        "gradient_accumulation_steps": 4,
    }


def test_deepspeed_with_model_parallelism_holds_the_data_parallel_triple():
    s = spec(tensor_parallel_size=2, pipeline_parallel_size=2)
    r = render(s, deepspeed)
    assert json.loads(r.text)["train_batch_size"] == 128 == 2 * 16 * 4
    assert code_list(r.findings) == ["deepspeed-pipeline-accumulation", "deepspeed-mpu-world"]


def test_deepspeed_autotp_counts_every_rank():
    s = spec(tensor_parallel_size=4, deepspeed_autotp=True)
    r = render(s, deepspeed)
    config = json.loads(r.text)
    assert config["train_batch_size"] == 2 * 16 * 16 == 512
    assert config["tensor_parallel"] == {"autotp_size": 4}
    assert code_list(r.findings) == ["deepspeed-autotp-world"]
    assert "samples per optimizer step are still 128" in r.findings[0].message


def test_deepspeed_pipeline_refuses_zero_2_and_3():
    assert "deepspeed-pipeline-zero" in code_list(
        deepspeed.check(spec(pipeline_parallel_size=2, zero_stage=2))
    )
    assert "deepspeed-pipeline-zero" not in code_list(
        deepspeed.check(spec(pipeline_parallel_size=2, zero_stage=1))
    )


def test_deepspeed_sequence_parallel_and_zero_keys():
    config = json.loads(render(spec(context_parallel_size=2, zero_stage=3), deepspeed).text)
    assert config["sequence_parallel_size"] == 2 and config["zero_optimization"] == {"stage": 3}


# Axolotl ---------------------------------------------------------------------------------------


def test_axolotl_yaml_has_per_rank_keys_and_never_batch_size():
    s = spec(tensor_parallel_size=2, context_parallel_size=2, sequence_length=4096)
    text = render(s, axolotl).text
    config = yaml.safe_load(text)
    assert config == {
        "micro_batch_size": 2,
        "gradient_accumulation_steps": 16,
        "sequence_len": 4096,
        "tensor_parallel_size": 2,
        "context_parallel_size": 2,
    }
    assert (
        "# batchspec: global batch 128 = micro_batch_size 2 × gradient_accumulation_steps 16 × data-parallel 4"
        in text
    )


def test_axolotl_leaves_out_what_is_not_given():
    assert yaml.safe_load(render(spec(), axolotl).text) == {
        "micro_batch_size": 2,
        "gradient_accumulation_steps": 4,
    }


def test_axolotl_has_no_pipeline_parallelism():
    (f,) = axolotl.check(spec(pipeline_parallel_size=2))
    assert f.code == "axolotl-no-pipeline" and f.severity == "error"


# Megatron --------------------------------------------------------------------------------------


def test_megatron_args_have_no_accumulation_flag():
    r = render(spec(tensor_parallel_size=2, sequence_length=2048), megatron)
    assert "--micro-batch-size 2\n" in r.text and "--global-batch-size 128\n" in r.text
    assert "--tensor-model-parallel-size 2\n" in r.text and "--seq-length 2048" in r.text
    assert "accumulation" not in "".join(x for x in r.text.splitlines() if not x.startswith("#"))
    assert code_list(r.findings) == ["megatron-accumulation-implied"]
    assert "128 / (micro 2 × DP 8) = 8 micro-batches" in r.findings[0].message


def test_megatron_writes_the_launch_sizes_when_nodes_are_known():
    text = render(
        BatchSpec(global_batch_size=128, micro_batch_size=2, nodes=2, gpus_per_node=8), megatron
    ).text
    assert "DISTRIBUTED_ARGS=(\n    --nproc_per_node 8\n    --nnodes 2\n)" in text


@pytest.mark.parametrize(
    "pp, accumulation, group, code",
    [
        (1, 8, None, "virtual-pipeline-needs-pp"),
        (4, 2, None, "virtual-pipeline-microbatches"),  # M < PP
        (4, 8, None, None),  # M multiple of PP
        (4, 6, None, "virtual-pipeline-microbatches"),  # remainder 2 < PP 4
        (2, 5, 4, "virtual-pipeline-microbatches"),  # remainder 1 < PP 2
        (2, 6, 4, None),  # remainder 2 >= PP 2
        (2, 6, 8, "virtual-pipeline-microbatches"),  # group > M
    ],
)
def test_interleaved_pipeline_rules(pp, accumulation, group, code):
    s = BatchSpec(
        micro_batch_size=1,
        gradient_accumulation_steps=accumulation,
        data_parallel_size=2,
        pipeline_parallel_size=pp,
        virtual_pipeline_stages=2,
        microbatch_group_size_per_vp_stage=group,
    )
    found = [c for c in code_list(megatron.check(s)) if c != "megatron-accumulation-implied"]
    assert found == ([code] if code else [])


@pytest.mark.parametrize(
    "pp, accumulation, group, near",
    [
        (4, 6, None, (4, 8)),  # N = PP: the multiples of PP
        (2, 5, 4, (4, 6)),  # N > PP: 6 leaves remainder 2 = PP, nearer than the multiple 8
        (2, 9, 8, (8, 10)),
        (3, 13, 6, (12, 15)),
    ],
)
def test_interleaved_pipeline_hint_names_the_nearest_valid_accumulations(
    pp, accumulation, group, near
):
    """Both values offered pass the rule, and no value between them but M's own does."""

    def spec(m):
        return BatchSpec(
            micro_batch_size=1,
            gradient_accumulation_steps=m,
            data_parallel_size=2,
            pipeline_parallel_size=pp,
            virtual_pipeline_stages=2,
            microbatch_group_size_per_vp_stage=group,
        )

    def valid(m):
        return "virtual-pipeline-microbatches" not in code_list(megatron.check(spec(m)))

    (f,) = [f for f in megatron.check(spec(accumulation)) if f.code.startswith("virtual")]
    assert f.hint == f"use accumulation {near[0]} or {near[1]}"
    assert valid(near[0]) and valid(near[1])
    assert not any(valid(m) for m in range(near[0] + 1, near[1]))


def test_megatron_reader_refuses_non_integers():
    reading = megatron.read(
        "ARGS=(\n    --micro-batch-size four\n    --global-batch-size 8\n)\n", "x.sh"
    )
    _, findings = megatron.interpret(reading, Launch(8))
    assert [f.code for f in findings] == ["invalid-value"]
    assert findings[0].where == "x.sh:2" and '--micro-batch-size is "four"' in findings[0].message
