"""inspect / validate / convert / update on configs people already have."""

import json
import os

import pytest
from run_batchspec import run, run_json

AXOLOTL = """\
# Llama-3 LoRA on one 8-GPU node
base_model: meta-llama/Meta-Llama-3-8B   # the Hub id
load_in_8bit: false

datasets:
  - path: data/train.jsonl   # alpaca format
    type: alpaca

sequence_len: 4096
sample_packing: false

micro_batch_size: 2            # per GPU
gradient_accumulation_steps: 4 # 2 × 4 × 8 GPUs = 64
learning_rate: 2.0e-4          # tuned at global 64
"""

DEEPSPEED = """{
    "train_batch_size": 64,
    "train_micro_batch_size_per_gpu": 2,
    "gradient_accumulation_steps": 4,
    "bf16": {"enabled": true},
    "zero_optimization": {"stage": 2, "overlap_comm": true}
}
"""

MEGATRON = """#!/bin/bash
GPUS_PER_NODE=8
NNODES=${NNODES:-1}
MBS=2
GBS=64
DISTRIBUTED_ARGS=(--nproc_per_node $GPUS_PER_NODE --nnodes $NNODES)
ARGS=(
    --micro-batch-size $MBS
    --global-batch-size $GBS   # samples per step
    --tensor-model-parallel-size 2
)
torchrun ${DISTRIBUTED_ARGS[@]} pretrain_gpt.py ${ARGS[@]} --lr 3e-4
"""


@pytest.fixture
def files(tmp_path):
    paths = {}
    for name, text in [("ax.yml", AXOLOTL), ("ds.json", DEEPSPEED), ("train.sh", MEGATRON)]:
        paths[name] = tmp_path / name
        paths[name].write_text(text)
    return paths


# inspect ---------------------------------------------------------------------------------------


def test_inspect_one_file_gives_one_object(files):
    result, out = run_json("inspect", files["train.sh"])
    assert result.exit_code == 0
    assert (
        out["framework"],
        out["world_size"],
        out["data_parallel_size"],
        out["gradient_accumulation_steps"],
    ) == ("megatron", 8, 4, 8)


def test_inspect_several_gives_one_object_and_the_world_flags_apply(files):
    result, out = run_json(
        "inspect", files["ax.yml"], files["ds.json"], "--nnodes", 1, "--nproc-per-node", 8
    )
    assert result.exit_code == 0 and [o["global_batch_size"] for o in out["files"]] == [64, 64]


def test_inspect_without_a_world_lists_common_sizes(files):
    result, out = run_json("inspect", files["ax.yml"])
    assert result.exit_code == 0 and out["global_batch_size"] is None
    (f,) = [f for f in out["findings"] if f["code"] == "world-unknown"]
    assert "8 → global 64 (micro 2 × accumulation 4 × DP 8)" in f["message"]
    assert out["micro_batch_size"] == 2


def test_inspect_wrong_world_exits_1_with_deepspeeds_words(files):
    result, out = run_json("inspect", files["ds.json"], "--world-size", 16)
    assert result.exit_code == 1
    (f,) = [f for f in out["findings"] if f["severity"] == "error"]
    assert f["code"] == "deepspeed-batch-mismatch" and f["where"] == f"{files['ds.json']}:2"
    assert (
        "train_batch_size is not equal to micro_batch_per_gpu * gradient_acc_step * "
        "world_size 64 != 2 * 4 * 16" in f["message"]
    )
    assert "gradient_accumulation_steps 2 keeps train_batch_size 64" in f["hint"]


def test_inspect_mixed_usable_and_unusable_exits_2(files, tmp_path):
    (tmp_path / "bad.json").write_text("{")
    result = run("inspect", files["train.sh"], tmp_path / "bad.json", "--json")
    assert result.exit_code == 2
    out = json.loads(result.stdout)
    assert out["files"][0]["framework"] == "megatron"
    assert "not valid JSON" in out["files"][1]["error"]


