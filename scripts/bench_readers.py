"""Reader throughput: files per second through `inspect` (read + interpret + solve), per
framework, over the fixtures and over a long synthetic launch script; then the launch-script
reader on 1x, 10x and 100x the same input, to show that reading time stays linear.
Run: python scripts/bench_readers.py [--seconds S]"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from translator import parsing
from translator.inspection import inspect_file
from translator.reading import Launch

ROOT = Path(__file__).resolve().parent.parent
LAUNCH = Launch(world_size=8)


def per_second(paths: list[Path], seconds: float) -> tuple[float, int]:
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for path in paths:
            inspect_file(str(path), launch=LAUNCH)
            parsing.clear_cache()  # each read starts cold, as a file read once does
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
        import os

        here = os.getcwd()
        os.chdir(tmp)  # relative paths start where the job runs, as people run them
        try:
            jobs = repository(Path(tmp), 100)
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
            script = long_script(Path(tmp) / f"scale-{lines}.sh", lines)
            start = time.perf_counter()
            inspect_file(str(script), launch=LAUNCH)
            took = time.perf_counter() - start
            print(
                f"  {lines * 2:7,} lines ({script.stat().st_size / 1024:6.0f} KiB)  {took:7.3f} s"
            )


if __name__ == "__main__":
    main()
