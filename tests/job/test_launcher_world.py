"""A launcher's facts do not depend on the program (issue 34): a job that launches a program no
framework reads still says how many processes its launcher starts, and what the system leaves
to its own runtime, or what a known environment script sets, is read as such."""

from __future__ import annotations

import textwrap

import pytest
from run_batchspec import inspect


def write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip())
    return path


def test_an_unread_program_under_torchrun_keeps_the_launcher_world(tmp_path):
    job = write(
        tmp_path,
        "launch.sh",
        """
        #!/bin/bash
        torchrun --nnodes 2 --nproc_per_node 8 my_train.py --epochs 3
        """,
    )
    code, out = inspect(job, exits=(2,))
    assert out["world_size"] == 16
    assert out["global_batch_size"] is None and out["micro_batch_size"] is None
    assert "its launcher starts 16 processes" in out["error"]


def test_a_skypilot_task_of_a_custom_program_has_the_world_of_its_nodes(tmp_path):
    task = write(
        tmp_path,
        "task.yaml",
        """
        resources:
          accelerators: L4:2
        num_nodes: 2
        run: |
          cd examples
          source .venv/bin/activate
          torchrun --nnodes=$SKYPILOT_NUM_NODES \\
            --nproc_per_node=$SKYPILOT_NUM_GPUS_PER_NODE main.py
        """,
    )
    code, out = inspect(task, exits=(2,))
    assert out["world_size"] == 4


@pytest.mark.parametrize(
    "launcher",
    [
        "python -u -m torch.distributed.run --nproc_per_node 8 --nnodes $SLURM_NNODES",
        "python -u -m accelerate.commands.launch --num_processes 16 --num_machines 2",
        "python -m deepspeed.launcher.runner --num_gpus 8 --num_nodes 2",
    ],
)
def test_a_launcher_module_behind_srun_bash_c_starts_the_program(tmp_path, launcher):
    """``srun bash -c "$CMD"``, one task a node, ``$CMD`` a launcher run as a module with a
    part left to each node (``\\$SLURM_PROCID``): the launcher's world, the program named
    once."""
    job = write(
        tmp_path,
        "job.slurm",
        f"""
        #!/bin/bash
        #SBATCH --nodes=2
        #SBATCH --ntasks-per-node=1
        CMD="{launcher} --node_rank \\$SLURM_PROCID gpu-test.py"
        srun --jobid $SLURM_JOB_ID bash -c "$CMD"
        """,
    )
    code, out = inspect(job, exits=(2,))
    assert out["world_size"] == 16
    assert out["error"].count("gpu-test.py") == 1


def test_several_unread_launches_of_different_worlds_give_no_world(tmp_path):
    job = write(
        tmp_path,
        "launch.sh",
        """
        #!/bin/bash
        torchrun --nproc_per_node 8 prepare.py
        torchrun --nproc_per_node 4 my_train.py
        """,
    )
    code, out = inspect(job, exits=(2,))
    assert out["world_size"] is None


@pytest.mark.parametrize(
    "activate",
    [
        ".venv/bin/activate",
        "/opt/conda/bin/activate",
        "venv/bin/activate",
        "/etc/profile.d/modules.sh",
        "$HOME/miniconda3/etc/profile.d/conda.sh",
        "/usr/share/lmod/lmod/init/bash",
    ],
)
def test_a_python_environment_activation_changes_no_job_variable(tmp_path, activate):
    job = write(
        tmp_path,
        "launch.sh",
        f"""
        #!/bin/bash
        GPUS=4
        MICRO=2
        source {activate}
        torchrun --nproc_per_node $GPUS train.py --per_device_train_batch_size $MICRO \\
            --gradient_accumulation_steps 4 --output_dir out
        """,
    )
    code, out = inspect(job)
    assert (out["world_size"], out["micro_batch_size"], out["global_batch_size"]) == (4, 2, 32)


