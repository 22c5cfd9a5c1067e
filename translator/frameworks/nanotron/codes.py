"""The finding codes of the nanotron framework (registered when it loads)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from translator.words.findings import Severity

#: code -> (severity, what it is about).
CODES: dict[str, tuple[Severity, str]] = {
    "nanotron-world-product": (
        "error",
        "nanotron's ParallelContext needs exactly the processes its parallel sizes multiply to",
    ),
    "nanotron-world-needed": (
        "info",
        "the launch's world is unknown; nanotron needs exactly the product of the sizes",
    ),
    "nanotron-1f1b-microbatches": (
        "error",
        "the 1F1B pipeline engine needs batch_accumulation_per_replica ≥ pp − 1",
    ),
    "nanotron-missing-key": (
        "error",
        "a key nanotron's config dataclasses have no default for is missing",
    ),
    "nanotron-pp-engine": ("error", "pp_engine is neither afab nor 1f1b"),
    "nanotron-expert-world": (
        "warning",
        "expert parallelism changes the world nanotron asks for, differently in each generation",
    ),
    "nanotron-generation": ("info", "the nanotron generation a config is written for"),
    "nanotron-other-generation": (
        "info",
        "the installed nanotron is of another generation than the file and refuses its keys",
    ),
    "nanotron-sequence-length-missing": (
        "info",
        "nanotron needs tokens.sequence_length, which the batch does not give",
    ),
}
