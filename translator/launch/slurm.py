"""Runs on Slurm: render the sbatch script (a smoke run, or a whole tune), submit it, follow
it, cancel it.

Commands are argument lists. No value that reaches the script may hold a control character
(a newline would end a ``#SBATCH`` line and start a command, and quoting cannot protect such a
line). Beyond that, values on ``#SBATCH`` lines are validated against what Slurm takes
(partition, account, time, extra options); paths and the interpreter appear only on the
``srun`` line, shell-quoted; the log path is given to ``sbatch`` as an argument, never written
into the script. Setup lines are the user's own shell lines, one per line. Job state comes
from ``squeue`` and, once the job has left the queue, ``scontrol show job`` (no accounting
database needed).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import time
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

from translator.launch import workdir as workdirs
from translator.launch.command import SmokePlan, local_command, torchrun_args, worker_args
from translator.launch.launcher import Built, Ran
from translator.words.errors import InputError

NAME_VALUE = re.compile(r"^[A-Za-z0-9_.,+-]+$")
TIME_VALUE = re.compile(r"^[0-9]+(-[0-9]{1,2})?(:[0-9]{1,2}){0,2}$")
SBATCH_OPTION = re.compile(r"^--?[A-Za-z][A-Za-z0-9-]*(=[^\s'\"`$;|&<>\\]+)?$")
#: Job states after which nothing more will happen.
FINAL_STATES = {
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "BOOT_FAIL",
    "DEADLINE",
    "PREEMPTED",
}
RDZV_PORT = 29500
#: The sbatch script's name in the work folder.
SCRIPT = "smoke.sbatch"


@dataclass(frozen=True)
class SlurmOptions:
    """What the user says about the cluster."""

    partition: str | None = None
    account: str | None = None
    time: str | None = None
    """Slurm time limit (``MM``, ``HH:MM:SS``, ``D-HH:MM``...)."""
    extra: list[str] = field(default_factory=list)
    """Extra ``#SBATCH`` options, e.g. ``--gpus-per-node=8``."""
    setup: list[str] = field(default_factory=list)
    """Shell lines run before the launch (``module load ...``, ``source venv/bin/activate``)."""
    gpus_per_node: int | None = None
    """GPUs asked per node (``--slurm-gpus-per-node``; default with ``--device gpu``:
    ``--nproc-per-node``)."""
    cpus_per_task: int | None = None
    """CPUs for the one task per node that hosts all its ranks (default: the partition's
    cores, rounded down to a multiple of ``--nproc``, when ``sinfo`` says)."""

    def validate(self) -> None:
        for name, value in (("--partition", self.partition), ("--account", self.account)):
            if value is not None and not NAME_VALUE.fullmatch(value):
                raise InputError(f"{name} {value!r}: only letters, digits and _ . , + - allowed")
        if self.time is not None and not TIME_VALUE.fullmatch(self.time):
            raise InputError(
                f"--time {self.time!r}: use a Slurm time such as 30, 1:00:00 or 1-00:00"
            )
        for line in self.extra:
            if not SBATCH_OPTION.fullmatch(line):
                raise InputError(
                    f"--sbatch {line!r}: give one option such as --gpus-per-node=8 "
                    "(no spaces, quotes or shell characters)"
                )
        for line in self.setup:
            check_line("--setup", line)


def check_line(name: str, value: str) -> None:
    """Refuse a value with a control character (newline, carriage return, escape...): in a
    generated script it would end the line it stands on and start another."""
    bad = next((c for c in value if unicodedata.category(c) == "Cc" or c in "\u2028\u2029"), None)
    if bad is not None:
        raise InputError(
            f"{name} {value!r}: holds the control character {bad!r}; a generated "
            "script takes no control characters"
        )


def check_path(name: str, path: Path) -> None:
    """A path that reaches a generated script: absolute and free of control characters."""
    if not path.is_absolute():
        raise InputError(f"{name} {str(path)!r}: must be an absolute path here")
    check_line(name, str(path))


def log_path(plan: SmokePlan) -> str:
    """The job's output file for ``sbatch --output`` (``%`` doubled: Slurm reads ``%j``...)."""
    return str(plan.workdir).replace("%", "%%") + "/slurm-%j.out"