def test_another_sourced_file_not_found_still_makes_the_variables_unknown(tmp_path):
    job = write(
        tmp_path,
        "launch.sh",
        """
        #!/bin/bash
        GPUS=4
        source ./cluster_env.sh
        torchrun --nproc_per_node $GPUS train.py --per_device_train_batch_size 2 \\
            --gradient_accumulation_steps 4 --output_dir out
        """,
    )
    code, out = inspect(job, exits=(0, 1, 2))
    assert out["world_size"] is None


TRAINJOB = """apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata:
  name: multi-node
spec:
  runtimeRef:
    name: torch-distributed
  trainer:
    numNodes: {nodes}
{resources}    command:
      - torchrun
      - my_train.py
"""
GPUS = "    resourcesPerNode:\n      limits:\n        nvidia.com/gpu: 4\n"


@pytest.mark.parametrize("nodes, resources, world", [(3, "", None), (2, GPUS, 8)])
def test_a_trainjob_has_the_world_its_runtime_and_gpus_give(tmp_path, nodes, resources, world):
    """With GPUs asked for, ``numProcPerNode`` (auto) is the pod's GPUs; without, the runtime's
    torchrun settings (``PET_NPROC_PER_NODE``) are set to a value this file does not give, and
    torchrun's own default of 1 does not apply."""
    job = tmp_path / "trainjob.yaml"
    job.write_text(TRAINJOB.format(nodes=nodes, resources=resources))
    code, out = inspect(job, exits=(2,))
    assert out["world_size"] == world


def test_overrides_after_config_are_not_a_trl_config_file(tmp_path):
    """fairseq2's ``--config key=value ...`` is no TRL ``--config FILE``: not read as the HF
    Trainer (which would state a data-parallel size for a program it does not know)."""
    job = write(
        tmp_path,
        "launch.sh",
        """
        #!/bin/bash
        torchrun --nnodes 2 --nproc_per_node 8 -m recipes.lm.sft out \\
            --config model.name=llama3_1_8b gang.tensor_parallel_size=8
        """,
    )
    code, out = inspect(job, exits=(2,))
    assert out["framework"] is None
    assert out["data_parallel_size"] is None and out["world_size"] == 16


def test_a_torchtune_config_not_read_leaves_the_tensor_parallel_size_unknown(tmp_path):
    """``full_finetune_distributed`` reads ``tensor_parallel_dim`` from its config: a built-in
    config that is not here may set it, so the data-parallel size is unknown; a recipe that
    never reads it keeps one rank a copy."""
    full = write(
        tmp_path,
        "full.sh",
        """
        #!/bin/bash
        tune run --nproc_per_node 8 full_finetune_distributed --config not_here/full.yaml
        """,
    )
    code, out = inspect(full, exits=(0, 1, 2))
    assert out["tensor_parallel_size"] is None and out["data_parallel_size"] is None
    dpo = write(
        tmp_path,
        "dpo.sh",
        """
        #!/bin/bash
        tune run --nproc_per_node 8 lora_dpo_distributed --config not_here/dpo.yaml
        """,
    )
    code, out = inspect(dpo, exits=(0, 1, 2))
    assert out["tensor_parallel_size"] == 1 and out["data_parallel_size"] == 8


@pytest.mark.parametrize(
    "name, text",
    [
        (
            "dstack.yml",
            """
            type: task
            commands:
              - torchrun --nproc_per_node $DSTACK_GPUS_PER_NODE train.py --per_device_train_batch_size 2 --output_dir o
            resources:
              gpu: v5litepod-8
            """,
        ),
        (
            "sky.yaml",
            """
            resources:
              accelerators: tpu-v2-8
            run: |
              torchrun --nproc_per_node $SKYPILOT_NUM_GPUS_PER_NODE train.py --per_device_train_batch_size 2 --output_dir o
            """,
        ),
    ],
)
def test_a_tpu_slice_is_no_gpu_count(tmp_path, name, text):
    """``v5litepod-8`` names a TPU slice, not one GPU of that name: the ranks are unknown."""
    job = write(tmp_path, name, text)
    code, out = inspect(job, exits=(0, 1, 2))
    assert out["world_size"] is None and out["micro_batch_size"] == 2


