"""A file a ConfigMap of the same manifest mounts into the container is the file the launch
names at that path (issue 35: 12): a PyTorchJob running ``accelerate launch --config_file
/etc/accelerate/config.yaml`` takes its world from the ConfigMap's accelerate YAML, ``update``
edits that YAML where the manifest writes it (with the Workers' replicas), and ``smoke
--launcher k8s --dry-run`` starts the pods × processes batchspec read. Each failed before:
``job-file-not-found`` and the global batch unknown, ``update`` refused, smoke ran 1 × 1."""

import json
import shutil

import pytest
import yaml
from run_batchspec import inspected, run, run_json
from test_job_definitions import JOBDEFS, changed_lines, line_of, update

NAME = "pytorchjob_accelerate_configmap.yaml"
K8S = ["--launcher", "k8s", "--k8s-image", "ghcr.io/acme/train:1", "--k8s-volume", "work"]


def configmap_text(text: str, key: str = "config.yaml") -> str:
    """The text the manifest's ConfigMap holds under ``key``, as Kubernetes mounts it."""
    return next(d for d in yaml.safe_load_all(text) if d["kind"] == "ConfigMap")["data"][key]


def accelerate_reads(text: str, tmp_path) -> tuple[int, int]:
    """``(num_processes, num_machines)`` as accelerate's own config loader reads ``text``."""
    loader = pytest.importorskip("accelerate.commands.config.config_args")
    path = tmp_path / "mounted" / "config.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    config = loader.load_config_from_file(str(path))
    return config.num_processes, config.num_machines


def where(out: dict, field: str) -> str:
    return next(s["where"] for s in out["sources"] if s["field"] == field and s["won"])


def test_the_configmaps_accelerate_config_gives_the_world(tmp_path):
    out = inspected(JOBDEFS / NAME)
    assert not any(f["code"] == "job-file-not-found" for f in out["findings"])
    assert (out["world_size"], out["nodes"], out["gpus_per_node"]) == (16, 2, 8)
    assert (out["micro_batch_size"], out["gradient_accumulation_steps"]) == (4, 2)
    assert out["global_batch_size"] == 4 * 2 * 16
    # the value points into the manifest: the ConfigMap's line of num_processes
    held = f"{JOBDEFS / NAME}[qwen-accelerate]/config.yaml"
    assert where(out, "world_size") == f"{held}:{line_of(NAME, 'num_processes:')} num_processes"
    text = configmap_text((JOBDEFS / NAME).read_text())
    assert accelerate_reads(text, tmp_path) == (out["world_size"], out["nodes"])


def test_update_edits_the_configmap_where_the_manifest_writes_it(tmp_path):
    """``--nnodes 4`` alone keeps the 8 processes each pod starts: num_processes and
    num_machines in the ConfigMap, the Workers' replicas (the Master stays one) and the
    accumulation (in Master and Worker) that keeps the global batch; nothing else."""
    code, output, before, after = update(tmp_path, NAME, "--nnodes", "4", "--from-world-size", "16")
    assert code == 0, output
    workers = [i for i, line in enumerate(before.splitlines(), 1) if "replicas:" in line][-1]
    accumulation = [i + 1 for i, line in enumerate(before.splitlines(), 1) if "_steps" in line]
    assert changed_lines(before, after) == {
        line_of(NAME, "num_machines:"): ("    num_machines: 2", "    num_machines: 4"),
        line_of(NAME, "num_processes:"): ("    num_processes: 16", "    num_processes: 32"),
        workers: ("      replicas: 1", "      replicas: 3"),
        **{i: ('                - "2"', '                - "1"') for i in accumulation},
    }
    assert f":{line_of(NAME, 'num_processes:')}: num_processes 16 → 32" in output
    again = inspected(tmp_path / NAME)
    assert (again["world_size"], again["nodes"], again["global_batch_size"]) == (32, 4, 128)
    assert again["gradient_accumulation_steps"] == 1
    assert accelerate_reads(configmap_text(after), tmp_path) == (32, 4)


def test_update_of_a_crlf_manifest_keeps_its_line_endings(tmp_path):
    path = tmp_path / NAME
    path.write_bytes((JOBDEFS / NAME).read_bytes().replace(b"\n", b"\r\n"))
    result = run("update", path, "--world-size", "32", "--in-place")
    assert result.exit_code == 0, result.output
    after = path.read_bytes()
    assert b"    num_processes: 32\r\n    rdzv_backend" in after
    assert after.count(b"\n") == after.count(b"\r\n")
    assert inspected(path)["world_size"] == 32


def test_a_configmap_not_in_the_file_asks_for_the_world_it_was_not_given(tmp_path):
    """The accelerate config is not found: the world cannot be moved by an edit, and the
    refusal says what to give instead of --from-world-size, which was given."""
    path = tmp_path / NAME
    path.write_text((JOBDEFS / NAME).read_text().split("\n---\n", 1)[1])
    before = path.read_text()
    result = run("update", path, "--nnodes", "4", "--from-world-size", "16", "--in-place")
    assert result.exit_code == 1
    assert "cannot move it from world 16 (--from-world-size)" in result.output
    assert "give --from-world-size 32 to re-solve the batch alone" in result.output
    assert path.read_text() == before
    again = run("update", path, "--nnodes", "4", "--from-world-size", "32", "--in-place")
    assert again.exit_code == 0, again.output
    assert inspected(path, "--world-size", "32")["job_definition"]["nodes"] == 4


