"""Kubernetes manifests that run training: a ``batch/v1`` Job (Indexed or not), Kubeflow's
``PyTorchJob`` and ``TrainJob``, and a JobSet; every document of the file (``---``), with the
ConfigMaps beside them that hold scripts, variables or the files a command reads.

Each is read as its controller runs it: how many pods (nodes) it starts, the GPUs each pod's
container asks for, and the variables the controller sets in the container. The training
operator sets, for a ``PyTorchJob``, ``PET_NNODES`` (the replicas, ``min:max`` when elastic),
``PET_NPROC_PER_NODE`` (``nprocPerNode``), ``PET_NODE_RANK``, ``MASTER_ADDR``, ``WORLD_SIZE``
(replicas × ``nprocPerNode``) and ``RANK``; torchrun takes the ``PET_*`` ones as the defaults
of its flags. The command is read as on the first pod (rank 0): each pod runs the same one.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import yaml

from translator.job.definitions import held
from translator.job.definitions import nodes as n
from translator.job.definitions.lines import Lines
from translator.job.definitions.pods import container_run, gpus, mounts
from translator.job.definitions.runs import Export, Run, Size, count
from translator.words.errors import NotAJob

#: The kinds read, as ``kind`` and the API group of ``apiVersion`` name them.
TRAINING_KINDS = {
    ("batch", "Job"): "Job",
    ("kubeflow.org", "PyTorchJob"): "PyTorchJob",
    ("trainer.kubeflow.org", "TrainJob"): "TrainJob",
    ("jobset.x-k8s.io", "JobSet"): "JobSet",
    ("kubeflow.org", "MPIJob"): "MPIJob",
    ("", "Pod"): "Pod",
    ("apps", "StatefulSet"): "StatefulSet",
}
#: Kinds that run training, which batchspec does not read (yet): named as such.
OTHER_TRAINING = {"TFJob", "XGBoostJob", "PaddleJob", "JAXJob", "RayJob", "VolcanoJob"}
#: The note every kind shares.
FIRST_POD = "read as on the first pod (rank 0): every pod runs the same command"


@dataclass(frozen=True)
class Around:
    """What a reader of one object is given of the file that holds it."""

    path: str
    """The file, as the user named it."""
    text: str
    """The file's text, which its nodes' offsets index."""
    configmaps: dict[str, yaml.Node]
    """Its ConfigMaps by name: the scripts, variables and files its containers may take."""
    imaged: list[Run] = field(default_factory=list)
    """The runs of containers that set no command (their images' own run), as their
    controller lays them out."""

    @functools.cached_property
    def lines(self) -> Lines:
        """The text's lines, indexed once for every container that mounts a ConfigMap."""
        return Lines(self.text)


def is_manifest(node: yaml.Node) -> bool:
    """Whether a document is a Kubernetes object (``apiVersion`` and ``kind``)."""
    return (
        n.text(n.child(node, "apiVersion")) is not None
        and n.text(n.child(node, "kind")) is not None
    )


def runs(docs: list[yaml.Node], path: str, env: dict[str, str], text: str) -> list[Run]:
    """What each training object of the file (``text``, composed as ``docs``) runs on its
    pods; a :class:`NotAJob` naming the kinds when none is one."""
    manifests = [d for d in docs if is_manifest(d)]
    around = Around(
        path,
        text,
        {
            n.text(n.child(d, "metadata", "name")) or "": d
            for d in manifests
            if n.text(n.child(d, "kind")) == "ConfigMap"
        },
    )
    out: list[Run] = []
    kinds, read = [], False
    for doc in manifests:
        kind = _kind(doc)
        kinds.append(kind)
        reader = READERS.get(kind)
        if reader is not None:
            read = True
            named = n.text(n.child(doc, "metadata", "name")) or "(no name)"
            for run in reader(doc, around, env):
                run.job = f"{kind} {named} (line {doc.start_mark.line + 1})"
                out.append(run)
    if not read:
        named = ", ".join(dict.fromkeys(kinds))
        others = [k for k in kinds if k in OTHER_TRAINING]
        raise NotAJob(
            f"{path}: "
            + (
                f"{others[0]}: a kind of training job batchspec does not read yet"
                if others
                else f"not a training job: a Kubernetes manifest of {named}"
            )
            + f" (batchspec reads {', '.join(READERS)})"
        )
    if not out:
        worlds = {e.value for r in around.imaged for e in r.exports if e.name == "WORLD_SIZE"}
        world = int(worlds.pop()) if len(worlds) == 1 and len(around.imaged) == 1 else None
        raise NotAJob(
            f"{path}: its containers set no command: they run their images' own (a TrainJob "
            "without trainer.command: its runtime's), which the manifest does not show"
            + ("" if world is None else f"; their controller sets WORLD_SIZE {world}"),
            world,
        )
    return out


def _kind(doc: yaml.Node) -> str:
    """The kind a reader is known by (``Job`` of ``batch/v1``), else as written, with the
    API group when it is another's (``Job`` of Volcano's ``batch.volcano.sh`` is
    ``VolcanoJob``)."""
    kind = n.text(n.child(doc, "kind")) or ""
    group = (n.text(n.child(doc, "apiVersion")) or "").rpartition("/")[0]
    if (group, kind) in TRAINING_KINDS:
        return TRAINING_KINDS[(group, kind)]
    return "VolcanoJob" if group == "batch.volcano.sh" else kind


def _pod_runs(pod: yaml.Node | None, around: Around, env: dict[str, str], make) -> list[Run]:
    """One run per container of a pod template (``make(container)`` gives the run's layout
    and the controller's variables) that sets a command."""
    spec = n.child(pod, "spec")
    out = []
    for container in n.items(n.child(spec, "containers")):
        made = make(gpus(n.child(container, "resources"), env))
        run = container_run(container, spec, around.configmaps, made)
        if run is None:
            around.imaged.append(made)
        else:
            mounted = mounts(container, spec, around.configmaps)
            run.files = held.files(around.path, around.lines, mounted) if mounted else {}
            out.append(run)
    return out


def _job(doc: yaml.Node, around: Around, env: dict[str, str]) -> list[Run]:
    spec = n.child(doc, "spec")
    return _pod_runs(
        n.child(spec, "template"),
        around,
        env,
        lambda g: Run("Kubernetes Job", _pods(spec, env), g, **_indexed(spec)),
    )


def _pods(spec: yaml.Node | None, env: dict[str, str], replicas: Size | None = None) -> Size:
    """The pods a Job runs at once: ``parallelism`` (else ``completions``, else one), times
    its replicas in a JobSet."""
    pods = _count_or_one(
        n.child(spec, "parallelism") or n.child(spec, "completions"), "parallelism", env
    )
    if replicas is None:
        return pods
    if pods.value is None or replicas.value is None:
        return Size(None, replicas.line, replicas.why or pods.why)
    return Size(pods.value * replicas.value, replicas.line)


def _count_or_one(node: yaml.Node | None, key: str, env: dict[str, str]) -> Size:
    """The count a key writes (``replicas: 2``), one when it is not written."""
    if node is None:
        return Size(1)
    return count(n.text(node), n.line(node), key, env, n.literal_span(node))


def _indexed(spec: yaml.Node | None) -> dict:
    """An Indexed Job's pods see ``JOB_COMPLETION_INDEX``, read as the first pod's."""
    if n.text(n.child(spec, "completionMode")) != "Indexed":
        return {"notes": [FIRST_POD]}
    return {"exports": [Export("JOB_COMPLETION_INDEX", "0")], "notes": [FIRST_POD]}


def _copies(
    chosen: yaml.Node | None, roles: list[tuple[str, yaml.Node]], buffer: str
) -> list[tuple[str, tuple[int, int], int | None]]:
    """For each other role, the span of the read role's containers and where the same text
    stands in that role's (``None`` when it is written otherwise); ``buffer``: the file."""
    mine = n.child(chosen, "template", "spec", "containers")
    if mine is None:
        return []
    start = mine.start_mark.index
    text = buffer[start : mine.end_mark.index].rstrip()  # a block ends where the next begins
    out = []
    for role, node in roles:
        theirs = n.child(node, "template", "spec", "containers")
        if node is chosen or theirs is None:
            continue
        other = theirs.start_mark.index
        same = buffer[other : theirs.end_mark.index].rstrip() == text
        out.append((role, (start, start + len(text)), other if same else None))
    return out


def _edited_role(sizes: dict[str, Size]) -> tuple[tuple[int, int] | None, int]:
    """Where the node count is edited, and what the other roles add to it: the one role's
    replicas, or the Workers' beside a single Master (the Master stays one pod); ``None``
    when no one literal makes the count."""
    if len(sizes) == 1:
        return next(iter(sizes.values())).span, 0
    worker, master = sizes.get("Worker"), sizes.get("Master")
    if set(sizes) == {"Master", "Worker"} and master is not None and master.value == 1:
        return (worker.span if worker is not None else None), 1
    return None, 0


def _pytorchjob(doc: yaml.Node, around: Around, env: dict[str, str]) -> list[Run]:
    spec = n.child(doc, "spec")
    replicas = n.child(spec, "pytorchReplicaSpecs")
    roles = n.pairs(replicas)
    total, where, why = 0, None, None
    sizes: dict[str, Size] = {}
    for role, node in roles:
        r = n.child(node, "replicas")
        size = sizes[role] = (
            Size(1)
            if r is None
            else count(n.text(r), n.line(r), f"{role} replicas", env, n.literal_span(r))
        )
        where = where or (n.line(r) if r is not None else None)
        if size.value is None:
            why = size.why
        else:
            total += size.value
    elastic = n.child(spec, "elasticPolicy")
    low, high = (n.text(n.child(elastic, k)) for k in ("minReplicas", "maxReplicas"))
    nnodes = None if why else str(total)
    if elastic is not None and (low or high) and low != high:
        why, nnodes = f"elastic: from {low} to {high} pods", f"{low}:{high}"
    alone, besides = _edited_role(sizes)
    edited = "Worker replicas" if besides else f"{roles[0][0]} replicas" if roles else None
    nodes = Size(None if why else total, where, why, alone, edited, besides)
    proc = n.child(spec, "nprocPerNode") or n.child(elastic, "nProcPerNode")
    master = any(role == "Master" for role, _ in roles)
    chosen = next(
        (node for role, node in roles if role == "Master"), roles[0][1] if roles else None
    )

    def make(g: Size) -> Run:
        if len(roles) > 1:  # each role's template asks for its own: no one literal to edit
            g = Size(g.value, g.line, g.why)
        per_node = _nproc(proc, g, env)
        # the launcher's nodes are the definition's; with a Master beside the Workers their
        # literal is not the count, so only the definition's edit writes it
        span = None if nodes.besides else nodes.span
        exports = [Export("PET_NNODES", nnodes, where, span) if nnodes else None]
        if master:
            exports += [
                Export("MASTER_ADDR", "master-0"),
                Export("MASTER_PORT", "23456"),
                Export("RANK", "0"),
                Export("PET_NODE_RANK", "0"),
            ]
            if nodes.value is not None:
                world = nodes.value * (per_node.value or 1)
                exports.append(Export("WORLD_SIZE", str(world), where))
            if per_node.value is not None:
                exports.append(Export.of("PET_NPROC_PER_NODE", per_node))
        notes = [FIRST_POD]
        if per_node.why:
            notes.append(f"nprocPerNode: {per_node.why}")
        elif proc is None and master:
            notes.append(
                f"nprocPerNode is not set: the training operator's default, auto, starts a "
                f"process per GPU ({per_node.value})"
            )
        copies = _copies(chosen, roles, around.text)
        differs = [
            f"the {role} pods' containers are written otherwise than the Master's, which are "
            "the ones read: their batch may differ"
            for role, _, at in copies
            if at is None
        ]
        return Run(
            "Kubeflow PyTorchJob",
            nodes,
            g,
            exports=[e for e in exports if e],
            notes=[note for note in notes if not (differs and note == FIRST_POD)],
            copies=[(start, end, at) for _, (start, end), at in copies],
            differs=differs,
        )

    return _pod_runs(n.child(chosen, "template"), around, env, make)


def _nproc(proc: yaml.Node | None, g: Size, env: dict[str, str]) -> Size:
    """Processes per pod: ``nprocPerNode`` (``auto`` and ``gpu``: the pod's GPUs, as torchrun
    counts them; not set: ``auto``, the operator's default since v1.7)."""
    text: str | None = "auto"
    line: int | None = None
    if proc is not None:
        text, line = n.text(proc), n.line(proc)
    if text in ("auto", "gpu"):
        if g.value is not None:
            return g
        return Size(None, line, f"{text}: the GPUs each pod sees, which it does not ask for")
    return count(text, line, "nprocPerNode", env, n.literal_span(proc))


def _trainjob(doc: yaml.Node, around: Around, env: dict[str, str]) -> list[Run]:
    trainer = n.child(doc, "spec", "trainer")
    num = n.child(trainer, "numNodes")
    nodes = (
        Size(None, None, "numNodes is the runtime's")
        if num is None
        else count(n.text(num), n.line(num), "numNodes", env, n.literal_span(num))
    )
    g = gpus(n.child(trainer, "resourcesPerNode"), env)
    per_node = _nproc(n.child(trainer, "numProcPerNode"), g, env)
    # The runtime's torchrun settings reach the trainer as PET_*; what the TrainJob leaves to
    # its runtime (not in this file) is set all the same, to a value unknown here.
    exports = [Export("PET_NODE_RANK", "0")]
    for name, size in (("PET_NNODES", nodes), ("PET_NPROC_PER_NODE", per_node)):
        known = size.value is not None
        exports.append(Export.of(name, size) if known else Export.unknown(name, "the runtime"))
    run = Run("Kubeflow TrainJob", nodes, g, exports=exports, notes=[FIRST_POD], name="trainer")
    done = container_run(trainer, None, around.configmaps, run)
    return [done] if done is not None else []


def _jobset(doc: yaml.Node, around: Around, env: dict[str, str]) -> list[Run]:
    out = []
    for job in n.items(n.child(doc, "spec", "replicatedJobs")):
        r = n.child(job, "replicas")
        replicas = Size(1) if r is None else count(n.text(r), n.line(r), "replicas", env)
        spec = n.child(job, "template", "spec")
        name = n.text(n.child(job, "name"))

        def make(g: Size, spec=spec, replicas=replicas, name=name) -> Run:
            return Run("JobSet", _pods(spec, env, replicas), g, name=name, **_indexed(spec))

        out += _pod_runs(n.child(spec, "template"), around, env, make)
    return out


def _mpijob(doc: yaml.Node, around: Around, env: dict[str, str]) -> list[Run]:
    """A Kubeflow MPIJob (mpi-operator): its Launcher pod runs ``mpirun``, which starts the
    ranks on the Worker pods (``slotsPerWorker`` each in the host file it writes); the nodes
    are the Workers, with their GPUs."""
    roles = n.child(doc, "spec", "mpiReplicaSpecs")
    worker = n.child(roles, "Worker")
    workers = _count_or_one(n.child(worker, "replicas"), "Worker replicas", env)
    pods = n.items(n.child(worker, "template", "spec", "containers"))
    g = gpus(n.child(pods[0], "resources"), env) if pods else Size(None)
    note = "read as the Launcher pod runs it: mpirun starts the ranks on the Worker pods"
    return _pod_runs(
        n.child(n.child(roles, "Launcher"), "template"),
        around,
        env,
        lambda _: Run("Kubeflow MPIJob", workers, g, notes=[note]),
    )


def _pod(doc: yaml.Node, around: Around, env: dict[str, str]) -> list[Run]:
    """A bare Pod: one node running its containers' commands."""
    return _pod_runs(doc, around, env, lambda g: Run("Kubernetes Pod", Size(1), g))


def _statefulset(doc: yaml.Node, around: Around, env: dict[str, str]) -> list[Run]:
    """A StatefulSet: ``replicas`` pods (one by default), each running the template's
    command; a pod's rank is its name's ordinal, which the command reads at run time."""
    spec = n.child(doc, "spec")
    pods = _count_or_one(n.child(spec, "replicas"), "replicas", env)
    note = "read as on its first pod (ordinal 0): every pod runs the same command"
    return _pod_runs(
        n.child(spec, "template"),
        around,
        env,
        lambda g: Run("Kubernetes StatefulSet", pods, g, notes=[note]),
    )


READERS = {
    "Job": _job,
    "PyTorchJob": _pytorchjob,
    "TrainJob": _trainjob,
    "JobSet": _jobset,
    "MPIJob": _mpijob,
    "Pod": _pod,
    "StatefulSet": _statefulset,
}
