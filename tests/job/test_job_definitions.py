"""Job definitions read as launchers: a Kubernetes Job, Kubeflow PyTorchJob and TrainJob,
a JobSet, a SkyPilot task and a dstack task are read as the command each node runs, in the
environment the system gives it, and the reading names the definition and its layout.

The fixtures in ``tests/jobdefs`` are written in the styles teams publish: Kubeflow's and
JobSet's examples (``bash -c`` scripts, ``command`` lists, ConfigMap-mounted scripts), envsubst
and Helm templates, SkyPilot's ``llm/`` tasks and dstack's ``examples/distributed-training``.
Each "confident wrong number" that batchspec gave before is a test here: such a file was read
as an HF TrainingArguments YAML (micro-batch 8, the Trainer's default) or a placeholder as TP 1.
"""

import json
import shutil
from pathlib import Path

import pytest
from paths import TESTS
from run_batchspec import inspected, run, run_json

JOBDEFS = TESTS / "job" / "jobdefs"


def line_of(name: str, text: str) -> int:
    """The 1-based line of the fixture that holds ``text``."""
    lines = (JOBDEFS / name).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


def where(out: dict, field: str) -> str:
    return next(s["where"] for s in out["sources"] if s["field"] == field)


def test_a_kubernetes_job_running_accelerate_is_read_as_the_launch_it_runs():
    """Was read as an HF TrainingArguments YAML: micro-batch 8, accumulation 1, exit 0."""
    out = inspected(JOBDEFS / "k8s_job_accelerate.yaml")
    assert out["framework"] == "hf"
    assert out["micro_batch_size"] == 2 and out["gradient_accumulation_steps"] == 8
    assert out["world_size"] == 8 and out["global_batch_size"] == 2 * 8 * 8
    assert out["job_definition"] == {
        "kind": "Kubernetes Job",
        "name": "trainer",
        "nodes": 1,
        "gpus_per_node": 8,
        "gpus": 8,
        "nodes_unknown": None,
        "gpus_unknown": None,
    }
    name = "k8s_job_accelerate.yaml"
    assert where(out, "micro_batch_size").endswith(
        f":{line_of(name, '--per_device_train_batch_size')} --per_device_train_batch_size"
    )
    assert f":{line_of(name, 'accelerate launch --num_processes')} " in where(out, "world_size")


def test_a_placeholder_in_a_pytorchjob_is_unknown_not_tp_1():
    """``--tensor-model-parallel-size=${TENSOR_PARALLEL}`` (envsubst) was read as TP 1."""
    out = inspected(JOBDEFS / "pytorchjob_megatron.yaml")
    assert out["framework"] == "megatron"
    assert out["tensor_parallel_size"] is None
    assert out["gradient_accumulation_steps"] is None and out["data_parallel_size"] is None
    assert out["world_size"] == 32 and out["pipeline_parallel_size"] == 2
    assert any("TENSOR_PARALLEL" in f["message"] for f in out["findings"])
    assert out["job_definition"]["kind"] == "Kubeflow PyTorchJob"
    assert (out["job_definition"]["nodes"], out["job_definition"]["gpus_per_node"]) == (4, 8)
    given = inspected(JOBDEFS / "pytorchjob_megatron.yaml", "--env", "TENSOR_PARALLEL=4")
    assert given["tensor_parallel_size"] == 4 and given["data_parallel_size"] == 32 // (4 * 2)
    assert given["gradient_accumulation_steps"] == 256 // (1 * 4)


def test_a_template_named_as_one_is_read_as_the_manifest_it_becomes(tmp_path):
    """``pytorchjob.yaml-template`` (filled by envsubst) was read as a Megatron YAML: TP 1."""
    path = tmp_path / "pytorchjob.yaml-template"
    shutil.copy(JOBDEFS / "pytorchjob_megatron.yaml", path)
    result, out = run_json("inspect", str(path))
    assert result.exit_code == 0
    assert out["job_definition"]["kind"] == "Kubeflow PyTorchJob"
    assert out["tensor_parallel_size"] is None and out["world_size"] == 32