def smoke_manifest(path, *flags) -> tuple[dict, list[dict]]:
    result, out = run_json("smoke", path, *K8S, "--dry-run", *flags)
    assert result.exit_code == 0, result.output
    return out, list(yaml.safe_load_all(out["files"]["smoke.k8s.yaml"]))


def test_smoke_k8s_dry_run_starts_the_pods_and_processes_it_read(tmp_path):
    """The operator starts a process per GPU, 8, on each of 2 pods: the dry run's Job is 2
    pods of 8 (it was 1 × 1), the job's own world, so its batch is not re-solved."""
    shutil.copy(JOBDEFS / NAME, tmp_path / NAME)
    said = run("smoke", tmp_path / NAME, *K8S, "--dry-run", "--workdir", tmp_path / "w")
    assert said.exit_code == 0, said.output
    assert "a process per GPU (8)" in said.output and "smoke-other-world" not in said.output
    out, (_, job) = smoke_manifest(tmp_path / NAME, "--workdir", tmp_path / "w")
    assert (out["world_size"], out["global_batch_size"]) == (16, 128)
    assert job["spec"]["completions"] == job["spec"]["parallelism"] == 2
    command = job["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command[command.index("--nnodes") + 1] == "2"
    assert command[command.index("--nproc_per_node") + 1] == "8"
    _, (_, one) = smoke_manifest(tmp_path / NAME, "--workdir", tmp_path / "w", "--nnodes", "1")
    assert one["spec"]["completions"] == 1  # asked for: one pod


DEEPSPEED_JOB = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: train-files
data:
  ds.json: |
    {
      "train_batch_size": 32,
      "train_micro_batch_size_per_gpu": 2,
      "gradient_accumulation_steps": 4,
      "zero_optimization": {"stage": 2}
    }
  accelerate.yaml: "distributed_type: MULTI_GPU\\nnum_machines: 1\\nnum_processes: 4\\n"
---
apiVersion: batch/v1
kind: Job
metadata:
  name: sft
spec:
  template:
    spec:
      containers:
        - name: trainer
          image: ghcr.io/acme/train:1
          command: [bash, -c]
          args:
            - |
              torchrun --nproc_per_node 4 train.py --deepspeed /cfg/zero.json \\
                --per_device_train_batch_size 2 --gradient_accumulation_steps 4 --output_dir /o
          resources:
            limits:
              nvidia.com/gpu: 4
          volumeMounts:
            - {name: files, mountPath: /cfg/zero.json, subPath: zero.json}
            - {name: launch, mountPath: /etc/accelerate}
      volumes:
        - name: files
          configMap:
            name: train-files
            items: [{key: ds.json, path: zero.json}]
        - name: launch
          projected:
            sources: [{configMap: {name: train-files}}]
"""


def test_items_and_sub_path_mount_a_deepspeed_json_update_edits_in_place(tmp_path):
    """``items`` names the key's file (``ds.json`` as ``zero.json``), ``subPath`` mounts that
    one file: the Trainer's DeepSpeed JSON, checked against its flags and edited with them."""
    path = tmp_path / "job.yaml"
    path.write_text(DEEPSPEED_JOB)
    out = inspected(path)
    assert not any(f["code"] == "job-file-not-found" for f in out["findings"])
    assert out["global_batch_size"] == 32 and out["world_size"] == 4
    result = run("update", path, "--micro-batch", "1", "--in-place")
    assert result.exit_code == 0, result.output
    assert json.loads(configmap_text(path.read_text(), "ds.json")) == {
        "train_batch_size": 32,
        "train_micro_batch_size_per_gpu": 1,
        "gradient_accumulation_steps": 8,
        "zero_optimization": {"stage": 2},
    }
    again = inspected(path)
    assert (again["micro_batch_size"], again["gradient_accumulation_steps"]) == (1, 8)


def test_a_configmap_value_not_written_as_a_block_is_read_and_not_edited(tmp_path):
    """A quoted value reads as the file it is; update cannot write it back as it was written,
    so it names the line and writes nothing (exit 1)."""
    text = DEEPSPEED_JOB.replace(
        "torchrun --nproc_per_node 4 train.py --deepspeed /cfg/zero.json",
        "accelerate launch --config_file /etc/accelerate/accelerate.yaml train.py",
    )
    path = tmp_path / "job.yaml"
    path.write_text(text)
    assert inspected(path)["world_size"] == 4
    result = run("update", path, "--world-size", "2", "--in-place")
    assert result.exit_code == 1
    line = text.splitlines().index(next(t for t in text.splitlines() if "accelerate.yaml:" in t))
    assert f"{path}:{line + 1}: ConfigMap train-files's accelerate.yaml is not written as a " in (
        result.output
    )
    assert path.read_text() == text
