"""``update`` of a whole job: the launch line and every file the job uses whose values change
(the accelerate config, the DeepSpeed JSON, the Trainer's arguments file, an Axolotl YAML,
Megatron-DeepSpeed's JSON) are edited together, each by its own framework, and written all
or none; the update reads the whole job back from the new texts before anything is written.

Styles: multi-node ``accelerate launch --config_file`` jobs of the Hugging Face alignment
handbook and LLaVA (an accelerate YAML with ``num_machines``/``num_processes`` and a
DeepSpeed JSON with the batch numbers written out), Megatron-DeepSpeed's pretraining scripts
(``--deepspeed_config ds_config.json``), Axolotl's CLI with a ``deepspeed:`` JSON.
"""

import json
from pathlib import Path

import pytest
from run_batchspec import run

from translator.words import files

#: Two nodes of eight: run once per node with NODE_RANK and MASTER_ADDR set.
JOB = """#!/bin/bash
# Llama SFT on 2 nodes x 8 GPUs.
accelerate launch --config_file configs/multi_node.yaml \\
    --machine_rank ${NODE_RANK:-0} --main_process_ip ${MASTER_ADDR:-localhost} \\
    train.py \\
    --deepspeed configs/ds_zero2.json \\
    --per_device_train_batch_size 4 \\
    --gradient_accumulation_steps 2 \\
    --output_dir out
"""
ACCELERATE = """compute_environment: LOCAL_MACHINE
distributed_type: DEEPSPEED
deepspeed_config:
  deepspeed_multinode_launcher: standard
machine_rank: 0
main_training_function: main
mixed_precision: bf16
num_machines: 2
num_processes: 16
rdzv_backend: static
same_network: true
"""
#: The batch numbers written out, not "auto": the Trainer checks them against its flags.
DEEPSPEED = """{
  "train_batch_size": 128,
  "train_micro_batch_size_per_gpu": 4,
  "gradient_accumulation_steps": 2,
  "zero_optimization": {"stage": 2},
  "bf16": {"enabled": true}
}
"""


@pytest.fixture
def job(tmp_path, monkeypatch) -> dict[str, Path]:
    """The job's three files, in the folder it runs from (the current one)."""
    monkeypatch.chdir(tmp_path)
    paths = {
        "job": Path("train.sh"),
        "accelerate": Path("configs/multi_node.yaml"),
        "deepspeed": Path("configs/ds_zero2.json"),
    }
    paths["accelerate"].parent.mkdir()
    for name, text in (("job", JOB), ("accelerate", ACCELERATE), ("deepspeed", DEEPSPEED)):
        paths[name].write_text(text)
    return paths


def texts(paths: dict[str, Path]) -> dict[str, str]:
    return {name: path.read_text() for name, path in paths.items()}


def test_two_nodes_of_eight_move_to_four_with_every_file_in_one_command(job):
    result = run("update", "train.sh", "--world-size", "32", "--in-place")
    assert result.exit_code == 0, result.output
    assert texts(job) == {
        "job": JOB.replace("accumulation_steps 2", "accumulation_steps 1"),
        "accelerate": ACCELERATE.replace("machines: 2", "machines: 4").replace(
            "processes: 16", "processes: 32"
        ),
        "deepspeed": DEEPSPEED.replace(
            '"gradient_accumulation_steps": 2', '"gradient_accumulation_steps": 1'
        ),
    }
    assert result.output.splitlines() == [
        "train.sh:8: gradient_accumulation_steps 2 → 1",
        "configs/ds_zero2.json:4: gradient_accumulation_steps 2 → 1",
        "configs/multi_node.yaml:9: num_processes 16 → 32",
        "configs/multi_node.yaml:8: num_machines 2 → 4",
    ]
    out = json.loads(run("inspect", "train.sh", "--json").stdout)
    shape = ("global_batch_size", "world_size", "nodes", "gpus_per_node")
    assert tuple(out[k] for k in shape) == (128, 32, 4, 8)


