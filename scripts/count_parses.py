"""How often one `smoke` prepare touches a job's file: opened, read by the shell reader,
parsed by tree-sitter, inspected. The job: a Megatron launch script of 8 processes (global 64,
micro 2) smoked on 4, its accumulation re-solved to keep global 64 (nothing is launched).

    python scripts/count_parses.py
"""

from __future__ import annotations

import collections
import os
import tempfile
from pathlib import Path

from translator import inspection
from translator.checks import estimation
from translator.edit import update
from translator.job import script
from translator.launch import preparing
from translator.launch.request import RunRequest
from translator.shell import reader, syntax
from translator.words import files

JOB = """#!/bin/bash
GPUS_PER_NODE=8
DISTRIBUTED_ARGS="--nproc_per_node $GPUS_PER_NODE --nnodes 1"
torchrun $DISTRIBUTED_ARGS pretrain_gpt.py \\
  --num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64 \\
  --max-position-embeddings 64 --micro-batch-size 2 --global-batch-size 64 \\
  --tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 --lr 1e-4 \\
  --train-iters 10 --tokenizer-type NullTokenizer --vocab-size 128 --mock-data --bf16
"""


def main() -> None:
    counts: collections.Counter[str] = collections.Counter()

    def counted(what: str, function):
        def wrapper(*args, **kwargs):
            counts[what] += 1
            return function(*args, **kwargs)

        return wrapper

    opened = counted("opened (read_text)", files.read_text)
    shell_read = counted("read by the shell reader", reader.parse)
    inspected = counted("inspected", inspection.inspect_reading)
    syntax.tree = counted("parsed by tree-sitter", syntax.tree)
    for module in (inspection, preparing, estimation, update, script):
        if hasattr(module, "read_text"):
            module.read_text = opened  # type: ignore[attr-defined]
        if hasattr(module, "inspect_reading"):
            module.inspect_reading = inspected  # type: ignore[attr-defined]
    script.shell.parse = shell_read  # type: ignore[attr-defined]
    with tempfile.TemporaryDirectory() as folder:
        os.chdir(folder)
        Path("job.sh").write_text(JOB)
        request = RunRequest("job.sh", None, 4, 1, 1, "tiny", 16, Path(folder) / "w")
        prepared = preparing.prepare(request)
    spec = prepared.spec
    print(
        f"job.sh (global 64 on 8 processes) smoked on {spec.world}: micro {spec.micro} x "
        f"accumulation {spec.accumulation} x data-parallel {spec.data_parallel} = "
        f"{spec.global_batch_size}"
    )
    for what in ("opened (read_text)", "parsed by tree-sitter", "read by the shell reader"):
        print(f"  {what:26} {counts[what]}")
    print(f"  {'inspected':26} {counts['inspected']}")


if __name__ == "__main__":
    main()
