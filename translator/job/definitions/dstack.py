"""A dstack task (``type: task``) as dstack runs it: its ``commands`` in one shell on each of
``nodes`` nodes, with ``env`` and what dstack sets (``DSTACK_NODES_NUM``,
``DSTACK_GPUS_PER_NODE``, ``DSTACK_GPUS_NUM`` from ``resources.gpu``, ``DSTACK_NODE_RANK``;
``DSTACK_MASTER_NODE_IP`` is known only when it runs)."""

from __future__ import annotations

import yaml

from translator.job.definitions import nodes as n
from translator.job.definitions.runs import Export, Run, Size, count
from translator.job.definitions.tasks import gpu_count, task_env


def is_task(doc: yaml.Node) -> bool:
    """Whether a YAML document is a dstack task: ``type: task`` with ``commands``."""
    return n.text(n.child(doc, "type")) == "task" and n.child(doc, "commands") is not None


def run(doc: yaml.Node, env: dict[str, str]) -> Run:
    """What each node runs."""
    num = n.child(doc, "nodes")
    nodes = (
        Size(1)
        if num is None
        else count(n.text(num), n.line(num), "nodes", env, n.literal_span(num))
    )
    g = _gpus(n.child(doc, "resources", "gpu"), env)
    exports = [Export("DSTACK_NODE_RANK", "0")]  # the master's address is only known then
    if nodes.value is not None:
        exports.append(Export.of("DSTACK_NODES_NUM", nodes))
    if g.value is not None:
        exports.append(Export.of("DSTACK_GPUS_PER_NODE", g))
        if nodes.value is not None:
            exports.append(Export("DSTACK_GPUS_NUM", str(g.value * nodes.value), g.line))
    own, left = task_env(n.child(doc, "env"), env)
    notes = ["read as on the first node (DSTACK_NODE_RANK 0): every node runs the same commands"]
    if left:
        notes.append(f"env set when the task is applied: {', '.join(left)}; unknown here")
    body = [(n.body_line(c), n.text(c) or "") for c in n.items(n.child(doc, "commands"))]
    return Run(
        "dstack task",
        nodes,
        g,
        body=body,
        exports=exports + own,
        name=n.text(n.child(doc, "name")),
        notes=notes,
    )


def _gpus(node: yaml.Node | None, env: dict[str, str]) -> Size:
    """GPUs per node from ``resources.gpu``: ``H100:8``, ``80GB:8``, ``24GB..:2``, ``8``, or a
    mapping with ``count``."""
    if node is None:
        return Size(None, None, "the task asks for no GPUs (resources.gpu)")
    what = "resources.gpu"
    if isinstance(node, yaml.MappingNode):
        c = n.child(node, "count")
        if c is None:
            return count("1", n.line(node), what, env)
        text = n.text(c)
        if text is None:  # count: {min: 2, max: 8}
            low, high = (n.text(n.child(c, k)) for k in ("min", "max"))
            text = f"{low}..{high or ''}"
        return gpu_count(f":{text}", n.line(c), what, env, c)
    return gpu_count(n.text(node) or "", n.line(node), what, env, node)
