"""Job definitions read in bounded time and memory (issue 37: 1, 2 and 3). A GPU count stays a
number: ``nvidia.com/gpu: 10000000`` made a CUDA_VISIBLE_DEVICES of ten million entries (9 s,
818 MB; 10**8 a MemoryError). A count past any cluster is a one-line input error naming the
file, line and key (10**18 replicas was a pydantic ValidationError, 5,001 digits Python's
int-string limit). A file of many jobs or containers costs each its own lines: the 400th job's
script was read below 399 jobs' worth of empty lines (100 PyTorchJobs 5.6 s, 400 22 s), and
each of 10,000 args moved back into the definition split the whole file again (45 s). Work is
counted here, never timed: ``scripts/bench_manifests.py`` times it."""

import pytest
from run_batchspec import inspected, run

from translator.job.definitions import script as definition_script
from translator.job.definitions import seam
from translator.words import parsing

MANIFEST = """apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: {name}
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      template:
        spec:
          containers:
            - name: pytorch
              image: x
              command: [{launch}, train.py, --per_device_train_batch_size, "2",
                        --gradient_accumulation_steps, "1", --output_dir, /out]
              resources:
                limits:
                  nvidia.com/gpu: {gpus}
    Worker:
      replicas: {replicas}
      template:
        spec:
          containers:
            - name: pytorch
              image: x
              command: [{launch}, train.py, --per_device_train_batch_size, "2",
                        --gradient_accumulation_steps, "1", --output_dir, /out]
              resources:
                limits:
                  nvidia.com/gpu: {gpus}
"""

SKYPILOT = """resources:
  accelerators: H100:{gpus}
num_nodes: {nodes}
run: |
  python train.py --per_device_train_batch_size 2 --gradient_accumulation_steps 1
"""

DSTACK = """type: task
nodes: {nodes}
resources:
  gpu: H100:{gpus}
commands:
  - python train.py --per_device_train_batch_size 2 --gradient_accumulation_steps 1
"""


def manifest(gpus: object = 8, replicas: object = 1, name: str = "j", launch="python") -> str:
    return MANIFEST.format(gpus=gpus, replicas=replicas, name=name, launch=launch)


@pytest.mark.parametrize(
    "name, text",
    [
        ("pytorchjob.yaml", manifest(gpus=2**20)),
        ("sky.yaml", SKYPILOT.format(gpus=2**20, nodes=1)),
        ("task.dstack.yml", DSTACK.format(gpus=2**20, nodes=1)),
    ],
    ids=["kubernetes", "skypilot", "dstack"],
)
def test_a_gpu_count_is_kept_as_a_number(tmp_path, monkeypatch, name, text):
    """2**20 GPUs, as many as a definition may give a node: the Trainer's DataParallel under
    plain python counts them all, and no script the shell reader is handed lists them."""
    scripts: list[str] = []
    read = seam.read_job
    monkeypatch.setattr(seam, "read_job", lambda text, *a: scripts.append(text) or read(text, *a))
    path = tmp_path / name
    path.write_text(text)
    out = inspected(path)
    assert out["job_definition"]["gpus_per_node"] == 2**20
    assert out["world_size"] == 2**20  # one process's DataParallel, on the node read
    assert scripts and max(len(s) for s in scripts) < 2_000


def line_of(text: str, key: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if key in line)


@pytest.mark.parametrize(
    "name, text, key, written",
    [
        ("pj.yaml", manifest(gpus=10**7), "limits[nvidia.com/gpu]", "nvidia.com/gpu"),
        ("pj.yaml", manifest(replicas=10**18), "Worker replicas", "replicas: 1000"),
        ("pj.yaml", manifest(replicas="9" * 5001), "Worker replicas", "replicas: 999"),
        ("sky.yaml", SKYPILOT.format(gpus=8, nodes=10**18), "num_nodes", "num_nodes"),
        ("sky.yaml", SKYPILOT.format(gpus=10**8, nodes=1), "resources.accelerators", "H100"),
        ("task.dstack.yml", DSTACK.format(gpus=8, nodes=10**18), "nodes", "nodes:"),
        ("task.dstack.yml", DSTACK.format(gpus=10**8, nodes=1), "resources.gpu", "H100"),
    ],
    ids=["gpus", "replicas", "digits", "num_nodes", "accelerators", "nodes", "gpu"],
)
def test_a_count_past_any_cluster_is_one_line_naming_the_file_and_key(
    tmp_path, name, text, key, written
):
    path = tmp_path / name
    path.write_text(text)
    result = run("inspect", path)
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2 and len(lines) == 1, result.output
    assert lines[0].startswith(f"batchspec: error: {path}:{line_of(text, written)}: {key} is ")
    assert "no real cluster is that large" in lines[0] and len(lines[0]) < 300