def test_a_file_named_through_a_cloned_folder_is_found_without_it(tmp_path, monkeypatch):
    """``git clone X && cd X`` then ``../configs/sft.yaml``: the folder exists once the job has
    cloned it; the file it names through it is the job's own, found here."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "sft.yaml").write_text(
        "per_device_train_batch_size: 2\ngradient_accumulation_steps: 4\noutput_dir: o\n"
    )
    job = write(
        tmp_path,
        "launch.sh",
        """
        #!/bin/bash
        git clone https://example.invalid/handbook.git
        cd handbook
        torchrun --nproc_per_node 2 scripts/run_sft.py ../configs/sft.yaml
        """,
    )
    code, out = inspect(job.name)
    assert (out["micro_batch_size"], out["gradient_accumulation_steps"]) == (2, 4)
    assert out["global_batch_size"] == 16


ACCELERATE_YAML = (
    "compute_environment: LOCAL_MACHINE\ndistributed_type: DEEPSPEED\nnum_processes: 8\n"
)


@pytest.mark.parametrize(
    "name, text",
    [
        (
            "axolotl.yml",
            "base_model: m\nmicro_batch_size: 2\ngradient_accumulation_steps: 4\n"
            "deepspeed: acc.yaml\ndatasets:\n  - path: x\n    type: alpaca\n",
        ),
        (
            "launch.sh",
            "#!/bin/bash\ntorchrun --nproc_per_node 2 train.py --output_dir o \\\n"
            "  --per_device_train_batch_size 2 --gradient_accumulation_steps 4 --deepspeed acc.yaml\n",
        ),
    ],
)
def test_a_deepspeed_key_naming_an_accelerate_yaml_is_an_error(tmp_path, monkeypatch, name, text):
    """Issue 34, item 8: the Trainer and Axolotl json.load the file ``deepspeed`` names; an
    accelerate YAML there stops the run, so the job is wrong (exit 1), not unreadable (2)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "acc.yaml").write_text(ACCELERATE_YAML)
    (tmp_path / name).write_text(text)
    code, out = inspect(name, "--world-size", "2", exits=(1,))
    assert "deepspeed-config-unreadable" in [f["code"] for f in out["findings"]]


def test_one_generic_trainer_field_does_not_make_a_trainer_program(tmp_path):
    """A custom FSDP loop taking ``--max_steps`` (a TrainingArguments field too) and its own
    ``--train_batch_size`` is no HF Trainer program: exit 2, its launcher's world stated, no
    data-parallel size of a Trainer it does not run; two Trainer fields, or one that names its
    batch or output folder, still are."""
    custom = write(
        tmp_path,
        "custom.sh",
        """
        #!/bin/bash
        torchrun --nnodes 4 --nproc_per_node 8 train.py --max_steps=50 --train_batch_size=1 \\
            --sharding_strategy=full --num_layers=32
        """,
    )
    code, out = inspect(custom, exits=(2,))
    assert out["framework"] is None and out["data_parallel_size"] is None
    assert out["world_size"] == 32
    trainer = write(
        tmp_path,
        "trainer.sh",
        """
        #!/bin/bash
        torchrun --nproc_per_node 8 train.py --max_steps 50 --logging_steps 10
        """,
    )
    code, out = inspect(trainer, exits=(0, 1))
    assert out["framework"] == "hf"


