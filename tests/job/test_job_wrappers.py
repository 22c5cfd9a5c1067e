"""Jobs as Slurm wraps them, read as they run: the variables sbatch and srun set from their
options, a script run by ``sbatch``/``srun``/``bash`` or sourced (followed with its
arguments), a script written by a heredoc and then run, and a script that stops when run
without its arguments (read with them not known, never refused)."""

from run_batchspec import inspected

HF = "train.py --per_device_train_batch_size 2 --gradient_accumulation_steps 4 --output_dir o"
MEGATRON = (
    "pretrain_gpt.py --num-layers 80 --hidden-size 8192 --num-attention-heads 64 "
    "--seq-length 4096 --max-position-embeddings 4096 --micro-batch-size 1 "
    "--global-batch-size 1024"
)


def inspect(tmp_path, monkeypatch, files: dict[str, str], *args: str, job: str = "job.sh"):
    """``files`` written in ``tmp_path``, and the JSON of ``job`` among them inspected there."""
    monkeypatch.chdir(tmp_path)
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return inspected(job, *args)


def warnings(out: dict) -> list[str]:
    return [f["message"] for f in out["findings"] if f["severity"] != "info"]


def test_sbatch_gpus_per_node_gives_the_gpus_each_node_sees(tmp_path, monkeypatch):
    job = (
        "#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=1\n#SBATCH --gpus-per-node=8\n"
        "torchrun --nnodes $SLURM_NNODES --nproc_per_node $SLURM_GPUS_ON_NODE "
        f"--node_rank $SLURM_NODEID {HF}\n"
    )
    out = inspect(tmp_path, monkeypatch, {"job.sh": job})
    assert out["world_size"] == 16 and out["global_batch_size"] == 2 * 4 * 16


def test_sbatch_counts_the_tasks_from_nodes_and_tasks_per_node(tmp_path, monkeypatch):
    job = (
        "#!/bin/bash\n#SBATCH -N 2\n#SBATCH --ntasks-per-node=4\n"
        f"mpirun -np $SLURM_NTASKS python {HF}\n"
    )
    assert inspect(tmp_path, monkeypatch, {"job.sh": job})["world_size"] == 8


def test_srun_options_set_what_each_task_sees(tmp_path, monkeypatch):
    job = (
        "#!/bin/bash\n#SBATCH --nodes=4\n"
        "srun --nodes 2 --ntasks-per-node 1 --gres=gpu:4 bash -c '"
        "torchrun --nnodes $SLURM_NNODES --nproc_per_node $SLURM_GPUS_ON_NODE "
        f"--node_rank $SLURM_PROCID {HF}'\n"
    )
    out = inspect(tmp_path, monkeypatch, {"job.sh": job})
    assert out["world_size"] == 8  # srun's 2 nodes, not the allocation's 4
    # what only the running task knows stays unknown, not empty
    unknown = (
        "#!/bin/bash\nsrun --ntasks-per-node 1 bash -c "
        f"'torchrun --nnodes $SLURM_NNODES --nproc_per_node 8 {HF}'\n"
    )
    out = inspect(tmp_path, monkeypatch, {"job.sh": unknown})
    assert out["world_size"] is None
    assert any("set by Slurm" in m for m in warnings(out))


def test_sbatch_of_another_script_is_followed_with_its_arguments(tmp_path, monkeypatch):
    train = (
        "#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --gpus-per-node=8\nMBS=${1:-1}\n"
        "srun --ntasks-per-node 1 torchrun --nnodes $SLURM_NNODES "
        "--nproc_per_node $SLURM_GPUS_PER_NODE train.py --per_device_train_batch_size $MBS "
        "--gradient_accumulation_steps $2 --output_dir o\n"
    )
    submit = "#!/bin/bash\nMBS=4\nsbatch --nodes 4 --job-name sweep train.slurm $MBS 2\n"
    out = inspect(
        tmp_path, monkeypatch, {"train.slurm": train, "submit.sh": submit}, job="submit.sh"
    )
    assert out["world_size"] == 32  # sbatch's --nodes 4 beats the script's #SBATCH --nodes=2
    assert out["micro_batch_size"] == 4 and out["gradient_accumulation_steps"] == 2
    assert out["global_batch_size"] == 4 * 2 * 32