def test_framework_override(files, tmp_path):
    odd = tmp_path / "launch.conf"
    odd.write_text(MEGATRON)
    assert run("inspect", odd, "--framework", "megatron").exit_code == 0
    (tmp_path / "notes.md").write_text("hello\n")
    result = run("inspect", tmp_path / "notes.md")
    assert result.exit_code == 2 and "cannot tell which framework" in result.stderr


def test_axolotl_pair_mismatch_in_the_trainers_words(tmp_path):
    (tmp_path / "ds.json").write_text(
        '{"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": "auto"}'
    )
    (tmp_path / "ax.yml").write_text(
        "micro_batch_size: 2\ngradient_accumulation_steps: 4\ndeepspeed: ds.json\n"
    )
    result, out = run_json("inspect", tmp_path / "ax.yml", "--world-size", 8)
    assert result.exit_code == 1
    codes = [f["code"] for f in out["findings"]]
    assert "axolotl-deepspeed-mismatch" in codes and "hf-auto" in codes
    msg = next(f["message"] for f in out["findings"] if f["code"] == "axolotl-deepspeed-mismatch")
    assert "ds train_micro_batch_size_per_gpu=4 vs hf per_device_train_batch_size=2" in msg


def test_a_deepspeed_path_not_found_here_is_a_warning_not_a_false_error(tmp_path):
    """Axolotl and the HF Trainer open the path from where the training is launched, which
    need not be where batchspec runs: the DeepSpeed side is unchecked, the rest still read."""
    (tmp_path / "ax.yml").write_text("micro_batch_size: 2\ndeepspeed: configs/zero9.json\n")
    result, out = run_json("inspect", tmp_path / "ax.yml", "--world-size", 8)
    assert result.exit_code == 0, result.output
    (f,) = [f for f in out["findings"] if f["code"] == "missing-file"]
    assert f["where"] == f"{tmp_path / 'ax.yml'}:2" and f["severity"] == "warning"
    assert "the DeepSpeed side was not checked" in f["message"]
    assert out["micro_batch_size"] == 2


# validate --------------------------------------------------------------------------------------


def test_validate_groups_findings_by_file(files, tmp_path):
    bad = tmp_path / "bad.sh"
    bad.write_text(
        "torchrun --nproc_per_node 8 x.py --micro-batch-size 4 --global-batch-size 100\n"
    )
    result, out = run_json("validate", files["train.sh"], bad)
    assert result.exit_code == 1
    assert [len([f for f in o["findings"] if f["severity"] == "error"]) for o in out["files"]] == [
        0,
        1,
    ]
    human = run("validate", files["train.sh"], bad)
    assert f"{files['train.sh']} (megatron): ok" in human.stdout
    assert "nearest are 96 (accumulation 3) and 128 (accumulation 4)" in human.stdout


@pytest.mark.framework
def test_validate_with_framework_reports_deepspeeds_verdict(files):
    pytest.importorskip("deepspeed")
    _, ok = run_json("validate", files["ds.json"], "--world-size", 8, "--with-framework")
    verdict = ok["files"][0]["findings"][-1]
    assert verdict["code"] == "framework-accepts" and "train_batch_size 64" in verdict["message"]
    _, bad = run_json("validate", files["ds.json"], "--world-size", 16, "--with-framework")
    verdict = bad["files"][0]["findings"][-1]
    assert verdict["code"] == "framework-refuses"
    assert "64 != 2 * 4 * 16" in verdict["message"]


@pytest.mark.framework
def test_validate_with_framework_megatron_and_axolotl(files):
    pytest.importorskip("megatron.core")
    pytest.importorskip("axolotl")
    result, out = run_json(
        "validate", files["train.sh"], files["ax.yml"], "--world-size", 8, "--with-framework"
    )
    verdicts = [o["findings"][-1] for o in out["files"]]
    assert [v["code"] for v in verdicts] == ["framework-accepts", "framework-accepts"]
    assert "runs 8 micro-batches" in verdicts[0]["message"]
    assert "batch_size 64, micro 2, accumulation 4" in verdicts[1]["message"]


