"""A job, read as it runs: the launch script, its launcher, the program, the program's flags
and the files they name.

The script is read by :mod:`translator.shell` with the arguments and environment it is run
with (none, unless the user gives them). Each command that starts a program is split into
launcher → program → arguments, and the frameworks are asked in their claim order whether the
program is theirs (``Framework.program``); the last command a framework claims that sets batch
values is the job's training launch. What every job shares is done here, for every framework:
the launcher's world, the launcher's own config file (``accelerate launch --config_file``),
the notes on what the reader did not follow, and the literals with several uses.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from translator import shell
from translator.job.detection import claimant
from translator.plugin.contract import Framework
from translator.plugin.findings import not_found
from translator.plugin.registry import FRAMEWORKS, by_claim_order
from translator.plugin.registry import launchers as known_launchers
from translator.reading import Call, Launch, Note, Reading, Source, Value, running_in
from translator.shell import launchers, slurm
from translator.shell.following import SHELLS, placed, shell_string
from translator.shell.uses import PRINTERS, uses_of
from translator.shell.values import clip
from translator.words.errors import InputError, NotAJob
from translator.words.files import read_text, suffix_of
from translator.words.findings import finding

#: ``$1``...``${12}``: an argument a script reads.
ARGUMENT = re.compile(r"\$\{?([1-9][0-9]*)")
#: File name endings that mark a launch script.
SCRIPT_SUFFIXES = (".sh", ".bash", ".slurm", ".sbatch", ".zsh")


@dataclass(frozen=True)
class Unread:
    """A launch of a program no framework reads."""

    program: str
    """The program and the line of its launch (``main.py (line 31)``)."""
    world_size: int | None
    """The processes its launcher starts, when that is known."""


@dataclass(frozen=True)
class RunAs:
    """How the job is run, beside its script."""

    args: tuple[str, ...] | None = None
    """The script's arguments (``inspect job.sh -- ARG...``); ``None``: run with none."""
    environment: Mapping[str, str] = field(default_factory=dict)
    """Variables set in the environment it runs in (``--env NAME=VALUE``)."""
    run_dir: str | None = None
    """The folder it runs in (``--run-dir``), where the relative paths it names start;
    ``None``: the current folder first, then the script's own."""
    mounts: Mapping[str, str] = field(default_factory=dict)
    """Paths on the machine it runs on -> the local files or folders mounted there (a
    SkyPilot task's ``file_mounts``)."""
    gpus: shell.Word | None = None
    """The count of GPUs the system gives each node, with the line that gives it (a job
    definition's ``nvidia.com/gpu: 8``): those a process sees where ``CUDA_VISIBLE_DEVICES``
    does not say; ``None``: not known."""
    gpus_key: str = "the node's GPUs"
    """What gives ``gpus``, for messages (``nvidia.com/gpu``, ``--nproc-per-node``)."""


def is_job(path: str, text: str) -> bool:
    """Whether a file is a launch script: by its name, or by a shell ``#!`` line."""
    if suffix_of(path) in SCRIPT_SUFFIXES:
        return True
    first = text.lstrip()[:80].split("\n", 1)[0]
    return first.startswith("#!") and any(s in first for s in ("sh", "bash", "zsh"))


def read_job(
    text: str, path: str, run_as: RunAs | None = None, framework: str | None = None
) -> tuple[Framework, Reading]:
    """The job's training launch, read by the framework whose program it runs (``framework``
    when given). A script with no launch of a known program is an input error, unless a
    framework claims the whole text (Megatron's arrays of flags without a launch line)."""
    run_as = run_as or RunAs()
    args = None if run_as.args is None else list(run_as.args)
    folders = _folders(path, run_as.run_dir)
    opener = _opener(folders)
    environment = dict(run_as.environment)
    gpus = run_as.gpus.text if run_as.gpus is not None else None
    script = shell.parse(text, path, args, environment, opener, gpus=gpus)
    frameworks = [FRAMEWORKS[framework]] if framework else by_claim_order()
    readers = [f for f in frameworks if f.program is not None]
    claimed, unread = _claims(script, text, path, readers, folders, run_as)
    stop = next((n for n in script.notes if "exits here" in n.text), None)
    if not claimed and stop is not None and args is None:
        for not_known in (("arguments",), ("arguments", "environment")):
            again = shell.parse(text, path, None, environment, opener, not_known, gpus)
            claimed, unread = _claims(again, text, path, readers, folders, run_as)
            if claimed:
                script = again
                script.notes.append(_stops_note(text, stop, not_known))
                break
    if not claimed:
        commands = {c for f in readers for c in f.commands}
        return _without_launch(text, path, frameworks, sorted(commands), unread, script)
    setting = [c for c in claimed if _sets(c[2])] or claimed
    last = setting[-1]
    # the rounds of a loop launch from one line: the first round is what the job runs first
    index, chosen, reading, call = next(c for c in setting if _site(c) == _site(last))
    _launched_again(reading, call, [c for c in setting if c[1] is chosen])
    if script.folders[index] is None:
        reading.notes.append(
            Note(
                call.line,
                "the script moves (cd) to a folder not known before this launch; the files it "
                "names are looked for as if it had not (give --run-dir)",
            )
        )
    _finish(reading, call, script)
    reading.arguments = list(call.split.arguments)
    _either_way(reading, script, index, [c[0] for c in claimed])
    return chosen, reading