@pytest.mark.parametrize(
    "launch, world",
    [
        ("FORCE_TORCHRUN=1 NNODES=4 llamafactory-cli train sft.yaml", 32),
        ("FORCE_TORCHRUN=1 llamafactory-cli train sft.yaml", 8),  # NNODES: 1
        ("deepspeed train.py --deepspeed ds.json --per_device_train_batch_size 2 $GA", 8),
        ("torchrun --nnodes 2 --nproc_per_node 4 train.py --per_device_train_batch_size 2 $GA", 8),
    ],
)
def test_processes_per_node_alone_is_the_gpus_each_node_has(tmp_path, launch, world):
    """``--nproc-per-node 8`` without a world: a launcher that starts one process per visible
    GPU starts 8 on each of the nodes the job gives; one that says its own sizes keeps them."""
    (tmp_path / "sft.yaml").write_text(
        "stage: sft\ndo_train: true\nmodel_name_or_path: m\nper_device_train_batch_size: 2\n"
    )
    (tmp_path / "ds.json").write_text('{"train_micro_batch_size_per_gpu": "auto"}\n')
    job = write(
        tmp_path, "train.sh", f"#!/bin/bash\nGA='--gradient_accumulation_steps 1'\n{launch}\n"
    )
    code, out = inspect(job, "--nproc-per-node", "8")
    assert out["world_size"] == world
    assert out["global_batch_size"] == 2 * world
    where = next(s["where"] for s in out["sources"] if s["field"] == "world_size")
    assert ("--nproc-per-node" in where) is ("torchrun" not in launch)


@pytest.mark.parametrize(
    "launch, world",
    [
        ("mpirun -np 8 ./train_gpt2cu -b 64 -n 5000", 8),  # a C/CUDA trainer
        ("fabric run --num-nodes 2 --devices 4 train.py --lr 3e-4", 8),
        ("fabric run model --devices=8 pretrain.py", 8),  # the older spelling
        ("fabric run train.py", 1),  # --devices "1", --num-nodes 1
    ],
)
def test_a_launcher_states_its_world_whatever_it_runs(tmp_path, launch, world):
    job = write(tmp_path, "launch.sh", f"#!/bin/bash\nsrun hostname\n{launch}\n")
    code, out = inspect(job, exits=(2,))
    assert out["world_size"] == world


#: A role of a PyTorchJob whose container gives only its image's program flags.
IMAGE_ROLE = """
      replicas: {}
      template:
        spec:
          containers:
            - name: pytorch
              image: example/mnist:latest
              args: ["--backend", "nccl"]
              resources: {{limits: {{nvidia.com/gpu: 1}}}}"""
PYTORCHJOB_OF_AN_IMAGE = f"""
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {{name: mnist}}
spec:
  pytorchReplicaSpecs:
    Master:{IMAGE_ROLE.format(1)}
    Worker:{IMAGE_ROLE.format(3)}
"""

MPIJOB = """
apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata: {name: hvd}
spec:
  slotsPerWorker: 1
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template:
        spec:
          containers:
          - name: mpi
            image: horovod/horovod:0.28.1
            command: [mpirun]
            args: [-np, "2", -bind-to, none, -x, PATH, python, /examples/mnist.py]
    Worker:
      replicas: 2
      template:
        spec:
          containers:
          - name: mpi
            image: horovod/horovod:0.28.1
            resources: {limits: {nvidia.com/gpu: 1}}
"""


@pytest.mark.parametrize(
    "manifest, world, says",
    [
        (PYTORCHJOB_OF_AN_IMAGE, 4, "their controller sets WORLD_SIZE 4"),
        (MPIJOB, 2, "its launcher starts 2 processes"),
    ],
)
def test_a_kubeflow_job_of_an_unread_program_states_its_world(tmp_path, manifest, world, says):
    """A PyTorchJob whose containers give only their image's program flags (``args`` with no
    ``command``): the operator's ``WORLD_SIZE``; an MPIJob: its Launcher's ``mpirun``."""
    code, out = inspect(write(tmp_path, "job.yaml", manifest), exits=(2,))
    assert out["world_size"] == world
    assert says in out["error"]


@pytest.mark.parametrize(
    "spawn, world",
    [("--world_size 8 --use_deepspeed", 8), ("--use_mpi", 1)],  # --world_size: 1 unless given
)
def test_a_launcher_script_is_no_program(tmp_path, spawn, world):
    """``python gaudi_spawn.py --world_size 8 sft.py ...``: the spawner starts the program,
    it is not the program (the Trainer's flags are sft.py's)."""
    job = write(
        tmp_path,
        "train.sh",
        f"""
        #!/bin/bash
        python ../gaudi_spawn.py {spawn} sft.py --output_dir out \\
            --per_device_train_batch_size=1 --gradient_accumulation_steps=2
        """,
    )
    code, out = inspect(job, exits=(0,))
    assert out["world_size"] == world
    assert out["global_batch_size"] == 2 * world