def test_srun_and_bash_run_a_local_script_with_its_arguments(tmp_path, monkeypatch):
    launch = (
        "#!/bin/bash\nGPUS=${GPUS:-1}\ntorchrun --nnodes ${NNODES:-1} --nproc_per_node $GPUS "
        "train.py --per_device_train_batch_size $1 --gradient_accumulation_steps 4 --output_dir o\n"
    )
    job = "#!/bin/bash\nexport GPUS=8\nNNODES=2  # not exported: launch.sh does not see it\nbash launch.sh 2\n"
    out = inspect(tmp_path, monkeypatch, {"launch.sh": launch, "job.sh": job})
    assert out["world_size"] == 8 and out["micro_batch_size"] == 2
    srun = "#!/bin/bash\n#SBATCH --nodes=2\nexport GPUS=4\nsrun --ntasks-per-node=1 ./launch.sh 3\n"
    out = inspect(
        tmp_path,
        monkeypatch,
        {"launch.sh": launch.replace("${NNODES:-1}", "$SLURM_NNODES"), "job.sh": srun},
    )
    assert out["world_size"] == 8 and out["micro_batch_size"] == 3


def test_a_sourced_local_file_is_read_and_what_was_set_before_stands(tmp_path, monkeypatch):
    env = "#!/bin/bash\nexport GPUS_PER_NODE=8\nMBS=2\n"
    job = (
        "#!/bin/bash\nNNODES=2\nsource ./env.sh\n"
        "torchrun --nnodes $NNODES --nproc_per_node $GPUS_PER_NODE train.py "
        "--per_device_train_batch_size $MBS --gradient_accumulation_steps 4 --output_dir o\n"
    )
    out = inspect(tmp_path, monkeypatch, {"env.sh": env, "job.sh": job})
    assert out["world_size"] == 16 and out["global_batch_size"] == 2 * 4 * 16
    assert not warnings(out)
    dotted = inspect(tmp_path, monkeypatch, {"job.sh": job.replace("source ./env.sh", ". env.sh")})
    assert dotted["world_size"] == 16


def test_a_script_written_by_a_heredoc_is_read_as_it_runs(tmp_path, monkeypatch):
    job = (
        "#!/bin/bash\n#SBATCH --nodes=8\n#SBATCH --ntasks-per-node=1\n#SBATCH --gpus-per-node=8\n"
        "TP=8\nPP=4\ncat > run_70b.sh <<EOT\n#!/bin/bash\n"
        "torchrun --nnodes \\$SLURM_NNODES --nproc_per_node 8 --node_rank \\$SLURM_NODEID \\\n"
        f"  {MEGATRON} \\\n  --tensor-model-parallel-size $TP --pipeline-model-parallel-size $PP\n"
        "EOT\nchmod +x run_70b.sh\nsrun bash run_70b.sh\n"
    )
    out = inspect(tmp_path, monkeypatch, {"job.sh": job})
    assert out["framework"] == "megatron"
    assert (out["tensor_parallel_size"], out["pipeline_parallel_size"]) == (8, 4)
    assert out["world_size"] == 64 and out["data_parallel_size"] == 2


def test_a_quoted_heredoc_is_written_as_it_stands(tmp_path, monkeypatch):
    body = (
        "TP=${TP:-2}\ntorchrun --nproc_per_node 8 "
        + MEGATRON
        + " --tensor-model-parallel-size $TP\n"
    )
    job = "#!/bin/bash\nTP=8\ncat <<QEOFQ > run.sh\n" + body + "EOF\nbash run.sh\n"
    expanded = inspect(tmp_path, monkeypatch, {"job.sh": job.replace("Q", "")})
    assert expanded["tensor_parallel_size"] == 8  # ${TP:-2} expanded when written
    quoted = inspect(tmp_path, monkeypatch, {"job.sh": job.replace("Q", "'")})
    assert quoted["tensor_parallel_size"] == 2  # TP is not exported: run.sh takes its default


def test_a_script_that_needs_its_arguments_is_read_with_them_unknown(tmp_path, monkeypatch):
    job = (
        '#!/bin/bash\nif [ $# -lt 1 ]; then\n  echo "usage: $0 MODEL"\n  exit 1\nfi\n'
        f"MODEL=$1\ntorchrun --nproc_per_node 8 {HF} --model_name_or_path $MODEL\n"
    )
    out = inspect(tmp_path, monkeypatch, {"job.sh": job})
    assert out["world_size"] == 8 and out["global_batch_size"] == 64
    assert any("stops here" in m and "($1)" in m for m in warnings(out))
    short = '#!/bin/bash\n[ -z "$1" ] && { echo usage; exit 1; }\n' + job.split("fi\n", 1)[1]
    assert inspect(tmp_path, monkeypatch, {"job.sh": short})["world_size"] == 8