def _claims(
    script: shell.Script,
    text: str,
    path: str,
    readers: list[Framework],
    folders: tuple,
    run_as: RunAs,
) -> tuple[list[tuple[int, Framework, Reading, Call]], list[Unread]]:
    """Each command a framework reads as its program's launch, with its reading; and the
    programs launched that no framework reads (``run_as``: where the job's files are mounted
    from, the GPUs its node has)."""
    commands = {c for f in readers for c in f.commands}
    modules = launcher_modules()
    claimed: list[tuple[int, Framework, Reading, Call]] = []
    unread: list[Unread] = []
    for i, words in enumerate(script.commands):
        if not words or words[0].text in PRINTERS:
            continue
        split = launchers.call_of(words, commands, modules)
        if split is not None:
            split = _placed(split, path)
        environment = script.environments[i]
        if split is None:
            binary = _binary_launch(words, script, environment, run_as)
            if binary is not None:
                unread.append(binary)
            continue
        sizes = launchers.sizes(
            split.launch,
            script.variables,
            environment,
            known=known_launchers(),
            gpus=run_as.gpus,
            gpus_key=run_as.gpus_key,
        )
        moved = _moved(folders, script.folders[i])
        call = Call(
            path, text, words[0].line, split, sizes, environment, script, moved, run_as.mounts
        )
        for f in readers:
            reading = f.program(call)  # type: ignore[misc]  # readers have one
            if reading is not None:
                claimed.append((i, f, reading, call))
                break
        else:
            if shell_string(words) is None:  # a `bash -c` string's commands are read apart
                unread.append(Unread(f"{clip(call.program)} (line {call.line})", sizes.world()[0]))
    return claimed, unread


def _placed(split: launchers.Split, path: str) -> launchers.Split:
    """The program named under the folder the job runs in (``$(pwd)/train.py``) or under the
    script's own (``$SCRIPT_DIR/train.py``, ``SCRIPT_DIR=$(dirname "$0")``), as the path that
    names it from here."""
    named = None if split.program.text is not None else placed(split.program, path)
    if named is None or named == ".":
        return split
    return dataclasses.replace(split, program=shell.Word(named, split.program.line))


def _binary_launch(
    words: list[shell.Word], script: shell.Script, environment, run_as: RunAs
) -> Unread | None:
    """A launcher starting a program that is no Python (``mpirun -np 8 ./train_gpt2cu``): a
    path to an executable, not a shell or a script the reader follows, nor a bare command
    (``srun hostname``)."""
    sizes = launchers.sizes(
        words, script.variables, environment, known=known_launchers(), gpus=run_as.gpus
    )
    if sizes.launcher in (None, "python") or sizes.runs_at is None:
        return None
    text = words[sizes.runs_at].text or ""
    name = text.rsplit("/", 1)[-1]
    if "/" not in text or not name or name.endswith(SCRIPT_SUFFIXES) or name in (*SHELLS, "env"):
        return None
    return Unread(f"{clip(text)} (line {words[0].line})", sizes.world()[0])


def launcher_modules() -> frozenset[str]:
    """The modules and scripts that are a launcher under ``python`` (``-m
    torch.distributed.run``, ``gaudi_spawn.py``)."""
    known = known_launchers()
    return frozenset(m for d in known.values() for m in d.modules) | {
        name for name in known if name.endswith(".py")
    }


