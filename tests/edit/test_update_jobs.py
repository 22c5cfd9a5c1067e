"""``update`` on launch scripts: the literal the launcher reads is edited so that the job
launches the new world, with the global batch kept; an update that changes nothing says so;
one that cannot be carried out says why. The change report names the flag and the line edited.

Styles: NVIDIA Megatron-LM's ``examples/llama`` scripts (variables behind a ``torchrun
${DISTRIBUTED_ARGS[@]}`` array), and HF Trainer jobs under torchrun, accelerate and deepspeed
(the fixtures in ``fixtures/hf/jobs``).
"""

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from paths import ROOT

from translator.cli import main

FIXTURES = ROOT / "fixtures"

#: Written in the style of Megatron-LM's examples/llama/train_llama3_8b_h100_fp8.sh: the
#: launcher's sizes are plain assignments far above the torchrun line that reads them.
MEGATRON = """#!/bin/bash
# Llama-3 8B on one node of eight H100s.
export CUDA_DEVICE_MAX_CONNECTIONS=${CUDA_DEVICE_MAX_CONNECTIONS:-1}
CHECKPOINT_PATH=${1:-"checkpoints/llama3_8b"}

# Distributed training setup
GPUS_PER_NODE=8
NUM_NODES=1
MASTER_ADDR=${MASTER_ADDR:-localhost}
MASTER_PORT=${MASTER_PORT:-29500}
NODE_RANK=${NODE_RANK:-0}
WORLD_SIZE=$(($GPUS_PER_NODE*$NUM_NODES))

TP_SIZE=1
CP_SIZE=1
MICRO_BATCH_SIZE=1
GLOBAL_BATCH_SIZE=128
SEQ_LENGTH=8192

DISTRIBUTED_ARGS=(
    --nproc_per_node $GPUS_PER_NODE
    --nnodes $NUM_NODES
    --node_rank $NODE_RANK
    --master_addr $MASTER_ADDR
    --master_port $MASTER_PORT
)

TRAINING_ARGS=(
    --micro-batch-size $MICRO_BATCH_SIZE
    --global-batch-size $GLOBAL_BATCH_SIZE
    --seq-length $SEQ_LENGTH
    --lr 0.00015
    --bf16
)

MODEL_PARALLEL_ARGS=(
    --tensor-model-parallel-size $TP_SIZE
    --context-parallel-size $CP_SIZE
)

torchrun ${DISTRIBUTED_ARGS[@]} \\
    pretrain_gpt.py \\
    ${TRAINING_ARGS[@]} \\
    ${MODEL_PARALLEL_ARGS[@]} \\
    --save "$CHECKPOINT_PATH"
"""
#: The lines of MEGATRON this file's tests look at.
PER_NODE_LINE, NODES_LINE, FLAG_LINES = 7, 8, (21, 22)


def update(path: Path, *args: str, json_out: bool = False):
    """``batchspec update PATH ARGS``: the result, and the JSON object when asked for."""
    result = CliRunner().invoke(
        main, ["update", str(path), *args, *(["--json"] if json_out else [])]
    )
    return result, json.loads(result.stdout) if json_out and result.stdout else None


def batch(path: Path) -> tuple:
    """(world, global batch, micro-batch, accumulation) of ``path`` as inspect reads it."""
    result = CliRunner().invoke(main, ["inspect", str(path), "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    return (
        out["world_size"],
        out["global_batch_size"],
        out["micro_batch_size"],
        out["gradient_accumulation_steps"],
    )


@pytest.fixture
def megatron(tmp_path) -> Path:
    path = tmp_path / "train_llama3_8b.sh"
    path.write_text(MEGATRON)
    return path


@pytest.fixture
def hf_jobs(tmp_path, monkeypatch) -> Path:
    """The HF job fixtures copied into a folder the test runs in (they name each other)."""
    for source in (FIXTURES / "hf" / "jobs").iterdir():
        shutil.copy(source, tmp_path / source.name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_the_lines_the_tests_name_are_those(megatron):
    lines = MEGATRON.splitlines()
    assert lines[PER_NODE_LINE - 1] == "GPUS_PER_NODE=8"
    assert lines[NODES_LINE - 1] == "NUM_NODES=1"
    assert [lines[n - 1].split()[0] for n in FLAG_LINES] == ["--nproc_per_node", "--nnodes"]
    assert batch(megatron) == (8, 128, 1, 16)


# Megatron: a new world edits the variables the launcher reads ----------------------------------


def test_half_a_node_edits_the_per_node_variable_and_names_the_flag_and_the_line(megatron):
    """The issue's crash (``'Reading' object has no attribute 'launcher'``): world 4 from one
    node of 8 is one node of 4."""
    result, _ = update(megatron, "--world-size", "4", "--in-place")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        f"{megatron}: --nproc_per_node (torchrun, line {FLAG_LINES[0]}) ← GPUS_PER_NODE=8 → 4 "
        f"(line {PER_NODE_LINE})"
    ]
    assert megatron.read_text() == MEGATRON.replace("GPUS_PER_NODE=8", "GPUS_PER_NODE=4")
    assert batch(megatron) == (4, 128, 1, 32)


def test_two_nodes_edit_the_node_variable(megatron):
    result, _ = update(megatron, "--world-size", "16", "--in-place")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        f"{megatron}: --nnodes (torchrun, line {FLAG_LINES[1]}) ← NUM_NODES=1 → 2 "
        f"(line {NODES_LINE})"
    ]
    assert megatron.read_text() == MEGATRON.replace("NUM_NODES=1", "NUM_NODES=2")
    assert batch(megatron) == (16, 128, 1, 8)


