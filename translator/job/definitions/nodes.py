"""A job definition's YAML as nodes with their lines: the documents of a file (``---``), the
children of a mapping, scalars as written, and the Helm placeholders of a chart's template
read as unknown values.

Nodes are composed safely (no tags, no code, no alias bombs) by
:func:`translator.words.parsing.compose_yaml`, once per text; a node keeps its line, so what is
read from a manifest points back into it.
"""

from __future__ import annotations

import re

import yaml

from translator.words.parsing import compose_yaml

#: A Helm value placeholder (``{{ .Values.train.tp }}``, ``{{- .Values.gpus | quote }}``).
HELM_VALUE = re.compile(r"\{\{-?\s*\.Values\.([\w.]+)[^}]*?-?\}\}")
#: Any other template action (``{{- if .Values.x }}``, ``{{ include "x" . }}``).
HELM_ACTION = re.compile(r"\{\{.*?\}\}")


def helm_name(path: str) -> str:
    """The variable a Helm value stands for in the reading: ``.Values.train.tp`` is
    ``Values_train_tp`` (settable with ``--env Values_train_tp=8``)."""
    return "Values_" + path.replace(".", "_")


def unhelm(text: str) -> tuple[str, list[str]]:
    """``text`` with each Helm value placeholder written as a shell variable (``${Values_x}``,
    unknown unless the environment sets it) and lines that hold only another template action
    blanked; the Helm values seen. Lines keep their numbers."""
    if "{{" not in text:
        return text, []
    seen: list[str] = []

    def value(m: re.Match) -> str:
        name = helm_name(m.group(1))
        seen.append(name)
        return "${" + name + "}"

    lines = []
    for line in text.split("\n"):
        line = HELM_VALUE.sub(value, line)
        if HELM_ACTION.search(line):
            rest = HELM_ACTION.sub("", line).strip()
            line = "" if not rest else HELM_ACTION.sub("${Helm_unknown}", line)
        lines.append(line)
    return "\n".join(lines), list(dict.fromkeys(seen))


def documents(text: str, path: str) -> list[yaml.Node]:
    """The file's YAML documents (``---``) as nodes; an :class:`InputError` naming the line
    when it is not valid YAML."""
    return list(compose_yaml(text, path))


def line(node: yaml.Node) -> int:
    """1-based line where the node starts."""
    return node.start_mark.line + 1


def child(node: yaml.Node | None, *keys: str) -> yaml.Node | None:
    """The node under ``keys`` (mapping keys, in turn), or ``None``."""
    for key in keys:
        if not isinstance(node, yaml.MappingNode):
            return None
        node = next(
            (v for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == key),
            None,
        )
    return node


def keys(node: yaml.Node | None) -> list[str]:
    """The keys of a mapping node (none for another node)."""
    if not isinstance(node, yaml.MappingNode):
        return []
    return [k.value for k, _ in node.value if isinstance(k, yaml.ScalarNode)]


def pairs(node: yaml.Node | None) -> list[tuple[str, yaml.Node]]:
    """A mapping node's ``(key, value node)`` pairs."""
    if not isinstance(node, yaml.MappingNode):
        return []
    return [(k.value, v) for k, v in node.value if isinstance(k, yaml.ScalarNode)]


def items(node: yaml.Node | None) -> list[yaml.Node]:
    """A sequence node's items (none for another node)."""
    return list(node.value) if isinstance(node, yaml.SequenceNode) else []


def text(node: yaml.Node | None) -> str | None:
    """A scalar as written (``null`` and ``~`` are ``None``; another node is ``None``). A plain
    scalar's style is ``None`` (PyYAML's composer) or ``""`` (libyaml's)."""
    if not isinstance(node, yaml.ScalarNode):
        return None
    if not node.style and node.value in ("", "~", "null", "Null", "NULL"):
        return None
    return node.value


def body_line(node: yaml.Node) -> int:
    """The line a scalar's text starts on: the line after ``|`` or ``>`` for a block scalar."""
    style = getattr(node, "style", None)
    return line(node) + (1 if style in ("|", ">") else 0)


def literal_span(node: yaml.Node | None) -> tuple[int, int] | None:
    """Character offsets of a scalar's text in the file, when it is written as read (plain,
    or quoted without escapes, on one line); ``None`` otherwise."""
    if not isinstance(node, yaml.ScalarNode) or node.style not in (None, "", '"', "'"):
        return None
    start, end = node.start_mark.index, node.end_mark.index
    if node.style:
        start, end = start + 1, end - 1
    # on one line, a scalar reads as written unless an escape (\n, '') made it shorter
    if node.start_mark.line != node.end_mark.line or end - start != len(node.value):
        return None
    return start, end


def tail_span(node: yaml.Node | None, tail: str) -> tuple[int, int] | None:
    """The offsets of ``tail`` where a scalar's text ends with it (the ``8`` of ``A100:8``)."""
    span = literal_span(node)
    if span is None or node is None or not node.value.endswith(tail):
        return None
    return span[1] - len(tail), span[1]
