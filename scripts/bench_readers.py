"""Reader throughput: files per second through `inspect` (read + interpret + solve), each file
read cold (every parse cache cleared between files, as a file read once is), per framework, over
the fixtures (or the files under --files) and a long synthetic launch script; then the
launch-script reader on 1x, 10x and 100x the same input, to show that reading time stays linear.
With --against REV, the tree at git revision REV reads the same files in a child process, and
both rates are printed side by side with their ratio.

Run: python scripts/bench_readers.py [--rounds N] [--against REV] [--files DIR]"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def cold() -> None:
    """Forget every parse: YAML, JSON and TOML, and the shell's (a tree without a cache has
    nothing to forget; the tree of 2026-12-01 kept its parsing at the package's root)."""
    import importlib

    for module in ("translator.words.parsing", "translator.parsing", "translator.shell.syntax"):
        try:
            clear = getattr(importlib.import_module(module), "clear_cache", None)
        except ImportError:
            continue
        if clear is not None:
            clear()


def per_second(paths: list[str], rounds: int) -> float:
    """Files per second: each file read ``rounds`` times, cold, its fastest read counted (the
    least disturbed by the machine's other work)."""
    from translator.inspection import inspect_file
    from translator.reading import Launch

    launch = Launch(world_size=8)
    best = dict.fromkeys(paths, float("inf"))
    for _ in range(rounds):
        for path in paths:
            start = time.perf_counter()
            try:
                inspect_file(path, launch=launch)
            except Exception:  # noqa: BLE001 - a file one tree refuses is timed all the same
                pass
            best[path] = min(best[path], time.perf_counter() - start)
            cold()
    return len(paths) / sum(best.values())


def rates(groups: dict[str, list[str]], rounds: int) -> dict[str, float]:
    """Files per second of each group, read by the tree this process imports."""
    return {name: per_second(paths, rounds) for name, paths in groups.items()}


def rates_of(revision: str, groups: dict[str, list[str]], rounds: int) -> dict[str, float]:
    """:func:`rates` of the tree at git ``revision``, in a child process that imports it."""
    with tempfile.TemporaryDirectory() as tree:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", revision, "translator"],
            capture_output=True,
            check=True,
        ).stdout
        subprocess.run(["tar", "-x", "-C", tree], input=archive, check=True)
        spec = Path(tree) / "groups.json"
        spec.write_text(json.dumps(groups))
        done = subprocess.run(
            [sys.executable, __file__, "--measure", str(spec), "--rounds", str(rounds)],
            env=os.environ | {"PYTHONPATH": tree},
            capture_output=True,
            text=True,
            check=True,
        )
        out = json.loads(done.stdout)
        if not out.pop("_tree").startswith(tree):
            raise SystemExit(f"the child did not import the tree at {revision}")
        return out


def groups_of(files: Path | None) -> dict[str, list[str]]:
    """The files read, by framework: the fixtures' folders, or the files under ``files`` by
    the framework this tree reads them as (those it refuses are left out)."""
    from translator.frameworks import names

    if files is None:
        return {
            name: sorted(
                str(p) for p in (ROOT / "fixtures" / name).glob("*/*") if p.name != "expected.yaml"
            )
            for name in names()
            if (ROOT / "fixtures" / name).is_dir()
        }
    from translator.inspection import read_file

    out: dict[str, list[str]] = {}
    for path in sorted(p for p in files.rglob("*") if p.is_file()):
        if path.suffix in (".md", ".txt") or path.name == "expected.json":
            continue
        try:
            framework = read_file(str(path))[0].name
        except Exception:  # noqa: BLE001 - not a file batchspec reads
            continue
        out.setdefault(framework, []).append(str(path))
    return out


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


