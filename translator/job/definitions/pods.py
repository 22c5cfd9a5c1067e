"""A Kubernetes pod's container as the node's launch script: its ``command`` and ``args``
(``bash -c SCRIPT``, a script mounted from a ConfigMap of the same file, or plain words), its
``env`` and ``envFrom``, and the GPUs its ``resources`` give it.

Kubernetes expands ``$(NAME)`` in ``command``/``args`` and in ``env`` values from the variables
set before; a ``${NAME}`` is a placeholder someone fills before ``kubectl apply`` (envsubst),
unknown here unless ``--env`` sets it.
"""

from __future__ import annotations

import posixpath
import re

import yaml

from translator.job.definitions import nodes as n
from translator.job.definitions.runs import REFERENCE, Export, Run, Size, count, shell_value
from translator.shell.following import SHELLS

#: The resource names that count GPUs.
GPU_RESOURCES = ("nvidia.com/gpu", "amd.com/gpu")
#: Commands that run the command after their own options as it is.
WRAPPERS = {"stdbuf", "env", "nice", "time", "tini", "dumb-init"}
#: Shells that take a script with ``-c``.


def gpus(resources: yaml.Node | None, env: dict[str, str]) -> Size:
    """The GPUs a container's ``resources`` give it (its limits, else its requests)."""
    for part in ("limits", "requests"):
        for resource in GPU_RESOURCES:
            node = n.child(resources, part, resource)
            if node is not None:
                what = f"{part}[{resource}]"
                return count(n.text(node), n.line(node), what, env, n.literal_span(node))
    return Size(None, None, "the container asks for no GPUs (resources.limits nvidia.com/gpu)")


def container_run(
    container: yaml.Node | None,
    pod: yaml.Node | None,
    configmaps: dict[str, yaml.Node],
    run: Run,
) -> Run | None:
    """``run`` given the container's command and environment; ``None`` when the container
    sets no command (its image's own runs, which the manifest does not show), or only
    ``args`` that are flags (``["--backend", "nccl"]``: the options of its image's program)."""
    run.name = n.text(n.child(container, "name")) or run.name
    run.exports += environment(container, configmaps)
    for source in n.items(n.child(container, "envFrom")):
        for kind in ("configMapRef", "secretRef"):
            name = n.text(n.child(source, kind, "name"))
            if name is not None and (kind == "secretRef" or name not in configmaps):
                run.notes.append(
                    f"line {n.line(source)}: the variables of {kind} {name} (envFrom) are not "
                    "in the file: a value read from one of them is taken as not set (give "
                    "--env)"
                )
    words = [*n.items(n.child(container, "command")), *n.items(n.child(container, "args"))]
    if not words:
        return None
    if n.child(container, "command") is None and (n.text(words[0]) or "").startswith("-"):
        return None
    known = {e.name for e in run.exports}
    mounted = mounts(container, pod, configmaps)
    texts = [_expanded(n.text(w) or "", known) for w in words]
    first = posixpath.basename(texts[0])
    at = _shell_c(texts)
    if at is not None:
        run.body = [(n.body_line(words[at + 2]), texts[at + 2])]
        run.args = tuple(texts[at + 4 :])  # after the script: $0, then $1...
        return run
    script = texts[1] if first in SHELLS and len(texts) > 1 else texts[0]
    if script in mounted:
        node = mounted[script][2]
        run.body = [(n.body_line(node), _expanded(n.text(node) or "", known))]
        run.args = tuple(texts[2:] if first in SHELLS else texts[1:])
        return run
    run.body = [_words(words, known)]
    return run


def _shell_c(texts: list[str]) -> int | None:
    """Where ``bash -c SCRIPT`` starts in the words, behind wrappers that run it as it is
    (``stdbuf -oL bash -c ...``, ``/usr/bin/env bash -c ...``); ``None``: no shell script."""
    for i, text in enumerate(texts[:-2]):
        name = posixpath.basename(text)
        if name in SHELLS and re.fullmatch(r"-[a-z]*c[a-z]*", texts[i + 1]):
            return i
        if name not in WRAPPERS and not (i and text.startswith("-")):
            return None
    return None


def _expanded(text: str, known: set[str]) -> str:
    """``$(NAME)`` of a variable set before, as Kubernetes replaces it (a shell expansion)."""
    return REFERENCE.sub(lambda m: "${" + m.group(1) + "}" if m.group(1) in known else m[0], text)


