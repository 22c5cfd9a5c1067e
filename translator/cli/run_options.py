"""The options that say how a real run runs, each defined once: the engine, ranks, model and
limits with Slurm's requests (``smoke`` and ``tune``), how the model trains (``estimate`` and
``tune``), memory sizes; and the command line as given, for a job that runs it again."""

from __future__ import annotations

import re
from pathlib import Path

import click

from translator.cli.batch_options import COUNT, OldSpellings
from translator.rank.engines import engine_names

MEMORY = re.compile(r"^(\d+)([KMGT]?)$")
#: The values of ``--launcher``.
LAUNCHERS = ("local", "slurm", "k8s")


def parse_memory(value: str | None, option: str = "--memory-limit") -> int | None:
    """Bytes from ``4G``, ``512M``, ``1024``; ``option`` names the flag in the error."""
    from translator.words.errors import InputError

    if value is None:
        return None
    m = MEMORY.match(value.strip().upper())
    if not m or int(m.group(1)) == 0:
        raise InputError(
            f"{option} {value!r}: give a positive number of bytes, or a number with K, M, G or T"
        )
    return int(m.group(1)) * 1024 ** " KMGT".index(m.group(2) or " ")


#: What runs: the engine, the ranks, the model and the limits.
RUN_OPTIONS = [
    click.option(
        "--framework",
        type=click.Choice(engine_names()),
        help="Engine (default: the config's own framework; torch for a spec).",
    ),
    click.option(
        "--nproc-per-node",
        "--nproc",
        "nproc",
        cls=OldSpellings,
        type=COUNT,
        help="Processes (ranks) per node (default: the job's own per node, else 1; smoke keeps "
        "the job's global batch on fewer, its accumulation re-solved).",
    ),
    click.option(
        "--nnodes",
        type=COUNT,
        default=1,
        show_default=True,
        help="Nodes (smoke with --slurm or --launcher k8s: the job's own, unless given).",
    ),
    click.option(
        "--seq-len",
        type=COUNT,
        help="Tokens per sample (default: the config's, else 64 for tiny, 1024 for 125m).",
    ),
    click.option(
        "--model",
        type=click.Choice(["tiny", "125m"]),
        help="Run a stand-in instead of the job's model: a GPT-style model built in code with "
        "random weights (default: the job's own model, built with random weights).",
    ),
    click.option(
        "--model-config",
        metavar="PATH",
        help="The job's model's config.json (or its folder), for a job whose model is not "
        "found here (nothing is downloaded).",
    ),
    click.option(
        "--layers",
        type=COUNT,
        help="Cut the job's model to N layers, keeping its architecture (run an 8B job's "
        "code path on a laptop or in CI).",
    ),
    click.option(
        "--timeout",
        type=click.FloatRange(min=0, min_open=True),
        help="Seconds before the run is stopped (exit 1, nothing left running).",
    ),
    click.option(
        "--memory-limit", help="Cap each rank's address space (e.g. 4G), to see what fits."
    ),
    click.option(
        "--workdir",
        type=click.Path(file_okay=False, path_type=Path),
        help="Folder for the config and the ranks' results (shared across nodes; "
        "default: .batchspec-<command>/<framework>).",
    ),
]
#: Where it runs: the launcher and what it asks its scheduler (Slurm, Kubernetes) for.
LAUNCHER_OPTIONS = [
    click.option(
        "--launcher",
        type=click.Choice(LAUNCHERS),
        help="What starts the ranks: torchrun here (local, the default), an sbatch job "
        "(slurm) or a Kubernetes Indexed Job applied with kubectl (k8s, smoke only).",
    ),
    click.option(
        "--slurm", "use_slurm", is_flag=True, help="Submit with sbatch: --launcher slurm."
    ),
    click.option("--partition", help="Slurm partition."),
    click.option("--account", help="Slurm account."),
    click.option("--time", "time_limit", help="Slurm time limit, e.g. 0:30:00."),
    click.option(
        "--sbatch", "sbatch_extra", multiple=True, help="Extra #SBATCH option (repeatable)."
    ),
    click.option("--setup", multiple=True, help="Shell line run before the launch (repeatable)."),
    click.option(
        "--device",
        type=click.Choice(["gpu", "cpu"]),
        help="Where the ranks compute (default: a GPU when this machine has one; "
        "with --slurm, gpu: compute nodes have GPUs that login nodes lack).",
    ),
    click.option(
        "--slurm-gpus-per-node",
        "--gpus-per-node",
        "gpus_per_node",
        cls=OldSpellings,
        type=COUNT,
        help="GPUs Slurm gives each node, a request to Slurm, not the number of "
        "processes (default with --device gpu: --nproc-per-node).",
    ),
    click.option(
        "--cpus-per-task",
        type=COUNT,
        help="CPUs Slurm gives each node's task (default: the partition's cores).",
    ),
    click.option(
        "--k8s-image", help="The image the pods run (batchspec and the framework installed)."
    ),
    click.option(
        "--k8s-volume",
        help="The PersistentVolumeClaim mounted at --workdir in every pod, a folder this "
        "machine sees at the same path (the ranks read the config and write results there).",
    ),
    click.option("--k8s-namespace", help="The namespace of the Job (default: kubectl's)."),
]


