"""Parsing config text safely, with errors that name the file and line: YAML (which also says
where each top-level key and scalar value stands) and JSON."""

from __future__ import annotations

import json

import yaml

from translator.errors import InputError


def load_yaml(text: str, where: str) -> tuple[object, dict[str, tuple[int, tuple[int, int] | None]]]:
    """``(data, positions)``: ``yaml.safe_load`` data (no tags, no code) and, for each
    top-level key, its 1-based line and the character span of its value when that is a scalar."""
    try:
        loader = yaml.SafeLoader(text)
        try:
            node = loader.get_single_node()
            data = None if node is None else loader.construct_document(node)
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f"{where}:{mark.line + 1}" if mark is not None else where
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(f"{at}: not valid YAML: {problem}") from None
    except RecursionError:
        raise InputError(f"{where}: nested too deeply") from None
    positions = {}
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode):
                span = ((value.start_mark.index, value.end_mark.index)
                        if isinstance(value, yaml.ScalarNode) else None)
                positions[key.value] = (key.start_mark.line + 1, span)
    return data, positions


def load_json(text: str, where: str, object_pairs_hook=None) -> object:
    """``json.loads`` with one-line errors naming the file and line."""
    try:
        return json.loads(text, object_pairs_hook=object_pairs_hook)
    except json.JSONDecodeError as exc:
        raise InputError(f"{where}:{exc.lineno}: not valid JSON: {exc.msg}") from None
    except RecursionError:
        raise InputError(f"{where}: nested too deeply") from None
