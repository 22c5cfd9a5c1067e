"""A launch command split as it runs (launcher → program → arguments), and how many processes
its launcher starts, read from its words the way each launcher counts them. A launcher is a
:class:`LauncherDefinition` definition: the generic ones are here (torchrun, also ``python -m
torch.distributed.run`` / ``.launch``; ``srun``, its own flags, else what the ``#SBATCH`` lines
give the job; ``mpirun`` / ``mpiexec``; LSF's ``jsrun``), a framework's own come with its package
(``Framework.launchers``: the ``deepspeed`` runner, ``accelerate launch``), and the caller hands
:func:`sizes` every one it knows. Plain ``python`` starts one process. A size the command leaves
to the machine stays unknown."""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field

from translator.shell.notes import Note
from translator.shell.values import VISIBLE, Word, listed_devices


@dataclass(frozen=True)
class LauncherDefinition:
    """A launcher's definition: what its options mean for the processes it starts."""

    name: str
    """As users know it (``torchrun``, ``srun``, ``mpirun``; a framework's: ``deepspeed``)."""
    per_node: tuple[str, ...] = ()
    """Spellings of processes per node."""
    nodes: tuple[str, ...] = ()
    """Spellings of the number of nodes."""
    total: tuple[str, ...] = ()
    """Spellings of all processes at once."""
    default_per_node: int | None = None
    """Processes per node when no flag says (``None``: decided by the machine)."""
    default_nodes: int | None = None
    """Nodes when no flag says (``None``: decided by a host file or the allocation)."""
    subcommand: str | None = None
    """The word after the launcher's name that makes it one (``accelerate launch``)."""
    after_subcommand: frozenset[str] = frozenset()
    """Words that may follow the subcommand before the flags (``fabric run model``)."""
    switches: frozenset[str] = frozenset()
    """Its flags that take no value (so the word after one is the program)."""
    several_nodes: str | None = None
    """What it needs outside the launch line to start several nodes, with ``{nodes}`` and
    ``{per_node}`` in it; ``None``: the line alone says it."""
    modules: frozenset[str] = frozenset()
    """The Python modules that are this launcher under ``python -m`` (torchrun's
    ``torch.distributed.run``)."""
    config_file: tuple[str, ...] = ()
    """Spellings of its option naming its own config file, which the framework that claims the
    file reads for the world (accelerate's ``--config_file``)."""
    hostfile: tuple[str, ...] = ()
    """Spellings of its option naming a host file of ``host slots=N`` lines, whose slots are
    the processes it starts (deepspeed's ``--hostfile``)."""
    own_flag: Callable[[Sizes, str, list[Word], int], None] | None = None
    """``own_flag(sizes, name, flags, j)``: what its flag ``name`` at ``flags[j]`` gives beyond
    the sizing flags (deepspeed's ``--include`` host list is a total)."""
    resources: Callable[[Sizes, Mapping[str, list[Word]], Mapping[str, Word]], None] | None = None
    """``resources(sizes, variables, environment)``, after its flags: what sizes it where they
    say nothing (torchrun's ``PET_*`` variables, srun's ``#SBATCH`` allocation, the GPUs
    deepspeed sees)."""
    unsized: Callable[[Sizes], str | None] | None = None
    """Why it starts an unknown number of processes although no word is unknown (deepspeed
    without ``--num_gpus`` takes every GPU it finds); ``None``: the words say all."""
    imposes: Callable[[Sizes], tuple[str, Word] | None] | None = None
    """``(flag, value)`` of a gradient accumulation it imposes on the program over the
    program's own (accelerate's on a DeepSpeed launch)."""


TORCH_MODULES = {"torch.distributed.run", "torch.distributed.launch"}
#: Commands whose words name packages or repositories, not a program they run.
INSTALLERS = frozenset({"pip", "pip3", "apt", "apt-get", "git", "wget", "curl", "hf"})
#: Those that install with some subcommands and run a program with others (``uv run``).
INSTALLING = {
    "uv": {"pip", "add", "sync", "venv", "tool"},
    "conda": {"install", "create", "env", "update"},
    "mamba": {"install", "create", "env", "update"},
    "micromamba": {"install", "create", "env", "update"},
    "poetry": {"add", "install"},
    "pipx": {"install"},
    "huggingface-cli": {"download", "login", "upload"},
}
#: What ``#SBATCH`` gives a job step that ``srun`` starts without sizing flags.
SLURM_SIZES = {
    "per_node": "SLURM_NTASKS_PER_NODE",
    "nodes": "SLURM_NNODES",
    "total": "SLURM_NTASKS",
}


