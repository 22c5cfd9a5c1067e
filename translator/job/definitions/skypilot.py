"""A SkyPilot task YAML as SkyPilot runs it: ``run`` on each of ``num_nodes`` nodes, in the
``workdir``, with ``envs`` and what SkyPilot sets (``SKYPILOT_NUM_NODES``,
``SKYPILOT_NUM_GPUS_PER_NODE`` from ``resources.accelerators``, ``SKYPILOT_NODE_RANK``,
``SKYPILOT_NODE_IPS``: a line per node, named ``node-0``... here); the
files named through ``file_mounts`` are looked for at their local source. ``setup`` runs
before, in another shell: what it sets does not reach ``run``."""

from __future__ import annotations

from pathlib import Path

import yaml

from translator.job.definitions import nodes as n
from translator.job.definitions.runs import Export, Run, Size, count
from translator.job.definitions.tasks import gpu_count, same_count, task_env

#: Keys that mark a SkyPilot task beside ``run``.
TASK_KEYS = ("resources", "num_nodes", "setup", "envs", "workdir", "file_mounts")
#: The most nodes whose addresses ``SKYPILOT_NODE_IPS`` is given, one line each (symbolic:
#: ``node-0``...); more are unknown.
MAX_LISTED = 1024
#: Where SkyPilot puts the workdir on each node.
REMOTE_WORKDIR = "~/sky_workdir"
#: The folder a command starts in, as long as :data:`REMOTE_WORKDIR`.
HERE = "./" * (len(REMOTE_WORKDIR) // 2) + "." * (len(REMOTE_WORKDIR) % 2)


def is_task(doc: yaml.Node) -> bool:
    """Whether a YAML document is a SkyPilot task: a ``run`` beside one of its other keys."""
    keys = n.keys(doc)
    return "run" in keys and any(k in keys for k in TASK_KEYS)


def run(doc: yaml.Node, path: str, env: dict[str, str]) -> tuple[Run, dict[str, str]]:
    """What each node runs, and the files ``file_mounts`` maps (remote path -> local)."""
    num = n.child(doc, "num_nodes")
    nodes = (
        Size(1)
        if num is None
        else count(n.text(num), n.line(num), "num_nodes", env, n.literal_span(num))
    )
    g = _accelerators(n.child(doc, "resources"), env)
    exports = [Export("SKYPILOT_NODE_RANK", "0")]
    if nodes.value is not None:
        exports.append(Export.of("SKYPILOT_NUM_NODES", nodes))
        if nodes.value <= MAX_LISTED:  # one line per node: `wc -l` counts them
            hosts = "\\n".join(f"node-{i}" for i in range(nodes.value))
            exports.append(Export("SKYPILOT_NODE_IPS", f"$'{hosts}'", nodes.line))
    if g.value is not None:
        exports.append(Export.of("SKYPILOT_NUM_GPUS_PER_NODE", g))
    own, left = task_env(n.child(doc, "envs"), env)
    notes = ["read as on the first node (SKYPILOT_NODE_RANK 0): every node runs the same run"]
    if left:
        notes.append(f"envs set at launch (sky launch --env): {', '.join(left)}; unknown here")
    body = n.child(doc, "run")
    assert body is not None  # is_task: it has one
    task = Run(
        "SkyPilot task",
        nodes,
        g,
        body=[(n.body_line(body), _in_workdir(n.text(body) or ""))],
        exports=exports + own,
        name=n.text(n.child(doc, "name")),
        notes=notes,
    )
    here = Path(path).parent
    workdir = n.text(n.child(doc, "workdir"))
    mounts: dict[str, str] = {}
    if workdir is not None:
        task.run_dir = str(here / workdir)
    for remote, source in n.pairs(n.child(doc, "file_mounts")):
        local = n.text(source) or n.text(n.child(source, "source"))
        if local is not None and "://" not in local:
            mounts[remote] = str(here / Path(local).expanduser())
    return task, mounts


def _in_workdir(text: str) -> str:
    """``run`` starts in the workdir, ``~/sky_workdir`` on the node: that path is the folder it
    starts in, written as long (``././././././.``) so the lines and columns stay."""
    return text.replace(REMOTE_WORKDIR, HERE)


def _accelerators(resources: yaml.Node | None, env: dict[str, str]) -> Size:
    """GPUs per node from ``accelerators`` (``A100:8``; a mapping ``{A100: 8}``; a list or
    set of choices), or from each of ``any_of``/``ordered``."""
    choices = (
        [resources] + n.items(n.child(resources, "any_of")) + n.items(n.child(resources, "ordered"))
    )
    sizes = []
    for choice in choices:
        node = n.child(choice, "accelerators")
        if node is None:
            continue
        what = "resources.accelerators"
        if isinstance(node, yaml.ScalarNode):
            sizes.append(gpu_count(n.text(node) or "", n.line(node), what, env, node))
        for item in n.items(node):
            sizes.append(gpu_count(n.text(item) or "", n.line(item), what, env, item))
        for name, value in n.pairs(node):
            given = n.text(value)
            spec = name if given is None else f"{name}:{given}"
            sizes.append(gpu_count(spec, n.line(value), what, env, value if given else None))
    if not sizes:
        return Size(None, None, "the task asks for no accelerators")
    return same_count(sizes, sizes[0].line or 0, "resources.accelerators")
