"""Checks and fixes from the model a job names (issue 28, item 3): the tensor-parallel size
against the attention heads and query groups, the pipeline stages against the layers, a
tensor-parallel group across nodes, each by the rules of the framework that trains the model;
and every parallel size or world a fix offers fits the model and the nodes."""

import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from run_batchspec import codes, inspect, run
from strategies import cluster_layouts, model_parts

from translator.checks.advice import general_findings
from translator.frameworks import get
from translator.frameworks.shared.hf_deepspeed import AUTOTP_SPLIT
from translator.model.model_split import ModelParts
from translator.reading import Reading
from translator.shell import Word
from translator.spec import BatchSpec
from translator.words.errors import ConfigError, InputError

#: A Megatron-LM Llama-3-8B launch written as NVIDIA's examples/llama scripts are: arrays of
#: flags, the vocabulary left to the tokenizer (so the model's parameter count is unknown, but
#: its layers and heads are not).
LLAMA3_8B = """#!/bin/bash
GPUS_PER_NODE=8
NUM_NODES={nodes}
DISTRIBUTED_ARGS=(
    --nproc_per_node $GPUS_PER_NODE
    --nnodes $NUM_NODES
    --master_addr $MASTER_ADDR
    --master_port 6000
)
MODEL_ARGS=(
    --use-mcore-models
    --num-layers 32
    --hidden-size 4096
    --ffn-hidden-size 14336
    --num-attention-heads 32
    --group-query-attention
    --num-query-groups 8
    --kv-channels 128
    --seq-length 8192
    --max-position-embeddings 8192
    --position-embedding-type rope
    --swiglu
    --untie-embeddings-and-output-weights
    --disable-bias-linear
    --normalization RMSNorm
)
TRAINING_ARGS=(
    --micro-batch-size 1
    --global-batch-size {global_batch}
    --train-samples 1953125000
    --lr 0.00015
    --bf16
)
MODEL_PARALLEL_ARGS=(
    --tensor-model-parallel-size {tp}
    --pipeline-model-parallel-size {pp}
    {more}
    --sequence-parallel
    --use-distributed-optimizer
)
torchrun ${{DISTRIBUTED_ARGS[@]}} pretrain_gpt.py \\
    ${{MODEL_ARGS[@]}} \\
    ${{TRAINING_ARGS[@]}} \\
    ${{MODEL_PARALLEL_ARGS[@]}} \\
    --tokenizer-type HuggingFaceTokenizer \\
    --tokenizer-model meta-llama/Meta-Llama-3-8B
"""


def line_of(path, text: str) -> str:
    """``path:N``, N the line of ``path`` that holds ``text``."""
    lines = path.read_text().splitlines()
    return f"{path}:{next(i for i, line in enumerate(lines, 1) if text in line)}"


def llama_job(tmp_path, nodes=2, global_batch=128, tp=4, pp=2, more=""):
    path = tmp_path / "train_llama3_8b.sh"
    path.write_text(
        LLAMA3_8B.format(nodes=nodes, global_batch=global_batch, tp=tp, pp=pp, more=more)
    )
    return path


#: How a hint names each spec field it offers a value for.
OFFERED = {
    "a world size of": "world_size",
    "tensor-parallel size": "tensor_parallel_size",
    "pipeline-parallel size": "pipeline_parallel_size",
}
_OFFER = re.compile(
    r"(?:^use |, or )(" + "|".join(map(re.escape, OFFERED)) + r") (\d+(?: or \d+)*)"
)


def offers(hint: str) -> list[tuple[str, int]]:
    """``(field, value)`` for every size or world the hint's "use ..." part offers."""
    return [
        (OFFERED[name], int(v))
        for name, values in _OFFER.findall(hint.split(";")[0])
        for v in values.split(" or ")
    ]


# The published layout and the one batchspec used to offer ------------------------------------


def test_a_published_layout_of_the_model_has_no_finding_about_its_split(tmp_path):
    code, out = inspect(llama_job(tmp_path))
    assert code == 0
    assert not {"model-tensor-heads", "model-pipeline-layers", "tensor-across-nodes"} & set(
        codes(out)
    )


def test_a_world_that_does_not_divide_offers_no_size_the_model_refuses(tmp_path):
    # 3 nodes × 8 over TP 4 × PP 4: the sizes that divide the world per model are 3 and 6,
    # which the 32 heads and the 32 layers refuse; 2 fits both, and the nodes.
    code, out = inspect(llama_job(tmp_path, nodes=3, global_batch=96, tp=4, pp=4))
    assert code == 1
    hint = codes(out)["world-not-divisible"]["hint"]
    assert (
        hint
        == "use a world size of 16 or 32, or tensor-parallel size 2, or pipeline-parallel size 2"
    )