def script(
    plan: SmokePlan,
    options: SlurmOptions,
    size: NodeSize | None = None,
    command: list[str] | None = None,
    stdout: Path | None = None,
) -> str:
    """The sbatch script of a run (``size``: the partition's nodes, asked of ``sinfo`` when
    not given). Smoke's job starts ``plan``'s ranks on every node; with ``command`` (a tune's
    own command line) the job runs that on its first node instead, its output into ``stdout``,
    and the command starts each probe as a job step of the allocation."""
    from translator.render import render_template

    options.validate()
    asked = resources(plan, options, size or node_size(options.partition))
    check_path("--workdir", plan.workdir)
    values = {
        "plan": plan,
        "partition": options.partition,
        "account": options.account,
        "time": options.time,
        "extra": options.extra,
        "setup": options.setup,
        **asked,
    }
    if command is not None:
        for word in command:
            check_line("the tune command", word)
        body = f"{shlex.join(command)} > {shlex.quote(str(stdout))}"
        return render_template(
            "sbatch.sh.j2", values | {"job_name": f"batchspec-tune-{plan.framework}", "body": body}
        )
    check_path("the Python interpreter", Path(plan.python))
    launcher = [plan.python, "-m", "torch.distributed.run", *torchrun_args(plan, "")]
    if plan.nnodes > 1:  # the endpoint and id are written by the template from Slurm's variables
        launcher = launcher[: launcher.index("--rdzv-endpoint")]
    return render_template(
        "sbatch.sh.j2",
        values
        | {
            "job_name": f"batchspec-smoke-{plan.framework}",
            "port": RDZV_PORT,
            "body": None,
            "launcher": [shlex.quote(a) for a in launcher],
            "worker": [shlex.quote(a) for a in worker_args(plan)],
        },
    )


@dataclass(frozen=True)
class NodeSize:
    """What ``sinfo`` reports for a partition's nodes (the smallest, when they differ)."""

    cpus: int | None
    gpus: int | None


def node_size(partition: str | None, env: dict | None = None) -> NodeSize:
    """The partition's nodes as ``sinfo`` reports them; unknown (``None``) without Slurm."""
    argv = ["sinfo", "-h", "-o", "%c %G"] + (["-p", partition] if partition else [])
    try:
        out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=30).stdout
    except (FileNotFoundError, subprocess.TimeoutExpired):
        return NodeSize(None, None)
    cpus, gpus = [], []
    for line in out.splitlines():
        fields = line.split()
        if fields and fields[0].isdigit():
            cpus.append(int(fields[0]))
            found = re.search(r"gpu(?::[^:,()]+)?:(\d+)", line)
            gpus.append(int(found.group(1)) if found else 0)
    return NodeSize(min(cpus, default=None), min(gpus, default=None))


