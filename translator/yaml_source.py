"""Safe YAML loading that also tells where each top-level key and scalar value stands."""

from __future__ import annotations

import yaml

from translator.errors import InputError


def load(text: str, where: str) -> tuple[object, dict[str, tuple[int, tuple[int, int] | None]]]:
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
