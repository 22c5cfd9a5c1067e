"""What the smoke tests share: the spec they run, the command line as a subprocess, and the
processes a run left behind."""

import json
import os
import subprocess
import sys
from pathlib import Path

from translator.rank.result import RankResult

SPEC = "global_batch_size: 8\nmicro_batch_size: 2\nsequence_length: 32\n"


def smoke_json(*args, timeout=300):
    """Run batchspec smoke in a subprocess (its own ranks need a real process tree)."""
    done = subprocess.run(
        [sys.executable, "-m", "translator", "smoke", *map(str, args), "--json"],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return done.returncode, json.loads(done.stdout) if done.stdout.strip() else None, done.stderr


def leftovers(marker: str) -> list[str]:
    """Processes whose command line mentions ``marker`` (a test's own workdir)."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if marker in cmd and str(os.getpid()) != proc.name:
                found.append(f"{proc.name}: {cmd}")
    return found


def write_results(folder, per_rank, packed_rows=None):
    """Ranks' reports of ``per_rank`` samples per step, as the engines write them."""
    folder.mkdir(parents=True)
    for rank, samples in enumerate(per_rank):
        RankResult(
            rank,
            len(per_rank),
            rank,
            True,
            samples,
            [0.1] * len(samples),
            sequence_length=32,
            packed_rows_per_step=packed_rows and packed_rows[rank],
            finished=True,
        ).write(folder)