def test_a_wrapped_shell_script_of_placeholders_is_unknown_until_given():
    """``stdbuf ... bash -c "..."`` in a flow sequence, every size an envsubst placeholder."""
    name = "k8s_job_stdbuf_envsubst.yaml"
    out = inspected(JOBDEFS / name)
    assert out["framework"] == "hf"
    assert out["micro_batch_size"] is None and out["world_size"] is None
    assert out["job_definition"]["gpus_per_node"] is None
    given = inspected(JOBDEFS / name, "--env", "NGPU=4", "--env", "BATCH=8", "--env", "ACCUM=2")
    assert given["world_size"] == 4 and given["global_batch_size"] == 8 * 2 * 4
    assert given["job_definition"]["gpus_per_node"] == 4


def test_a_multi_document_manifest_runs_the_script_its_configmap_mounts():
    """Was refused as invalid YAML. torchrun has no sizing flag: it takes PET_NNODES and
    PET_NPROC_PER_NODE, which the training operator sets from the replicas and nprocPerNode;
    the container's env sets the script's MICRO_BATCH over its default."""
    name = "pytorchjob_configmap.yaml"
    out = inspected(JOBDEFS / name)
    assert out["world_size"] == (1 + 1) * 4
    assert out["micro_batch_size"] == 2 and out["gradient_accumulation_steps"] == 2
    assert out["global_batch_size"] == 2 * 2 * 8
    assert f":{line_of(name, 'replicas: 1')} PET_NNODES" in where(out, "world_size")
    assert f":{line_of(name, 'nprocPerNode')} PET_NPROC_PER_NODE" in where(out, "world_size")
    assert where(out, "gradient_accumulation_steps").endswith(
        f":{line_of(name, '--gradient_accumulation_steps')} --gradient_accumulation_steps"
    )


def test_a_skypilot_task_is_read_from_its_run_block():
    """Ended in "cannot tell which framework"; a run block with HF flags must not be read as
    an HF YAML either."""
    out = inspected(JOBDEFS / "sky_accelerate.yaml")
    assert out["framework"] == "hf"
    assert out["world_size"] == 2 * 8
    assert out["micro_batch_size"] == 2 and out["gradient_accumulation_steps"] == 8
    assert out["global_batch_size"] == 2 * 8 * 16
    assert out["job_definition"]["kind"] == "SkyPilot task"
    assert (out["job_definition"]["nodes"], out["job_definition"]["gpus_per_node"]) == (2, 8)
    assert any("HF_TOKEN" in f["message"] for f in out["findings"])


def test_skypilot_file_mounts_name_the_config_and_choices_of_gpus_agree():
    out = inspected(JOBDEFS / "sky_torchrun_deepspeed.yaml")
    assert out["world_size"] == 4 * 8 and out["job_definition"]["gpus_per_node"] == 8
    assert not any(f["code"] == "job-file-not-found" for f in out["findings"])
    assert out["micro_batch_size"] == 4
    # ``cd ~/sky_workdir`` is where run starts: no folder left unknown
    assert not any(f["code"] == "script-not-followed" for f in out["findings"])


def test_skypilot_file_mount_not_found_is_named(tmp_path):
    shutil.copy(JOBDEFS / "sky_torchrun_deepspeed.yaml", tmp_path / "task.yaml")
    result, out = run_json("inspect", str(tmp_path / "task.yaml"))
    assert result.exit_code == 0
    missing = [f for f in out["findings"] if f["code"] == "job-file-not-found"]
    assert missing and "ds_zero3.json" in missing[0]["message"]


def test_a_dstack_task_is_read_from_its_commands():
    out = inspected(JOBDEFS / "dstack_torchrun.dstack.yml")
    assert out["world_size"] == 2 * 8
    assert out["gradient_accumulation_steps"] == 4 and out["micro_batch_size"] == 4
    assert out["job_definition"] == {
        "kind": "dstack task",
        "name": "train-distrib",
        "nodes": 2,
        "gpus_per_node": 8,
        "gpus": 16,
        "nodes_unknown": None,
        "gpus_unknown": None,
    }


