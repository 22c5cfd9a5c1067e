"""``render --into`` and ``convert --into``: a batch (a spec's, or a job's) written into
configs the user already has, every other byte kept (comments, key order, the keys batchspec does not read), as ``update`` writes;
a folder takes them in each of its configs a ``--to`` framework claims.

Styles: an Axolotl example YAML with comments beside its batch keys, an HF TrainingArguments
YAML naming a DeepSpeed JSON with its numbers written out, an accelerate multi-node config.
"""

import json
from pathlib import Path

import pytest
from run_batchspec import run

SPEC = "global_batch_size: 256\nmicro_batch_size: 4\nnodes: 4\ngpus_per_node: 8\n"
AXOLOTL = """base_model: meta-llama/Llama-3.1-8B
load_in_8bit: false

# batch: per GPU, then accumulated
micro_batch_size: 2  # fits 80 GB
gradient_accumulation_steps: 4
sequence_len: 4096
learning_rate: 0.0002
"""
DEEPSPEED = """{
  "train_batch_size": 128,
  "train_micro_batch_size_per_gpu": 4,
  "gradient_accumulation_steps": 2,
  "zero_optimization": {"stage": 2}
}
"""
ACCELERATE = """compute_environment: LOCAL_MACHINE
distributed_type: DEEPSPEED
num_machines: 2
num_processes: 16
"""


@pytest.fixture
def folder(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    Path("spec.yaml").write_text(SPEC)
    configs = Path("configs")
    configs.mkdir()
    for name, text in (
        ("lora.yml", AXOLOTL),
        ("ds_config.json", DEEPSPEED),
        ("multi_node.yaml", ACCELERATE),
    ):
        (configs / name).write_text(text)
    return configs


def test_into_a_file_changes_its_batch_keys_and_keeps_every_other_byte(folder):
    result = run("render", "spec.yaml", "--to", "axolotl", "--into", "configs/lora.yml")
    assert result.exit_code == 0, result.output
    assert (folder / "lora.yml").read_text() == AXOLOTL.replace("size: 2  #", "size: 4  #").replace(
        "steps: 4", "steps: 2"
    )
    assert result.output.splitlines()[:2] == [
        "configs/lora.yml:5: micro_batch_size 2 → 4",
        "configs/lora.yml:6: gradient_accumulation_steps 4 → 2",
    ]


def test_a_file_of_another_framework_is_refused_naming_both(folder):
    result = run("render", "spec.yaml", "--to", "deepspeed", "--into", "configs/lora.yml")
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "batchspec: error: configs/lora.yml: is axolotl's config, not deepspeed's: give --to "
        "axolotl to write into it, or --out to write a new deepspeed file"
    )
    assert (folder / "lora.yml").read_text() == AXOLOTL


def test_into_a_folder_writes_each_config_a_framework_claims_and_lists_the_rest(folder):
    result = run("render", "spec.yaml", "--to", "all", "--into", "configs", "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["files"] == {
        "axolotl": "configs/lora.yml",
        "deepspeed": "configs/ds_config.json",
        "accelerate": "configs/multi_node.yaml",
    }
    assert out["refused"]["megatron"] == "no megatron config in configs to write into"
    ds = json.loads((folder / "ds_config.json").read_text())
    assert (ds["train_batch_size"], ds["gradient_accumulation_steps"]) == (256, 2)
    assert (folder / "multi_node.yaml").read_text() == ACCELERATE.replace(
        "machines: 2", "machines: 4"
    ).replace("processes: 16", "processes: 32")
    assert Path("spec.yaml").read_text() == SPEC  # a spec in the folder is no config


def test_strict_writes_nothing_when_a_framework_has_no_config_there(folder):
    result = run(
        "render", "spec.yaml", "--to", "deepspeed,megatron", "--into", "configs", "--strict"
    )
    assert result.exit_code == 2
    assert "no megatron config in configs to write into" in result.stderr
    assert (folder / "ds_config.json").read_text() == DEEPSPEED


def test_a_config_moves_the_deepspeed_json_it_names_with_it(folder):
    Path("args.yaml").write_text(
        "output_dir: out\nper_device_train_batch_size: 4\ngradient_accumulation_steps: 4\n"
        "deepspeed: configs/ds_config.json\n"
    )
    result = run("render", "spec.yaml", "--to", "hf", "--into", "args.yaml")
    assert result.exit_code == 0, result.output
    assert "gradient_accumulation_steps: 2" in Path("args.yaml").read_text().splitlines()
    ds = json.loads((folder / "ds_config.json").read_text())
    assert (ds["train_batch_size"], ds["gradient_accumulation_steps"]) == (256, 2)


def test_out_and_into_are_one_or_the_other(folder):
    both = run("render", "spec.yaml", "--to", "axolotl", "--into", "configs/lora.yml", "--out", "o")
    neither = run("render", "spec.yaml", "--to", "axolotl")
    assert (both.exit_code, neither.exit_code) == (2, 2)
    assert "give --out or --into, one of them" in both.stderr + neither.stderr
    assert not Path("o").exists()


def test_one_file_takes_one_framework(folder):
    result = run("render", "spec.yaml", "--to", "axolotl,deepspeed", "--into", "configs/lora.yml")
    assert result.exit_code == 2
    assert "give --into a folder" in result.stderr


#: A job on four nodes of eight, as published torchrun jobs write it: convert reads its batch
#: (256 = 4 × 2 × 32) and writes it into configs the user has for another framework.
JOB = """#!/bin/bash
torchrun --nnodes 4 --nproc_per_node 8 --rdzv_backend c10d --rdzv_endpoint $HEAD:29500 \\
    train.py --per_device_train_batch_size 4 --gradient_accumulation_steps 2 --output_dir out
"""


def test_convert_into_a_file_keeps_every_other_byte(folder):
    Path("train.sh").write_text(JOB)
    result = run("convert", "train.sh", "--to", "axolotl", "--into", "configs/lora.yml")
    assert result.exit_code == 0, result.output
    assert (folder / "lora.yml").read_text() == AXOLOTL.replace("size: 2  #", "size: 4  #").replace(
        "steps: 4", "steps: 2"
    )


def test_convert_into_a_folder_is_all_or_none_with_the_jobs_layout(folder):
    Path("train.sh").write_text(JOB)
    strict = run(
        "convert", "train.sh", "--to", "deepspeed,megatron", "--into", "configs", "--strict"
    )
    assert strict.exit_code == 2 and (folder / "ds_config.json").read_text() == DEEPSPEED
    result = run("convert", "train.sh", "--to", "all", "--into", "configs", "--json")
    assert result.exit_code == 0, result.output
    assert set(json.loads(result.stdout)["files"]) == {"axolotl", "deepspeed", "accelerate"}
    ds = json.loads((folder / "ds_config.json").read_text())
    assert (ds["train_batch_size"], ds["train_micro_batch_size_per_gpu"]) == (256, 4)
    assert (folder / "multi_node.yaml").read_text() == ACCELERATE.replace(
        "machines: 2", "machines: 4"
    ).replace("processes: 16", "processes: 32")


def test_convert_takes_out_or_into_one_of_them(folder):
    Path("train.sh").write_text(JOB)
    neither = run("convert", "train.sh", "--to", "axolotl")
    wrong = run("convert", "train.sh", "--to", "deepspeed", "--into", "configs/lora.yml")
    assert neither.exit_code == 2 and "give --out or --into, one of them" in neither.stderr
    assert wrong.exit_code == 2 and "is axolotl's config, not deepspeed's" in wrong.stderr
    assert (folder / "lora.yml").read_text() == AXOLOTL