def _words(words: list[yaml.Node], known: set[str]) -> tuple[int, str]:
    """The container's words as one shell command, each on its own line when they stand in
    order there (lines continued with ``\\``), else all on the first."""
    lines = [n.line(w) for w in words]
    quoted = [shell_value(_expanded(n.text(w) or "", known)) for w in words]
    if lines != sorted(lines):
        return lines[0], " ".join(quoted)
    out: list[str] = []
    for line, word in zip(lines, quoted):
        at = line - lines[0]
        while len(out) <= at:
            out.append("")
        out[at] += (" " if out[at] else "") + word
    return lines[0], " \\\n".join(out)


def environment(container: yaml.Node | None, configmaps: dict[str, yaml.Node]) -> list[Export]:
    """The container's ``envFrom`` ConfigMaps of this file, then its ``env`` (which wins); a
    value from elsewhere (``valueFrom``, a ConfigMap not in the file) is unknown."""
    out: list[Export] = []
    for source in n.items(n.child(container, "envFrom")):
        name = n.text(n.child(source, "configMapRef", "name"))
        for key, node in n.pairs(n.child(configmaps.get(name or ""), "data")):
            out.append(Export(key, shell_value(n.text(node) or ""), n.line(node)))
    for entry in n.items(n.child(container, "env")):
        name = n.text(n.child(entry, "name"))
        if name is None or not re.fullmatch(r"[A-Za-z_]\w*", name):
            continue
        value = n.child(entry, "value")
        origin = n.child(entry, "valueFrom")
        if value is None and origin is not None:
            # a value only the cluster knows: unknown, as a command's output is
            kinds = " ".join(n.keys(origin)) or "valueFrom"
            out.append(Export.unknown(name, f"kubernetes {kinds}", n.line(entry)))
            continue
        out.append(Export(name, shell_value(n.text(value) or "", True), n.line(value or entry)))
    return out


def mounts(
    container: yaml.Node | None, pod: yaml.Node | None, configmaps: dict[str, yaml.Node]
) -> dict[str, tuple[str, str, yaml.Node]]:
    """The files ConfigMaps of this file put into the container: its path there -> (the
    ConfigMap's name, the key, the value's node). A volume's ``items`` choose the keys and
    name their files; a mount's ``subPath`` mounts one file (or folder) of the volume at the
    mount's path."""
    volumes = {
        n.text(n.child(v, "name")): _volume_files(v, configmaps)
        for v in n.items(n.child(pod, "volumes"))
    }
    out: dict[str, tuple[str, str, yaml.Node]] = {}
    for mount in n.items(n.child(container, "volumeMounts")):
        files = volumes.get(n.text(n.child(mount, "name")))
        at = n.text(n.child(mount, "mountPath"))
        if not files or at is None:
            continue
        sub = (n.text(n.child(mount, "subPath")) or "").strip("/")
        for name, held in files.items():
            if not sub:
                out[posixpath.join(at, name)] = held
            elif name == sub:
                out[at] = held
            elif name.startswith(sub + "/"):
                out[posixpath.join(at, name[len(sub) + 1 :])] = held
    return out


def _volume_files(
    volume: yaml.Node, configmaps: dict[str, yaml.Node]
) -> dict[str, tuple[str, str, yaml.Node]]:
    """The files a volume makes of this file's ConfigMaps (a ``configMap`` volume, or the
    ``configMap`` sources of a ``projected`` one): their path in the volume -> (the
    ConfigMap's name, the key, the value's node)."""
    sources = [n.child(volume, "configMap")]
    sources += [n.child(s, "configMap") for s in n.items(n.child(volume, "projected", "sources"))]
    out: dict[str, tuple[str, str, yaml.Node]] = {}
    for source in sources:
        name = n.text(n.child(source, "name"))
        data = dict(n.pairs(n.child(configmaps.get(name or ""), "data")))
        items = n.items(n.child(source, "items"))
        chosen = (
            [(n.text(n.child(i, "key")), n.text(n.child(i, "path"))) for i in items]
            if items
            else [(key, key) for key in data]
        )
        for key, path in chosen:
            if name is not None and key is not None and key in data and path:
                out[posixpath.normpath(path).lstrip("/")] = (name, key, data[key])
    return out
