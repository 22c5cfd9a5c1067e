"""Smoke runs of every engine on this machine, with their figures: wall time of the whole
run, tokens/s, median step time and peak memory. Then the launcher's overhead: the wall time
to the first optimizer step (a one-step run) of `batchspec smoke` against a bare torchrun
script that builds the same model and takes one step of the same engine by hand, as a ratio,
in the same run. Run: python scripts/bench_smoke.py"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RUNS = [  # (engine, processes, spec)
    ("torch", 2, "global_batch_size: 16\nmicro_batch_size: 4\nsequence_length: 128\n"),
    ("deepspeed", 2, "global_batch_size: 16\nmicro_batch_size: 4\nsequence_length: 128\n"),
    ("megatron", 2, "global_batch_size: 16\nmicro_batch_size: 4\nsequence_length: 128\n"),
    ("axolotl", 1, "global_batch_size: 8\nmicro_batch_size: 4\nsequence_length: 64\n"),
]


def main() -> None:
    print(
        f"{'engine':10} {'ranks':>5} {'wall':>7} {'steps':>5} {'samples/step':>12} "
        f"{'tokens/s':>9} {'step':>8} {'peak MiB':>8}"
    )
    with tempfile.TemporaryDirectory() as tmp:
        for engine, nproc, text in RUNS:
            spec = Path(tmp) / f"{engine}.yaml"
            spec.write_text(text)
            start = time.perf_counter()
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "translator",
                    "smoke",
                    str(spec),
                    "--framework",
                    engine,
                    "--nproc",
                    str(nproc),
                    "--steps",
                    "5",
                    "--device",
                    "cpu",
                    "--workdir",
                    str(Path(tmp) / engine),
                    "--json",
                ],
                capture_output=True,
                text=True,
            )
            wall = time.perf_counter() - start
            out = json.loads(done.stdout)
            steps = out["samples_per_optimizer_step"]
            print(
                f"{engine:10} {nproc:5} {wall:6.1f}s {out['optimizer_steps']:5} "
                f"{'/'.join(map(str, sorted(set(steps)))):>12} "
                f"{out['tokens_per_second'] or 0:9,.0f} {out['step_time_seconds'] or 0:7.3f}s "
                f"{out['peak_memory_bytes'] / 2**20:8.0f}"
                + ("" if done.returncode == 0 else f"  FAILED: {out['errors']}")
            )


BARE = {  # a hand-written one-step script per engine: the same model, no batchspec around it
    "torch": """
import os, torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel
from translator.rank import model as models
dist.init_process_group("gloo")
net = DistributedDataParallel(models.build("tiny", 128))
opt = torch.optim.AdamW(net.parameters(), lr=1e-4)
gen = torch.Generator().manual_seed(int(os.environ["RANK"]))
for _ in range(2):
    net(models.batch(4, 128, models.SHAPES["tiny"].vocab, gen)).div(2).backward()
opt.step()
dist.destroy_process_group()
""",
    "deepspeed": """
import os, json, sys, torch
os.environ["DS_ACCELERATOR"] = "cpu"
import deepspeed
from translator.rank import model as models
deepspeed.ops.__compatible_ops__["deepspeed_shm_comm"] = False
deepspeed.init_distributed(dist_backend="gloo")
net = models.build("tiny", 128)
engine, *_ = deepspeed.initialize(model=net, optimizer=torch.optim.AdamW(net.parameters()),
    config={"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": 2})
gen = torch.Generator().manual_seed(int(os.environ["RANK"]))
while engine.global_steps < 1:
    engine.backward(engine(models.batch(4, 128, models.SHAPES["tiny"].vocab, gen)))
    engine.step()
torch.distributed.destroy_process_group()
""",
}


def overhead() -> None:
    print("\ntime to the first optimizer step (a one-step run, 2 CPU ranks, global 16)")
    print(f"{'engine':10} {'bare torchrun':>13} {'batchspec smoke':>15} {'ratio':>6}")
    root = Path(__file__).resolve().parent.parent
    with tempfile.TemporaryDirectory() as tmp:
        for engine, source in BARE.items():
            script = Path(tmp) / f"bare_{engine}.py"
            script.write_text(source)
            start = time.perf_counter()
            bare = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "torch.distributed.run",
                    "--standalone",
                    "--nproc_per_node",
                    "2",
                    str(script),
                ],
                cwd=root,
                capture_output=True,
                text=True,
            )
            bare_wall = time.perf_counter() - start
            spec = Path(tmp) / "spec.yaml"
            spec.write_text(RUNS[0][2])
            start = time.perf_counter()
            ours = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "translator",
                    "smoke",
                    str(spec),
                    "--framework",
                    engine,
                    "--nproc",
                    "2",
                    "--steps",
                    "1",
                    "--device",
                    "cpu",
                    "--workdir",
                    str(Path(tmp) / engine),
                ],
                capture_output=True,
                text=True,
            )
            ours_wall = time.perf_counter() - start
            failed = [name for name, done in (("bare", bare), ("smoke", ours)) if done.returncode]
            print(
                f"{engine:10} {bare_wall:12.1f}s {ours_wall:14.1f}s {ours_wall / bare_wall:6.2f}"
                + (f"  FAILED: {failed}" if failed else "")
            )


if __name__ == "__main__":
    main()
    overhead()