def test_the_same_world_in_another_shape_is_edited_not_a_silent_no_op(megatron):
    """--nnodes 2 --nproc-per-node 4 is world 8 too, but another launch: both variables
    change (this wrote a byte-identical file and said nothing)."""
    result, out = update(megatron, "--nnodes", "2", "--nproc-per-node", "4", json_out=True)
    assert result.exit_code == 0, result.output
    assert out["text"] == MEGATRON.replace("GPUS_PER_NODE=8", "GPUS_PER_NODE=4").replace(
        "NUM_NODES=1", "NUM_NODES=2"
    )
    assert out["changes"] == [
        {
            "key": "--nproc_per_node",
            "old": 8,
            "new": 4,
            "line": FLAG_LINES[0],
            "read_by": "torchrun",
            "edit": {"line": PER_NODE_LINE, "old": "GPUS_PER_NODE=8", "new": "GPUS_PER_NODE=4"},
        },
        {
            "key": "--nnodes",
            "old": 1,
            "new": 2,
            "line": FLAG_LINES[1],
            "read_by": "torchrun",
            "edit": {"line": NODES_LINE, "old": "NUM_NODES=1", "new": "NUM_NODES=2"},
        },
    ]
    assert out["nothing_to_change"] is None
    assert (out["world_size"], out["global_batch_size"]) == (8, 128)


def test_a_default_is_edited_inside_its_expansion(tmp_path):
    """The fixture's ``NUM_NODES=${NUM_NODES:-1}``: the default is the literal torchrun
    reads as run."""
    path = tmp_path / "pretrain.sh"
    shutil.copy(FIXTURES / "megatron" / "valid" / "pretrain_llama3_8b_fp8.sh", path)
    before = path.read_text()
    result, _ = update(path, "--world-size", "16", "--in-place")
    assert result.exit_code == 0, result.output
    assert path.read_text() == before.replace("${NUM_NODES:-1}", "${NUM_NODES:-2}")
    assert result.output.splitlines() == [
        f"{path}: --nnodes (torchrun, line 33) ← NUM_NODES=${{NUM_NODES:-1}} → 2 (line 18)"
    ]


def test_a_world_that_cannot_keep_the_batch_names_the_nearest_worlds(megatron):
    result, out = update(megatron, "--world-size", "24", "--in-place", json_out=True)
    assert result.exit_code == 1
    (f,) = out["findings"]
    assert f["code"] == "update-impossible"
    assert "; or keep global 128 and micro-batch 1 on world 16 or 32 (`batchspec plan" in f["hint"]
    assert len(result.stderr.strip().splitlines()) == 1
    assert megatron.read_text() == MEGATRON


# Nothing to change ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args", [["--world-size", "8"], ["--nnodes", "1", "--nproc-per-node", "8"]]
)
def test_an_update_that_changes_nothing_says_so_and_writes_nothing(megatron, args):
    out_path = megatron.parent / "new.sh"
    result, _ = update(megatron, *args, "-o", str(out_path))
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        f"{megatron}: nothing to change: it already launches 8 processes (1 node × 8) and "
        "gives global batch 128 (micro-batch 1 × accumulation 16 × data-parallel 8)"
    ]
    assert not out_path.exists() and megatron.read_text() == MEGATRON