def test_a_script_that_needs_its_environment_is_read_with_it_unknown(tmp_path, monkeypatch):
    job = (
        '#!/bin/bash\nif [ -z "$NNODES" ]; then\n  echo "NNODES is not set"\n  exit 1\nfi\n'
        f"torchrun --nnodes $NNODES --nproc_per_node 8 {HF}\n"
    )
    out = inspect(tmp_path, monkeypatch, {"job.sh": job})
    assert out["world_size"] is None and out["micro_batch_size"] == 2
    assert any("environment not known" in m for m in warnings(out))
    assert inspect(tmp_path, monkeypatch, {"job.sh": job}, "--env", "NNODES=2")["world_size"] == 16


def test_a_substring_at_a_computed_offset_does_not_stop_the_reader(tmp_path, monkeypatch):
    job = (
        "#!/bin/bash\nN=0\nHOSTS=node1,node2\nREST=${HOSTS:$N+6}\n"
        f"torchrun --nproc_per_node 8 {HF}\n"
    )
    assert inspect(tmp_path, monkeypatch, {"job.sh": job})["world_size"] == 8


def test_scripts_that_run_each_other_are_read_once_each(tmp_path, monkeypatch):
    a = f"#!/bin/bash\nexport N=2\nbash b.sh\ntorchrun --nproc_per_node $N {HF}\n"
    b = "#!/bin/bash\nbash a.sh\nN=4  # not exported back: a.sh keeps its own\n"
    out = inspect(tmp_path, monkeypatch, {"a.sh": a, "b.sh": b}, job="a.sh")
    assert out["world_size"] == 2


def test_a_followed_script_that_does_not_parse_is_a_note(tmp_path, monkeypatch):
    job = f"#!/bin/bash\nbash broken.sh\ntorchrun --nproc_per_node 2 {HF}\n"
    files = {"broken.sh": "#!/bin/bash\nif [ -z $X ; then\n", "job.sh": job}
    out = inspect(tmp_path, monkeypatch, files)
    assert out["world_size"] == 2
    assert any("broken.sh" in m and "does not parse" in m for m in warnings(out))


def test_a_recipe_launcher_with_options_reads_the_recipe_it_is_given(tmp_path, monkeypatch):
    """The recipe-repository style: --help caught by a pattern, options parsed by a loop, the
    config path built from them (``recipes/$MODEL/$TASK/...``), the launch kept in
    variables and run by ``srun bash -c``."""
    (tmp_path / "recipes" / "m7b" / "sft").mkdir(parents=True)
    (tmp_path / "recipes" / "m7b" / "sft" / "config_full.yaml").write_text(
        "model_name_or_path: m\nper_device_train_batch_size: 4\ngradient_accumulation_steps: 2\n"
        "output_dir: o\n"
    )
    job = (
        "#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=1\n#SBATCH --gres=gpu:8\n"
        'if [[ "$*" == *"--help"* ]]; then\n  echo usage\n  exit 0\nfi\n'
        'while [[ $# -gt 0 ]]; do\n  case $1 in\n    --model) MODEL="$2"; shift 2 ;;\n'
        '    --task) TASK="$2"; shift 2 ;;\n    --config) SUFFIX="$2"; shift 2 ;;\n'
        "    *) exit 1 ;;\n  esac\ndone\n"
        "CONFIG_FILE=recipes/$MODEL/$TASK/config_$SUFFIX.yaml\n"
        "WORLD_SIZE=$(($SLURM_NNODES * 8))\n"
        'export CMD="src/$TASK.py --config $CONFIG_FILE"\n'
        'export LAUNCHER="accelerate launch --num_machines $SLURM_NNODES '
        '--num_processes $WORLD_SIZE --machine_rank \\$SLURM_PROCID"\n'
        'srun bash -c "$LAUNCHER $CMD"\n'
    )
    args = ["--", "--model", "m7b", "--task", "sft", "--config", "full"]
    out = inspect(tmp_path, monkeypatch, {"launch.slurm": job}, *args, job="launch.slurm")
    assert (out["micro_batch_size"], out["gradient_accumulation_steps"]) == (4, 2)
    assert out["world_size"] == 16 and out["global_batch_size"] == 4 * 2 * 16


MEGATRON_8 = f"{MEGATRON} --tensor-model-parallel-size 8"


def test_a_script_named_under_the_current_folder_is_followed(tmp_path, monkeypatch):
    """``. `pwd`/CONFIG.sh``, ``bash $(pwd)/run.sh``, ``$PWD/run.sh``: the folder the job runs
    in, where a relative name starts too."""
    config = f'export PARAMS="{MEGATRON_8}"\n'
    submit = (
        "#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=8\n"
        ". `pwd`/config.sh\nsrun bash $(pwd)/run.sh\n"
    )
    run = "#!/bin/bash\npython -u pretrain_gpt.py $PARAMS\n"
    files = {"config.sh": config, "run.sh": run, "job.sh": submit}
    out = inspect(tmp_path, monkeypatch, files)
    assert out["world_size"] == 16 and out["data_parallel_size"] == 2
    dollar = inspect(tmp_path, monkeypatch, {"job.sh": submit.replace("`pwd`", "$PWD")})
    assert dollar["world_size"] == 16