#: Launch scripts in the styles repositories publish (a HF Trainer program under deepspeed,
#: torchrun, accelerate launch and python; a Megatron pretrain script), {i} varying them.
STYLES = [
    "#!/bin/bash\nexport CUDA_VISIBLE_DEVICES=0,1,2,3\nBS=${{BS:-{i}}}\n"
    "deepspeed llava/train/train_mem.py --deepspeed ./scripts/zero3.json \\\n"
    "    --per_device_train_batch_size $BS --gradient_accumulation_steps 2 --output_dir o\n",
    "#!/bin/bash\nGPUS_PER_NODE=8\nNNODES=${{NNODES:-1}}\n"
    "torchrun --nproc_per_node $GPUS_PER_NODE --nnodes $NNODES finetune.py \\\n"
    "    --per_device_train_batch_size {i} --gradient_accumulation_steps 4 \\\n"
    "    --deepspeed ./scripts/zero3.json --bf16 True --output_dir out\n",
    "#!/bin/bash\nNUM_GPUS=4\nBATCH_SIZE_PER_GPU={i}\nTOTAL_BATCH_SIZE=$((BATCH_SIZE_PER_GPU*NUM_GPUS*8))\n"
    "GRADIENT_ACC_STEPS=$(($TOTAL_BATCH_SIZE/$NUM_GPUS/$BATCH_SIZE_PER_GPU))\n"
    "accelerate launch --mixed_precision bf16 --num_machines 1 --num_processes $NUM_GPUS \\\n"
    "    open_instruct/finetune.py --per_device_train_batch_size $BATCH_SIZE_PER_GPU \\\n"
    "    --gradient_accumulation_steps $GRADIENT_ACC_STEPS --output_dir out\n",
    "#!/bin/bash\nCUDA_VISIBLE_DEVICES=0 python finetune.py --per_device_train_batch_size {i} "
    "--gradient_accumulation_steps 8 --output_dir o\n",
    "#!/bin/bash\nGPUS_PER_NODE=8\nMBS={i}\nGBS=$((MBS*64))\nGPT_ARGS=(\n  --micro-batch-size $MBS\n"
    "  --global-batch-size $GBS\n  --tensor-model-parallel-size 2\n)\n"
    'torchrun --nproc_per_node $GPUS_PER_NODE pretrain_gpt.py ${{GPT_ARGS[@]}} "$@"\n',
]


def repository(folder: Path, count: int) -> list[Path]:
    """``count`` launch scripts of the published styles, with the DeepSpeed JSON they name."""
    (folder / "scripts").mkdir(parents=True, exist_ok=True)
    (folder / "scripts" / "zero3.json").write_text(
        '{"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto", '
        '"gradient_accumulation_steps": "auto", "zero_optimization": {"stage": 3}}'
    )
    paths = []
    for i in range(count):
        path = folder / "scripts" / f"train_{i}.sh"
        path.write_text(STYLES[i % len(STYLES)].format(i=1 + i % 8))
        paths.append(path)
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=7, help="reads of each file (fastest kept)")
    parser.add_argument("--against", metavar="REV", help="a git revision to read beside")
    parser.add_argument("--files", type=Path, help="read these files, not the fixtures")
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    rounds = args.rounds
    if args.measure is not None:  # the child of --against
        import translator

        out = rates(json.loads(args.measure.read_text()), rounds)
        print(json.dumps(out | {"_tree": translator.__file__}))
        return
    with tempfile.TemporaryDirectory() as tmp:
        groups = groups_of(args.files)
        script = long_script(Path(tmp) / "long.sh", 2000)
        groups["4,000-line script"] = [str(script)]
        now = rates(groups, rounds)
        then = rates_of(args.against, groups, rounds) if args.against else {}
        print(f"files/s through inspect_file, each read cold, the fastest of {rounds} reads")
        header = f"  {'files':18} {'count':>5} {'this tree':>10}"
        if then:
            header += f" {args.against:>10} {'ratio':>6}"
        print(header)
        for name, paths in groups.items():
            line = f"  {name:18} {len(paths):5} {now[name]:10.1f}"
            if then:
                line += f" {then[name]:10.1f} {now[name] / then[name]:5.2f}x"
            print(line)
        size = script.stat().st_size
        print(
            f"  4,000-line script: {1000 / now['4,000-line script']:.0f} ms a read "
            f"({size / 1024:.0f} KiB)"
        )
        jobs_and_scale(Path(tmp))


def jobs_and_scale(tmp: Path) -> None:
    """A repository's 100 launch scripts read in a row; the launch-script reader at 3 sizes."""
    from translator.inspection import inspect_file
    from translator.reading import Launch

    here = os.getcwd()
    os.chdir(tmp)  # relative paths start where the job runs, as people run them
    try:
        jobs = repository(tmp, 100)
        start = time.perf_counter()
        for job in jobs:
            inspect_file(str(job.relative_to(tmp)))
        took = time.perf_counter() - start
    finally:
        os.chdir(here)
    print(
        f"  jobs       a repository's 100 launch scripts ({len(STYLES)} styles, with the "
        f"JSON they name)  {took:6.2f} s in all"
    )
    print("launch-script reader, seconds per read (linear: 10x input, ~10x time)")
    for lines in (400, 4_000, 40_000):
        script = long_script(tmp / f"scale-{lines}.sh", lines)
        cold()
        start = time.perf_counter()
        inspect_file(str(script), launch=Launch(world_size=8))
        took = time.perf_counter() - start
        print(f"  {lines * 2:7,} lines ({script.stat().st_size / 1024:6.0f} KiB)  {took:7.3f} s")


if __name__ == "__main__":
    main()