def test_nothing_to_change_on_one_process_says_one_process(tmp_path):
    script = tmp_path / "one.sh"
    script.write_text(
        "torchrun --nnodes 1 --nproc_per_node 1 pretrain_gpt.py --micro-batch-size 2 "
        "--global-batch-size 8\n"
    )
    result, _ = update(script, "--world-size", "1")
    assert result.exit_code == 0, result.output
    assert result.stderr.strip() == (
        f"{script}: nothing to change: it already launches 1 process (1 node × 1) and gives "
        "global batch 8 (micro-batch 2 × accumulation 4 × data-parallel 1)"
    )


def test_nothing_to_change_in_place_leaves_the_file_and_json_says_so(megatron):
    stamp = megatron.stat().st_mtime_ns
    result, out = update(megatron, "--world-size", "8", "--in-place", json_out=True)
    assert result.exit_code == 0, result.output
    assert out["changes"] == [] and out["written"] is None
    assert out["nothing_to_change"].startswith(f"{megatron}: nothing to change: it already")
    assert megatron.stat().st_mtime_ns == stamp


def test_nothing_to_change_while_printing_goes_to_stderr(megatron):
    """Without -o the new file goes to stdout; there is none, so stdout stays empty."""
    result, _ = update(megatron, "--world-size", "8")
    assert result.exit_code == 0
    assert result.stdout == ""
    assert "nothing to change" in result.stderr


def test_nothing_to_change_in_a_config_names_the_world_it_was_read_on(tmp_path):
    path = tmp_path / "ds.json"
    path.write_text(
        '{"train_batch_size": 64, "train_micro_batch_size_per_gpu": 2, '
        '"gradient_accumulation_steps": 4}\n'
    )
    result, _ = update(path, "--world-size", "8", "--in-place")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        f"{path}: nothing to change: at world 8 it already gives global batch 64 (micro-batch 2 "
        "× accumulation 4 × data-parallel 8)"
    ]


# What update cannot carry out: exit 1, saying why, nothing written -----------------------------


def test_a_world_from_the_environment_is_refused_naming_it(tmp_path):
    text = MEGATRON.replace("NUM_NODES=1\n", "").replace("$NUM_NODES", "$SLURM_NNODES")
    path = tmp_path / "train.sh"
    path.write_text(text)
    result, _ = update(path, "--world-size", "32", "--from-world-size", "16", "--in-place")
    assert result.exit_code == 1
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"batchspec: error: {path}: cannot launch world 32: line ")
    assert "--nnodes is $SLURM_NNODES" in line and "a number the file does not write" in line
    assert path.read_text() == text


def test_a_world_from_the_environment_takes_a_batch_only_update_on_the_world_it_names(tmp_path):
    text = MEGATRON.replace("NUM_NODES=1\n", "").replace("$NUM_NODES", "$SLURM_NNODES")
    path = tmp_path / "train.sh"
    path.write_text(text)
    args = ["--world-size", "16", "--from-world-size", "16", "--global-batch", "256"]
    result, _ = update(path, *args, "--in-place")
    assert result.exit_code == 0, result.output
    assert path.read_text() == text.replace("GLOBAL_BATCH_SIZE=128", "GLOBAL_BATCH_SIZE=256")


def test_a_node_count_the_line_does_not_give_is_added_after_the_launcher(hf_jobs):
    """torchrun --nproc_per_node=4 with no --nnodes runs on one node; two nodes get the word
    written after the launcher's name, the rest of the line as it was."""
    path = Path("torchrun_fastchat_style.sh")
    before = path.read_text()
    result, _ = update(path, "--nnodes", "2", "--nproc-per-node", "4", "--in-place")
    assert result.exit_code == 0, result.output
    assert f"{path}:1: --nnodes 2 (added to the torchrun line)" in result.output.splitlines()
    assert path.read_text() == before.replace(
        "torchrun --nproc", "torchrun --nnodes 2 --nproc"
    ).replace("accumulation_steps 16", "accumulation_steps 8")
    assert batch(path) == (8, 128, 2, 8)


def test_a_bigger_world_keeps_the_processes_per_node_and_adds_nodes(hf_jobs):
    """A line of 4 per node moved to world 8 runs 2 nodes × 4, not one node of 8 it may not
    have; --nproc-per-node 8 asks for the node of 8."""
    path = Path("torchrun_fastchat_style.sh")
    before = path.read_text()
    result, out = update(path, "--world-size", "8", json_out=True)
    assert result.exit_code == 0, result.output
    assert (out["nodes"], out["gpus_per_node"]) == (2, 4)
    assert out["text"] == before.replace("torchrun --nproc", "torchrun --nnodes 2 --nproc").replace(
        "accumulation_steps 16", "accumulation_steps 8"
    )


