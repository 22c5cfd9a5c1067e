"""``#SBATCH`` lines: the variables Slurm sets in the job from them (``SLURM_NNODES``,
``SLURM_NTASKS_PER_NODE``, ``SLURM_GPUS_PER_NODE``...), each at the span of its number so
``update`` can change the option."""

from __future__ import annotations

import re

from translator.shell.values import Env, Piece, Var

#: ``#SBATCH`` option -> the variables Slurm sets from it.
VARIABLES = {
    "--nodes": ["SLURM_NNODES", "SLURM_JOB_NUM_NODES"],
    "-N": ["SLURM_NNODES", "SLURM_JOB_NUM_NODES"],
    "--ntasks-per-node": ["SLURM_NTASKS_PER_NODE"],
    "--ntasks": ["SLURM_NTASKS", "SLURM_NPROCS"],
    "-n": ["SLURM_NTASKS", "SLURM_NPROCS"],
    "--gpus-per-node": ["SLURM_GPUS_PER_NODE"],
    "--gpus": ["SLURM_GPUS"],
    "-G": ["SLURM_GPUS"],
    "--gpus-per-task": ["SLURM_GPUS_PER_TASK"],
    "--gres": ["SLURM_GPUS_ON_NODE"],
    "--cpus-per-task": ["SLURM_CPUS_PER_TASK"],
}
OPTION = re.compile(r"(--[a-z-]+|-[A-Za-z])(?:[= ]\s*)(\S+)")
#: Where an option starts in a ``#SBATCH`` line (``#SBATCH <SLURM OPTIONS> --nodes=128``).
STARTS = re.compile(r"(?<!\S)(?:--[a-z-]+|-[A-Za-z])(?=[= ])")
#: Options whose count ends the value (``--gres=gpu:a100:8``, ``--gpus=h100:16``).
TRAILING_COUNT = ("--gres", "--gpus-per-node", "--gpus", "-G", "--gpus-per-task")


def sbatch_variables(text: str, env: Env) -> bool:
    """Set in ``env`` what the ``#SBATCH`` lines before the first command give the job;
    whether there is one (the script is then a batch job: Slurm sets more ``SLURM_*``
    names, with values the reader does not know)."""
    pos = 0
    found = False
    for line in text.splitlines(keepends=True):
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            break
        m = re.match(r"\s*#SBATCH\s+(.*)", line)
        if m:
            found = True
            rest, at = m.group(1), pos + m.start(1)
            for opt in STARTS.finditer(rest):  # a line may hold several options
                _option(rest[opt.start() :], at + opt.start(), env)
        pos += len(line)
    return found


def _option(rest: str, at: int, env: Env) -> None:
    """One option (``rest``, at character offset ``at`` of the file)."""
    m = OPTION.match(rest)
    if not m or m.group(1) not in VARIABLES:
        return
    option, value, start = m.group(1), m.group(2), at + m.start(2)
    if option == "--gres" and not value.startswith("gpu"):
        return
    if option in TRAILING_COUNT:
        count, group = re.search(r"(\d+)$", value), 1
    else:
        count, group = re.fullmatch(r"\d+", value), 0
    if count is None:
        return
    span = (start + count.start(group), start + count.end(group))
    piece = Piece(count.group(group), span, None, frozenset({span}))
    for name in VARIABLES[option]:
        env.set(name, Var(((piece,),)))
