"""Job definitions in the other forms they are written in: a Kubernetes manifest written as
JSON in a ``.yaml`` file (YAML's superset), and a dstack task that starts with a UTF-8
byte-order mark, are read as what they define, not as a Trainer's arguments file with its
defaults (micro-batch 8)."""

import json

import yaml
from run_batchspec import run, run_json

MANIFEST = """apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: j
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      template:
        spec:
          containers:
            - name: pytorch
              image: x
              command: ["torchrun", "--nnodes=2", "--nproc_per_node=4", "train.py",
                        "--per_device_train_batch_size=2", "--gradient_accumulation_steps=3",
                        "--output_dir=o"]
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
              command: ["torchrun", "--nnodes=2", "--nproc_per_node=4", "train.py",
                        "--per_device_train_batch_size=2", "--gradient_accumulation_steps=3",
                        "--output_dir=o"]
              resources:
                limits:
                  nvidia.com/gpu: 4
"""
TASK = (
    "type: task\nnodes: 2\ncommands:\n"
    "  - torchrun --nproc_per_node 4 train.py --per_device_train_batch_size 2 --output_dir o\n"
    "resources:\n  gpu: H100:4\n"
)


def batch(out: dict) -> tuple:
    return tuple(out[k] for k in ("micro_batch_size", "gradient_accumulation_steps", "world_size"))


def test_a_manifest_written_as_json_in_a_yaml_file_is_read_as_the_job_it_defines(tmp_path):
    as_yaml, as_json = tmp_path / "job.yaml", tmp_path / "job-json.yaml"
    as_yaml.write_text(MANIFEST)
    as_json.write_text(json.dumps(yaml.safe_load(MANIFEST), indent=2))
    (_, one), (_, other) = run_json("inspect", as_yaml), run_json("inspect", as_json)
    assert batch(other) == batch(one) == (2, 3, 8)
    assert other["job_definition"]["kind"] == one["job_definition"]["kind"]


def test_a_dstack_task_with_a_byte_order_mark_reads_as_without(tmp_path):
    plain, marked = tmp_path / "plain.dstack.yml", tmp_path / "marked.dstack.yml"
    plain.write_text(TASK)
    marked.write_bytes(b"\xef\xbb\xbf" + TASK.encode())
    (_, one), (_, other) = run_json("inspect", plain), run_json("inspect", marked)
    assert other["job_definition"] == one["job_definition"] is not None
    assert batch(other) == batch(one)


def two_jobs(tmp_path):
    """A manifest of two PyTorchJobs, ``b`` accumulating 5 where ``a`` accumulates 3."""
    path = tmp_path / "jobs.yaml"
    a = MANIFEST.replace("name: j", "name: a")
    b = MANIFEST.replace("name: j", "name: b").replace("steps=3", "steps=5")
    path.write_text(a + "---\n" + b)
    return path


def test_a_file_of_two_training_jobs_says_which_it_read_and_names_the_other(tmp_path):
    result, out = run_json("inspect", two_jobs(tmp_path))
    assert result.exit_code == 0
    (several,) = [f for f in out["findings"] if f["code"] == "job-definition-several"]
    assert several["severity"] == "warning"
    assert "read: PyTorchJob b (line 34)" in several["message"]
    assert "not read: PyTorchJob a (line 1)" in several["message"]
    assert out["gradient_accumulation_steps"] == 5
    one = tmp_path / "one.yaml"
    one.write_text(MANIFEST)
    _, alone = run_json("inspect", one)
    assert not any(f["code"] == "job-definition-several" for f in alone["findings"])


def test_validate_strict_fails_a_file_whose_other_job_is_not_checked(tmp_path):
    result = run("validate", two_jobs(tmp_path), "--strict")
    assert result.exit_code == 1
    assert "job-definition-several" in result.output


def test_update_refuses_to_move_one_job_of_two(tmp_path):
    path = two_jobs(tmp_path)
    before = path.read_text()
    result = run("update", path, "--world-size", 16, "--in-place")
    assert result.exit_code == 2
    assert "defines 2 training jobs, and update moves one" in result.stderr
    assert path.read_text() == before
