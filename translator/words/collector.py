"""Python's cyclic garbage collector kept off work that makes many objects that live on:
composing a large YAML text (a node or two for each scalar and collection: 170,000 for a 1 MB
manifest) and reading each job of a definition. Run every 700 new objects, the collector walks
what was made so far again and again, then walks it twice more as it ages it: on a manifest of
400 PyTorchJobs, half the time. Cycles made meanwhile wait for a later collection; they are
bounded as the input is (4 MiB)."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused() -> Iterator[None]:
    """Within it, the collector does not run (it runs again after, unless it was off before)."""
    running = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if running:
            gc.enable()


def settle() -> None:
    """Move every object the collector tracks to its oldest generation without walking any
    (``gc.freeze`` then ``gc.unfreeze``): for objects made in bulk that live on (a composed
    text's nodes, which its readers share), walked then only by the rare full collection.
    Young garbage made elsewhere is moved too, to be collected by that full collection."""
    gc.freeze()
    gc.unfreeze()
