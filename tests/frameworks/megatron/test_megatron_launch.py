"""The Megatron reader on launchers, the DeepSpeed JSON a script writes, and what it says when
it cannot read something."""

import difflib
import json

import pytest
from paths import ROOT
from run_batchspec import inspect_job, run

from translator.frameworks import get

FIXTURES = ROOT / "fixtures" / "megatron"

megatron = get("megatron")


def inspect_run_sh(tmp_path, text: str) -> tuple[int, dict]:
    """``text`` as ``run.sh`` in ``tmp_path``, inspected by its absolute path from here."""
    return inspect_job(text, name=tmp_path / "run.sh", shebang=False)


PROGRAM = "pretrain_gpt.py --micro-batch-size 2 --global-batch-size 64"


@pytest.mark.parametrize(
    "launch, world",
    [
        ("torchrun --nproc_per_node 4 --nnodes 2", 8),
        ("torchrun --nproc-per-node=4", 4),
        ("torchrun", 1),  # torchrun's defaults: 1 x 1
        ("python -m torch.distributed.launch --use_env --nproc_per_node 8", 8),
        ("python -u -m torch.distributed.run --nproc_per_node 2 --nnodes 4", 8),
        ("deepspeed --num_gpus 8 --num_nodes 2", 16),
        ("deepspeed --num_gpus=2 --num_nodes=1", 2),
        ("deepspeed --num_gpus 8", 8),  # read as run: no host file, this node alone
        ("deepspeed --num_gpus 8 --hostfile hosts", None),  # its hosts decide the nodes
        ("deepspeed", None),
        ("srun --nodes 2 --ntasks-per-node 4 python", 8),
        ("srun -n 16 python", 16),
        ("srun python", None),  # no #SBATCH sizes in the file
        ("mpirun -np 16 python", 16),
        ("torchrun --nproc_per_node $GPUS", None),
        ("torchrun --nproc_per_node 8 --nnodes 1:4", None),  # elastic
        ("python", 1),  # one process
        ("srun -n16 --ntasks-per-node=8 python", 16),  # -n fixes the total
        ("jsrun --nrs 16 --tasks_per_rs 1 --gpu_per_rs 1 python", 16),  # LSF resource sets
        ("jsrun -n 8 -a 2 python", 16),
        ("deepspeed --hostfile hosts --include a:0,1,2,3@b:0,1,2,3", 8),
        ("deepspeed --hostfile hosts --include a@b", None),  # all slots of each host
        ("torchrun $(cat launch_args)", None),  # may hold --nproc_per_node
        ("torchrun ${LAUNCH_ARGS[@]}", 1),  # never set: empty as run, torchrun's defaults
        ("torchrun --nproc_per_node 8 --rdzv_id=$SLURM_JOB_ID", 8),  # a value, not more flags
        ("srun --label singularity exec $IMAGE python", None),  # no sizes at all
    ],
)
def test_each_launcher_counts_its_processes(tmp_path, launch, world):
    code, out = inspect_run_sh(tmp_path, f"{launch} {PROGRAM}\n")
    assert code == 0
    assert out["world_size"] == world
    if world is None:
        unknown = [f for f in out["findings"] if f["code"] == "world-unknown"]
        assert unknown and "so the global batch is not known" in unknown[0]["message"]


def test_srun_takes_its_sizes_from_the_sbatch_lines(tmp_path):
    text = f"#!/bin/bash\n#SBATCH --nodes=3\n#SBATCH --ntasks-per-node=8\nsrun python {PROGRAM}\n"
    assert inspect_run_sh(tmp_path, text)[1]["world_size"] == 24


def test_the_world_unknown_message_names_the_launch_line_and_why(tmp_path):
    _, out = inspect_run_sh(tmp_path, f"echo start\ndeepspeed --hostfile h {PROGRAM}\n")
    message = next(f["message"] for f in out["findings"] if f["code"] == "world-unknown")
    assert message.startswith(
        "line 2: deepspeed starts an unknown number of processes: deepspeed runs on every host "
        "of its host file h"
    )