def test_validate_with_framework_warns_naming_what_to_install(files, monkeypatch):
    import dataclasses

    from translator.plugin import registry as frameworks

    real = frameworks.get
    monkeypatch.setattr(
        frameworks,
        "get",
        lambda name: dataclasses.replace(real(name), requires=("torch", "no_such_framework_here")),
    )
    code, out = run_json("validate", files["train.sh"], "--with-framework")
    v = out["files"][0]["findings"][-1]
    assert code.exit_code == 0 and v["code"] == "framework-not-installed"
    assert v["severity"] == "warning"
    assert v["message"] == (
        "megatron's own validator was not run: it needs no_such_framework_here, not installed here"
    )
    assert v["hint"] == "pip install 'batchspec[megatron]'"


# convert ---------------------------------------------------------------------------------------


def test_convert_keeps_the_batch(files, tmp_path):
    out_dir = tmp_path / "out"
    result = run(
        "convert",
        files["ax.yml"],
        "--to",
        "deepspeed,megatron",
        "--out",
        out_dir,
        "--world-size",
        8,
    )
    assert result.exit_code == 0, result.output
    ds = json.loads((out_dir / "deepspeed.json").read_text())
    assert (ds["train_batch_size"], ds["gradient_accumulation_steps"]) == (64, 4)
    _, back = run_json("inspect", out_dir / "megatron.sh", "--world-size", 8)
    assert (back["global_batch_size"], back["gradient_accumulation_steps"]) == (64, 4)


def test_convert_needs_the_world(files, tmp_path):
    result = run("convert", files["ax.yml"], "--to", "megatron", "--out", tmp_path / "o")
    assert result.exit_code == 2 and "give --world-size" in result.stderr
    assert not (tmp_path / "o").exists()


def test_convert_of_a_wrong_config_exits_1_and_writes_nothing(files, tmp_path):
    result = run(
        "convert", files["ds.json"], "--to", "megatron", "--out", tmp_path / "o", "--world-size", 16
    )
    assert result.exit_code == 1 and not (tmp_path / "o").exists()


# update ----------------------------------------------------------------------------------------


def test_update_done_when_example_keeps_every_comment_and_key(files):
    path = files["ax.yml"]
    result = run("update", path, "--world-size", 16, "--global-batch", 64, "--in-place")
    assert result.exit_code == 0, result.output
    assert path.read_text() == AXOLOTL.replace(
        "gradient_accumulation_steps: 4 #", "gradient_accumulation_steps: 2 #"
    )
    assert f"{path}:13: gradient_accumulation_steps 4 → 2" in result.stdout


def test_update_prints_by_default_and_leaves_the_file(files):
    result = run("update", files["ds.json"], "--world-size", 4, "--from-world-size", 8)
    assert result.exit_code == 0
    assert result.stdout == DEEPSPEED.replace(
        '"gradient_accumulation_steps": 4', '"gradient_accumulation_steps": 8'
    )
    assert files["ds.json"].read_text() == DEEPSPEED


def test_update_edits_the_variables_and_the_launch_line(files, tmp_path):
    out = tmp_path / "new.sh"
    result = run("update", files["train.sh"], "--world-size", 32, "--micro-batch", 1, "-o", out)
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert "MBS=1\n" in text and "NNODES=${NNODES:-4}" in text and "GBS=64" in text
    _, again = run_json("inspect", out)
    assert (
        again["world_size"],
        again["global_batch_size"],
        again["gradient_accumulation_steps"],
    ) == (32, 64, 4)


def test_refused_update_lists_the_options_and_leaves_the_file(files):
    before = files["ax.yml"].read_text()
    result, out = run_json(
        "update", files["ax.yml"], "--world-size", 12, "--global-batch", 64, "--in-place"
    )
    assert result.exit_code == 1 and files["ax.yml"].read_text() == before
    (f,) = out["findings"]
    assert f["code"] == "update-impossible"
    assert "nearest are 48 (accumulation 2) and 72 (accumulation 3)" in f["message"]
    assert "learning rate × 0.866 for Adam" in f["hint"]