def _stops_note(text: str, stop: Note, not_known: tuple[str, ...]) -> Note:
    """What a job read with its arguments (and environment) not known says: where it stops
    when run as read, and which arguments its values may rest on."""
    named = sorted(set(ARGUMENT.findall(text)), key=int)
    what = "arguments" + (f" ({', '.join('$' + n for n in named)})" if named else "")
    if "environment" in not_known:
        what += " and environment"
    return Note(
        stop.line,
        f"run as read, with no arguments and an empty environment, the script stops here; "
        f"read with its {what} not known instead, so what they give is unknown (give them "
        "after -- and with --env)",
    )


def _opener(folders: tuple[Path, ...]):
    """Opens a script file a job runs or sources (a path from where the job starts): looked for
    where the job's other files are; ``None`` when it is not there or cannot be read."""

    def open_script(name: str) -> str | None:
        for candidate in [Path(name)] if name.startswith("/") else [f / name for f in folders]:
            if candidate.is_file():
                try:
                    return read_text(candidate)
                except InputError:
                    return None
        return None

    return open_script


def _sets(reading: Reading) -> bool:
    """Whether a program's reading sets a value where the job stands (a value it only
    implies, such as a flag not given, has no line) or names a file that does."""
    return bool(reading.partners) or any(v.line is not None for v in reading.values.values())


def _without_launch(
    text: str,
    path: str,
    frameworks: list[Framework],
    tools: list[str],
    unread: list[Unread],
    script: shell.Script,
) -> tuple[Framework, Reading]:
    """A script with no launch a framework reads: a framework that reads such files whole
    (Megatron's arrays of flags), else the reason, one line."""
    stops = [str(n) for n in script.notes if "exits here" in n.text]
    if stops:
        raise NotAJob(
            f"{path}: read as run it stops before any launch ({stops[0]}); give the "
            "arguments it is run with after --"
        )
    suffix = suffix_of(path)
    for f in frameworks:
        if not unread and suffix in f.extensions and f.claims(text) and f.holds_batch(text):
            return f, f.read(text, path)
    if unread:
        worlds = {u.world_size for u in unread}
        world = worlds.pop() if len(worlds) == 1 else None
        started = "" if world is None else f"; its launcher starts {world} processes"
        raise NotAJob(
            f"{path}: it launches {', '.join(u.program for u in unread[-3:])}, a program none "
            f"of the frameworks batchspec reads ({', '.join(f.name for f in frameworks)}) "
            f"knows by its arguments{started}",
            world,
        )
    raise NotAJob(
        f"{path}: no launch of a training program found (read as run with no arguments; "
        f"launchers read: {', '.join(known_launchers())}, python; tools: {', '.join(tools)})"
    )


def _folders(script: str, run_dir: str | None) -> tuple[Path, ...]:
    """Where the files a job names are looked for: ``run_dir``, else the current folder, then
    the script's."""
    if run_dir:
        return (Path(run_dir),)
    here = Path(script).parent if script != "-" else Path()
    return tuple(dict.fromkeys([Path(), here]))


def _moved(folders: tuple[Path, ...], folder: str | None) -> tuple[Path, ...]:
    """Where a command's files are looked for once the script has moved to ``folder``
    (relative to where it started; ``None``: not known): there first, then where it started
    (a ``cd`` to the author's own checkout, ``/home/them/repo``, is this checkout here)."""
    if not folder:
        return folders
    there = [Path(folder)] if folder.startswith("/") else [f / folder for f in folders]
    return tuple(dict.fromkeys([*there, *folders]))