def test_a_jobset_counts_replicas_times_parallelism():
    out = inspected(JOBDEFS / "jobset_torchrun.yaml")
    assert out["job_definition"]["nodes"] == 2 * 2
    assert out["world_size"] == 4 * 8 and out["global_batch_size"] == 1 * 16 * 32
    assert not any(f["code"] == "job-definition-mismatch" for f in out["findings"])


def test_a_trainjob_runs_torchrun_with_its_nodes_and_auto_processes():
    out = inspected(JOBDEFS / "trainjob.yaml")
    assert out["job_definition"]["kind"] == "Kubeflow TrainJob"
    assert out["world_size"] == 2 * 4  # numProcPerNode auto: the GPUs of each node
    assert out["global_batch_size"] == 2 * 4 * 8


def test_a_manifest_of_another_kind_is_not_a_training_job():
    result, out = run_json("inspect", str(JOBDEFS / "deployment.yaml"))
    assert result.exit_code == 2
    assert "not a training job" in out["error"] and "Deployment, Service" in out["error"]
    assert out["micro_batch_size"] is None and out["tensor_parallel_size"] is None


@pytest.mark.parametrize(
    "api, kind, said",
    [
        ("kubeflow.org/v1", "TFJob", "TFJob: a kind of training job"),
        ("batch.volcano.sh/v1alpha1", "Job", "VolcanoJob: a kind of training job"),
        ("apps/v1", "Deployment", "not a training job"),
    ],
)
def test_other_kinds_are_named_not_read(tmp_path, api, kind, said):
    path = tmp_path / "job.yaml"
    path.write_text(f"apiVersion: {api}\nkind: {kind}\nmetadata:\n  name: x\nspec: {{}}\n")
    result, out = run_json("inspect", str(path))
    assert result.exit_code == 2 and said in out["error"]
    assert out["micro_batch_size"] is None


def test_helm_values_are_unknown_until_given():
    out = inspected(JOBDEFS / "helm_job.yaml")
    assert out["micro_batch_size"] is None and out["world_size"] is None
    assert out["job_definition"]["gpus_per_node"] is None
    assert "Values_gpus" in out["job_definition"]["gpus_unknown"]
    assert any("Values_microBatch" in f["message"] for f in out["findings"])
    given = inspected(
        JOBDEFS / "helm_job.yaml", "--env", "Values_microBatch=2", "--env", "Values_gpus=4"
    )
    assert given["micro_batch_size"] == 2 and given["world_size"] == 4
    assert given["job_definition"]["gpus_per_node"] == 4
    assert given["global_batch_size"] == 2 * 4 * 4


def test_validate_and_the_precommit_path_take_definitions():
    result, out = run_json(
        "validate",
        str(JOBDEFS / "k8s_job_accelerate.yaml"),
        str(JOBDEFS / "sky_accelerate.yaml"),
        str(JOBDEFS / "deployment.yaml"),
        "--skip-other-files",
    )
    assert result.exit_code == 0
    files = {Path(f["file"]).name: f for f in out["files"]}
    assert set(files) == {"k8s_job_accelerate.yaml", "sky_accelerate.yaml"}
    assert files["sky_accelerate.yaml"]["job_definition"]["kind"] == "SkyPilot task"


MISMATCH = """apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: mismatch
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      template:
        spec:
          containers:
            - name: pytorch
              image: x
              command: ["torchrun", "--nnodes=3", "--nproc_per_node=8", "train.py",
                        "--per_device_train_batch_size=1", "--output_dir=o"]
              resources:
                limits:
                  nvidia.com/gpu: 4
    Worker:
      replicas: 1
      template:
        spec:
          containers:
            - name: pytorch
              image: x
"""


def test_a_launcher_that_disagrees_with_the_definition_is_warned(tmp_path):
    path = tmp_path / "job.yaml"
    path.write_text(MISMATCH)
    result, out = run_json("inspect", str(path))
    assert result.exit_code == 0
    found = [f["message"] for f in out["findings"] if f["code"] == "job-definition-mismatch"]
    assert any("8 processes per node" in m and "4 GPUs" in m for m in found)
    assert any("3 nodes" in m and "starts 2" in m for m in found)


