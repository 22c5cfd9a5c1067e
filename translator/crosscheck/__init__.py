"""Feed configs to the frameworks' own code and report what the framework makes of them.

Each module imports its framework only inside its functions, so importing this package is
cheap. These are used by the tests (the proof that rendered configs are right) and by
commands that offer a framework's own verdict.
"""
