"""Parity checks of every engine that runs them, on this machine: the wall time of
`smoke A --parity B` against one smoke run of A of the same size (one optimizer step, the same
batch, model and sequence), as a ratio (goal: at most 2.2), against the smoke runs of A and of B
(the file parity derived for B) together, and the float noise parity saw
between two correct splits of the batch (the relative difference of the loss and of the
update's parameter that differs most), the figures the parity tolerance (docs/guide.md) is set against.
Run: python scripts/bench_parity.py [ENGINE ...] (default: every engine below)"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SPEC = "global_batch_size: 8\nmicro_batch_size: 4\nsequence_length: 32\n"
MEGATRON = """BATCH_ARGS=(
    --micro-batch-size 4
    --global-batch-size 8
    --seq-length 32
    --calculate-per-token-loss
)
"""
BRIDGE = """train:
  global_batch_size: 8
  micro_batch_size: 4
model:
  tensor_model_parallel_size: 1
  pipeline_model_parallel_size: 1
  context_parallel_size: 1
  calculate_per_token_loss: true
dataset:
  seq_length: 32
"""
RUNS = [  # (engine, file name, its text, processes, --parity)
    ("torch", "spec.yaml", SPEC, 2, "micro=1,nproc=1"),
    ("deepspeed", "spec.yaml", SPEC, 2, "micro=1,nproc=1"),
    ("megatron", "megatron.sh", MEGATRON, 2, "micro=1,nproc=1"),
    ("hf", "spec.yaml", SPEC, 2, "micro=1,nproc=1"),
    ("megatron-bridge", "megatron_bridge.yaml", BRIDGE, 2, "micro=1,nproc=1"),
]


def smoke(args: list[str]) -> tuple[float, dict]:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "translator", "smoke", *args, "--device", "cpu", "--json"],
        capture_output=True,
        text=True,
    )
    wall = time.perf_counter() - start
    out = json.loads(done.stdout) if done.stdout.strip() else {}
    if done.returncode != 0 and "--parity" not in args or not out:
        sys.exit(f"smoke {' '.join(args)} failed: {done.stderr[-2000:]}")
    return wall, out


def main() -> None:
    print(
        f"{'engine':15} {'A':>7} {'B':>7} {'smoke A':>8} {'smoke B':>8} {'parity':>7} "
        f"{'/A':>5} {'/(A+B)':>6} {'loss diff':>10} {'update diff':>12}  parameter"
    )
    with tempfile.TemporaryDirectory() as tmp:
        asked = sys.argv[1:] or [run[0] for run in RUNS]
        for engine, name, text, nproc, other in (r for r in RUNS if r[0] in asked):
            path = Path(tmp) / engine / name
            path.parent.mkdir()
            path.write_text(text)
            common = [str(path), "--framework", engine, "--nproc-per-node", str(nproc)]
            one, _ = smoke([*common, "--steps", "1", "--workdir", str(path.parent / "smoke")])
            both, out = smoke(
                [*common, "--parity", other, "--workdir", str(path.parent / "parity")]
            )
            diff = out["difference"]
            if diff is None:
                sys.exit(f"{engine}: {out['errors']}")
            (b_file,) = (path.parent / "parity" / "b-input").iterdir()  # the file B ran
            other_side, _ = smoke(
                [
                    str(b_file),
                    "--framework",
                    engine,
                    "--nproc-per-node",
                    "1",
                    "--steps",
                    "1",
                    "--workdir",
                    str(path.parent / "smoke-b"),
                ]
            )
            largest = diff["update"]["largest"]
            a, b = out["a"], out["b"]
            split = "{micro_batch_size}x{gradient_accumulation_steps}x{data_parallel_size}"
            print(
                f"{engine:15} {split.format(**a):>7} {split.format(**b):>7} {one:7.1f}s "
                f"{other_side:7.1f}s {both:6.1f}s {both / one:5.2f} "
                f"{both / (one + other_side):6.2f} {diff['loss']['relative_difference']:10.1e} "
                f"{largest['relative_difference']:12.1e}  {largest['parameter']}"
            )


if __name__ == "__main__":
    main()
