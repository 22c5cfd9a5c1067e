"""Megatron-Bridge / NeMo configs: the three generations of keys, the traps (silent round-down,
ramp-up, Lightning accumulation, NeMo 2's overwritten model sizes, the recipe's values), render
and read-back, update and convert keeping every other byte."""

from functools import partial

import pytest
from run_batchspec import codes, read_and_inspect, run, run_json

from translator.frameworks import FRAMEWORKS
from translator.frameworks.megatron_bridge import rules
from translator.inspection import inspect_reading
from translator.reading import Launch
from translator.render import render
from translator.spec import BatchSpec

MB = FRAMEWORKS["megatron-bridge"]
#: A Megatron-Bridge or NeMo YAML ``cfg.yaml``, read and inspected at ``world`` and ``sizes``.
inspect = partial(read_and_inspect, MB)

BRIDGE = """\
# overrides
train:
  train_iters: 10
  global_batch_size: 64   # samples per step
  micro_batch_size: 2
model:
  seq_length: 4096
  tensor_model_parallel_size: 2
  pipeline_model_parallel_size: 1
  context_parallel_size: 1
optimizer:
  lr: 1.0e-4
"""
NEMO1 = """\
trainer:
  devices: 8
  num_nodes: 2
  accumulate_grad_batches: 1 # do not modify
model:
  micro_batch_size: 4
  global_batch_size: 256
  tensor_model_parallel_size: 2
  pipeline_model_parallel_size: 1
"""
NEMO2 = """\
data:
  global_batch_size: 512
  micro_batch_size: 1
trainer:
  devices: 8
  num_nodes: 4
  accumulate_grad_batches: 1
  strategy:
    tensor_model_parallel_size: 4
    pipeline_model_parallel_size: 2
    context_parallel_size: 2
"""
LITGPT = """\
model_name: pythia-160m
out_dir: out/pretrain
devices: auto
num_nodes: 1
train:
  global_batch_size: 512
  micro_batch_size: 4
optimizer:
  class_path: torch.optim.AdamW
"""
AXOLOTL = "base_model: x\nmicro_batch_size: 2\ngradient_accumulation_steps: 4\n"


@pytest.mark.parametrize(
    "text, ours", [(BRIDGE, True), (NEMO1, True), (NEMO2, True), (LITGPT, False), (AXOLOTL, False)]
)
def test_claims_nvidia_configs_and_not_litgpt_or_axolotl(text, ours):
    assert rules.claims(text) is ours


def test_each_generation_is_counted_by_megatron_cores_rule():
    bridge = inspect(BRIDGE, 16)
    assert (bridge.spec.data_parallel, bridge.spec.accumulation) == (8, 4)
    nemo1 = inspect(NEMO1)  # the world is trainer.devices × trainer.num_nodes
    assert (nemo1.spec.world, nemo1.spec.data_parallel, nemo1.spec.accumulation) == (16, 8, 8)
    nemo2 = inspect(NEMO2)
    assert (nemo2.spec.world, nemo2.spec.data_parallel, nemo2.spec.accumulation) == (32, 2, 256)


def test_an_older_generation_names_its_megatron_bridge_keys():
    (note,) = [f for f in inspect(NEMO2).findings if f.code == "megatron-bridge-generation"]
    assert "NeMo 2" in note.message
    assert "data.global_batch_size → train.global_batch_size" in note.hint
    assert "trainer.strategy.tensor_model_parallel_size → model.tensor_model_parallel_size" in (
        note.hint
    )
    assert "megatron-bridge-generation" not in codes(inspect(BRIDGE, 16))


def test_a_size_the_override_file_leaves_out_is_the_recipes_not_a_default():
    text = "train:\n  global_batch_size: 32\n  micro_batch_size: 1\nlogger:\n  log_interval: 1\n"
    got = inspect(text, 8)
    assert got.spec is None and "megatron-bridge-recipe-value" in codes(got)
    assert "tensor_parallel_size" not in got.values
    sized = inspect(
        text, 8, tensor_parallel_size=2, pipeline_parallel_size=1, context_parallel_size=1
    )
    assert (sized.spec.data_parallel, sized.spec.accumulation) == (4, 8)


def test_nemo1_sizes_default_to_one():
    got = inspect(NEMO1.replace("  tensor_model_parallel_size: 2\n", ""))
    assert got.spec.tensor_parallel_size == 1 and got.spec.data_parallel == 16