def engine_options(fn):
    """What runs where: the engine, the ranks, the model, the limits and the launcher's
    requests (shared by smoke and tune)."""
    for option in reversed(RUN_OPTIONS + LAUNCHER_OPTIONS):
        fn = option(fn)
    return fn


def pop_launcher(params: dict):
    """Take the launcher's flags out of a command's parameters: the checked
    :class:`~translator.launch.launcher.Launcher` they ask for (local when none)."""
    from translator.launch import slurm
    from translator.launch.kubernetes import Kubernetes, KubernetesOptions
    from translator.launch.local import Local
    from translator.words.errors import InputError

    name, use_slurm = params.pop("launcher"), params.pop("use_slurm")
    if use_slurm and name not in (None, "slurm"):
        raise InputError(f"--slurm is --launcher slurm: give one launcher, not also {name}")
    name = "slurm" if use_slurm else name or "local"
    gpus_per_node, cpus_per_task = params.pop("gpus_per_node"), params.pop("cpus_per_task")
    if name != "slurm" and (gpus_per_node or cpus_per_task):
        raise InputError(
            "--slurm-gpus-per-node and --cpus-per-task are requests to Slurm: use them with --slurm"
        )
    options = slurm.SlurmOptions(
        params.pop("partition"),
        params.pop("account"),
        params.pop("time_limit"),
        list(params.pop("sbatch_extra")),
        list(params.pop("setup")),
        gpus_per_node,
        cpus_per_task,
    )
    options.validate()
    image, volume = params.pop("k8s_image"), params.pop("k8s_volume")
    namespace = params.pop("k8s_namespace")
    if name != "k8s" and (image or volume or namespace):
        raise InputError("--k8s-image, --k8s-volume and --k8s-namespace are for --launcher k8s")
    if name == "slurm":
        return slurm.Slurm(options)
    if name == "k8s":
        missing = [flag for flag, v in (("--k8s-image", image), ("--k8s-volume", volume)) if not v]
        if missing:
            raise InputError(
                f"--launcher k8s needs {' and '.join(missing)}: the image the pods run, and "
                "the volume that holds the work folder for the pods and for this machine"
            )
        k8s = KubernetesOptions(image, volume, namespace)
        k8s.validate()
        return Kubernetes(k8s)
    return Local()


def pop_slurm(params: dict):
    """The Slurm options of a command that runs here or in a Slurm allocation (``tune``), or
    None without ``--slurm``; another launcher is refused."""
    from translator.launch.local import Local
    from translator.launch.slurm import Slurm
    from translator.words.errors import InputError

    launcher = pop_launcher(params)
    if isinstance(launcher, Slurm):
        return launcher.options
    if isinstance(launcher, Local):
        return None
    raise InputError(f"--launcher {launcher.name} is for smoke; tune runs here or in a Slurm job")


def run_options(fn):
    """The options that say how the model trains, shared by estimate and tune."""
    options = [
        click.option(
            "--precision",
            type=click.Choice(["bf16", "fp32"]),
            help="bf16 mixed precision (GPU default) or fp32 (CPU default).",
        ),
        click.option(
            "--attention",
            type=click.Choice(["flash", "eager"]),
            default="flash",
            show_default=True,
            help="Flash/SDPA attention stores no s² scores.",
        ),
        click.option(
            "--sequence-parallel",
            is_flag=True,
            help="Megatron sequence parallelism (activations split over TP).",
        ),
        click.option(
            "--distributed-optimizer",
            is_flag=True,
            help="Megatron's distributed optimizer (optimizer state over DP, as ZeRO 1).",
        ),
        click.option(
            "--overhead",
            help="Memory no formula covers (CUDA context, NCCL), e.g. "
            "1G (default: 1G on a GPU; 0 on CPU, where the "
            "process's own baseline shows in the fit instead).",
        ),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


def given_options() -> tuple:
    """The running command's parameters as parsed (see
    :class:`~translator.launch.tune.GivenOption`)."""
    from translator.launch.tune import GivenOption

    ctx = click.get_current_context()
    return tuple(
        GivenOption(
            param.name,
            None if isinstance(param, click.Argument) else param.opts[0],
            ctx.params.get(param.name),
            getattr(param, "is_flag", False),
            param.multiple,
            next(iter(getattr(param, "secondary_opts", [])), None),
        )
        for param in ctx.command.params
    )
