"""batchspec as the tests run it: its command line, in-process."""

import json

from click.testing import CliRunner, Result

from translator.cli import main


def run(*args, stdin: str | None = None) -> Result:
    """``batchspec ARGS...`` (each argument as ``str``), with ``stdin`` as its standard input."""
    return CliRunner().invoke(main, [str(a) for a in args], input=stdin)


def run_json(*args) -> tuple[Result, dict]:
    """``batchspec ARGS... --json``: the result and the JSON it printed."""
    result = run(*args, "--json")
    return result, json.loads(result.stdout)
