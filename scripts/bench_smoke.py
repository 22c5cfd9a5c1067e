"""Smoke runs of every engine on this machine, with their figures: wall time of the whole
run, tokens/s, median step time and peak memory. Run: python scripts/bench_smoke.py"""

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
    print(f"{'engine':10} {'ranks':>5} {'wall':>7} {'steps':>5} {'samples/step':>12} "
          f"{'tokens/s':>9} {'step':>8} {'peak MiB':>8}")
    with tempfile.TemporaryDirectory() as tmp:
        for engine, nproc, text in RUNS:
            spec = Path(tmp) / f"{engine}.yaml"
            spec.write_text(text)
            start = time.perf_counter()
            done = subprocess.run([sys.executable, "-m", "translator", "smoke", str(spec),
                                   "--framework", engine, "--nproc", str(nproc), "--steps", "5",
                                   "--workdir", str(Path(tmp) / engine), "--json"],
                                  capture_output=True, text=True)
            wall = time.perf_counter() - start
            out = json.loads(done.stdout)
            steps = out["samples_per_optimizer_step"]
            print(f"{engine:10} {nproc:5} {wall:6.1f}s {out['optimizer_steps']:5} "
                  f"{'/'.join(map(str, sorted(set(steps)))):>12} "
                  f"{out['tokens_per_second'] or 0:9,.0f} {out['step_time_seconds'] or 0:7.3f}s "
                  f"{out['peak_memory_bytes'] / 2**20:8.0f}"
                  + ("" if done.returncode == 0 else f"  FAILED: {out['errors']}"))


if __name__ == "__main__":
    main()