def test_the_job_keeps_its_eight_per_node(job):
    """The accelerate config's nodes are the job's layout: world 32 is 4 × 8, not 2 × 16."""
    out = json.loads(run("update", "train.sh", "--world-size", "32", "--json").stdout)
    (accelerate,) = [f for f in out["other_files"] if f["path"].endswith(".yaml")]
    assert {(c["key"], c["new"]) for c in accelerate["changes"]} == {
        ("num_processes", 32),
        ("num_machines", 4),
    }
    assert (out["nodes"], out["gpus_per_node"]) == (4, 8)
    assert texts(job) == {"job": JOB, "accelerate": ACCELERATE, "deepspeed": DEEPSPEED}


def test_without_in_place_the_diff_of_every_file_is_printed(job):
    result = run("update", "train.sh", "--nnodes", "4", "--nproc-per-node", "8")
    assert result.exit_code == 0, result.output
    headers = [line for line in result.stdout.splitlines() if line.startswith("+++ ")]
    assert headers == [
        "+++ b/train.sh",
        "+++ b/configs/ds_zero2.json",
        "+++ b/configs/multi_node.yaml",
    ]
    assert "+num_processes: 32" in result.stdout.splitlines()
    assert texts(job) == {"job": JOB, "accelerate": ACCELERATE, "deepspeed": DEEPSPEED}


def test_out_with_several_files_is_refused_and_writes_nothing(job):
    result = run("update", "train.sh", "--world-size", "32", "-o", "new.sh")
    assert result.exit_code == 2
    assert "-o/--out writes one file, and this update changes 3" in result.stderr
    assert not Path("new.sh").exists()
    assert texts(job) == {"job": JOB, "accelerate": ACCELERATE, "deepspeed": DEEPSPEED}


def test_a_job_whose_deepspeed_json_fixes_the_batch_moves(tmp_path, monkeypatch):
    """torchrun with --deepspeed: the JSON's written numbers move with the flags; they made
    the job immovable (the Trainer's mismatch check refused the half-edited job)."""
    monkeypatch.chdir(tmp_path)
    script = (
        "torchrun --nproc_per_node 8 train.py --deepspeed ds.json "
        "--per_device_train_batch_size 2 --gradient_accumulation_steps 8 --output_dir o\n"
    )
    ds = '{\n  "train_batch_size": 128,\n  "train_micro_batch_size_per_gpu": 2,\n  "gradient_accumulation_steps": 8\n}\n'
    Path("job.sh").write_text(script)
    Path("ds.json").write_text(ds)
    result = run("update", "job.sh", "--world-size", "16", "--in-place")
    assert result.exit_code == 0, result.output
    assert Path("ds.json").read_text() == ds.replace('steps": 8', 'steps": 4')
    assert Path("job.sh").read_text() == script.replace("torchrun", "torchrun --nnodes 2").replace(
        "steps 8", "steps 4"
    )


def test_the_deepspeed_json_accelerates_config_names_moves_too(tmp_path, monkeypatch):
    """accelerate's deepspeed_config_file is the DeepSpeed config the Trainer checks its flags
    against: its written accumulation moves with the flag (the update was refused: the re-read
    job mismatched its own JSON)."""
    monkeypatch.chdir(tmp_path)
    script = (
        "accelerate launch --config_file acc.yaml train.py --per_device_train_batch_size 4 "
        "--gradient_accumulation_steps 4 --output_dir o\n"
    )
    acc = (
        "distributed_type: DEEPSPEED\ndeepspeed_config:\n  deepspeed_config_file: ds.json\n"
        "num_machines: 2\nnum_processes: 16\n"
    )
    ds = '{"train_batch_size": 256, "gradient_accumulation_steps": 4, "zero_optimization": {}}\n'
    for name, text in (("job.sh", script), ("acc.yaml", acc), ("ds.json", ds)):
        Path(name).write_text(text)
    result = run("update", "job.sh", "--nnodes", "4", "--nproc-per-node", "8", "--in-place")
    assert result.exit_code == 0, result.output
    assert Path("ds.json").read_text() == ds.replace('steps": 4', 'steps": 2')
    assert Path("acc.yaml").read_text() == acc.replace("2\n", "4\n").replace("16", "32")
    assert Path("job.sh").read_text() == script.replace("steps 4", "steps 2")