def test_a_followed_template_with_placeholders_is_read_with_them_unknown(tmp_path, monkeypatch):
    config = f'DATA=<path to the data>\nexport PARAMS="{MEGATRON_8} --micro-batch-size 2"\n'
    job = (
        "#!/bin/bash\nsource config.sh\n"
        'torchrun --nproc_per_node 8 pretrain_gpt.py $PARAMS --data-path "$DATA"\n'
    )
    out = inspect(tmp_path, monkeypatch, {"config.sh": config, "job.sh": job})
    assert (out["tensor_parallel_size"], out["micro_batch_size"]) == (8, 2)
    assert any("config.sh" in m and "line 1" in m for m in warnings(out))


def test_a_script_sbatch_runs_sizes_its_steps_from_its_own_sbatch_lines(tmp_path, monkeypatch):
    """The batch script's ``#SBATCH --ntasks-per-node=8`` and sbatch's ``--nodes=2`` size
    the ``srun`` in it (``sh -c`` with its options, ``bash -x -c``, as published)."""
    run = (
        "#!/bin/bash\n#SBATCH -t 0:30:00 --exclusive --ntasks-per-node=8\n"
        'CMD="python -u pretrain_gpt.py $PARAMS"\nsrun -l --output=x.log bash -x -c "$CMD"\n'
    )
    submit = f'#!/bin/bash\nexport PARAMS="{MEGATRON_8}"\nsbatch -p x --nodes=2 run.sh\n'
    out = inspect(tmp_path, monkeypatch, {"run.sh": run, "submit.sh": submit}, job="submit.sh")
    assert out["world_size"] == 16 and out["data_parallel_size"] == 2


def test_sbatch_wrap_is_the_batch_script(tmp_path, monkeypatch):
    run = (
        "#!/bin/bash\ntorchrun --nnodes $SLURM_NNODES --nproc_per_node 8 "
        f"--node_rank $SLURM_NODEID {MEGATRON_8}\n"
    )
    submit = '#!/bin/bash\nsbatch --exclusive --nodes 4 --wrap="srun bash $(pwd)/run.sh"\n'
    files = {"run.sh": run, "submit.sh": submit}
    out = inspect(tmp_path, monkeypatch, files, job="submit.sh")
    assert out["world_size"] == 32 and out["data_parallel_size"] == 4
    spaced = submit.replace('--wrap="srun', '--wrap "srun --ntasks-per-node=1')
    files["submit.sh"] = spaced
    assert inspect(tmp_path, monkeypatch, files, job="submit.sh")["world_size"] == 32


def test_a_batch_script_given_on_sbatch_input_is_read(tmp_path, monkeypatch):
    job = (
        "#!/bin/bash\nTP=8\nsbatch --nodes 2 <<EOF\n#!/bin/bash\n#SBATCH --nodes=4\n"
        "#SBATCH --ntasks-per-node=8\n"
        f"srun python {MEGATRON} --tensor-model-parallel-size $TP\nEOF\n"
    )
    out = inspect(tmp_path, monkeypatch, {"job.sh": job})
    assert out["world_size"] == 16  # sbatch's --nodes 2 beats the script's 4
    assert out["tensor_parallel_size"] == 8


def test_glued_short_options_and_node_ranges(tmp_path, monkeypatch):
    job = f"#!/bin/bash\n#SBATCH -N2\n#SBATCH --ntasks-per-node=8\nsrun python {MEGATRON_8}\n"
    files = {"job.sh": job}
    assert inspect(tmp_path, monkeypatch, files)["world_size"] == 16
    files["submit.sh"] = "#!/bin/bash\nsbatch -N4 job.sh\n"
    assert inspect(tmp_path, monkeypatch, files, job="submit.sh")["world_size"] == 32
    # a range is the scheduler's choice: unknown, not the script's 2
    files["submit.sh"] = "#!/bin/bash\nsbatch --nodes=2-4 job.sh\n"
    assert inspect(tmp_path, monkeypatch, files, job="submit.sh")["world_size"] is None
    files["submit.sh"] = "#!/bin/bash\nsbatch --nodes=3-3 job.sh\n"
    assert inspect(tmp_path, monkeypatch, files, job="submit.sh")["world_size"] == 24