def test_an_unreadable_word_is_named_with_its_line(tmp_path):
    text = (
        "MBS=$(python -c 'print(4)')\n"
        "torchrun --nproc_per_node 8 pretrain_gpt.py --global-batch-size 64 \\\n"
        "    --micro-batch-size $MBS\n"
    )
    code, out = inspect_run_sh(tmp_path, text)
    unknown = next(f for f in out["findings"] if f["code"] == "unknown-value")
    assert unknown["message"].startswith("--micro-batch-size is $(python -c 'print(4)') is not run")
    assert unknown["where"].endswith("run.sh:3")
    assert out["micro_batch_size"] is None and code == 0
    assert not any("add the missing batch value" in (f["hint"] or "") for f in out["findings"])


def test_what_the_reader_did_not_follow_is_shown(tmp_path):
    _, out = inspect_run_sh(
        tmp_path, f"source ./cluster.env\ntorchrun --nproc_per_node 8 {PROGRAM}\n"
    )
    note = next(f for f in out["findings"] if f["code"] == "script-not-followed")
    assert note["message"] == "source ./cluster.env is not read"
    assert note["where"].endswith("run.sh:1")


def test_a_misspelt_flag_is_what_megatron_refuses(tmp_path):
    code, out = inspect_run_sh(tmp_path, f"torchrun {PROGRAM} --micro-bach-size 4\n")
    typo = next(f for f in out["findings"] if f["code"] == "batch-key-typo")
    assert code == 1 and "Megatron-LM stops at start" in typo["message"]
    # a flag the program adds itself is not a typo of a near flag
    code, out = inspect_run_sh(tmp_path, f"torchrun {PROGRAM} --total-seq-length 4096\n")
    assert code == 0 and not any(f["code"] == "batch-key-typo" for f in out["findings"])


def test_update_edits_the_heredoc_json_with_the_flags(tmp_path):
    """Moving the Megatron-DeepSpeed script to 4 nodes changes --num_nodes only (the JSON
    takes the same variables); every other byte stays."""
    source = FIXTURES / "valid" / "ds_megatron_options_heredoc.sh"
    path = tmp_path / source.name
    path.write_text(source.read_text())
    result = run("update", path, "--nnodes", "4", "--nproc-per-node", "8", "--json")
    assert result.exit_code == 0, result.output
    changes = {c["key"]: (c["old"], c["new"]) for c in json.loads(result.stdout)["changes"]}
    assert changes == {"--num_nodes": (2, 4)}


NVIDIA_STYLE = (
    "#!/bin/bash\n"
    "GPUS_PER_NODE=8\n"
    "NUM_NODES=1\n"
    "torchrun --nproc_per_node $GPUS_PER_NODE --nnodes $NUM_NODES pretrain_gpt.py \\\n"
    "    --tensor-model-parallel-size 2 --micro-batch-size 1 --global-batch-size 128\n"
)


def test_update_to_fewer_gpus_than_a_node_takes_them_on_one_node(tmp_path):
    """World 4 from one node of 8 is one node of 4: the per-node variable changes (this
    used to crash on a ``Reading.launcher`` that did not exist, then to refuse)."""
    path = tmp_path / "train.sh"
    path.write_text(NVIDIA_STYLE)
    result = run("update", path, "--world-size", "4", "--in-place")
    assert result.exit_code == 0, result.output
    assert "internal error" not in result.output
    assert result.output.strip().splitlines() == [
        f"{path}: --nproc_per_node (torchrun, line 4) ← GPUS_PER_NODE=8 → 4 (line 2)"
    ]
    assert path.read_text() == NVIDIA_STYLE.replace("GPUS_PER_NODE=8", "GPUS_PER_NODE=4")


def test_update_to_a_world_no_node_count_makes_refuses_naming_the_shapes(tmp_path):
    path = tmp_path / "train.sh"
    path.write_text(NVIDIA_STYLE)
    result = run("update", path, "--world-size", "12", "--global-batch", "192", "--in-place")
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines() == [
        f"batchspec: error: {path}: it runs 8 processes per node, which cannot make world 12 "
        "in whole nodes; give --nnodes and --nproc-per-node (such as 2 × 6 or 3 × 4)"
    ]
    assert path.read_text() == NVIDIA_STYLE