def test_the_tensor_parallel_size_must_divide_the_heads_and_the_query_groups(tmp_path):
    job = llama_job(tmp_path, nodes=3, global_batch=96, tp=3, pp=1)
    code, out = inspect(job)
    assert code == 1
    found = codes(out)["model-tensor-heads"]
    assert found["severity"] == "error"
    assert found["where"] == line_of(job, "--tensor-model-parallel-size")
    assert (
        "tensor-parallel size 3 does not split the 32 attention heads and the 8 key/value"
        in (found["message"])
    )
    assert found["hint"].startswith("use tensor-parallel size 2 or 4 (global 96 kept")
    assert "span two nodes" in codes(out)["tensor-across-nodes"]["message"]


def test_megatron_takes_a_tensor_parallel_size_that_is_a_multiple_of_the_query_groups(tmp_path):
    # megatron-core: num_query_groups must be a multiple or a divisor of the TP size; 16 ranks
    # share the 8 groups two by two. Only the nodes are against it.
    code, out = inspect(llama_job(tmp_path, nodes=2, global_batch=64, tp=16, pp=1))
    assert code == 0, out["findings"]
    found = codes(out)
    assert "model-tensor-heads" not in found
    across = found["tensor-across-nodes"]
    assert across["severity"] == "warning"
    assert across["message"].startswith("tensor-parallel size 16 is more than the 8 GPUs of a node")
    assert across["hint"].startswith("use tensor-parallel size 8 ")


@pytest.mark.parametrize(
    "pp, more, fails",
    [
        (3, "", True),  # 32 layers over 3 stages
        (4, "", False),
        (3, "--decoder-first-pipeline-num-layers 12 --decoder-last-pipeline-num-layers 10", False),
        # the job sets its stages' layers: batchspec leaves their split to Megatron
        (
            4,
            "--decoder-first-pipeline-num-layers 6 --decoder-last-pipeline-num-layers 6 "
            "--num-layers-per-virtual-pipeline-stage 3",
            False,
        ),
        (2, "--num-virtual-stages-per-pipeline-rank 3", True),  # 16 layers a stage, 3 chunks
        (2, "--num-virtual-stages-per-pipeline-rank 4", False),
        # 32 layers + the embedding + the loss = 34 slots over 2 stages: 17 each
        (
            2,
            "--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split",
            False,
        ),
        (4, "--account-for-embedding-in-pipeline-split", True),  # 33 slots over 4 stages
    ],
)
def test_megatron_splits_the_layers_evenly_over_the_stages(tmp_path, pp, more, fails):
    code, out = inspect(llama_job(tmp_path, nodes=3, global_batch=192, tp=2, pp=pp, more=more))
    found = codes(out).get("model-pipeline-layers")
    assert (found is not None) == fails, out["findings"]
    assert code == (1 if fails else 0)
    if fails:
        assert "megatron-core refuses it" in found["message"]
        assert "--decoder-first-pipeline-num-layers" in found["hint"]
        for field, value in offers(found["hint"]):
            assert field == "pipeline_parallel_size"
            stages = value * (2 if "virtual" in more else 1) * (3 if "3" in more else 1)
            assert (32 + more.count("account-for")) % stages == 0


def test_the_message_says_the_uneven_split_megatron_refuses(tmp_path):
    job = llama_job(tmp_path, nodes=3, global_batch=192, tp=2, pp=3)
    _, out = inspect(job)
    found = codes(out)["model-pipeline-layers"]
    assert found["where"] == line_of(job, "--pipeline-model-parallel-size")
    assert found["message"].startswith(
        "pipeline-parallel size 3 does not divide the 32 layers of the model"
    )
    assert found["hint"].startswith("use pipeline-parallel size 2 or 4 (global 192 kept")


#: A nanotron config as its examples write it, with the SmolLM-135M shape (9 heads, 3 key/value
#: heads, 30 layers).
NANOTRON = """general:
  project: smollm
  run: smollm-135m
model:
  init_method:
    std: 0.041666666666666664
  model_config:
    bos_token_id: 0
    eos_token_id: 0
    hidden_act: silu
    hidden_size: 576
    initializer_range: 0.02
    intermediate_size: 1536
    is_llama_config: true
    max_position_embeddings: 2048
    num_attention_heads: 9
    num_hidden_layers: 30
    num_key_value_heads: 3
    rms_norm_eps: 1.0e-05
    tie_word_embeddings: true
    vocab_size: 49152
parallelism:
  dp: 4
  pp: 1
  tp: {tp}
  tp_linear_async_communication: true
  tp_mode: REDUCE_SCATTER
tokens:
  batch_accumulation_per_replica: 1
  micro_batch_size: 8
  sequence_length: 2048
  train_steps: 600000
"""