def test_a_world_set_in_the_launchers_config_file_is_moved_there(hf_jobs):
    """accelerate launch --config_file: the world is the config's num_processes (the total
    over num_machines), so the config moves with the job; it was refused ("set it there")."""
    path, config = Path("accelerate_handbook_style.sh"), Path("accelerate_4gpu.yaml")
    script, yaml = path.read_text(), config.read_text()
    result, _ = update(path, "--world-size", "8", "--in-place")
    assert result.exit_code == 0, result.output
    assert config.read_text() == yaml.replace("machines: 1", "machines: 2").replace(
        "processes: 4", "processes: 8"
    )
    assert path.read_text() == script.replace("_steps 4", "_steps 2")
    assert result.output.splitlines()[-2:] == [
        f"{config}:6: num_processes 4 → 8",
        f"{config}:5: num_machines 1 → 2",
    ]
    same, _ = update(path, "--world-size", "8", "--in-place")
    assert same.exit_code == 0
    assert "nothing to change: it already launches 8 processes (2 nodes × 4)" in same.output


def test_every_gpu_deepspeed_finds_is_refused_for_another_world(hf_jobs):
    path = Path("deepspeed_llava_style.sh")
    before = path.read_text()
    args = ["--world-size", "4", "--from-world-size", "8", "--in-place"]
    result, _ = update(path, *args)
    assert result.exit_code == 1
    assert "deepspeed without --num_gpus uses every GPU it finds" in result.stderr
    assert path.read_text() == before


# HF Trainer jobs ---------------------------------------------------------------------------------


def test_an_hf_torchrun_job_on_half_a_node_keeps_its_batch(hf_jobs):
    path = Path("torchrun_qwen_style.sh")
    before = path.read_text()
    result, _ = update(path, "--world-size", "4", "--in-place")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        f"{path}:21: gradient_accumulation_steps 16 → 32",
        f"{path}: --nproc_per_node (torchrun, line 16) ← GPUS_PER_NODE=8 → 4 (line 3)",
    ]
    assert path.read_text() == before.replace("GPUS_PER_NODE=8", "GPUS_PER_NODE=4").replace(
        "accumulation_steps 16", "accumulation_steps 32"
    )
    assert batch(path) == (4, 128, 1, 32)


def test_an_hf_torchrun_job_in_another_shape_of_the_same_world(hf_jobs):
    path = Path("torchrun_qwen_style.sh")
    before = path.read_text()
    result, _ = update(path, "--nnodes", "2", "--nproc-per-node", "4", "--in-place")
    assert result.exit_code == 0, result.output
    assert path.read_text() == before.replace("GPUS_PER_NODE=8", "GPUS_PER_NODE=4").replace(
        "${NNODES:-1}", "${NNODES:-2}"
    )
    assert batch(path) == (8, 128, 1, 16)


def test_an_hf_flag_written_with_its_value_is_reported_on_its_line(hf_jobs):
    path = Path("torchrun_fastchat_style.sh")
    result, _ = update(path, "--world-size", "8", "--nproc-per-node", "8", "--in-place")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        f"{path}:9: gradient_accumulation_steps 16 → 8",
        f"{path}:1: --nproc_per_node 4 → 8",
    ]
    assert batch(path) == (8, 128, 2, 8)


def test_an_accumulation_the_job_computes_follows_the_edited_world(hf_jobs):
    """open-instruct's GRADIENT_ACC_STEPS=$(($TOTAL_BATCH_SIZE/$NUM_GPUS/...)): editing
    NUM_GPUS is enough, the script computes the new accumulation itself."""
    path = Path("accelerate_open_instruct_style.sh")
    before = path.read_text()
    args = ["--world-size", "8", "--nproc-per-node", "8", "--in-place"]
    result, out = update(path, *args, json_out=True)
    assert result.exit_code == 0, result.output
    assert path.read_text() == before.replace("NUM_GPUS=4", "NUM_GPUS=8")
    changes = {c["key"]: c for c in out["changes"]}
    assert changes["gradient_accumulation_steps"]["edit"] is None
    assert (
        changes["gradient_accumulation_steps"]["old"],
        changes["gradient_accumulation_steps"]["new"],
    ) == (16, 8)
    assert changes["--num_processes"]["edit"] == {
        "line": 3,
        "old": "NUM_GPUS=4",
        "new": "NUM_GPUS=8",
    }
    assert batch(path) == (8, 128, 2, 8)