def test_a_failure_to_write_one_file_puts_every_file_back(job, monkeypatch):
    calls = []
    commit = files._commit

    def fail_on_the_third(plan, tmp):
        calls.append(plan.path)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        commit(plan, tmp)

    monkeypatch.setattr(files, "_commit", fail_on_the_third)
    result = run("update", "train.sh", "--world-size", "32", "--in-place")
    assert result.exit_code == 2
    assert "No space left on device" in result.stderr
    assert texts(job) == {"job": JOB, "accelerate": ACCELERATE, "deepspeed": DEEPSPEED}
    assert sorted(p.name for p in Path("configs").iterdir()) == ["ds_zero2.json", "multi_node.yaml"]


def test_a_file_that_would_read_wrong_stops_the_whole_update(job):
    """accelerate's parallelism_config must multiply to num_processes: moving the world alone
    breaks it, so nothing is written, naming the file's own error."""
    yaml = ACCELERATE + "parallelism_config:\n  parallelism_config_dp_shard_size: 16\n"
    job["accelerate"].write_text(yaml)
    result = run("update", "train.sh", "--world-size", "32", "--in-place")
    assert result.exit_code == 1
    assert "parallelism_config sizes multiply to 16" in result.stderr
    assert texts(job) == {"job": JOB, "accelerate": yaml, "deepspeed": DEEPSPEED}


def test_a_line_that_sizes_the_world_keeps_the_config_as_it_is(job):
    """--num_processes on the launch line beats the config's: the line is edited, and the
    config's num_processes (not in force) stays."""
    script = JOB.replace("--config_file", "--num_machines 2 --num_processes 16 --config_file")
    job["job"].write_text(script)
    result = run("update", "train.sh", "--world-size", "32", "--in-place")
    assert result.exit_code == 0, result.output
    assert job["accelerate"].read_text() == ACCELERATE
    assert job["job"].read_text() == script.replace("machines 2", "machines 4").replace(
        "processes 16", "processes 32"
    ).replace("accumulation_steps 2", "accumulation_steps 1")


