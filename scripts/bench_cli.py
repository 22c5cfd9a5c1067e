"""Median wall time of `batchspec plan --json` and `render` (all backends), beside
`python -c "import deepspeed"`. Run: python scripts/bench_cli.py [--runs N]"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SPEC = "global_batch_size: 128\nmicro_batch_size: 4\nworld_size: 16\ntensor_parallel_size: 2\n"


def median_seconds(argv: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=15)
    runs = parser.parse_args().runs
    cli = [sys.executable, "-m", "translator"]
    with tempfile.TemporaryDirectory() as tmp:
        spec = Path(tmp) / "spec.yaml"
        spec.write_text(SPEC)
        rows = [
            (
                "batchspec plan --json",
                cli
                + [
                    "plan",
                    "--global-batch",
                    "128",
                    "--micro-batch",
                    "4",
                    "--world-size",
                    "16",
                    "--tp",
                    "2",
                    "--json",
                ],
            ),
            (
                "batchspec render (3 backends)",
                cli
                + [
                    "render",
                    str(spec),
                    "--to",
                    "deepspeed,axolotl,megatron",
                    "--out",
                    str(Path(tmp) / "out"),
                    "--force",
                ],
            ),
            (
                "batchspec inspect (HF args + accelerate)",
                cli
                + [
                    "inspect",
                    str(ROOT / "fixtures/accelerate/valid/deepspeed_zero2.yaml"),
                    str(ROOT / "fixtures/hf/valid/trl_cli_config.yaml"),
                    "--json",
                ],
            ),
            ("python -c 'import deepspeed'", [sys.executable, "-c", "import deepspeed"]),
            ("python -c 'pass' (interpreter start)", [sys.executable, "-c", "pass"]),
        ]
        results = {name: median_seconds(argv, runs) for name, argv in rows}
    width = max(map(len, results))
    print(f"median of {runs} runs, {sys.version.split()[0]}")
    for name, seconds in results.items():
        print(f"  {name.ljust(width)}  {seconds * 1000:8.1f} ms")
    ratio = results["batchspec plan --json"] / results["python -c 'import deepspeed'"]
    print(f"  plan --json / import deepspeed = {ratio:.2f} (target < 0.25)")


if __name__ == "__main__":
    main()