def test_update_with_the_node_shape_edits_the_per_node_variable(tmp_path):
    path = tmp_path / "train.sh"
    path.write_text(NVIDIA_STYLE)
    result = run("update", path, "--nnodes", "1", "--nproc-per-node", "4", "--in-place")
    assert result.exit_code == 0, result.output
    assert path.read_text() == NVIDIA_STYLE.replace("GPUS_PER_NODE=8", "GPUS_PER_NODE=4")
    code, out = inspect_run_sh(tmp_path, path.read_text())
    assert code == 0
    assert (out["world_size"], out["global_batch_size"], out["gradient_accumulation_steps"]) == (
        4,
        128,
        64,
    )


def test_update_rewrites_literal_batch_keys_in_the_heredoc(tmp_path):
    text = (
        "cat <<EOT > ds.json\n"
        '{"train_batch_size": 64, "train_micro_batch_size_per_gpu": 2,\n'
        ' "gradient_accumulation_steps": 4}\nEOT\n'
        "deepspeed --num_gpus 8 --num_nodes 1 pretrain_gpt.py --micro-batch-size 2 "
        "--global-batch-size 64 --deepspeed_config ds.json\n"
    )
    path = tmp_path / "run.sh"
    path.write_text(text)
    result = run("update", path, "--world-size", "16", "--in-place")
    assert result.exit_code == 0, result.output
    new = path.read_text()
    changed = [
        line for line in difflib.ndiff(text.splitlines(), new.splitlines()) if line[:1] in "+-"
    ]
    assert changed == [
        '-  "gradient_accumulation_steps": 4}',
        '+  "gradient_accumulation_steps": 2}',
        "- deepspeed --num_gpus 8 --num_nodes 1 pretrain_gpt.py --micro-batch-size "
        "2 --global-batch-size 64 --deepspeed_config ds.json",
        "+ deepspeed --num_gpus 8 --num_nodes 2 pretrain_gpt.py --micro-batch-size "
        "2 --global-batch-size 64 --deepspeed_config ds.json",
    ]


def test_the_heredoc_json_is_checked_against_the_flags(tmp_path):
    """Megatron-DeepSpeed hands DeepSpeed its own global batch each iteration: the JSON's
    global batch and accumulation are replaced (a warning), its micro-batch is not (an
    error: DeepSpeed counts accumulation in it)."""
    code, out = inspect_run_sh(
        tmp_path, (FIXTURES / "invalid" / "ds_heredoc_disagrees.sh").read_text()
    )
    mismatch = next(f for f in out["findings"] if f["code"] == "megatron-deepspeed-mismatch")
    assert code == 1
    assert (
        "train_micro_batch_size_per_gpu 4 where --micro-batch-size gives 2" in mismatch["message"]
    )
    replaced = next(f for f in out["findings"] if f["code"] == "megatron-deepspeed-overridden")
    assert replaced["severity"] == "warning"
    assert "train_batch_size 512 where --global-batch-size gives 256" in replaced["message"]
    assert (
        "gradient_accumulation_steps 32 where micro-batches per step gives 16"
        in replaced["message"]
    )
    assert replaced["where"].endswith("run.sh:9")


def test_a_json_the_script_names_is_read_where_the_job_runs(tmp_path, monkeypatch):
    """``--deepspeed_config ds.json`` that the script does not write: read from the folder the
    job runs in and checked against the flags; a missing one is a warning naming where."""
    monkeypatch.chdir(tmp_path)
    script = f"deepspeed --num_gpus 8 --num_nodes 1 {PROGRAM} --deepspeed_config ds.json\n"
    code, out = inspect_run_sh(tmp_path, script)
    missing = [f for f in out["findings"] if f["code"] == "job-file-not-found"]
    assert code == 0 and missing and "ds.json" in missing[0]["message"]
    (tmp_path / "ds.json").write_text(
        '{"train_batch_size": 32, "train_micro_batch_size_per_gpu": 2}'
    )
    code, out = inspect_run_sh(tmp_path, script)
    assert code == 0  # Megatron's global batch replaces the JSON's each iteration
    assert "train_batch_size 32 where --global-batch-size gives 64" in next(
        f["message"] for f in out["findings"] if f["code"] == "megatron-deepspeed-overridden"
    )


