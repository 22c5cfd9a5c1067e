"""The framework's own verdict on a config, beside batchspec's (``validate --with-framework``):
each framework's ``verdict(inspection, world)`` (see :mod:`translator.plugin.contract`),
asked only when the packages it ``requires`` are installed."""

from __future__ import annotations

import contextlib
import sys

from translator.inspection import Inspection
from translator.plugin.contract import NotEnoughKnown, missing
from translator.words.findings import Finding, finding


def framework_verdict(inspection: Inspection) -> Finding:
    """Run the framework's validator on the file, or say plainly why it was not run."""
    from translator.plugin.registry import get

    name = inspection.reading.framework
    where = inspection.reading.path
    framework = get(name)
    if framework.verdict is None:
        return finding(
            "framework-not-run", f"{name} has no validator of its own to run", where=where
        )
    absent = missing(framework.requires)
    if absent:
        return finding(
            "framework-not-installed",
            f"{name}'s own validator was not run: it needs {', '.join(absent)}, not installed here",
            hint=f"pip install 'batchspec[{framework.extra or name}]'",
            where=where,
        )
    world = inspection.values.get("world_size")
    if world is None:
        return finding(
            "framework-not-run",
            f"{name}'s validator needs the world size, which is unknown",
            hint="give --world-size",
            where=where,
        )
    try:
        # Frameworks print banners on stdout, which belongs to --json alone.
        with contextlib.redirect_stdout(sys.stderr):
            verdict = framework.verdict(inspection, world)
    except (NotEnoughKnown, ImportError) as exc:
        return finding("framework-not-run", f"{name}'s validator was not run: {exc}", where=where)
    except Exception as exc:  # the framework's refusal, in its own words
        text = " ".join(str(exc).split()) or type(exc).__name__
        return finding(
            "framework-refuses", f"{name} refuses it: {type(exc).__name__}: {text}", where=where
        )
    return finding("framework-accepts", f"{name} accepts it: {verdict}", where=where)