@dataclass
class Sizes:
    """The launch of one command: which launcher, and the words that size it."""

    launcher: str | None = None
    """The launcher closest to the program (``python`` for a program run by plain python),
    ``None`` when nothing launches it (a framework's own command-line tool)."""
    line: int | None = None
    """Line of the launch command."""
    rules: LauncherDefinition | None = None
    """Its definition (``None`` for plain python or no launcher)."""
    words: dict[str, tuple[str, Word]] = field(default_factory=dict)
    """Role (``per_node``, ``nodes``, ``total``) -> (the flag or ``#SBATCH`` option, its word)."""
    defaults: dict[str, int] = field(default_factory=dict)
    """Roles the launcher fills itself when no flag says (torchrun: one node, one process)."""
    missing: str | None = None
    """Why the number of processes is unknown although no word is (deepspeed with no
    ``--num_gpus``..., or no launcher at all)."""
    options: dict[str, Word] = field(default_factory=dict)
    """Every ``--flag`` the closest launcher is given -> its value (``"true"`` for a switch):
    accelerate's ``--config_file``, ``--gradient_accumulation_steps``..."""
    visible: Word | None = None
    """What says which GPUs the program's process sees: ``CUDA_VISIBLE_DEVICES`` when it is
    set, else the count of GPUs the system gives the node, when it gives one (a job
    definition's ``nvidia.com/gpu: 8``)."""
    given: int | None = None
    """The GPUs the system gives the node, when ``visible`` is that count (a number, never a
    list of the GPUs: a definition may ask for any number)."""
    visible_key: str = VISIBLE
    """What gives ``visible``, for messages: ``CUDA_VISIBLE_DEVICES``, else what says the
    node's GPUs (a definition's GPU count, ``--nproc-per-node``)."""
    runs_at: int | None = None
    """Where, among the words sized, the command the launcher runs starts (``./train_gpt2cu``
    of ``mpirun -np 8 ./train_gpt2cu``); ``None``: none follows its flags."""
    copies: tuple[str, int, int | None] | None = None
    """For a launcher started by another (``srun torchrun``): ``(the outer launcher, how many
    copies of this one it starts, its line)``, when it says how many."""

    def counts(self) -> dict[str, int]:
        """Role -> the count its word gives, else the launcher's default; roles whose word is
        not a usable count are left out."""
        out = dict(self.defaults)
        for role, (_, word) in self.words.items():
            out.pop(role, None)
            if (
                word.text is not None
                and word.text.isascii()
                and word.text.isdigit()
                and int(word.text) >= 1
            ):
                out[role] = int(word.text)
        return out

    def world(self) -> tuple[int | None, Note | None]:
        """``(processes started, None)``, or ``(None, why it is unknown)``."""
        if self.launcher is None:
            return None, Note(None, self.missing or "no launcher starts the program")
        counts = self.counts()
        bad = next(
            (
                f"{key} is {word.why_unknown or repr(word.text)}"
                for role, (key, word) in self.words.items()
                if role not in counts
            ),
            None,
        )
        if "total" in self.words:
            if "total" in counts:
                return counts["total"], None
        elif "total" in self.defaults:
            return self.defaults["total"], None
        elif self.missing is None and {"per_node", "nodes"} <= counts.keys():
            return counts["per_node"] * counts["nodes"], None
        lacking = "processes per node" if "per_node" not in counts else "nodes"
        return None, Note(
            self.line,
            f"{self.launcher} starts an unknown number of "
            f"processes: {bad or self.missing or 'nothing gives its ' + lacking}",
        )

    @property
    def hostfile(self) -> Word | None:
        """The host file the launch names (deepspeed's ``--hostfile``), when it names one."""
        word = self._option(self.rules.hostfile if self.rules else ())
        return word if word is not None and word.text != "" else None

    @property
    def config_file(self) -> Word | None:
        """The launcher's own config file the launch names (accelerate's ``--config_file``)."""
        return self._option(self.rules.config_file if self.rules else ())

    def _option(self, spellings: tuple[str, ...]) -> Word | None:
        return next((self.options[s] for s in spellings if s in self.options), None)

    def use_hostfile(self, text: str, where: str) -> None:
        """``deepspeed --hostfile``'s hosts, one ``host slots=N`` line each: every slot of
        every host, the first ``--num_nodes`` hosts, ``--num_gpus`` slots of each."""
        slots = [int(n) for n in HOST_LINE.findall(text)]
        if not slots:
            self.missing = f"the host file {where} lists no `host slots=N` line"
            return
        counts = self.counts()
        hosts = slots[: counts["nodes"]] if "nodes" in self.words and "nodes" in counts else slots
        per = counts.get("per_node") if "per_node" in self.words else None
        line = self.hostfile.line if self.hostfile is not None else self.line or 0
        self.words = {
            "total": (f"{where} (its hosts' slots)", Word(str(sum(per or n for n in hosts)), line))
        }
        self.missing = None

    def accumulation(self) -> tuple[str, Word] | None:
        """``(flag, value)`` of an accumulation the launcher imposes on the program (it wins
        over the program's own): ``accelerate launch --gradient_accumulation_steps N`` on a
        DeepSpeed launch."""
        return self.rules.imposes(self) if self.rules and self.rules.imposes else None

    def visible_count(self) -> tuple[int | None, str]:
        """``(GPUs CUDA_VISIBLE_DEVICES lists, or the system gives the node, "")`` or
        ``(None, why not known)``."""
        if self.given is not None:
            return self.given, ""
        if self.visible is None:
            return None, f"{VISIBLE} is not set"
        if self.visible.text is None:
            return None, f"{VISIBLE} is {self.visible.why_unknown}"
        listed = listed_devices(self.visible.text)
        return (listed, "") if listed else (None, f"{VISIBLE} is empty (no GPU)")