def test_srun_fills_what_its_line_leaves_out_from_the_sbatch_lines(tmp_path):
    text = f"#SBATCH --nodes=2\nsrun --ntasks-per-node 4 python {PROGRAM}\n"
    assert inspect_run_sh(tmp_path, text)[1]["world_size"] == 8


def test_a_flag_with_an_unknown_value_after_equals_is_one_word(tmp_path):
    """``--deepspeed_config="$cfg"`` is a value, it cannot hide another flag;
    ``--tensor-model-parallel-size="$TP"`` is that flag, unknown."""
    _, out = inspect_run_sh(
        tmp_path,
        f"torchrun --nproc_per_node 8 {PROGRAM} "
        '--deepspeed_config="$CFG" --pipeline-model-parallel-size="$PP"\n',
    )
    assert out["context_parallel_size"] == 1 and out["tensor_parallel_size"] == 1
    assert out["pipeline_parallel_size"] is None


def test_an_unknown_program_word_still_starts_the_program(tmp_path):
    """``python3 ${EXEC} ...``: the words after it are Megatron's, and an unknown one among
    them may hold flags; one never set is empty as run."""
    line = "srun -n 4 python3 ${EXEC} --micro-batch-size 1 --global-batch-size 8 "
    _, out = inspect_run_sh(tmp_path, line + "$(cat llama_args)\n")
    assert out["world_size"] == 4
    assert out["micro_batch_size"] == 1 and out["global_batch_size"] == 8
    assert out["tensor_parallel_size"] is None
    _, out = inspect_run_sh(tmp_path, line + "${LLAMA_ARGS}\n")
    assert out["tensor_parallel_size"] == 1 and out["gradient_accumulation_steps"] == 2
    assert any(f["code"] == "job-defaults" for f in out["findings"])


@pytest.mark.parametrize(
    "tail, holds",
    [
        ('--data-path 1 "TRAIN: 1 0:0.6 $DATA"', False),  # quoted, starts as no flag does
        ("--data-path 0.2 <PATH TO DATA> 0.8 <PATH TO MORE>", False),
        ('--data-path 1 "TRAIN: 1 0:0.6 "$DATA', True),  # unquoted: $DATA may split into flags
        ('--data-path 1 "$DATA"', True),  # may be --tensor-model-parallel-size=2
    ],
)
def test_an_unknown_word_holds_flags_only_where_it_may_be_one(tmp_path, tail, holds):
    """A quoted word whose known start is no flag, and a template's ``<placeholder>``, are
    one value each whatever they hold: the sizes they cannot set keep their defaults."""
    text = f"DATA=$(cat data.txt)\ntorchrun --nproc_per_node 4 {PROGRAM} {tail}\n"
    _, out = inspect_run_sh(tmp_path, text)
    assert out["global_batch_size"] == 64
    assert (out["tensor_parallel_size"] is None) is holds
    assert (out["gradient_accumulation_steps"] is None) is holds


def test_yaml_cfg_replaces_every_argument(tmp_path):
    code, out = inspect_run_sh(
        tmp_path, f"torchrun --nproc_per_node 4 {PROGRAM} --yaml-cfg run.yaml\n"
    )
    assert code == 0 and out["world_size"] == 4
    assert [out[k] for k in ("micro_batch_size", "global_batch_size", "tensor_parallel_size")] == [
        None,
        None,
        None,
    ]
    assert any(
        f["code"] == "script-not-followed" and "--yaml-cfg" in f["message"] for f in out["findings"]
    )


def test_a_command_run_from_an_unknown_string_hides_the_defaults(tmp_path):
    """No launch line can be read (``eval "$run_cmd"`` of an unknown string): flags seen
    elsewhere are read, the sizes they may set are unknown."""
    text = (
        'ARGS="--micro-batch-size 2 --global-batch-size 64"\n'
        'run_cmd="$(cat cmd.txt)"\neval "$run_cmd $ARGS"\n'
    )
    _, out = inspect_run_sh(tmp_path, text)
    assert out["micro_batch_size"] == 2 and out["tensor_parallel_size"] is None