@pytest.mark.parametrize("tp, fails", [(3, False), (2, True), (9, True)])
def test_nanotron_needs_the_tensor_parallel_size_to_divide_both_head_counts(tmp_path, tp, fails):
    path = tmp_path / "smollm.yaml"
    path.write_text(NANOTRON.format(tp=tp))
    code, out = inspect(path, "--framework", "nanotron")
    found = codes(out).get("model-tensor-heads")
    assert (found is not None) == fails, out["findings"]
    assert code == (1 if fails else 0)
    if fails:
        assert "nanotron's attention needs it to divide them" in found["message"]
        assert found["where"] == line_of(path, "  tp: ")
        assert "(or the query groups" not in found["message"]


def test_deepspeed_autotp_splits_the_heads_unevenly_and_says_so(tmp_path):
    folder = tmp_path / "Meta-Llama-3-8B"
    folder.mkdir()
    (folder / "config.json").write_text(
        json.dumps(
            {
                "architectures": ["LlamaForCausalLM"],
                "model_type": "llama",
                "hidden_size": 4096,
                "intermediate_size": 14336,
                "num_attention_heads": 32,
                "num_key_value_heads": 8,
                "num_hidden_layers": 32,
                "vocab_size": 128256,
            }
        )
    )
    (tmp_path / "ds_autotp.json").write_text(
        json.dumps(
            {
                "train_micro_batch_size_per_gpu": "auto",
                "gradient_accumulation_steps": "auto",
                "train_batch_size": "auto",
                "zero_optimization": {"stage": 1},
                "tensor_parallel": {"autotp_size": 3},
                "bf16": {"enabled": "auto"},
            },
            indent=2,
        )
    )
    job = tmp_path / "train.sh"
    job.write_text(
        "torchrun --nproc_per_node 6 train.py --model_name_or_path ./Meta-Llama-3-8B "
        "--deepspeed ds_autotp.json --per_device_train_batch_size 2 "
        "--gradient_accumulation_steps 3 --output_dir out --bf16\n"
    )
    code, out = inspect(job)
    assert code == 0, out["findings"]
    found = codes(out)["model-uneven-split"]
    assert found["where"] == line_of(tmp_path / "ds_autotp.json", "autotp_size")
    assert found["message"].startswith(
        "tensor-parallel size 3 splits the 8 key/value heads (query groups) of the model"
    )
    assert found["message"].endswith("unevenly: 3 on 2 ranks, 2 on 1 rank")
    assert found["hint"].endswith(
        "use tensor-parallel size 2 (global 12 kept, the accumulation re-solved)"
    )


