"""Job-definition reading time on large manifests: one file of 100, 400 and 3,000 PyTorchJobs
(400 make about 1 MB), one container with 10,000 words of args, one pod of 4,000 containers.
Each file is read by `inspect` in a child process (so that a case past --timeout is stopped),
its seconds printed, wall and CPU (the read alone: not Python's start, nor the imports a first
read makes; on a machine that other work shares, the CPU seconds are the steadier). With
--against REV, the tree at git revision REV reads the same files too, side by side.

Run: python scripts/bench_manifests.py [--timeout S] [--against REV]"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: Times one inspect of argv[1] in the child process, after one of argv[2] (a one-job manifest:
#: what a read imports is imported then); prints its seconds, wall and CPU.
MEASURE = """
import sys, time
from translator.inspection import inspect_file
inspect_file(sys.argv[2])
wall, cpu = time.perf_counter(), time.process_time()
try:
    inspect_file(sys.argv[1])
except Exception as exc:  # a refusal is timed all the same
    print(type(exc).__name__, str(exc)[:120], file=sys.stderr)
print(time.perf_counter() - wall, time.process_time() - cpu)
"""

ROLE = """\
    {role}:
      replicas: {replicas}
      template:
        spec:
          containers:
            - name: pytorch
              image: ghcr.io/acme/train:latest
              command: [torchrun, train.py]
              args: [--per_device_train_batch_size, "4", --gradient_accumulation_steps, "4",
                     --learning_rate, "2e-5", --num_train_epochs, "3", --bf16, "true",
                     --output_dir, /out/{name}, --logging_steps, "10", --save_steps, "500"]
              env:
                - name: NCCL_DEBUG
                  value: INFO
                - name: HF_HOME
                  value: /cache/{name}
              resources:
                limits: {{nvidia.com/gpu: 8, memory: 512Gi, cpu: "64"}}
                requests: {{nvidia.com/gpu: 8, memory: 512Gi, cpu: "64"}}
              volumeMounts:
                - {{name: data, mountPath: /data}}
                - {{name: out, mountPath: /out}}
          volumes:
            - {{name: data, persistentVolumeClaim: {{claimName: data}}}}
            - {{name: out, persistentVolumeClaim: {{claimName: out}}}}
"""


def pytorchjobs(count: int, workers: bool = True) -> str:
    """``count`` PyTorchJobs of a Master (and two Workers), one document apiece."""
    jobs = []
    for i in range(count):
        name = f"sft-{i}"
        roles = [ROLE.format(role="Master", replicas=1, name=name)]
        if workers:
            roles.append(ROLE.format(role="Worker", replicas=2, name=name))
        jobs.append(
            "apiVersion: kubeflow.org/v1\nkind: PyTorchJob\n"
            f"metadata:\n  name: {name}\n  labels: {{team: research, run: '{i}'}}\n"
            'spec:\n  nprocPerNode: "8"\n  pytorchReplicaSpecs:\n' + "".join(roles)
        )
    return "---\n".join(jobs)


def long_args(words: int) -> str:
    """A batch/v1 Job whose one container runs torchrun with ``words`` words of args."""
    args = "".join(f'                - "--extra_{i}"\n' for i in range(words - 4))
    return (
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: long\nspec:\n  template:\n"
        "    spec:\n      containers:\n        - name: train\n          image: x\n"
        '          command: [torchrun, --nproc_per_node, "8", train.py]\n'
        "          args:\n"
        '                - "--per_device_train_batch_size"\n                - "4"\n'
        '                - "--gradient_accumulation_steps"\n                - "2"\n'
        + args
        + "          resources:\n            limits: {nvidia.com/gpu: 8}\n"
    )


def many_containers(count: int) -> str:
    """A batch/v1 Job whose pod runs ``count`` containers, each its own torchrun."""
    containers = "".join(
        f"        - name: c{i}\n          image: x\n"
        f'          command: [torchrun, --nproc_per_node, "1", train.py,'
        f' --per_device_train_batch_size, "{1 + i % 4}"]\n'
        "          resources:\n            limits: {nvidia.com/gpu: 1}\n"
        for i in range(count)
    )
    return (
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: wide\nspec:\n  template:\n"
        "    spec:\n      containers:\n" + containers
    )


CASES = {
    "100 PyTorchJobs": lambda: pytorchjobs(100),
    "400 PyTorchJobs": lambda: pytorchjobs(400),
    "3000 PyTorchJobs": lambda: pytorchjobs(3000, workers=False),
    "10k words of args": lambda: long_args(10_000),
    "4k containers": lambda: many_containers(4000),
}


def seconds(tree: Path, path: Path, first: Path, timeout: float) -> str:
    """The seconds ``tree``'s inspect takes to read ``path`` (after ``first``), wall (CPU), or
    ``> timeout`` when it was stopped."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", MEASURE, str(path), str(first)],
            env=os.environ | {"PYTHONPATH": str(tree)},
            cwd=path.parent,  # not this tree's root, whose translator/ would come first
            capture_output=True,
            text=True,
            timeout=timeout,
            check=True,
        )
    except subprocess.TimeoutExpired:
        return f"> {timeout:g}"
    wall, cpu = (float(x) for x in done.stdout.split()[-2:])
    return f"{wall:.2f} ({cpu:.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds a case may take")
    parser.add_argument("--against", help="a git revision whose tree reads the same files")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        trees = {"this tree": ROOT}
        if args.against:
            old = Path(work) / "against"
            old.mkdir()
            archive = subprocess.run(
                ["git", "-C", str(ROOT), "archive", args.against, "translator"],
                capture_output=True,
                check=True,
            ).stdout
            subprocess.run(["tar", "-x", "-C", str(old)], input=archive, check=True)
            trees = {args.against: old, **trees}
        first = Path(work) / "first.yaml"
        first.write_text(pytorchjobs(1))
        print(f"{'case':<20} {'MB':>6} " + " ".join(f"{name:>16}" for name in trees))
        for i, (case, build) in enumerate(CASES.items()):
            path = Path(work) / f"case{i}.yaml"
            path.write_text(build())
            size = path.stat().st_size / 1e6
            times = [seconds(tree, path, first, args.timeout) for tree in trees.values()]
            print(f"{case:<20} {size:>6.2f} " + " ".join(f"{t:>16}" for t in times), flush=True)


if __name__ == "__main__":
    main()
