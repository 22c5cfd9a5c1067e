"""What runs inside a launched process: the run context, the harness that counts samples per
optimizer step (the counting rule), the stand-in model, the rank's result, the parity rank's
record, the plain torch engine, and the worker program each rank starts with. The engines'
lookup (:mod:`translator.rank.engines`) finds a framework's engine module through the registry.

Nothing here starts processes (that is :mod:`translator.launch`, the floor above the
frameworks); the framework engines import from here.
"""