def test_plan_warns_of_a_tensor_parallel_group_across_nodes():
    result = run(
        "plan", "--global-batch", "64", "--micro-batch", "1", "--nnodes", "2",
        "--nproc-per-node", "8", "--tp", "16", "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    found = codes(json.loads(result.stdout))["tensor-across-nodes"]
    assert found["hint"].startswith("use tensor-parallel size 8")


# Every offer fits, over random models and layouts -------------------------------------------


def megatron_rules(flags: tuple[str, ...] = ()):
    reading = Reading("run.sh", "megatron", "")
    reading.arguments = [Word(flag, 1) for flag in flags]
    return get("megatron").split_rules(reading, {})


RULES = {
    "megatron": megatron_rules(),
    "megatron, embedding in the split": megatron_rules(
        ("--account-for-embedding-in-pipeline-split",)
    ),
    "megatron-deepspeed": megatron_rules(("--deepspeed", "--num-key-value-heads")),
    "nanotron": get("nanotron").split_rules(Reading("c.yaml", "nanotron", ""), {}),
    "deepspeed autotp": AUTOTP_SPLIT,
}


def assert_fits(field: str, value: int, values: dict, parts: ModelParts, rules) -> None:
    """An offered size or world fits the model, the rules and the nodes, and solves."""
    per_node, virtual = values["gpus_per_node"], values.get("virtual_pipeline_stages")
    changed = values | {field: value}
    if field == "world_size":
        assert value % per_node == 0, f"world {value} is not whole nodes of {per_node}"
        changed = {k: v for k, v in changed.items() if k not in ("nodes", "gpus_per_node")}
    elif field == "tensor_parallel_size":
        assert per_node % value == 0, f"tensor-parallel {value} spans nodes of {per_node}"
        assert rules is AUTOTP_SPLIT or rules.tensor_fits(parts, value), (field, value)
        assert rules.even().tensor_fits(parts, value), "an uneven split offered"
    else:
        assert rules.pipeline_fits(parts, value, virtual), (field, value)
    try:
        BatchSpec.model_validate(changed, context={"model": (parts, rules)})
    except ConfigError as err:  # a global that no micro-batch splits needs changing as well
        assert values["global_batch_size"] % values["micro_batch_size"], err.findings
        assert err.findings[0].code == "global-not-divisible"


@settings(max_examples=400, deadline=None)
@given(
    model_parts(),
    st.sampled_from(sorted(RULES)),
    cluster_layouts(),
    st.sampled_from([None, 2, 3, 4]),
)
def test_every_size_a_fix_offers_fits_the_model_and_the_nodes(parts, name, values, virtual):
    rules = RULES[name]
    if virtual is not None and values["pipeline_parallel_size"] > 1:
        values = values | {"virtual_pipeline_stages": virtual}
    try:
        spec = BatchSpec.model_validate(values, context={"model": (parts, rules)})
    except ConfigError as err:
        hints = [f.hint for f in err.findings if f.code == "world-not-divisible"]
    except InputError:
        return
    else:
        hints = [f.hint for f in general_findings(spec, parts, rules) if f.hint]
        found = {f.code for f in general_findings(spec, parts, rules)}
        tp, pp = spec.tensor_parallel_size, spec.pipeline_parallel_size
        assert ("model-tensor-heads" in found) == (not rules.tensor_fits(parts, tp))
        assert ("model-pipeline-layers" in found) == (
            not rules.pipeline_fits(parts, pp, virtual if pp > 1 else None)
        )
        assert ("tensor-across-nodes" in found) == bool(values["gpus_per_node"] % tp)
    for hint in hints:
        for field, value in offers(hint):
            assert_fits(field, value, values, parts, rules)


def test_layers_per_virtual_stage_must_divide_each_stages_layers(tmp_path):
    more = "--num-layers-per-virtual-pipeline-stage 3"
    code, out = inspect(llama_job(tmp_path, nodes=3, global_batch=96, tp=2, pp=4, more=more))
    assert code == 1
    found = codes(out)["model-pipeline-layers"]
    assert found["message"].startswith(
        "--num-layers-per-virtual-pipeline-stage 3 does not divide the 8 layers of each of the "
        "4 pipeline stages"
    )
    assert found["hint"] == "use --num-layers-per-virtual-pipeline-stage 2 or 4"
    assert found["where"].endswith("train_llama3_8b.sh:37")
    ok = llama_job(tmp_path, nodes=3, global_batch=96, tp=2, pp=4, more=more.replace("3", "4"))
    assert inspect(ok)[0] == 0


def test_the_worlds_an_expert_grid_fix_names_are_whole_nodes():
    spec = BatchSpec(
        global_batch_size=48,
        micro_batch_size=1,
        nodes=2,
        gpus_per_node=8,
        expert_parallel_size=3,
        num_experts=12,
    )
    (found,) = [f for f in general_findings(spec) if f.code == "expert-grid"]
    assert found.hint.startswith("use a world size of 24, or ")  # 12 would be 1.5 nodes


#: A Megatron-DeepSpeed Llama-2 launch written as its examples_deepspeed scripts are: sizes in
#: variables, the DeepSpeed JSON written by the script, its own --num-key-value-heads flag.
MEGATRON_DEEPSPEED = """#!/bin/bash
set -ex
DS_CONFIG=./ds_config.json
TP={tp}
PP={pp}
ZERO_STAGE=1
GPUS_PER_NODE=8
NNODES={nodes}
NUM_LAYERS=32
NUM_HEADS=32
NUM_KV_HEADS=4
MICRO_BATCH_SIZE=1
GLOBAL_BATCH_SIZE=96
cat <<EOT > $DS_CONFIG
{{
  "train_batch_size" : $GLOBAL_BATCH_SIZE,
  "train_micro_batch_size_per_gpu": $MICRO_BATCH_SIZE,
  "steps_per_print": 1,
  "zero_optimization": {{"stage": $ZERO_STAGE}},
  "bf16": {{"enabled": true}}
}}
EOT
ds_args=""
ds_args=" --deepspeed ${{ds_args}}"
ds_args=" --deepspeed_config=$DS_CONFIG ${{ds_args}}"
ds_args=" --zero-stage=$ZERO_STAGE ${{ds_args}}"
DISTRIBUTED_ARGS="--nproc_per_node $GPUS_PER_NODE --nnodes $NNODES --node_rank 0"
torchrun $DISTRIBUTED_ARGS \\
       pretrain_gpt.py \\
       --tensor-model-parallel-size $TP \\
       --pipeline-model-parallel-size $PP \\
       --num-layers $NUM_LAYERS \\
       --hidden-size 4096 \\
       --ffn-hidden-size 11008 \\
       --num-attention-heads $NUM_HEADS \\
       --micro-batch-size $MICRO_BATCH_SIZE \\
       --global-batch-size $GLOBAL_BATCH_SIZE \\
       --seq-length 4096 \\
       --max-position-embeddings 4096 \\
       --tokenizer-type GPTSentencePieceTokenizer \\
       --bf16 \\
       --swiglu \\
       --num-key-value-heads $NUM_KV_HEADS \\
       $ds_args
"""


def test_megatron_deepspeed_divides_its_key_value_heads_by_the_tensor_parallel_size(tmp_path):
    # megatron-core would share the 4 groups over 8 ranks; Megatron-DeepSpeed's attention
    # divides the key/value heads (core.utils.divide) and stops.
    path = tmp_path / "pretrain_llama2_distributed.sh"
    path.write_text(MEGATRON_DEEPSPEED.format(tp=8, pp=1, nodes=1))
    code, out = inspect(path)
    assert code == 1
    found = codes(out)["model-tensor-heads"]
    assert "the 4 key/value heads (query groups)" in found["message"]
    assert "Megatron-DeepSpeed needs it to divide them" in found["message"]
    assert found["hint"].startswith("use tensor-parallel size 4 ")


def test_megatron_deepspeeds_pipeline_splits_the_layers_unevenly_and_says_so(tmp_path):
    path = tmp_path / "pretrain_llama2_distributed.sh"
    path.write_text(MEGATRON_DEEPSPEED.format(tp=2, pp=3, nodes=3))
    code, out = inspect(path)
    assert code == 0, out["findings"]
    found = codes(out)["model-uneven-split"]
    assert found["severity"] == "warning"
    assert found["message"].endswith("unevenly: 11 on 2 stages, 10 on 1 stage")
    assert found["hint"].startswith(
        "the longest stage sets the pace; use pipeline-parallel size 2 or 4"
    )


#: A Llama-2-13B launch in the style of llm-jp's Megatron-LM scripts: sizes in variables, the
#: tensor-parallel size left to the environment.
LLAMA2_13B = """#!/bin/bash
NUM_GPU_PER_NODE=8
NUM_NODES=4
HIDDEN_SIZE=5120
FFN_HIDDEN_SIZE=13824 # intermediate size (HuggingFace)
NUM_LAYERS=40
NUM_HEADS=40
SEQ_LENGTH=4096
TENSOR_PARALLEL_SIZE=${TP_SIZE}
PIPELINE_PARALLEL_SIZE=1
MICRO_BATCH_SIZE=1
GLOBAL_BATCH_SIZE=128
torchrun --nproc_per_node $NUM_GPU_PER_NODE --nnodes $NUM_NODES pretrain_gpt.py \\
  --tensor-model-parallel-size ${TENSOR_PARALLEL_SIZE} \\
  --pipeline-model-parallel-size ${PIPELINE_PARALLEL_SIZE} \\
  --num-layers ${NUM_LAYERS} \\
  --hidden-size ${HIDDEN_SIZE} \\
  --ffn-hidden-size ${FFN_HIDDEN_SIZE} \\
  --num-attention-heads ${NUM_HEADS} \\
  --seq-length ${SEQ_LENGTH} \\
  --micro-batch-size ${MICRO_BATCH_SIZE} \\
  --global-batch-size ${GLOBAL_BATCH_SIZE} \\
  --use-mcore-models
"""


def test_the_sizes_listed_for_an_unknown_tensor_parallel_size_fit_the_model_and_nodes(tmp_path):
    path = tmp_path / "13b.sh"
    path.write_text(LLAMA2_13B)
    code, out = inspect(path)
    assert code == 0
    message = codes(out)["batch-depends-on-unknown"]["message"]
    listed = [int(v) for v in re.findall(r"tensor_parallel_size (\d+) →", message)]
    # 16 and 32 divide the world and the batch, but not the 40 heads, nor the 8 GPUs of a node
    assert listed == [1, 2, 4, 8]