def test_a_world_past_the_specs_bound_is_one_line_not_a_validation_error(tmp_path):
    """Each count within the bound, their product past any world a spec takes (2**40)."""
    path = tmp_path / "pj.yaml"
    path.write_text(manifest(gpus=2**20, replicas=2**20, launch="torchrun"))
    script = tmp_path / "job.sh"
    script.write_text(
        "#!/bin/bash\ntorchrun --nnodes 1000000000000000000 --nproc_per_node 8 train.py "
        "--per_device_train_batch_size 2 --gradient_accumulation_steps 1\n"
    )
    for given in (path, script):
        result = run("inspect", given)
        lines = result.output.strip().splitlines()
        assert result.exit_code == 2 and len(lines) == 1, result.output
        assert lines[0].startswith(f"batchspec: error: {given}: world_size")
        assert "ValidationError" not in result.output


def many_jobs(count: int) -> str:
    return "---\n".join(manifest(name=f"job-{i}") for i in range(count))


def many_containers(count: int) -> str:
    containers = "".join(
        f"        - name: c{i}\n          image: x\n"
        f'          command: [torchrun, --nproc_per_node, "1", train.py,'
        f' --per_device_train_batch_size, "{1 + i % 4}"]\n'
        for i in range(count)
    )
    return (
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: wide\nspec:\n  template:\n"
        "    spec:\n      containers:\n" + containers
    )


@pytest.mark.parametrize("text", [many_jobs(200), many_containers(500)], ids=["jobs", "containers"])
def test_a_file_of_many_jobs_is_composed_once_and_each_job_read_from_its_own_lines(
    tmp_path, monkeypatch, text
):
    """Every run is read (the file names the jobs it does not read), and all the scripts
    handed to the shell reader together are shorter than the file: before, the last job's
    alone was as long, its lines kept by empty ones. The YAML is composed once (three times
    before: detection twice, then the reader)."""
    scripts: list[str] = []
    read = seam.read_job
    monkeypatch.setattr(seam, "read_job", lambda text, *a: scripts.append(text) or read(text, *a))
    composed = []
    loader = parsing._loader
    monkeypatch.setattr(parsing, "_loader", lambda text: composed.append(text) or loader(text))
    parsing.clear_cache()
    path = tmp_path / "jobs.yaml"
    path.write_text(text)
    out = inspected(path)
    assert out["job_definition"] is not None
    assert len(composed) == 1
    assert len(scripts) > 200 and sum(len(s) for s in scripts) < len(text)


def test_the_literals_of_long_args_are_moved_back_by_one_index_of_the_lines(tmp_path, monkeypatch):
    """3,000 words of args: each literal still points at its word in the definition, found
    through one index of each text's lines (the whole file was split once per literal)."""
    indexed = []
    real = definition_script.Lines

    def counting(text: str):
        indexed.append(len(text))
        return real(text)

    monkeypatch.setattr(definition_script, "Lines", counting)
    args = "".join(f'            - "--extra_{i}"\n' for i in range(3000))
    text = (
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: long\nspec:\n  template:\n"
        "    spec:\n      containers:\n        - name: train\n          image: x\n"
        '          command: [torchrun, --nproc_per_node, "8", train.py]\n'
        "          resources: {limits: {nvidia.com/gpu: 8}}\n"
        "          args:\n"
        '            - "--per_device_train_batch_size"\n            - "4"\n'
        '            - "--gradient_accumulation_steps"\n            - "2"\n' + args
    )
    path = tmp_path / "long.yaml"
    path.write_text(text)
    result = run("update", path, "--nnodes", "1", "--nproc-per-node", "16")
    assert result.exit_code == 0, result.output
    assert 'command: [torchrun, --nproc_per_node, "16", train.py]' in result.output
    assert '"--gradient_accumulation_steps"\n            - "1"\n' in result.output
    assert 0 < len(indexed) <= 4  # the script's and the definition's, as read and read back