def test_a_skypilot_task_counts_its_nodes_from_their_addresses(tmp_path):
    """``SKYPILOT_NODE_IPS`` holds a line per node: ``wc -l`` counts them, ``head -n1`` is the
    head node."""
    task = write(
        tmp_path,
        "task.yaml",
        """
        resources:
          accelerators: A100:8
        num_nodes: 2
        run: |
          num_nodes=`echo "$SKYPILOT_NODE_IPS" | wc -l`
          master_addr=$(echo "$SKYPILOT_NODE_IPS" | head -n1)
          python -m torch.distributed.run --nproc_per_node=$SKYPILOT_NUM_GPUS_PER_NODE \\
            --nnodes=$num_nodes --master_addr=$master_addr train_custom.py
        """,
    )
    code, out = inspect(task, exits=(2,))
    assert out["world_size"] == 16


POD = """
apiVersion: v1
kind: Pod
metadata: {name: finetune}
spec:
  containers:
  - name: trainer
    image: example/trainer
    command: ["bash", "-c"]
    args:
    - accelerate launch --num_processes 4 train.py --output_dir o
      --per_device_train_batch_size 2 --gradient_accumulation_steps 3
    resources: {limits: {nvidia.com/gpu: 4}}
"""

STATEFULSET = """
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: trainer}
spec:
  replicas: 2
  serviceName: trainer
  template:
    spec:
      containers:
      - name: trainer
        image: example/trainer
        command: ["torchrun", "--nnodes=2", "--nproc_per_node=8", "train.py",
                  "--output_dir", "o", "--per_device_train_batch_size", "2"]
        resources: {limits: {nvidia.com/gpu: 8}}
"""


@pytest.mark.parametrize(
    "manifest, world, global_batch",
    [(POD, 4, 24), (STATEFULSET, 16, None)],  # the StatefulSet's program leaves accumulation
)
def test_a_pod_and_a_statefulset_run_their_command(tmp_path, manifest, world, global_batch):
    code, out = inspect(write(tmp_path, "job.yaml", manifest))
    assert out["world_size"] == world
    assert out["global_batch_size"] == global_batch
    assert out["job_definition"]["nodes"] == world // (4 if world == 4 else 8)


@pytest.mark.parametrize(
    "tasks, nnodes, error",
    [
        ("#SBATCH --ntasks-per-node=8", "--nnodes=2", True),  # 16 torchruns told of 2 nodes
        ("#SBATCH --ntasks-per-node=1", "--nnodes=2", False),  # one a node: as written
        ("", "--nnodes=2", False),  # sbatch's default: one task a node
        ("#SBATCH --ntasks-per-node=1", "", True),  # 2 torchruns, each told of 1 node
    ],
)
def test_a_node_launcher_started_by_srun_needs_one_copy_a_node(tmp_path, tasks, nnodes, error):
    job = write(
        tmp_path,
        "job.slurm",
        f"#!/bin/bash\n#SBATCH --nodes=2\n{tasks}\nsrun torchrun --nproc_per_node=8 {nnodes} "
        "pretrain_gpt.py --micro-batch-size 1 --global-batch-size 64\n",
    )
    code, out = inspect(job)
    assert (code == 1) is error
    assert any(f["code"] == "launcher-copies" for f in out["findings"]) is error


def test_a_slurm_count_that_is_no_number_is_unknown_not_a_default(tmp_path):
    """``#SBATCH --ntasks-per-node=YOUR_NUM_TASKS_PER_NODE`` (a template's): the tasks are
    unknown, not Slurm's one a node."""
    job = write(
        tmp_path,
        "job.slurm",
        "#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=YOUR_NUM_TASKS_PER_NODE\n"
        "srun python pretrain_gpt.py --micro-batch-size 1 --global-batch-size 64\n",
    )
    code, out = inspect(job)
    assert out["world_size"] is None and out["global_batch_size"] == 64
