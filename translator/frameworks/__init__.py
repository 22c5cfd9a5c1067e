"""The frameworks: one package each under this folder (same file names for the same roles:
``rules.py``, ``program.py``, ``engine.py``, ``verdict.py``, ``codes.py``), each registered by
the entry point a plugin uses. The contract they meet and the registry that finds them live a
floor below, in :mod:`translator.plugin`; their names are here too, where a plugin written
for batchspec's first releases imports them.
"""

from translator.plugin.contract import Engine, Framework
from translator.plugin.registry import ALL, FRAMEWORKS, GROUP, by_claim_order, get, get_many, names

__all__ = [
    "ALL",
    "FRAMEWORKS",
    "GROUP",
    "Engine",
    "Framework",
    "by_claim_order",
    "get",
    "get_many",
    "names",
]