def test_decrease_batch_size_if_needed_runs_the_rounded_batch_and_the_hint_solves_it():
    text = BRIDGE.replace("global_batch_size: 64", "global_batch_size: 100").replace(
        "  micro_batch_size: 2\n", "  micro_batch_size: 2\n  decrease_batch_size_if_needed: true\n"
    )
    got = inspect(text, 16)  # micro 2 × DP 8 = 16: 100 runs as 96
    (warn,) = [f for f in got.findings if f.code == "megatron-bridge-rounds-down"]
    assert got.spec.global_batch == 96 and "silently runs 96" in warn.message
    assert "96 or 112" in warn.hint
    for fixed in (96, 112):
        assert BatchSpec(
            global_batch_size=fixed, micro_batch_size=2, world_size=16, tensor_parallel_size=2
        )
    divisible = inspect(text.replace("100", "64"), 16)
    assert "megatron-bridge-decrease-batch" in codes(divisible)
    assert divisible.spec.global_batch == 64


def test_lightning_accumulation_other_than_one_is_an_error():
    got = inspect(NEMO1.replace("accumulate_grad_batches: 1", "accumulate_grad_batches: 4"))
    (err,) = [f for f in got.findings if f.code == "megatron-bridge-accumulation"]
    assert err.severity == "error" and "trainer.accumulate_grad_batches: 1" in err.hint


def test_rampup_and_the_unused_schedule_are_warnings():
    text = BRIDGE.replace(
        "  micro_batch_size: 2\n",
        "  micro_batch_size: 2\n  rampup_batch_size: [16, 16, 1000]\n"
        '  step_batch_size_schedule: "0:32 1M:64"\n',
    )
    found = {f.code: f for f in inspect(text, 16).findings}
    assert found["megatron-bridge-rampup"].severity == "warning"
    assert "[16, 16, 1000]" in found["megatron-bridge-rampup"].message
    assert found["megatron-bridge-schedule-unused"].severity == "warning"


def test_an_interpolation_reads_as_the_key_it_names_and_an_unresolved_one_is_unknown():
    text = (
        NEMO1 + "  encoder_seq_length: 2048\n  data:\n    seq_length: ${model.encoder_seq_length}\n"
    )
    text = text.replace("global_batch_size: 256", "global_batch_size: ${model.gbs}\n  gbs: 256")
    got = inspect(text)
    assert got.spec.global_batch == 256
    odd = inspect(NEMO1.replace("global_batch_size: 256", "global_batch_size: ${oc.env:GBS}"))
    assert odd.spec is None and "unknown-value" in codes(odd)


def test_a_misspelt_batch_key_is_an_error():
    got = inspect(BRIDGE.replace("micro_batch_size", "micro_batch_sise"), 16)
    assert [f.severity for f in got.findings if f.code == "batch-key-typo"] == ["error"]