def _finish(reading: Reading, call: Call, script: shell.Script) -> None:
    """What every job shares: the launcher's words and world, its config file, the notes."""
    reading.notes = list(script.notes) + reading.notes
    reading.uses = uses_of(script)
    sizes = call.sizes
    reading.launcher = reading.launcher or sizes.launcher
    reading.slurm = _slurm_at(call)
    own_world = reading.world_size is not None or reading.world_unknown is not None
    if sizes.hostfile is not None and sizes.hostfile.text is not None and not own_world:
        found, looked = call.locate(sizes.hostfile.text)
        if found is None:
            reading.findings.append(
                not_found(
                    f"the host file {sizes.hostfile.text}",
                    looked,
                    f"{call.path}:{sizes.hostfile.line}",
                )
            )
        else:
            sizes.use_hostfile(read_text(found), str(found))
    if not own_world:
        for role, (key, word) in sizes.words.items():
            reading.values[key] = Value.of_word(word)
            reading.launch_keys[role] = key
        reading.launch_counts = sizes.counts()
        reading.launch_at = _launcher_end(call)
        reading.world_size, reading.world_unknown = sizes.world()
        if reading.world_size is not None:
            where = (
                "; ".join(f"{call.path}:{word.line} {key}" for key, word in sizes.words.values())
                or f"{call.path}:{call.line} ({sizes.launcher}'s defaults)"
            )
            reading.sources.append(Source("world_size", reading.world_size, where))
    _copies(reading, call)
    if sizes.config_file is not None:
        launcher_config(reading, call, sizes, sizes.config_file)
    imposed = sizes.accumulation()
    count = imposed[1].text if imposed is not None else None
    if imposed is not None and count is not None and count.isdigit():
        flag, word = imposed
        reading.launch = dataclasses.replace(
            reading.launch or Launch(),
            world_size=None,
            gradient_accumulation_steps=int(count),
            source=f"{call.path}:{word.line} ({sizes.launcher} {flag})",
        )
    rests = _rests_on(reading, call, script)
    if rests:
        reading.findings.append(
            finding(
                "job-defaults",
                "read as run with no arguments and an empty environment, the reading rests on: "
                + "; ".join(rests),
                hint="give the script's arguments after -- and variables with --env to read it "
                "as you run it",
                where=call.path,
            )
        )
    for note in reading.notes:
        reading.findings.append(
            finding(
                "script-not-followed",
                note.text,
                hint="values set there are unknown to batchspec",
                where=call.path if note.line is None else f"{call.path}:{note.line}",
            )
        )


def _copies(reading: Reading, call: Call) -> None:
    """A node launcher started by another (``srun torchrun``): each copy is one node's agent,
    so there must be as many copies as the nodes it is told of; else the copies wait for
    agents that never come, or crowd one node's GPUs."""
    sizes = call.sizes
    nodes = sizes.counts().get("nodes")
    if sizes.copies is None or nodes is None or sizes.copies[1] == nodes:
        return
    outer, copies, line = sizes.copies
    reading.findings.append(
        finding(
            "launcher-copies",
            f"{outer} starts {copies} copies of {sizes.launcher}, each one node's launcher, "
            f"but {sizes.launcher} is told the job has {nodes} node(s): the run does not start "
            "as written",
            hint=f"start one {sizes.launcher} a node ({outer} --ntasks-per-node=1), or tell it "
            f"{copies} nodes",
            where=f"{call.path}:{line or call.line}",
        )
    )


def _slurm_at(call: Call) -> str | None:
    """Where the job shows that Slurm runs it: the ``srun`` that starts its launcher, else the
    script's first ``#SBATCH`` line; ``None`` when neither does."""
    run = next((w for w in call.split.launch if (w.text or "").rsplit("/", 1)[-1] == "srun"), None)
    line = run.line if run is not None else slurm.sbatch_line(call.text)
    return None if line is None else f"{call.path}:{line}"


def _launcher_end(call: Call) -> int | None:
    """Just after the launcher's name on the launch line (``torchrun``, ``accelerate launch``,
    ``python -m torch.distributed.run``), where a sizing flag can be added; ``None`` when no
    literal word names it."""
    words, name, launcher = call.split.launch, call.sizes.launcher, call.sizes.rules
    if launcher is None:
        return None
    for i in range(len(words) - 1, -1, -1):
        text = (words[i].text or "").rsplit("/", 1)[-1]
        if text == name or text in launcher.modules:
            at = i + 1 if launcher.subcommand is not None else i
            span = words[at].span if at < len(words) else None
            if span is None or call.text.count("\n", 0, span[0]) + 1 != words[at].line:
                return None  # no literal, or one set elsewhere (a variable's assignment)
            return span[1]
    return None


def _rests_on(reading: Reading, call: Call, script: shell.Script) -> list[str]:
    """The defaults the read values take because a variable or argument is not set, and the
    words that are empty as run where the program or launcher would take more flags."""
    spans = {v.span: (key, v.value) for key, v in reading.values.items() if v.span is not None}
    out = [
        f"{spans[d.span][0]} {spans[d.span][1]}, the default of ${{{d.name}}} (line {d.line}), "
        "which is not set"
        for d in script.defaults
        if d.span in spans
    ]
    words = [*call.split.launch, *call.arguments]
    for i, word in enumerate(words):
        before = words[i - 1].text or "" if i else ""
        if word.absent and not (before.startswith("-") and "=" not in before):
            shown = (word.why_unknown or "a word").split(" (")[0]
            out.append(f"{shown} (line {word.line}) empty, so no flags there")
    return list(dict.fromkeys(out))