def resources(plan: SmokePlan, options: SlurmOptions, size: NodeSize) -> dict:
    """The ``#SBATCH`` GPU and CPU requests: GPUs only with ``--device gpu`` (``--nproc`` per
    node unless told), CPUs for the node's one task. Refuses more GPUs than the nodes have."""
    gpus = (
        options.gpus_per_node
        if options.gpus_per_node is not None
        else (plan.nproc if plan.device == "gpu" else None)
    )
    if plan.device == "cpu" and options.gpus_per_node:
        raise InputError("--slurm-gpus-per-node with --device cpu: the ranks would not use them")
    asked = (
        "--slurm-gpus-per-node"
        if options.gpus_per_node is not None
        else "--device gpu takes a GPU per rank, --nproc-per-node"
    )
    if gpus is not None and size.gpus is not None and gpus > size.gpus:
        raise InputError(
            f"{asked} {gpus}: the nodes of "
            f"{options.partition or 'the default partition'} have "
            f"{size.gpus} GPU(s) (sinfo)" + ("" if options.gpus_per_node else "; or --device cpu")
        )
    if gpus is not None and gpus < plan.nproc and plan.device == "gpu":
        raise InputError(
            f"--slurm-gpus-per-node {gpus} is fewer than --nproc-per-node {plan.nproc}: each "
            "rank needs a GPU of its own"
        )
    cpus = options.cpus_per_task
    if cpus is None and size.cpus:
        cpus = max(size.cpus // plan.nproc, 1) * plan.nproc
    return {
        "gpus_per_node": gpus,
        "cpus_per_task": cpus,
        "threads": None if cpus is None else max(cpus // plan.nproc, 1),
    }


def submit_command(plan: SmokePlan, path: str) -> list[str]:
    """The ``sbatch`` command for the script at ``path``; the log path travels as an argument."""
    return ["sbatch", "--parsable", f"--output={log_path(plan)}", path]


def submit(plan: SmokePlan, path: str, env: dict) -> str:
    """Submit the script at ``path``; the job id."""
    out = _slurm(submit_command(plan, path), env)
    return out.strip().split(";")[0]


def require_sbatch() -> None:
    """Refuse ``--slurm`` off a login node (before anything is written)."""
    if shutil.which("sbatch") is None:
        raise InputError("sbatch not found: --slurm needs a Slurm login node")


@dataclass(frozen=True)
class Job:
    """A Slurm job that has ended."""

    id: str
    """Slurm's job id."""
    state: str
    """Its final state (``COMPLETED``, ``FAILED``...), or ``timeout`` / ``interrupted`` when
    batchspec cancelled it."""
    log_tail: list[str]
    """The last lines of its output file."""

    @property
    def stopped(self) -> str | None:
        """``timeout`` or ``interrupted`` when batchspec cancelled it, else None."""
        return self.state if self.state in ("timeout", "interrupted") else None


def run_job(
    plan: SmokePlan,
    text: str,
    name: str,
    env: dict,
    timeout: float | None,
    on_state=lambda line: None,
    submitted: str = "",
) -> Job:
    """Write the script ``text`` as ``name`` in the work folder, submit it and follow it to its
    end (``scancel`` on ``timeout`` or Ctrl-C); ``on_state`` hears of the submission (with
    ``submitted`` after the job id) and of each new state."""
    path = plan.workdir / name
    workdirs.write(plan.workdir, {path: text})
    job = submit(plan, str(path), env)
    on_state(f"submitted job {job}{submitted}")
    final = follow(job, env, timeout, lambda s: on_state(f"job {job}: {s}"))
    log = plan.workdir / f"slurm-{job}.out"
    tail = log.read_text(errors="replace").splitlines()[-40:] if log.exists() else []
    return Job(job, final, tail)


def state(job: str, env: dict) -> str:
    """The job's state: from squeue while queued or running, else from scontrol."""
    queued = _slurm(["squeue", "-h", "-j", job, "-o", "%T"], env, check=False).strip()
    if queued:
        return queued.splitlines()[0]
    shown = _slurm(["scontrol", "show", "job", "-o", job], env, check=False)
    m = re.search(r"JobState=(\S+)", shown)
    return m.group(1) if m else "UNKNOWN"


def follow(job: str, env: dict, timeout: float | None, on_state=lambda s: None) -> str:
    """Wait for a final state; ``scancel`` on timeout or Ctrl-C. Returns the final state or
    ``timeout`` / ``interrupted``."""
    start, last = time.monotonic(), None
    try:
        while True:
            current = state(job, env)
            if current != last:
                on_state(current)
                last = current
            if current in FINAL_STATES:
                return current
            if timeout is not None and time.monotonic() - start > timeout:
                cancel(job, env)
                return "timeout"
            time.sleep(0.5)
    except KeyboardInterrupt:
        cancel(job, env)
        return "interrupted"


def cancel(job: str, env: dict) -> None:
    _slurm(["scancel", job], env, check=False)


def _slurm(argv: list[str], env: dict, check: bool = True) -> str:
    try:
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise InputError(f"{argv[0]} not found: is this a Slurm login node?") from None
    except subprocess.TimeoutExpired:
        raise InputError(f"{argv[0]} did not answer within 60 s") from None
    if check and done.returncode:
        raise InputError(
            f"{' '.join(argv[:2])} failed: {done.stderr.strip() or done.stdout.strip()}"
        )
    return done.stdout


@dataclass(frozen=True)
class Slurm:
    """The Slurm launcher: one sbatch job whose tasks start torchrun on every node."""

    options: SlurmOptions
    """What the job asks of Slurm."""
    name: str = "slurm"
    remote: bool = True

    def check(self) -> None:
        require_sbatch()

    def build(self, plan: SmokePlan, variables: dict[str, str]) -> Built:
        text = script(plan, self.options)  # refuses unsafe values before anything is written
        return Built(
            {SCRIPT: text},
            submit_command(plan, str(plan.workdir / SCRIPT)),
            local_command(plan),
            variables,
        )

    def launch(self, plan: SmokePlan, built: Built, timeout: float | None, say) -> Ran:
        env = dict(os.environ) | built.variables  # sbatch hands its environment to the job
        job = run_job(plan, built.files[SCRIPT], SCRIPT, env, timeout, say)
        return Ran(job.stopped, job.log_tail, job.id)