PYTHONS = re.compile(r"python[0-9.]*")
#: A host file's line: ``worker-1 slots=8`` (``#`` comments aside).
HOST_LINE = re.compile(r"^[ \t]*[^#\s]\S*[ \t]+slots[ \t]*=[ \t]*(\d+)", re.M)


@dataclass(frozen=True)
class Split:
    """One command as it runs: the launcher words, then the program and its arguments."""

    launch: list[Word]
    """The words before the program (wrappers, launchers and their flags; ``-m`` included)."""
    program: Word
    """The program: a ``*.py`` path, a module (after ``-m``) or a command-line tool."""
    module: bool
    """Whether the program is a Python module (``python -m``, ``accelerate launch -m``)."""
    arguments: list[Word]
    """The program's arguments, in order."""

    @property
    def name(self) -> str:
        """The program's known text (the known end of an unknown word)."""
        return _tail(self.program)


def split(words: list[Word]) -> tuple[list[Word], list[Word] | None]:
    """``(launcher words, program words)``: the program starts at the first ``*.py`` word (not
    a launcher module), or at the first word after ``python`` and its options (``python3
    ${EXEC}``); ``(words, None)`` when there is none."""
    found = call_of(words)
    return (words, None) if found is None else (found.launch, [found.program, *found.arguments])


def call_of(
    words: list[Word], commands: Collection[str] = (), modules: Collection[str] = TORCH_MODULES
) -> Split | None:
    """The program a command runs and its arguments: the first ``*.py`` word, a module after
    ``-m``, the word after ``python`` and its options (none of them one of ``modules``, the
    launchers' own modules and scripts: ``torch.distributed.run``, ``gaudi_spawn.py``), or
    one of ``commands`` (tools such as ``llamafactory-cli``), whichever comes first; ``None``
    when the command runs none of them, or installs or fetches them (``pip install trl``,
    ``git clone .../axolotl``)."""
    if _installs(words):
        return None
    candidates = [
        at
        for at in (
            _script_at(words, modules),
            _module_at(words, modules),
            _python_program_at(words, modules),
            _command_at(words, commands),
        )
        if at is not None
    ]
    if not candidates:
        return None
    at = min(candidates)
    module = at > 0 and words[at - 1].text in ("-m", "--module")
    return Split(words[:at], words[at], module, words[at + 1 :])


def _installs(words: list[Word]) -> bool:
    """Whether a command installs or fetches (``pip install trl``, ``uv pip install``,
    ``git clone .../axolotl``): the names among its words are packages, not programs."""
    if not words:
        return False
    name = (words[0].text or "").rsplit("/", 1)[-1]
    following = words[1].text if len(words) > 1 else None
    return name in INSTALLERS or following in INSTALLING.get(name, ())