def test_an_elastic_pytorchjob_has_no_fixed_world(tmp_path):
    text = MISMATCH.replace(
        "spec:\n  pytorchReplicaSpecs:",
        "spec:\n  elasticPolicy:\n    minReplicas: 1\n    maxReplicas: 4\n  pytorchReplicaSpecs:",
        1,
    ).replace('"--nnodes=3", "--nproc_per_node=8", ', "")
    text = text.replace('"--output_dir=o"', '"--gradient_accumulation_steps=2", "--output_dir=o"')
    path = tmp_path / "job.yaml"
    path.write_text(text)
    result, out = run_json("inspect", str(path))
    assert result.exit_code == 0
    assert out["world_size"] is None and out["job_definition"]["nodes"] is None
    assert any("1:4" in f["message"] for f in out["findings"] if f["code"] == "world-unknown")
    # nprocPerNode not set: the operator's default, auto, is a process per GPU
    assert any("auto" in f["message"] for f in out["findings"] if f["code"] == "job-definition")


def update(tmp_path, name: str, *args: str) -> tuple[int, str, str, str]:
    """``update`` on a copy of a fixture: exit code, output, text before, text after."""
    path = tmp_path / name
    shutil.copy(JOBDEFS / name, path)
    before = path.read_text()
    result = run("update", path, *args, "--in-place")
    return result.exit_code, result.output, before, path.read_text()


def changed_lines(before: str, after: str) -> dict[int, tuple[str, str]]:
    old, new = before.splitlines(), after.splitlines()
    assert len(old) == len(new)
    return {i: (a, b) for i, (a, b) in enumerate(zip(old, new), 1) if a != b}


def test_update_moves_a_skypilot_task_to_more_nodes(tmp_path):
    """The world is the definition's nodes × GPUs: ``num_nodes`` is edited, the accelerate
    flags that read it follow, accumulation keeps the global batch; one diff."""
    code, output, before, after = update(tmp_path, "sky_accelerate.yaml", "--world-size", "32")
    assert code == 0, output
    assert changed_lines(before, after) == {
        line_of("sky_accelerate.yaml", "num_nodes:"): ("num_nodes: 2", "num_nodes: 4"),
        line_of("sky_accelerate.yaml", "--gradient_accumulation_steps"): (
            "    --gradient_accumulation_steps 8 \\",
            "    --gradient_accumulation_steps 4 \\",
        ),
    }
    again = run_json("inspect", str(tmp_path / "sky_accelerate.yaml"))[1]
    assert again["world_size"] == 32 and again["global_batch_size"] == 256
    assert again["job_definition"]["nodes"] == 4


@pytest.mark.parametrize(
    "name, key, lines",
    [
        ("dstack_torchrun.dstack.yml", "nodes:", ("nodes: 2", "nodes: 4")),
        ("trainjob.yaml", "numNodes", ("    numNodes: 2", "    numNodes: 8")),
    ],
)
def test_update_edits_the_nodes_a_definition_writes(tmp_path, name, key, lines):
    code, output, before, after = update(tmp_path, name, "--world-size", "32")
    assert code == 0, output
    changed = changed_lines(before, after)
    assert changed[line_of(name, key)] == lines
    assert len(changed) == 2  # the nodes, and the accumulation that keeps the global batch
    again = run_json("inspect", str(tmp_path / name))[1]
    assert again["world_size"] == 32
    assert not any(f["code"] == "job-definition-mismatch" for f in again["findings"])


def test_update_moves_a_pytorchjob_by_its_worker_replicas(tmp_path):
    """A PyTorchJob of one Master and Workers runs 1 + Workers pods: world 16 on pods of 4
    processes is 4 pods, so the Workers' replicas go from 1 to 3 (the Master stays one);
    torchrun's PET_NNODES follows, and the accumulation keeps the global batch."""
    name = "pytorchjob_configmap.yaml"
    code, output, before, after = update(tmp_path, name, "--world-size", "16")
    assert code == 0, output
    changed = changed_lines(before, after)
    workers = [i for i, line in enumerate(before.splitlines(), 1) if "replicas:" in line][-1]
    assert changed[workers] == ("      replicas: 1", "      replicas: 3")
    assert len(changed) == 2  # and the accumulation
    again = run_json("inspect", str(tmp_path / name))[1]
    assert again["world_size"] == 16 and again["job_definition"]["nodes"] == 4
    assert (
        again["global_batch_size"]
        == run_json("inspect", str(JOBDEFS / name))[1]["global_batch_size"]
    )


