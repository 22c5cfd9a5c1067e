"""How many processes a launch command starts, read from its words the way each launcher
counts them: torchrun (also ``python -m torch.distributed.run`` / ``.launch``), the
``deepspeed`` launcher, ``srun`` (its own flags, else what the ``#SBATCH`` lines give the
job) and ``mpirun``. A size the command leaves to the machine stays unknown."""

from __future__ import annotations

from dataclasses import dataclass, field

from translator import bash


@dataclass(frozen=True)
class Launcher:
    """The flags that size one launcher."""

    name: str
    """As users know it (``torchrun``, ``deepspeed``, ``srun``, ``mpirun``)."""
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


TORCHRUN = Launcher("torchrun", ("--nproc_per_node", "--nproc-per-node"), ("--nnodes",),
                    default_per_node=1, default_nodes=1)
LAUNCHERS = {
    "torchrun": TORCHRUN,
    "deepspeed": Launcher("deepspeed", ("--num_gpus", "--num-gpus"),
                          ("--num_nodes", "--num-nodes")),
    "srun": Launcher("srun", ("--ntasks-per-node",), ("--nodes", "-N"), ("--ntasks", "-n")),
    "mpirun": Launcher("mpirun", total=("-np", "-n", "--np")),
    "mpiexec": Launcher("mpiexec", total=("-np", "-n", "--np")),
}
TORCH_MODULES = {"torch.distributed.run", "torch.distributed.launch"}
#: What ``#SBATCH`` gives a job step that ``srun`` starts without sizing flags.
SLURM_SIZES = {"per_node": "SLURM_NTASKS_PER_NODE", "nodes": "SLURM_NNODES",
               "total": "SLURM_NTASKS"}


@dataclass
class Sizes:
    """The launch of one command: which launcher, and the words that size it."""

    launcher: str | None = None
    """The launcher closest to the program, ``None`` when the program is run directly."""
    line: int | None = None
    """Line of the launch command."""
    words: dict[str, tuple[str, bash.Word]] = field(default_factory=dict)
    """Role (``per_node``, ``nodes``, ``total``) -> (the flag or ``#SBATCH`` option, its word)."""
    defaults: dict[str, int] = field(default_factory=dict)
    """Roles the launcher fills itself when no flag says (torchrun: one node, one process)."""
    missing: str | None = None
    """Why the number of processes is unknown although no word is (deepspeed with no
    ``--num_nodes``...)."""


    def counts(self) -> dict[str, int]:
        """Role -> the count its word gives, else the launcher's default; roles whose word is
        not a usable count are left out."""
        out = dict(self.defaults)
        for role, (_, word) in self.words.items():
            out.pop(role, None)
            if word.text is not None and word.text.isascii() and word.text.isdigit() \
                    and int(word.text) >= 1:
                out[role] = int(word.text)
        return out

    def world(self) -> tuple[int | None, str | None]:
        """``(processes started, None)``, or ``(None, why it is unknown)``."""
        if self.launcher is None:
            return None, "no launcher (torchrun, deepspeed, srun, mpirun) starts the program"
        counts = self.counts()
        bad = next((f"{key} is {word.why_unknown or repr(word.text)}"
                    for role, (key, word) in self.words.items() if role not in counts), None)
        if "total" in self.words:
            if "total" in counts:
                return counts["total"], None
        elif self.missing is None and {"per_node", "nodes"} <= counts.keys():
            return counts["per_node"] * counts["nodes"], None
        lacking = "processes per node" if "per_node" not in counts else "nodes"
        return None, (f"line {self.line}: {self.launcher} starts an unknown number of "
                      f"processes: {bad or self.missing or 'nothing gives its ' + lacking}")


def split(words: list[bash.Word]) -> tuple[list[bash.Word], list[bash.Word] | None]:
    """``(launcher words, program words)``: the program starts at the first ``*.py`` word
    (not a launcher module); ``(words, None)`` when there is none."""
    for i, word in enumerate(words):
        text = word.text if word.text is not None else (
            word.parts[-1].text or "" if word.parts else "")  # `pwd`/pretrain_gpt.py
        if text.endswith(".py") and not (i and words[i - 1].text == "-m"):
            return words[:i], words[i:]
    return words, None


def _name(words: list[bash.Word], i: int) -> str | None:
    text = (words[i].text or "").rsplit("/", 1)[-1]
    if text in LAUNCHERS:
        return text
    if words[i].text == "-m" and i + 1 < len(words) and words[i + 1].text in TORCH_MODULES:
        return "torchrun"
    return None


def sizes(launch: list[bash.Word], variables: dict[str, list[bash.Word]]) -> Sizes:
    """How ``launch`` (the words before the program) sizes the job."""
    found = [(i, n) for i in range(len(launch)) if (n := _name(launch, i))]
    if not found:
        return Sizes()
    start, name = found[-1]
    launcher = LAUNCHERS[name]
    out = Sizes(name, launch[start].line)
    flags = launch[start + 1:]
    roles = {"per_node": launcher.per_node, "nodes": launcher.nodes, "total": launcher.total}
    for j, word in enumerate(flags):
        flag, eq, inline = (word.text or "").partition("=")
        for role, spellings in roles.items():
            if flag in spellings:
                value = bash.Word(inline, word.line, _inline_span(word, len(flag) + 1),
                                  sources=word.sources) if eq else (
                    flags[j + 1] if j + 1 < len(flags) else None)
                if value is not None:
                    out.words[role] = (flag, value)
    if name == "srun" and not out.words:
        for role, variable in SLURM_SIZES.items():
            value = variables.get(variable)
            if value and len(value) == 1 and value[0].span is not None:
                out.words[role] = (f"#SBATCH {variable}", value[0])
        if "nodes" in out.words and "total" not in out.words:
            out.defaults["per_node"] = 1  # Slurm starts one task per node by default
    if launcher.default_per_node:
        out.defaults["per_node"] = launcher.default_per_node
    if launcher.default_nodes:
        out.defaults["nodes"] = launcher.default_nodes
    if name == "deepspeed" and "nodes" not in out.words:
        out.missing = ("deepspeed without --num_nodes runs on every host of its host file "
                       "(/job/hostfile by default), or on this node alone when there is none")
    elif name == "srun" and not out.words:
        out.missing = "srun without --ntasks or #SBATCH sizes runs as many tasks as the job has"
    return out


def _inline_span(word: bash.Word, offset: int):
    """The span of ``value`` in a ``--flag=value`` literal."""
    if word.span is None:
        return None
    return word.span[0] + offset, word.span[1]