def _script_at(words: list[Word], launchers: Collection[str]) -> int | None:
    """Where the first ``*.py`` word stands (`` `pwd`/pretrain_gpt.py`` too), not counting the
    module after ``-m`` nor a launcher's own script (one of ``launchers``)."""
    for i, word in enumerate(words):
        tail = _tail(word)
        if (
            tail.endswith(".py")
            and not (i and words[i - 1].text == "-m")
            and tail.rsplit("/", 1)[-1] not in launchers
        ):
            return i
    return None


def _module_at(words: list[Word], launchers: Collection[str]) -> int | None:
    """Where the module of ``-m MODULE`` stands (not one of ``launchers``)."""
    for i, word in enumerate(words[:-1]):
        if word.text == "-m" and words[i + 1].text not in launchers:
            return i + 1
    return None


def _command_at(words: list[Word], commands: Collection[str]) -> int | None:
    """Where the first of ``commands`` stands as a command (not as a flag's value)."""
    for i, word in enumerate(words):
        if (word.text or "").rsplit("/", 1)[-1] in commands and not (
            i and _takes_value(words[i - 1])
        ):
            return i
    return None


def _takes_value(word: Word) -> bool:
    text = word.text or ""
    return text.startswith("-") and "=" not in text and len(text) > 1


def _python_program_at(words: list[Word], launchers: Collection[str]) -> int | None:
    """Where the program of the first ``python [options] PROGRAM`` stands (not a launcher's
    own script, one of ``launchers``)."""
    after = (_after_python(words, i) for i in range(len(words)))
    return next(
        (j for j in after if j is not None and _tail(words[j]).rsplit("/", 1)[-1] not in launchers),
        None,
    )


def _after_python(words: list[Word], i: int) -> int | None:
    """When ``words[i]`` is ``python``: where its program starts, after its options; ``None``
    when it is not python, runs a module (``python -m ...``: :func:`_module_at` finds it) or
    runs nothing."""
    if not PYTHONS.fullmatch((words[i].text or "").rsplit("/", 1)[-1]):
        return None
    j = i + 1
    while j < len(words) and (words[j].text or "").startswith("-"):
        if words[j].text == "-m":
            return None
        j += 1
    return j if j < len(words) else None


def _head(word: Word) -> str:
    """A word's text; for an unknown word, the known text it starts with (``--x=`` of
    ``--x=$Y``)."""
    if word.text is not None:
        return word.text
    return (word.parts[0].text or "") if word.parts else ""


def _tail(word: Word) -> str:
    """A word's text; for an unknown word, the known text it ends with."""
    if word.text is not None:
        return word.text
    return (word.parts[-1].text or "") if word.parts else ""


def _name(words: list[Word], i: int, known: Mapping[str, LauncherDefinition]) -> str | None:
    text = (words[i].text or "").rsplit("/", 1)[-1]
    launcher = known.get(text)
    if launcher is not None:
        if launcher.subcommand is None:
            return text
        following = words[i + 1].text if i + 1 < len(words) else None
        return text if following == launcher.subcommand else None
    if words[i].text == "-m" and i + 1 < len(words):
        module = words[i + 1].text
        return next((k.name for k in known.values() if module in k.modules), None)
    return None


