"""What Slurm sets in a job: the variables ``sbatch`` gives the batch script from its
``#SBATCH`` lines (``SLURM_NNODES``, ``SLURM_NTASKS_PER_NODE``, ``SLURM_GPUS_ON_NODE``...),
each at the span of its number so ``update`` can change the option, and those ``srun`` or
``sbatch`` give what they start from the options on their own command line.

As Slurm's ``sbatch``/``srun`` set them: ``--nodes`` gives ``SLURM_NNODES`` (and
``SLURM_JOB_NUM_NODES``); ``--ntasks`` gives ``SLURM_NTASKS`` (``SLURM_NPROCS``), and without it
``--nodes`` × ``--ntasks-per-node`` does (sbatch computes the task count so);
``--ntasks-per-node`` gives ``SLURM_NTASKS_PER_NODE``; ``--gpus-per-node`` gives
``SLURM_GPUS_PER_NODE`` and, with ``--gres=gpu:N``, the GPUs each node's step sees,
``SLURM_GPUS_ON_NODE``. A range (``--nodes=2-4``) is left to the scheduler: unknown, and it
overrides what the ``#SBATCH`` lines said. Short options may be glued to their value
(``-N2``)."""

from __future__ import annotations

import re

from translator.shell.values import Env, Piece, Var, Word, merge_sources, text_of, unknown

#: Option -> the variables Slurm sets from it.
VARIABLES = {
    "--nodes": ["SLURM_NNODES", "SLURM_JOB_NUM_NODES"],
    "-N": ["SLURM_NNODES", "SLURM_JOB_NUM_NODES"],
    "--ntasks-per-node": ["SLURM_NTASKS_PER_NODE"],
    "--ntasks": ["SLURM_NTASKS", "SLURM_NPROCS"],
    "-n": ["SLURM_NTASKS", "SLURM_NPROCS"],
    "--gpus-per-node": ["SLURM_GPUS_PER_NODE", "SLURM_GPUS_ON_NODE"],
    "--gpus": ["SLURM_GPUS"],
    "-G": ["SLURM_GPUS"],
    "--gpus-per-task": ["SLURM_GPUS_PER_TASK"],
    "--gres": ["SLURM_GPUS_ON_NODE"],
    "--cpus-per-task": ["SLURM_CPUS_PER_TASK"],
}
OPTION = re.compile(r"(--[a-z-]+(?:[= ]\s*)|-[A-Za-z](?:[= ]\s*)?)(\S+)")
#: Where an option starts in a ``#SBATCH`` line (``#SBATCH <SLURM OPTIONS> --nodes=128``,
#: ``-N2``).
STARTS = re.compile(r"(?<!\S)(?:--[a-z-]+(?=[= ])|-[A-Za-z](?=[= ]|\d))")
#: A count Slurm picks from a range (``--nodes=2-4``; ``4-4`` is 4).
RANGE = re.compile(r"(\d+)-(\d+)")
#: The count of ``gpu[:type]:count`` (``--gres=gpu:a100:8``, ``--gpus=h100:16``, ``8``); a
#: value with none (``gpu:a100``) is one, as Slurm's manual says of ``--gres``.
GPU_COUNT = re.compile(r"(?:gpu:)?(?:[^:,(]+:)?(\d+)(?=$|,|\()")
#: Options whose count ends the value (``--gres=gpu:a100:8``, ``--gpus=h100:16``).
TRAILING_COUNT = ("--gres", "--gpus-per-node", "--gpus", "-G", "--gpus-per-task")
#: ``sbatch``/``srun`` options that take no value (so the word after one is the script).
SWITCHES = frozenset(
    "--parsable --wait -W --exclusive --requeue --no-requeue --hold -H --test-only "
    "--overcommit -O --quiet -Q --verbose -v --spread-job --use-min-nodes --contiguous "
    "--get-user-env --ignore-pbs --label -l --unbuffered -u --overlap --no-kill -k "
    "--kill-on-bad-exit -K --pty --exact --whole".split()
)


def sbatch_variables(text: str, env: Env, spans: bool = True) -> bool:
    """Set in ``env`` what the ``#SBATCH`` lines before the first command give the job;
    whether there is one (the script is then a batch job: Slurm sets more ``SLURM_*``
    names, with values the reader does not know). ``spans``: whether the numbers keep
    their place in ``text`` (not for a script other than the one being edited)."""
    pos = 0
    found = False
    given: dict[str, Piece] = {}
    lines: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(keepends=True), 1):
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            break
        m = re.match(r"\s*#SBATCH\s+(.*)", line)
        if m:
            found = True
            rest, at = m.group(1), pos + m.start(1)
            for opt in STARTS.finditer(rest):  # a line may hold several options
                _option(rest[opt.start() :], at + opt.start() if spans else None, given)
            lines |= dict.fromkeys(given.keys() - lines.keys(), number)
        pos += len(line)
    _set(env, given, lines)
    return found


def sbatch_line(text: str) -> int | None:
    """The line of a script's first ``#SBATCH`` line before its first command, if any."""
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            return None
        if re.match(r"\s*#SBATCH\s", line):
            return number
    return None