def test_megatron_deepspeeds_json_is_edited_with_the_script(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    script = """#!/bin/bash
GPUS_PER_NODE=8
NNODES=2
DISTRIBUTED_ARGS="--nproc_per_node $GPUS_PER_NODE --nnodes $NNODES --master_port 6000"
torchrun $DISTRIBUTED_ARGS pretrain_gpt.py \\
    --tensor-model-parallel-size 2 \\
    --num-layers 24 --hidden-size 2048 --num-attention-heads 16 --seq-length 2048 \\
    --micro-batch-size 4 --global-batch-size 256 \\
    --deepspeed --deepspeed_config ds_config.json --zero-stage 1
"""
    ds = (
        '{\n  "train_batch_size": 256,\n  "train_micro_batch_size_per_gpu": 4,\n'
        '  "gradient_accumulation_steps": 8,\n  "zero_optimization": {"stage": 1}\n}\n'
    )
    Path("pretrain.sh").write_text(script)
    Path("ds_config.json").write_text(ds)
    result = run("update", "pretrain.sh", "--world-size", "32", "--in-place")
    assert result.exit_code == 0, result.output
    assert Path("pretrain.sh").read_text() == script.replace("NNODES=2", "NNODES=4")
    # TP 2 of 32 ranks: data-parallel 16, so accumulation 256 / (4 × 16) = 4.
    assert Path("ds_config.json").read_text() == ds.replace('steps": 8', 'steps": 4')


def test_an_axolotl_yaml_and_its_deepspeed_json_move_with_the_launch(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = (
        "base_model: m\nmicro_batch_size: 2\ngradient_accumulation_steps: 4\ndeepspeed: ds.json\n"
    )
    ds = '{\n  "train_micro_batch_size_per_gpu": 2,\n  "gradient_accumulation_steps": 4\n}\n'
    script = (
        "#!/bin/bash\naxolotl train lora.yml --launcher torchrun -- --nnodes 2 --nproc_per_node 8\n"
    )
    for name, text in (("lora.yml", config), ("ds.json", ds), ("job.sh", script)):
        Path(name).write_text(text)
    result = run("update", "job.sh", "--world-size", "32", "--in-place")
    assert result.exit_code == 0, result.output
    assert Path("lora.yml").read_text() == config.replace("steps: 4", "steps: 2")
    assert Path("ds.json").read_text() == ds.replace('steps": 4', 'steps": 2')
    assert Path("job.sh").read_text() == script.replace("--nnodes 2", "--nnodes 4")


# an accelerate config alone ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "machines", "processes"),
    [
        (["--world-size", "32"], 4, 32),  # eight per machine kept
        (["--nnodes", "2", "--nproc-per-node", "4"], 2, 8),
        (["--world-size", "4"], 1, 4),  # below one machine: one
    ],
)
def test_an_accelerate_config_alone_moves_its_world(tmp_path, flags, machines, processes):
    path = tmp_path / "multi_node.yaml"
    path.write_text(ACCELERATE)
    result = run("update", str(path), *flags, "--in-place")
    assert result.exit_code == 0, result.output
    assert path.read_text() == ACCELERATE.replace("machines: 2", f"machines: {machines}").replace(
        "processes: 16", f"processes: {processes}"
    )


def test_an_accelerate_config_without_machines_gets_them_for_several_nodes(tmp_path):
    path = tmp_path / "one.yaml"
    text = "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\nnum_processes: 8\n"
    path.write_text(text)
    result = run("update", str(path), "--world-size", "16", "--in-place")
    assert result.exit_code == 0, result.output
    lines = path.read_text().splitlines()
    assert "num_processes: 16" in lines and "num_machines: 2" in lines


def test_an_accelerate_config_takes_no_batch(tmp_path):
    path = tmp_path / "multi_node.yaml"
    path.write_text(ACCELERATE)
    result = run("update", str(path), "--world-size", "32", "--global-batch", "256")
    assert result.exit_code == 2
    assert "gives the launch, not the batch" in result.stderr
    assert path.read_text() == ACCELERATE


def test_an_accelerate_config_already_there_says_so(tmp_path):
    path = tmp_path / "multi_node.yaml"
    path.write_text(ACCELERATE)
    result = run("update", str(path), "--nnodes", "2", "--nproc-per-node", "8")
    assert result.exit_code == 0
    assert result.stderr.strip() == (
        f"{path}: nothing to change: it already launches 16 processes (2 nodes × 8)"
    )


# model-parallel sizes are kept or refused, never dropped --------------------------------------

#: Plain DeepSpeed: no tensor-parallel size in it (Megatron-DeepSpeed's is the script's flag).
PLAIN = '{\n  "train_batch_size": 128,\n  "train_micro_batch_size_per_gpu": 4,\n  "gradient_accumulation_steps": 2\n}\n'
#: DeepSpeed AutoTP 4 on 16 ranks: train_batch_size counts every rank (4 × 2 × 16).
AUTOTP = PLAIN.replace("2\n}", '2,\n  "tensor_parallel": {"autotp_size": 4}\n}')


@pytest.mark.parametrize("flag", ["--tp", "--cp"])
def test_a_size_a_deepspeed_json_cannot_hold_is_refused_not_dropped(tmp_path, flag):
    """It was written nowhere, the accumulation re-solved for data-parallel 16 (exit 0)."""
    path = tmp_path / "ds.json"
    path.write_text(PLAIN)
    result = run("update", str(path), "--world-size", "32", flag, "2")
    assert result.exit_code == 1
    words = {"--tp": "tensor-parallel", "--cp": "context-parallel"}[flag]
    assert f"{words} 2 would be written nowhere: updated, the job gives {words} 1" in result.stderr
    assert path.read_text() == PLAIN


def test_deepspeed_autotp_is_kept_on_a_new_world_and_rewritten_when_asked(tmp_path):
    path = tmp_path / "ds.json"
    path.write_text(AUTOTP)
    kept = json.loads(run("update", str(path), "--world-size", "32").stdout)
    assert kept["tensor_parallel"] == {"autotp_size": 4}
    # global 32 (micro 4 × 2 × data-parallel 4) kept on 32 ranks of TP 8: data-parallel 4.
    moved = json.loads(run("update", str(path), "--world-size", "32", "--tp", "8").stdout)
    assert moved["tensor_parallel"] == {"autotp_size": 8}
    assert (moved["train_batch_size"], moved["gradient_accumulation_steps"]) == (256, 2)


def test_an_accelerate_config_of_uneven_machines_needs_the_layout_given(tmp_path):
    """num_processes 1 over num_machines 2 starts nothing: a world alone says no layout to keep
    (it was moved onto one machine of 32), so its error is named; a layout given is written."""
    path = tmp_path / "fsdp.yaml"
    text = "compute_environment: LOCAL_MACHINE\ndistributed_type: FSDP\nnum_machines: 2\nnum_processes: 1\n"
    path.write_text(text)
    alone = run("update", str(path), "--world-size", "32")
    assert alone.exit_code == 1 and "num_processes 1 over num_machines 2" in alone.stderr
    given = run("update", str(path), "--nnodes", "2", "--nproc-per-node", "8", "--in-place")
    assert given.exit_code == 0, given.output
    assert path.read_text() == text.replace("processes: 1", "processes: 16")


def test_the_accumulation_accelerate_imposes_moves_with_the_trainers(job):
    """deepspeed_config.gradient_accumulation_steps in the accelerate config overrides the
    Trainer's: both move (to 4 on 8 ranks), with the DeepSpeed JSON."""
    yaml = ACCELERATE.replace(
        "  deepspeed_multinode_launcher: standard\n",
        "  deepspeed_multinode_launcher: standard\n  gradient_accumulation_steps: 2\n",
    )
    job["accelerate"].write_text(yaml)
    result = run("update", "train.sh", "--world-size", "8", "--in-place")
    assert result.exit_code == 0, result.output
    assert job["accelerate"].read_text() == yaml.replace("steps: 2", "steps: 4").replace(
        "machines: 2", "machines: 1"
    ).replace("processes: 16", "processes: 8")
    assert "--gradient_accumulation_steps 4" in job["job"].read_text()
    assert json.loads(job["deepspeed"].read_text())["gradient_accumulation_steps"] == 4


def test_a_parity_split_that_moves_other_files_is_refused(tmp_path, monkeypatch):
    """smoke --parity writes B's file alone into its work folder: a split that must change
    the DeepSpeed JSON the config names too would run B with A's JSON, so it is refused."""
    from types import SimpleNamespace

    from translator.launch.parity import derive_file
    from translator.spec import BatchSpec
    from translator.words.errors import InputError

    monkeypatch.chdir(tmp_path)
    Path("ds.json").write_text(PLAIN.replace("128", "16"))  # 4 × 2 × 2 ranks
    Path("args.yaml").write_text(
        "output_dir: o\nper_device_train_batch_size: 4\ngradient_accumulation_steps: 2\n"
        "deepspeed: ds.json\n"
    )
    a = SimpleNamespace(
        spec=BatchSpec(global_batch_size=16, micro_batch_size=4, world_size=2),
        plan=SimpleNamespace(framework="hf"),
    )
    with pytest.raises(InputError, match="B's split changes ds.json too"):
        derive_file(
            "args.yaml",
            a,
            BatchSpec(global_batch_size=16, micro_batch_size=1, world_size=1),
            tmp_path / "w",
        )
    assert not (tmp_path / "w").exists()