def sizes(
    launch: list[Word],
    variables: Mapping[str, list[Word]],
    environment: Mapping[str, Word] | None = None,
    *,
    known: Mapping[str, LauncherDefinition],
    gpus: Word | None = None,
    gpus_key: str = "the node's GPUs",
) -> Sizes:
    """How ``launch`` (the words before the program) sizes the job; ``variables``: the
    script's, for what ``#SBATCH`` gives ``srun``; ``environment``: what the command's
    processes see (``CUDA_VISIBLE_DEVICES``); ``known``: every launcher definition by name
    (:data:`LAUNCHERS` and the frameworks', as ``translator.plugin.registry.launchers`` gives
    them); ``gpus``: the count of GPUs the system gives the node, when it gives one, and
    ``gpus_key`` what gives it."""
    environment = environment or {}
    found = [(i, n) for i in range(len(launch)) if (n := _name(launch, i, known))]
    visible, given, key = environment.get(VISIBLE), None, VISIBLE
    if visible is None and gpus is not None and gpus.text is not None:
        visible, given, key = gpus, int(gpus.text), gpus_key
    if not found:
        if any(PYTHONS.fullmatch((w.text or "").rsplit("/", 1)[-1]) for w in launch):
            return Sizes(
                "python",
                launch[0].line,
                defaults={"total": 1},
                visible=visible,
                given=given,
                visible_key=key,
            )
        why = f"no launcher ({', '.join(known)}) starts the program"
        return Sizes(missing=why, visible=visible, given=given, visible_key=key)
    start, name = found[-1]
    launcher = known[name]
    out = Sizes(name, launch[start].line, launcher, visible=visible, given=given, visible_key=key)
    at = start + 1
    if at < len(launch) and (launch[at].text in launcher.modules or launcher.subcommand):
        at += 1
    if at < len(launch) and launch[at].text in launcher.after_subcommand:
        at += 1
    command = _read_flags(out, launcher, launch[at:])
    out.runs_at = None if command is None else at + command
    if len(found) > 1:  # each copy the outer launcher starts is one node's launcher
        outer = sizes(launch[:start], variables, environment, known=known)
        copies = outer.world()[0]
        if outer.launcher is not None and copies is not None:
            out.copies = (outer.launcher, copies, outer.line)
    if launcher.resources is not None:
        launcher.resources(out, variables, environment)
    if launcher.default_per_node:
        out.defaults.setdefault("per_node", launcher.default_per_node)
    if launcher.default_nodes:
        out.defaults.setdefault("nodes", launcher.default_nodes)
    if not out.missing and launcher.unsized is not None:
        out.missing = launcher.unsized(out)
    return out


#: What torchrun takes as the default of a sizing flag not given (its ``env`` argparse
#: action: ``PET_`` and the flag's name), as the Kubeflow training operator sets them.
TORCHRUN_ENVIRONMENT = {"nodes": "PET_NNODES", "per_node": "PET_NPROC_PER_NODE"}


def _torchrun_environment(
    out: Sizes, variables: Mapping[str, list[Word]], environment: Mapping[str, Word]
) -> None:
    """torchrun's sizes that no flag gives, from the ``PET_*`` variables its process sees."""
    for role, variable in TORCHRUN_ENVIRONMENT.items():
        if role not in out.words and variable in environment:
            out.words[role] = (variable, environment[variable])


def _read_flags(out: Sizes, launcher: LauncherDefinition, flags: list[Word]) -> int | None:
    """The launcher's flags, up to the command it runs (a container, a wrapper script, the
    program): where that command starts among ``flags``, when it does."""
    for j, word in enumerate(flags):
        text = _head(word)  # --rdzv_id=$SLURM_JOB_ID
        _sizing_flag(out, launcher, flags, j)
        if launcher.own_flag is not None:
            launcher.own_flag(out, text.partition("=")[0], flags, j)
        before = flags[j - 1].text if j else None
        after_option = (
            before is not None
            and before.startswith("-")
            and "=" not in before
            and before not in launcher.switches
        )
        if text.startswith("-") and word.text is not None:
            flag, eq, value = text.partition("=")
            following = flags[j + 1] if j + 1 < len(flags) else None
            if eq:
                out.options[flag] = Word(value, word.line, _inline_span(word, len(flag) + 1))
            elif flag in launcher.switches or following is None or _head(following).startswith("-"):
                out.options[flag] = Word("true", word.line)
            else:
                out.options[flag] = following
        if word.text is None and not after_option and not text.startswith("-"):
            if not word.absent:  # as run, it is no word at all
                out.missing = (
                    f"{word.why_unknown} may hold {launcher.name}'s own flags "
                    "(how many processes it starts)"
                )
            continue
        if not text.startswith("-") and not after_option:
            return j  # the command the launcher runs starts here
    return None


def _sizing_flag(out: Sizes, launcher: LauncherDefinition, flags: list[Word], j: int) -> None:
    """When ``flags[j]`` is one of the launcher's sizing flags: its value, by role."""
    roles = {"per_node": launcher.per_node, "nodes": launcher.nodes, "total": launcher.total}
    for role, spellings in roles.items():
        for flag in spellings:
            value = flag_value(flags, j, flag)
            if value is not None:
                out.words[role] = (flag, value)