def launcher_config(reading: Reading, call: Call, sizes: launchers.Sizes, config) -> None:
    """The config file of the launcher ``sizes`` describes (accelerate's ``--config_file``,
    the word ``config``): read by the framework that claims it; its world counts unless the
    launcher's flags give one (a launcher's flag beats its config file), and its other sizes
    and accumulation reach the program. A framework whose tool starts a launcher itself
    (``axolotl train ... -- --config_file x``) calls it with that launcher's sizes."""
    where = f"{call.path}:{config.line}"
    if config.text is None:
        reading.notes.append(
            Note(config.line, f"the launcher's config file is {config.why_unknown}")
        )
        return
    found, looked = call.locate(config.text)
    if found is None:
        reading.findings.append(
            not_found(f"the launcher's config file {config.text}", looked, where)
        )
        if not reading.world_size:
            reading.world_unknown = Note(
                config.line, f"the launcher's config file {config.text} is not found"
            )
        return
    text = read_text(found)
    framework = claimant(str(found), text)
    if framework is None or framework.launch_of is None:
        return
    with running_in(call.folders):  # the files it names open where the launch runs
        config_reading = framework.read(text, str(found))
    given = framework.launch_of(config_reading)
    reading.findings += [f for f in config_reading.findings if f.severity != "info"]
    from_flags = "total" in sizes.words
    if given.world_size is not None:
        shown = (
            f"{found}:{config_reading.values['num_processes'].line}"
            if "num_processes" in config_reading.values
            else str(found)
        )
        if from_flags:
            reading.sources.append(
                Source(
                    "world_size",
                    given.world_size,
                    f"{shown} num_processes",
                    won=False,
                    why=f"{sizes.launcher} launch's flags win over its config file",
                )
            )
        else:
            reading.world_size, reading.world_unknown = given.world_size, None
            reading.sources.append(Source("world_size", given.world_size, f"{shown} num_processes"))
    reading.launcher_config = config_reading
    reading.launch = Launch(
        None,
        given.tensor_parallel_size,
        given.pipeline_parallel_size,
        given.context_parallel_size,
        given.gradient_accumulation_steps,
        str(found),
        nodes=None if from_flags else given.nodes,
        handed=given.handed,
    )


def _site(claim: tuple) -> tuple[str, int]:
    """Where a claimed launch stands: its file and line."""
    return claim[3].path, claim[3].line


def _launched_again(reading: Reading, call: Call, launches: list[tuple]) -> None:
    """A warning when the script trains several times in turn with other values (a loop over
    parallel layouts): the reading is its last launch line's (a loop's: its first round)."""
    values = [{k: v.value for k, v in c[2].values.items()} for c in launches]
    if len(launches) < 2 or all(v == values[-1] for v in values):
        return
    lines = sorted({c[3].line for c in launches})
    at = f"line{'s' if len(lines) > 1 else ''} {', '.join(map(str, lines))}"
    changed = sorted(k for k in values[-1] if any(v.get(k) != values[-1][k] for v in values))
    read_as = (
        "the first round of its loop" if len(lines) == 1 else f"its launch on line {call.line}"
    )
    reading.findings.append(
        finding(
            "job-launches-several",
            f"the script launches {call.program} {len(launches)} times ({at}), with other "
            f"{', '.join(changed)} each time: read as {read_as}",
            hint="inspect a copy of the script that launches the one you mean",
            where=f"{call.path}:{call.line}",
        )
    )


def _either_way(reading: Reading, script: shell.Script, chosen: int, others: list[int]) -> None:
    """When another launch runs instead of the chosen one on another path of an ``if`` the
    reader cannot decide, and it starts another number of processes, the world is unknown."""
    if reading.world_size is None:
        return
    mine = dict(script.paths[chosen])
    for other in others:
        theirs = dict(script.paths[other])
        split = next(
            (
                what
                for (n, what), k in mine.items()
                if (n, what) in theirs and theirs[(n, what)] != k
            ),
            None,
        )
        if split is None:
            continue
        words = script.commands[other]
        found = launchers.call_of(words, modules=launcher_modules())
        world = (
            launchers.sizes(found.launch, script.variables, known=known_launchers()).world()[0]
            if found
            else None
        )
        if world != reading.world_size:
            reading.world_size = None
            reading.world_unknown = Note(
                script.commands[chosen][0].line,
                f"the script launches the program this way or another way depending on {split}",
            )
            return