def option_variables(words: list[Word], env: Env) -> None:
    """Set in ``env`` what the ``srun``/``sbatch`` options ``words`` (after the command's
    name, up to what it runs) give the tasks it starts; the rest of the allocation's
    (``#SBATCH``) stands."""
    given: dict[str, Piece] = {}
    for j, word in enumerate(words):
        text = word.text
        if text is None or not text.startswith("-"):
            continue
        glued = re.fullmatch(r"(-[A-Za-z])(\d.*)", text)
        if glued:  # -N2
            option, value = glued.groups()
            start = word.span[0] + 2 if word.span is not None else None
        elif "=" in text:
            option, _, value = text.partition("=")
            start = word.span[0] + len(option) + 1 if word.span is not None else None
        elif text in VARIABLES and j + 1 < len(words) and words[j + 1].text is not None:
            after = words[j + 1]
            option, value = text, after.text or ""
            start = after.span[0] if after.span is not None else None
        else:
            continue
        _option(f"{option}={value}", None if start is None else start - len(option) - 1, given)
    if not given:
        return
    if "SLURM_NTASKS" not in given and {"SLURM_NNODES", "SLURM_NTASKS_PER_NODE"} & given.keys():
        for name in ("SLURM_NNODES", "SLURM_NTASKS_PER_NODE"):  # the allocation's other one
            var = env.get(name)
            if name not in given and isinstance(var, Var) and text_of(var.scalar) is not None:
                given[name] = Piece(text_of(var.scalar), None, None, merge_sources(var.scalar))
        if not {"SLURM_NNODES", "SLURM_NTASKS_PER_NODE"} <= given.keys():
            why = "the task count of the step (srun's nodes or tasks per node not known)"
            for name in ("SLURM_NTASKS", "SLURM_NPROCS"):
                env.set(name, Var((unknown(why),)))
    _set(env, given)


def script_at(words: list[Word]) -> int | None:
    """Where the script ``srun``/``sbatch`` runs stands among ``words`` (after the command's
    name): the first word that is no option nor an option's value."""
    j = 0
    while j < len(words):
        text = words[j].text
        if text is None:
            return None
        if not text.startswith("-"):
            return j
        j += 1 if "=" in text or text in SWITCHES or len(text) > 2 and text[1] != "-" else 2
    return None


def _option(rest: str, at: int | None, given: dict[str, Piece]) -> None:
    """One option (``rest``, at character offset ``at`` of the file; ``None``: no place)."""
    m = OPTION.match(rest)
    option = m.group(1).rstrip("= \t") if m else ""
    if not m or option not in VARIABLES:
        return
    value = m.group(2)
    if option == "--gres" and not value.startswith("gpu"):
        return
    picked = RANGE.fullmatch(value)
    if picked and picked.group(1) != picked.group(2) and option not in TRAILING_COUNT:
        why = f"{option}={value}: Slurm picks the count in the range when the job starts"
        for name in VARIABLES[option]:
            given[name] = Piece(None, None, why)
        return
    if option in TRAILING_COUNT:
        count, group = GPU_COUNT.match(value), 1
    else:
        count, group = picked or re.fullmatch(r"\d+", value), 2 if picked else 0
    if count is None and option not in TRAILING_COUNT:  # a template's YOUR_NUM_TASKS: no count
        for name in VARIABLES[option]:
            given[name] = Piece(None, None, f"{option}={value} is no count")
        return
    if count is None:  # --gres=gpu, --gres=gpu:a100: Slurm's count is one
        for name in VARIABLES[option]:
            given[name] = Piece("1")
        return
    if at is None:
        piece = Piece(count.group(group))
    else:
        start = at + m.start(2)
        span = (start + count.start(group), start + count.end(group))
        piece = Piece(count.group(group), span, None, frozenset({span}))
    for name in VARIABLES[option]:
        given[name] = piece


def _set(env: Env, given: dict[str, Piece], lines: dict[str, int] | None = None) -> None:
    """Set ``given`` in ``env``, with the task count nodes × tasks per node when no
    ``--ntasks`` gives it (computed: no literal to edit); ``lines``: the ``#SBATCH`` line
    each comes from, where known (the task count: the nodes' line)."""
    lines = dict(lines or {})
    nodes, per_node = given.get("SLURM_NNODES"), given.get("SLURM_NTASKS_PER_NODE")
    if "SLURM_NTASKS" not in given and nodes is not None and per_node is not None:
        if nodes.text is None or per_node.text is None:
            piece = Piece(None, None, nodes.why or per_node.why)
        else:
            total = int(nodes.text) * int(per_node.text)
            piece = Piece(str(total), None, None, merge_sources([nodes, per_node]))
        given = {**given, "SLURM_NTASKS": piece, "SLURM_NPROCS": piece}
        if "SLURM_NNODES" in lines:
            lines |= dict.fromkeys(("SLURM_NTASKS", "SLURM_NPROCS"), lines["SLURM_NNODES"])
    for name, piece in given.items():
        line = lines.get(name)
        env.set(name, Var(((piece,),), lines=() if line is None else (line,)))
