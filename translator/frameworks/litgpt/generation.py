"""Which litgpt is installed, and what changed between its releases for the batch.

- Up to 0.3.x the optimizer's settings were train keys (``train.learning_rate``,
  ``train.weight_decay``, ``train.beta1``, ``train.beta2``); 0.4.0 (PR #1409) moved them to an
  ``optimizer:`` block, and its command line (jsonargparse) refuses the old keys.
- ``num_nodes`` is a setting from 0.5.0.
- Up to 0.5.7 ``TrainArgs.batch_size(devices)`` divided ``global_batch_size`` by the devices of
  one node, so the global batch was per node; 0.5.8 (PR #1947) divides by ``devices ×
  num_nodes``, so the same YAML trains ``num_nodes`` times fewer samples per step.

The version is read from the package's metadata (nothing is imported).
"""

from __future__ import annotations

from importlib import metadata

#: The first release whose global batch counts every node.
GLOBAL_OVER_NODES = (0, 5, 8)
#: The first release with the ``optimizer:`` block (and without the train optimizer keys).
OPTIMIZER_BLOCK = (0, 4, 0)


def installed() -> tuple[int, ...] | None:
    """The installed litgpt's version as numbers (``(0, 5, 13)``), ``None`` when it is not
    installed here."""
    try:
        text = metadata.version("litgpt")
    except metadata.PackageNotFoundError:
        return None
    return parse(text)


def parse(text: str) -> tuple[int, ...]:
    """``"0.5.13"`` -> ``(0, 5, 13)``; a pre-release tail (``0.4.0.dev0``) is dropped."""
    numbers = []
    for part in text.split("."):
        digits = "".join(c for c in part if c.isdigit()) if part[:1].isdigit() else ""
        if not digits:
            break
        numbers.append(int(digits))
    return tuple(numbers)


def shown(version: tuple[int, ...]) -> str:
    return ".".join(map(str, version))


def per_node(version: tuple[int, ...] | None) -> bool:
    """Whether ``version`` takes the global batch per node; ``None`` (not installed here) is
    read as the current releases (batchspec's ``native`` extra installs one)."""
    return version is not None and version < GLOBAL_OVER_NODES