def test_malformed_yaml_is_one_line_naming_the_file(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("train:\n  global_batch_size: [1\n")
    result = run("inspect", path, "--framework", "megatron-bridge")
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert result.stderr.strip().startswith(f"batchspec: error: {path}:")


@pytest.mark.parametrize(
    "fields",
    [
        {"global_batch_size": 64, "micro_batch_size": 2, "world_size": 8},
        {
            "global_batch_size": 32,
            "micro_batch_size": 1,
            "world_size": 16,
            "tensor_parallel_size": 2,
            "context_parallel_size": 2,
        },
        {
            "global_batch_size": 128,
            "micro_batch_size": 2,
            "world_size": 16,
            "pipeline_parallel_size": 2,
            "virtual_pipeline_stages": 2,
            "sequence_length": 4096,
        },
    ],
)
def test_a_rendered_file_reads_back_as_the_spec(fields):
    spec = BatchSpec(**fields)
    out = render(spec, MB)
    got = inspect_reading(MB, MB.read(out.text, out.filename), Launch(spec.world))
    assert got.spec.model_dump() == spec.model_dump() | {"nodes": None, "gpus_per_node": None}
    assert all(f.severity == "info" for f in got.findings)


def test_update_changes_the_values_and_keeps_every_other_byte(tmp_path):
    path = tmp_path / "o.yaml"
    path.write_text(BRIDGE)
    result = run(
        "update",
        path,
        "--from-world-size",
        16,
        "--world-size",
        32,
        "--global-batch",
        128,
        "--tp",
        4,
        "--in-place",
        "--json",
    )
    assert result.exit_code == 0
    assert path.read_text() == BRIDGE.replace(
        "global_batch_size: 64", "global_batch_size: 128"
    ).replace("tensor_model_parallel_size: 2", "tensor_model_parallel_size: 4")


def test_update_of_a_nemo_world_edits_the_trainer_and_nothing_else(tmp_path):
    path = tmp_path / "gpt.yaml"
    path.write_text(NEMO1)
    result = run("update", path, "--world-size", 32, "--in-place", "--json")
    assert result.exit_code == 0 and path.read_text() == NEMO1.replace(
        "num_nodes: 2", "num_nodes: 4"
    )


def test_update_refuses_a_size_the_file_does_not_hold(tmp_path):
    path = tmp_path / "o.yaml"
    path.write_text(BRIDGE.replace("  pipeline_model_parallel_size: 1\n", ""))
    result = run("update", path, "--from-world-size", "16", "--pp", "2", "--pp", "2", "--in-place")
    assert result.exit_code == 2
    assert "add pipeline_model_parallel_size under model: by hand" in result.stderr


def test_convert_writes_a_bridge_file_from_nemo1_that_reads_the_same(tmp_path):
    (tmp_path / "gpt.yaml").write_text(NEMO1)
    result = run(
        "convert",
        tmp_path / "gpt.yaml",
        "--to",
        "megatron-bridge",
        "--out",
        tmp_path / "out",
        "--json",
    )
    assert result.exit_code == 0
    got = inspect((tmp_path / "out" / MB.filename).read_text(), 16)
    assert (got.spec.global_batch, got.spec.micro, got.spec.tensor_parallel_size) == (256, 4, 2)


@pytest.mark.framework
def test_the_verdict_accepts_a_good_file_and_refuses_a_wrong_one(tmp_path):
    path = tmp_path / "o.yaml"
    path.write_text(BRIDGE)
    result, out = run_json("validate", path, "--world-size", 16, "--with-framework")
    (file,) = out["files"]
    (accepts,) = [f for f in file["findings"] if f["code"] == "framework-accepts"]
    assert (
        result.exit_code == 0
        and "runs 4 micro-batches of 2 on each of 8 data-parallel ranks" in accepts["message"]
    )
    result, out = run_json("validate", path, "--world-size", 12, "--with-framework")
    (file,) = out["files"]
    (refuses,) = [f for f in file["findings"] if f["code"] == "framework-refuses"]
    assert result.exit_code == 1
    assert (
        "global batch size (64) is not divisible by micro batch size (2) times data parallel size (6)"
        in refuses["message"]
    )


@pytest.mark.framework
def test_the_verdict_runs_the_calculator_with_the_rampup_and_the_round_down():
    from translator.frameworks.megatron_bridge.verdict import verdict

    text = BRIDGE.replace(
        "  micro_batch_size: 2\n", "  micro_batch_size: 2\n  rampup_batch_size: [16, 16, 1000]\n"
    )
    assert "the ramp-up starts it at global 16" in verdict(inspect(text, 16), 16)
    down = BRIDGE.replace("global_batch_size: 64", "global_batch_size: 100").replace(
        "  micro_batch_size: 2\n", "  micro_batch_size: 2\n  decrease_batch_size_if_needed: true\n"
    )
    assert "global 96, rounded down from 100" in verdict(inspect(down, 16), 16)


def test_the_interleaved_schedule_rules_apply_to_virtual_stages():
    text = BRIDGE.replace(
        "  pipeline_model_parallel_size: 1\n",
        "  pipeline_model_parallel_size: 4\n  virtual_pipeline_model_parallel_size: 2\n",
    ).replace("tensor_model_parallel_size: 2", "tensor_model_parallel_size: 1")
    got = inspect(text, 16)  # DP 4, M = 64 / (2 × 4) = 8: interleaves in groups of 4
    assert got.spec.virtual_pipeline_stages == 2 and "virtual-pipeline-microbatches" not in codes(
        got
    )
    few = inspect(text.replace("global_batch_size: 64", "global_batch_size: 16"), 16)  # M = 2 < PP
    (err,) = [f for f in few.findings if f.code == "virtual-pipeline-microbatches"]
    assert err.severity == "error" and "at least PP=4 micro-batches" in err.message


def test_a_null_global_batch_is_one_micro_batch_per_step_and_a_wrong_one_is_an_error():
    got = inspect(BRIDGE.replace("global_batch_size: 64", "global_batch_size: null"), 16)
    assert got.spec.global_batch == 16 and "megatron-bridge-global-default" in codes(got)
    wrong = inspect(BRIDGE.replace("global_batch_size: 64", "global_batch_size: many"), 16)
    assert "invalid-value" in codes(wrong) and "megatron-bridge-global-default" not in codes(wrong)