def test_refused_update_with_an_unknown_micro_batch_names_the_global_options(tmp_path):
    """With the micro-batch unknown the global batch splits over DP alone: the options are
    its nearest multiples of DP (this was an internal TypeError)."""
    script = tmp_path / "t.sh"
    script.write_text(
        "torchrun --nproc_per_node 8 x.py --micro-batch-size $MBS --global-batch-size 100\n"
    )
    result, out = run_json("update", script, "--world-size", 16)
    assert result.exit_code == 1, result.output
    (f,) = out["findings"]
    assert f["code"] == "update-impossible"
    assert (
        "nearest are 96 (micro × accumulation 6) and 112 (micro × accumulation 7)" in (f["message"])
    )
    assert f["hint"].startswith("global 96 (micro × accumulation 6) needs the learning rate")
    assert "no micro-batch keeps global 100 on data-parallel 16" in f["hint"]


def test_update_refuses_a_computed_value(tmp_path):
    script = tmp_path / "t.sh"
    script.write_text(
        "MBS=2\ntorchrun --nproc_per_node 8 x.py --micro-batch-size $MBS "
        "--global-batch-size $((MBS*32))\n"
    )
    result = run("update", script, "--global-batch", 128, "--in-place")
    assert result.exit_code == 1 and "cannot change --global-batch-size" in result.stderr
    assert "set it to 128 by hand" in result.stderr


def test_update_fixes_axolotls_batch_size_trap(tmp_path):
    path = tmp_path / "ax.yml"
    path.write_text("base_model: x\nmicro_batch_size: 2\nbatch_size: 16  # meant per GPU\nlr: 1\n")
    result = run("update", path, "--world-size", 8, "--global-batch", 128, "--in-place")
    assert result.exit_code == 0, result.output
    assert (
        path.read_text()
        == "base_model: x\nmicro_batch_size: 2\ngradient_accumulation_steps: 8\nlr: 1\n"
    )


def test_update_out_never_overwrites_without_force(files):
    result = run("update", files["ds.json"], "--world-size", 16, "-o", files["train.sh"])
    assert result.exit_code == 2 and files["train.sh"].read_text() == MEGATRON


# bad input: one line naming the file (and line), exit 2 unusable / 1 wrong, nothing written ---

BAD = [
    ("empty.json", b"", 2, "empty.json: empty file"),
    ("trunc.json", b'{"train_batch_size": 8,\n "train_micro', 2, "trunc.json:2: not valid JSON"),
    ("list.json", b"[1, 2]", 2, "must be a JSON object"),
    ("binary.yml", b"\x7fELF\x00\x00", 2, "binary.yml: binary file"),
    ("latin.yml", b"micro_batch_size: 2\n# \xe9t\xe9\n", 2, "latin.yml:2: not UTF-8"),
    (
        "tab.yml",
        b"micro_batch_size: 2\n\tgradient_accumulation_steps: 4\n",
        2,
        "tab.yml:2: not valid YAML",
    ),
    (
        "indent.yml",
        b"micro_batch_size: 2\n  gradient_accumulation_steps: 4\n",
        2,
        "indent.yml:2: not valid YAML",
    ),
    (
        "tag.yml",
        b"micro_batch_size: !!python/object/apply:os.system ['true']\n",
        2,
        "tag.yml:1: not valid YAML",
    ),
    (
        "bomb.yml",
        b"a: &a [1,1,1,1,1,1,1,1,1]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
        b"c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
        b"micro_batch_size: *d\ngradient_accumulation_steps: 2\n",
        2,
        "bomb.yml:5: aliases expand to more than 10000 nodes",
    ),
    (
        "string.json",
        b'{"train_batch_size": "64", "train_micro_batch_size_per_gpu": 2}',
        1,
        'train_batch_size is "64" (str)',
    ),
    (
        "float.yml",
        b"micro_batch_size: 2.5\ngradient_accumulation_steps: 4\n",
        1,
        "[{path}:1]: micro_batch_size is 2.5 (float)",
    ),
    (
        "bool.yml",
        b"micro_batch_size: true\ngradient_accumulation_steps: 4\n",
        1,
        "micro_batch_size is True (bool)",
    ),
    (
        "nan.json",
        b'{"train_batch_size": NaN, "train_micro_batch_size_per_gpu": 2}',
        1,
        "train_batch_size is nan (float)",
    ),
    (
        "negative.json",
        b'{"train_micro_batch_size_per_gpu": -2}',
        1,
        "train_micro_batch_size_per_gpu is -2 (int)",
    ),
    (
        "zero.yml",
        b"micro_batch_size: 0\ngradient_accumulation_steps: 4\n",
        1,
        "micro_batch_size is 0 (int)",
    ),
    (
        "huge.sh",
        b"torchrun --nproc_per_node 8 x.py --micro-batch-size 1"
        + b"0" * 60
        + b" --global-batch-size 8\n",
        1,
        "--micro-batch-size is 1000000",
    ),
    (
        "word.sh",
        b"torchrun --nproc_per_node 8 x.py --micro-batch-size four --global-batch-size 8\n",
        1,
        '[{path}:1]: --micro-batch-size is "four" (str)',
    ),
    (
        "array.sh",
        b"ARGS=(\n  --micro-batch-size 2\n  --global-batch-size 8\n",
        2,
        "array.sh:1: unterminated array ARGS=(",
    ),
    (
        "quote.sh",
        b'echo "unfinished\n--micro-batch-size 2\n',
        2,
        "quote.sh:1: unterminated double quote",
    ),
    ("longline.sh", b"# " + b"x" * 5_000_000 + b"\n", 2, "longline.sh: larger than 4 MiB"),
    (
        "typo.json",
        b'{"train_batch_size": 64, "train_micro_batch_size_per_gpu": 2, '
        b'"gradient_acumulation_steps": 4}',
        1,
        "'gradient_acumulation_steps' is not a key the framework reads",
    ),
    (
        "typo.sh",
        b"torchrun --nproc_per_node 8 x.py --micro-batch-size 2 --global-batch-szie 64\n",
        1,
        "looks like a misspelt '--global-batch-size'",
    ),
    (
        "elastic.json",
        b'{"train_batch_size": 64, "elasticity": {"enabled": true}}',
        1,
        "the elasticity block was removed",
    ),
]


