"""The ``deepspeed`` launcher (DeepSpeed's runner, ``deepspeed [flags] train.py``) as a launcher
definition: its sizing flags, the total its ``--include`` host list gives, its host file, and
what it runs on when its flags leave that open (its ``runner.py``)."""

from __future__ import annotations

from collections.abc import Mapping

from translator.shell.launchers import LauncherDefinition, Sizes, flag_value
from translator.shell.values import Word


def _include(out: Sizes, name: str, flags: list[Word], j: int) -> None:
    """``deepspeed --include host1:0,1@host2:0,1``: the processes it starts, as a total."""
    if name not in ("--include", "-i"):
        return
    include = flag_value(flags, j, name)
    slots = _slots(include.text if include is not None else None)
    if slots is None:
        why = "a host list without slot numbers"
        out.words["total"] = (name, Word(None, flags[j].line, why_unknown=why))
    else:
        out.words["total"] = (name, Word(str(slots), flags[j].line))


def _slots(include: str | None) -> int | None:
    """Processes ``deepspeed --include host1:0,1@host2:0,1`` starts (``None``: a host without
    slot numbers takes all of its own)."""
    if not include:
        return None
    total = 0
    for host in include.replace("\\", "").split("@"):
        name, colon, slots = host.partition(":")
        if not colon or not slots:
            return None
        total += len([x for x in slots.split(",") if x])
    return total


def _resources(
    out: Sizes, variables: Mapping[str, list[Word]], environment: Mapping[str, Word]
) -> None:
    """What the launcher runs on when its flags leave it open: without a host file (read as
    run: none, unless ``--hostfile`` names one) it runs on this node; there, with no
    ``--include``/``--exclude``/``--num_gpus``/``--num_nodes``, an exported
    ``CUDA_VISIBLE_DEVICES`` becomes ``--include localhost:<its list>``."""
    hostfile = out.options.get("--hostfile")
    if hostfile is not None and hostfile.text != "":
        if "nodes" not in out.words and "total" not in out.words:
            shown = hostfile.text or hostfile.why_unknown
            out.missing = f"deepspeed runs on every host of its host file {shown}"
        return
    if "--exclude" in out.options or "-e" in out.options:
        out.missing = "deepspeed --exclude leaves every other GPU it finds"
        return
    nodes = out.words.get("nodes")
    several = nodes is not None and nodes[1].text not in (None, "1")
    if "total" not in out.words and "per_node" not in out.words and not several:
        count, _ = out.visible_count()
        if count is not None and out.visible is not None:
            out.words["total"] = (out.visible_key, Word(str(count), out.visible.line))
            return
    if "nodes" not in out.words:
        out.defaults["nodes"] = 1


def _unsized(out: Sizes) -> str | None:
    if "total" not in out.words and "per_node" not in out.words:
        return "deepspeed without --num_gpus uses every GPU it finds"
    return None


LAUNCHER = LauncherDefinition(
    "deepspeed",
    ("--num_gpus", "--num-gpus"),
    ("--num_nodes", "--num-nodes"),
    modules=frozenset({"deepspeed.launcher.runner"}),  # the deepspeed command's module
    switches=frozenset(
        {"--no_ssh", "--no_ssh_check", "--force_multi", "--no_local_rank", "--module"}
    ),
    # its runner starts the other nodes over ssh from the host file
    several_nodes="deepspeed starts its {nodes} nodes from its host file (--hostfile, else "
    "/job/hostfile): it must list {nodes} hosts, one `host slots={per_node}` line each; "
    "without one deepspeed runs on this node alone",
    hostfile=("--hostfile",),
    own_flag=_include,
    resources=_resources,
    unsized=_unsized,
)
