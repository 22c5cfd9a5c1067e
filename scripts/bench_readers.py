"""Reader throughput: files per second through `inspect` (read + interpret + solve), per
framework, over the fixtures and over a long synthetic launch script; then the launch-script
reader on 1x, 10x and 100x the same input, to show that reading time stays linear.
Run: python scripts/bench_readers.py [--seconds S]"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from translator.inspection import inspect_file
from translator.reading import Launch

ROOT = Path(__file__).resolve().parent.parent
LAUNCH = Launch(world_size=8)


def per_second(paths: list[Path], seconds: float) -> tuple[float, int]:
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for path in paths:
            inspect_file(str(path), launch=LAUNCH)
            done += 1
    return done / (time.perf_counter() - start), done


def long_script(path: Path, lines: int) -> Path:
    body = [f"VAR_{i}=$(( {i} * 2 ))  # filler {i}" for i in range(lines)]
    body += [
        "ARGS=(",
        "  --micro-batch-size 2",
        "  --global-batch-size 64",
        ")",
        "torchrun --nproc_per_node 8 pretrain_gpt.py ${ARGS[@]} \\",
        *[f"  --flag-{i} $VAR_{i} \\" for i in range(lines)],
        "  --lr 3e-4",
    ]
    path.write_text("\n".join(body) + "\n")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=2.0)
    seconds = parser.parse_args().seconds
    print(f"files/s through inspect_file, {seconds:g} s each")
    from translator.frameworks import names

    for framework in (n for n in names() if (ROOT / "fixtures" / n).is_dir()):
        paths = sorted(
            p for p in (ROOT / "fixtures" / framework).glob("*/*") if p.name != "expected.yaml"
        )
        rate, n = per_second(paths, seconds)
        print(f"  {framework:10} {len(paths):3} fixtures  {rate:8.0f} files/s  ({n} reads)")
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        script = long_script(Path(tmp) / "long.sh", 2000)
        size = script.stat().st_size
        rate, n = per_second([script], seconds)
        print(
            f"  megatron   4,000-line script ({size / 1024:.0f} KiB)  {rate:8.1f} files/s  "
            f"({rate * size / 2**20:.2f} MiB/s)"
        )
        print("launch-script reader, seconds per read (linear: 10x input, ~10x time)")
        for lines in (400, 4_000, 40_000):
            script = long_script(Path(tmp) / f"scale-{lines}.sh", lines)
            start = time.perf_counter()
            inspect_file(str(script), launch=LAUNCH)
            took = time.perf_counter() - start
            print(
                f"  {lines * 2:7,} lines ({script.stat().st_size / 1024:6.0f} KiB)  {took:7.3f} s"
            )


if __name__ == "__main__":
    main()