def test_a_computed_value_that_does_not_follow_is_refused(tmp_path):
    path = tmp_path / "t.sh"
    text = (
        "N=4\nACC=$((64/4/2))\ntorchrun --nproc_per_node $N train.py "
        "--per_device_train_batch_size 2 --gradient_accumulation_steps $ACC --output_dir o\n"
    )
    path.write_text(text)
    result, _ = update(path, "--world-size", "8", "--in-place")
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        f"batchspec: error: {path}:3: cannot change gradient_accumulation_steps: its value is "
        "computed, not written; set it to 4 by hand"
    )
    assert path.read_text() == text


def test_an_sbatch_size_and_a_quoted_variable_are_named_as_written(tmp_path):
    path = tmp_path / "job.sbatch"
    text = (
        '#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=1\nGPUS="8"\n'
        "srun torchrun --nnodes $SLURM_NNODES --nproc_per_node $GPUS pretrain_gpt.py \\\n"
        "    --micro-batch-size 1 --global-batch-size 128\n"
    )
    path.write_text(text)
    result, _ = update(path, "--nnodes", "4", "--nproc-per-node", "4", "--in-place")
    assert result.exit_code == 0, result.output
    assert sorted(result.output.splitlines()) == [
        f"{path}: --nnodes (torchrun, line 5) ← --nodes=2 → 4 (line 2)",
        f'{path}: --nproc_per_node (torchrun, line 5) ← GPUS="8" → 4 (line 4)',
    ]
    assert path.read_text() == text.replace("nodes=2", "nodes=4").replace('"8"', '"4"')
    assert batch(path) == (16, 128, 1, 8)


#: A LLaMA-Factory launch whose key=value overrides take their values from variables.
OVERRIDES = """#!/bin/bash
export FORCE_TORCHRUN=1 NPROC_PER_NODE=2
BS=4
GA=8
llamafactory-cli train cfg.yaml per_device_train_batch_size=$BS gradient_accumulation_steps=${GA}
"""
LMF_CONFIG = "stage: sft\ndo_train: true\nper_device_train_batch_size: 1\noutput_dir: out\n"


def test_an_override_from_a_variable_is_edited_where_the_variable_is_set(tmp_path):
    (tmp_path / "cfg.yaml").write_text(LMF_CONFIG)
    path = tmp_path / "run.sh"
    path.write_text(OVERRIDES)
    result, _ = update(path, "--global-batch", "32", "--in-place")
    assert result.exit_code == 0, result.output
    assert result.output == (f"{path}: gradient_accumulation_steps (line 5) ← GA=8 → 4 (line 4)\n")
    assert path.read_text() == OVERRIDES.replace("GA=8", "GA=4")
    assert batch(path) == (2, 32, 4, 4)


def test_a_variable_behind_two_overrides_is_still_refused(tmp_path):
    (tmp_path / "cfg.yaml").write_text(LMF_CONFIG)
    path = tmp_path / "run.sh"
    path.write_text(OVERRIDES.replace("GA=8", "GA=$BS").replace("BS=4", "BS=8"))
    before = path.read_text()
    result, _ = update(path, "--global-batch", "32", "--in-place")
    assert result.exit_code == 1
    assert "edit it by hand" in result.output or "also used by" in result.output
    assert path.read_text() == before


def test_a_job_whose_batch_is_unknown_on_its_known_world_says_why(tmp_path):
    """torchtitan's multinode_trainer.slurm style: 4 × 8 launched, the batch in a config
    function batchspec cannot read; before, the error said the world was not known."""
    from click.testing import CliRunner

    from translator.cli import main

    job = tmp_path / "multinode_trainer.slurm"
    job.write_text(
        "#!/bin/bash\n#SBATCH --nodes=4\n#SBATCH --ntasks=4\n"
        'MODULE=${MODULE:-"my_recipes.llama3"}\nCONFIG=${CONFIG:-"llama3_debugmodel"}\n'
        "srun torchrun --nnodes 4 --nproc_per_node 8 --rdzv_backend c10d "
        '--rdzv_endpoint "$head:29500" -m torchtitan.train --module ${MODULE} '
        '--config ${CONFIG} "$@"\n'
    )
    result = CliRunner().invoke(main, ["update", str(job), "--world-size", "64"])
    assert result.exit_code == 2
    assert f"{job}: the current global batch is not known on its world 32 (" in result.stderr
    assert "does not say its world size" not in result.stderr
