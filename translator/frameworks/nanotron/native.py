"""nanotron's own config code, imported past the import cycle of its 0.4 release.

In nanotron 0.4 every first import fails (huggingface/nanotron#191, #235): ``nanotron.config``
needs the pipeline engine, the engine needs ``nanotron.logging.log_rank``, and
``nanotron.logging`` imports ``LoggingArgs`` from ``nanotron.config.config`` before it defines
``log_rank``. ``LoggingArgs`` is only an annotation there, so :func:`config` lets
``nanotron.logging`` load first against a stand-in ``nanotron.config.config``, removes the
stand-in, then imports the real ``nanotron.config`` (which now finds ``log_rank``) and gives
``nanotron.logging`` the real ``LoggingArgs``. Nothing of nanotron is changed on disk.
"""

from __future__ import annotations

import sys
import types
from functools import cache

#: The modules the stand-in occupies while ``nanotron.logging`` loads.
_STANDING_IN = ("nanotron.config", "nanotron.config.config")


@cache
def config() -> types.ModuleType:
    """``nanotron.config``: ``Config``, ``ParallelismArgs``, ``TokensArgs``,
    ``get_config_from_dict``... An ``ImportError`` when nanotron is not installed."""
    if "nanotron.logging" not in sys.modules:
        import nanotron.distributed  # noqa: F401  (before nanotron.utils, its own cycle)

        stand_in = types.ModuleType("nanotron.config.config")
        stand_in.LoggingArgs = object  # type: ignore[attr-defined]
        sys.modules.update(dict(zip(_STANDING_IN, (types.ModuleType(_STANDING_IN[0]), stand_in))))
        try:
            import nanotron.logging
        finally:
            for name in _STANDING_IN:
                sys.modules.pop(name, None)
    import nanotron.config
    import nanotron.logging

    nanotron.logging.LoggingArgs = nanotron.config.LoggingArgs
    return nanotron.config