def _srun_allocation(
    out: Sizes, variables: Mapping[str, list[Word]], environment: Mapping[str, Word]
) -> None:
    """What the allocation gives ``srun`` where its own flags say nothing (the script's
    ``#SBATCH`` lines, else what its process sees: a script that ``sbatch`` runs, or the
    user's ``--env``), and which of the two wins."""
    for role, variable in SLURM_SIZES.items():
        value = variables.get(variable)
        if role in out.words:
            continue
        if value and len(value) == 1 and value[0].span:
            out.words[role] = (f"#SBATCH {variable}", value[0])
        elif variable in environment:  # unknown too (a template's YOUR_NUM_TASKS)
            out.words[role] = (f"#SBATCH {variable}", environment[variable])
    if "total" not in out.words and "nodes" in out.words and "per_node" not in out.words:
        out.defaults["per_node"] = 1  # Slurm starts one task per node by default
    if "total" in out.words and _from_flag(out, "per_node") and not _from_flag(out, "total"):
        del out.words["total"]  # srun --ntasks-per-node on the line beats #SBATCH --ntasks
    if "total" in out.words and _from_flag(out, "total"):
        out.words.pop("per_node", None)
        out.words.pop("nodes", None)


def _srun_unsized(out: Sizes) -> str | None:
    """Why an srun launch starts an unknown number of tasks although no word is unknown."""
    if not out.words:
        return "srun without --ntasks or #SBATCH sizes runs as many tasks as the job has"
    return None


def flag_value(flags: list[Word], j: int, flag: str) -> Word | None:
    """The value of ``flag`` when ``flags[j]`` is it: ``--flag V``, ``--flag=V`` or ``-nV``."""
    word = flags[j]
    text = word.text or ""
    if text == flag:
        return flags[j + 1] if j + 1 < len(flags) else None
    if text.startswith(flag + "="):
        return Word(
            text[len(flag) + 1 :],
            word.line,
            _inline_span(word, len(flag) + 1),
            sources=word.sources,
        )
    if len(flag) == 2 and flag[0] == "-" and text.startswith(flag) and text[2:].isdigit():
        return Word(text[2:], word.line, _inline_span(word, 2), sources=word.sources)
    if word.text is None and word.parts and (word.parts[0].text or "").startswith(flag + "="):
        return Word(None, word.line, why_unknown=word.why_unknown)
    return None


def _from_flag(sizes: Sizes, role: str) -> bool:
    return role in sizes.words and not sizes.words[role][0].startswith("#SBATCH")


def _inline_span(word: Word, offset: int):
    """The span of ``value`` in a ``--flag=value`` literal."""
    if word.span is None:
        return None
    return word.span[0] + offset, word.span[1]


TORCHRUN = LauncherDefinition(
    "torchrun",
    ("--nproc_per_node", "--nproc-per-node"),
    ("--nnodes",),
    default_per_node=1,
    default_nodes=1,
    switches=frozenset({"--standalone", "--no_python", "--no-python", "--module", "-m"}),
    modules=frozenset(TORCH_MODULES),
    resources=_torchrun_environment,
)
#: The launchers no framework owns, by name; a framework contributes its own
#: (``Framework.launchers``).
LAUNCHERS = {
    "torchrun": TORCHRUN,
    "srun": LauncherDefinition(
        "srun",
        ("--ntasks-per-node",),
        ("--nodes", "-N"),
        ("--ntasks", "-n"),
        resources=_srun_allocation,
        unsized=_srun_unsized,
    ),
    "mpirun": LauncherDefinition("mpirun", total=("-np", "-n", "--np")),
    # optimum-habana's spawner for Gaudi (examples/gaudi_spawn.py): --world_size, default 1
    "gaudi_spawn.py": LauncherDefinition(
        "gaudi_spawn.py",
        total=("--world_size",),
        default_per_node=1,
        default_nodes=1,
        switches=frozenset({"--use_deepspeed", "--use_mpi"}),
        hostfile=("--hostfile",),
    ),
    # Lightning Fabric's CLI (lightning_fabric/cli.py): --devices "1" and --num-nodes 1 unless
    # given; `fabric run model` is its older spelling
    "fabric": LauncherDefinition(
        "fabric",
        ("--devices",),
        ("--num-nodes", "--num_nodes"),
        default_per_node=1,
        default_nodes=1,
        subcommand="run",
        after_subcommand=frozenset({"model"}),
    ),
    "mpiexec": LauncherDefinition("mpiexec", total=("-np", "-n", "--np")),
    # LSF: resource sets; --tasks_per_rs defaults to 1
    "jsrun": LauncherDefinition(
        "jsrun", ("--tasks_per_rs", "-a"), ("--nrs", "-n"), default_per_node=1
    ),
}