def test_update_edits_the_workers_copy_of_the_masters_container(tmp_path):
    """Master and Workers repeat one container: the accumulation is edited in both (the second
    "4" of a flow list's line, not the first), and the Workers' replicas make the nodes."""
    name = "pytorchjob_hf_flow_args.yaml"
    code, output, before, after = update(tmp_path, name, "--nnodes", "4", "--nproc-per-node", "8")
    assert code == 0, output
    changed = changed_lines(before, after)
    args = [i for i, line in enumerate(before.splitlines(), 1) if "args:" in line]
    assert len(args) == 2
    for line in args:
        assert changed[line][1].endswith('--gradient_accumulation_steps, "2",')
        assert '--per_device_train_batch_size, "4"' in changed[line][1]
    assert len(changed) == 3  # and the Workers' replicas, 1 -> 3
    again = run_json("inspect", str(tmp_path / name))[1]
    assert (again["world_size"], again["global_batch_size"]) == (32, 256)


def test_workers_written_otherwise_than_the_master_are_said_and_not_edited(tmp_path):
    """A Worker container that differs from the Master's (another accumulation) may run
    another batch: a warning names it, and update refuses rather than edit one of them."""
    text = (JOBDEFS / "pytorchjob_hf_flow_args.yaml").read_text()
    at = text.index("Worker:")
    path = tmp_path / "differs.yaml"
    path.write_text(text[:at] + text[at:].replace('steps, "4"', 'steps, "8"'))
    result, out = run_json("inspect", str(path))
    assert "job-definition-pods-differ" in {f["code"] for f in out["findings"]}
    result = run("update", path, "--world-size", "32", "--in-place")
    assert result.exit_code == 1 and "written otherwise" in result.output
    assert path.read_text() == text[:at] + text[at:].replace('steps, "4"', 'steps, "8"')


def test_update_adds_the_launcher_flag_a_bash_c_script_lacks(tmp_path):
    """World 16 on pods of 8 GPUs: two pods (``parallelism``), and ``--num_machines 2`` added
    on the accelerate line of the container's script, which is written in the manifest as
    it runs."""
    name = "k8s_job_accelerate.yaml"
    code, output, before, after = update(tmp_path, name, "--world-size", "16")
    assert code == 0, output
    changed = changed_lines(before, after)
    assert changed[line_of(name, "parallelism:")] == ("  parallelism: 1", "  parallelism: 2")
    launch = changed[line_of(name, "accelerate launch --num_processes")][1]
    assert "accelerate launch --num_machines 2 --num_processes 16 " in launch
    assert len(changed) == 3  # and the accumulation
    again = run_json("inspect", str(tmp_path / name))[1]
    assert again["world_size"] == 16 and again["global_batch_size"] == 128
    assert again["job_definition"]["nodes"] == 2


@pytest.mark.parametrize(
    "name, why",
    [
        ("jobset_torchrun.yaml", "set it to 2 by hand"),  # replicas × parallelism
        ("helm_job.yaml", "not known"),  # a Helm template: nothing is edited
    ],
)
def test_update_refuses_what_a_definition_does_not_write_and_writes_nothing(tmp_path, name, why):
    code, output, before, after = update(tmp_path, name, "--world-size", "16")
    assert code in (1, 2)
    assert why in output
    assert after == before


@pytest.mark.parametrize(
    "spec, count",
    [("A100:8", 8), ("H100", 1), ("80GB:8", 8), ("24GB..:2", 2), ("A100-80GB:4", 4), ("8", 8)],
)
def test_gpu_specs_give_the_count(spec, count):
    from translator.job.definitions.tasks import gpu_count

    assert gpu_count(spec, 1, "gpu", {}).value == count


@pytest.mark.parametrize("spec", ["2..8", "A100:0.5", "H100:${GPUS}"])
def test_gpu_specs_without_one_count_are_unknown(spec):
    from translator.job.definitions.tasks import gpu_count

    size = gpu_count(spec, 1, "gpu", {})
    assert size.value is None and size.why


