"""Which framework a config file is for: by its extension, and by its content where several
frameworks claim the extension."""

from __future__ import annotations

from pathlib import Path

from translator.errors import InputError
from translator.frameworks import FRAMEWORKS, Framework, by_claim_order


def detect(path: str, text: str) -> Framework:
    """The framework for a file: the one that claims its extension; when several do (a YAML),
    the first of them to claim its content; with none, the first to claim its content."""
    suffix = Path(path).suffix.lower()
    frameworks = by_claim_order()
    by_suffix = [f for f in frameworks if suffix in f.extensions]
    if len(by_suffix) == 1:
        return by_suffix[0]
    for framework in by_suffix or frameworks:  # several claim .yaml: the content decides
        if framework.claims(text):
            return framework
    if by_suffix:
        return by_suffix[0]
    raise InputError(
        f"{path}: cannot tell which framework this config is for; "
        f"give --framework {'|'.join(FRAMEWORKS)}"
    )