@pytest.mark.parametrize("name, content, code, message", BAD, ids=[b[0] for b in BAD])
@pytest.mark.parametrize("command", ["inspect", "validate", "convert", "update"])
def test_bad_configs(tmp_path, name, content, code, message, command):
    path = tmp_path / name
    path.write_bytes(content)
    extra = {
        "convert": ["--to", "deepspeed", "--out", tmp_path / "out"],
        "update": ["--in-place"],
    }.get(command, [])
    result = run(command, path, "--world-size", 8, *extra)
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    if code == 2 or command in ("convert", "update"):
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("batchspec: error: ")
        assert str(path) in lines[0] or "file" not in message
    if code == 2 or command == "inspect":
        assert message.format(path=path) in result.output
    assert path.read_bytes() == content and not (tmp_path / "out").exists()
    assert sorted(os.listdir(tmp_path)) == [name]


def test_a_directory_and_a_missing_file(tmp_path):
    assert "is a directory" in run("inspect", tmp_path).stderr
    result = run("validate", tmp_path / "nope.json")
    assert result.exit_code == 2 and "nope.json: cannot read: No such file" in result.stderr


@pytest.mark.parametrize(
    "command",
    [["inspect"], ["validate"], ["convert", "--to", "deepspeed"], ["update", "--world-size", "16"]],
)
def test_an_exit_1_error_names_the_file_and_line(tmp_path, command):
    """A wrong configuration (exit 1) is reported with file:line on the error line, as an
    unusable input (exit 2) is."""
    path = tmp_path / "bad.sh"
    path.write_text(
        "torchrun --nproc_per_node 8 pretrain_gpt.py \\\n"
        "    --micro-batch-size 3 --global-batch-size 64\n"
    )
    args = [command[0], str(path), *command[1:]]
    if command[0] == "convert":
        args += ["--out", str(tmp_path / "out")]
    result = run(*args)
    assert result.exit_code == 1
    if command[0] == "update":
        assert f"batchspec: error: {path}: cannot keep the batch exact" in result.stderr
    elif command[0] == "convert":
        assert f"batchspec: error: {path}:2: global 64 does not split" in result.stderr
    else:
        assert f"[{path}:2]: global 64 does not split" in result.stdout
    assert not (tmp_path / "out").exists()