INDEXED = """apiVersion: batch/v1
kind: Job
metadata:
  name: indexed
spec:
  parallelism: 2
  completions: 2
  completionMode: Indexed
  template:
    spec:
      containers:
        - name: c
          image: x
          env:
            - name: NNODES
              value: "2"
            - name: MBS
              valueFrom:
                secretKeyRef:
                  name: other
                  key: mbs
          envFrom:
            - configMapRef:
                name: train-env
            - secretRef:
                name: tokens
          args:
            - torchrun
            - --nnodes=$(NNODES)
            - --nproc_per_node=4
            - --node_rank=$(JOB_COMPLETION_INDEX)
            - train.py
            - --per_device_train_batch_size=$(MBS)
            - --gradient_accumulation_steps=$(ACCUM)
            - --output_dir=o
          resources:
            limits:
              nvidia.com/gpu: 4
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: train-env
data:
  ACCUM: "4"
"""


def test_kubernetes_variables_references_and_config_maps(tmp_path):
    """``$(NAME)`` in args is Kubernetes' reference to the container's variables; ``envFrom``
    a ConfigMap of the file sets them too; ``valueFrom`` is only known to the cluster."""
    path = tmp_path / "job.yaml"
    path.write_text(INDEXED)
    result, out = run_json("inspect", str(path))
    assert result.exit_code == 0
    assert out["world_size"] == 2 * 4 and out["job_definition"]["nodes"] == 2
    assert out["gradient_accumulation_steps"] == 4
    assert out["micro_batch_size"] is None  # valueFrom a secret
    assert any("secretRef tokens" in f["message"] for f in out["findings"])
    assert not any(f["code"] == "job-definition-mismatch" for f in out["findings"])


def test_convert_reads_a_definition(tmp_path):
    result = run("convert", JOBDEFS / "sky_accelerate.yaml", "--to", "deepspeed", "--out", tmp_path)
    assert result.exit_code == 0, result.output
    written = json.loads((tmp_path / "deepspeed.json").read_text())
    assert written["train_batch_size"] == 2 * 8 * 16
    assert written["train_micro_batch_size_per_gpu"] == 2
    assert written["gradient_accumulation_steps"] == 8


def test_installing_a_tool_is_not_running_it(tmp_path):
    """``pip install trl`` was read as a run of the ``trl`` tool with its defaults (micro-batch
    8, accumulation 1): dstack's and SkyPilot's tasks install their tools before the launch."""
    path = tmp_path / "task.dstack.yml"
    path.write_text(
        "type: task\n"
        "commands:\n"
        "  - pip install trl peft\n"
        "  - git clone https://github.com/axolotl-ai-cloud/axolotl\n"
        "  - python train.py\n"
        "resources:\n"
        "  gpu: MI300X\n"
    )
    result, out = run_json("inspect", str(path))
    assert result.exit_code == 2
    assert out["micro_batch_size"] is None and "train.py" in out["error"]


def test_a_lone_double_dash_names_no_axolotl_config(tmp_path, monkeypatch):
    """dstack's Axolotl tasks run ``accelerate launch -m axolotl.cli.train -- CONFIG``: the
    config is the word after ``--`` (it was read as a config named ``--``)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "lora.yml").write_text(
        "base_model: meta-llama/Llama-3.1-8B\nmicro_batch_size: 2\ngradient_accumulation_steps: 4\n"
    )
    (tmp_path / "train.dstack.yml").write_text(
        "type: task\n"
        "commands:\n"
        "  - pip install axolotl\n"
        "  - accelerate launch --num_processes 2 -m axolotl.cli.train -- lora.yml\n"
        "      --wandb-project demo\n"
        "resources:\n"
        "  gpu: 24GB:2\n"
    )
    result, out = run_json("inspect", "train.dstack.yml")
    assert result.exit_code == 0, out
    assert out["framework"] == "axolotl"
    assert (out["micro_batch_size"], out["gradient_accumulation_steps"]) == (2, 4)
    assert out["world_size"] == 2 and out["global_batch_size"] == 16
