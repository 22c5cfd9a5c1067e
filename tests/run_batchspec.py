"""batchspec as the tests run it: its command line in-process (``run``, ``run_json``, ``inspect``
and its forms; ``batch`` and ``model_of`` of what it read), a framework's reader on a text
(``read_and_inspect``), and the codes of the findings either gives (``codes``, ``code_list``)."""

import json
from pathlib import Path

from click.testing import CliRunner, Result

from translator.cli import main
from translator.inspection import inspect_reading
from translator.plugin.contract import Framework
from translator.plugin.inspection import Inspection
from translator.reading import Launch


def run(*args, stdin: str | None = None) -> Result:
    """``batchspec ARGS...`` (each argument as ``str``), with ``stdin`` as its standard input."""
    return CliRunner().invoke(main, [str(a) for a in args], input=stdin)


def run_json(*args) -> tuple[Result, dict]:
    """``batchspec ARGS... --json``: the result and the JSON it printed."""
    result = run(*args, "--json")
    return result, json.loads(result.stdout)


def inspect(path, *args, exits: tuple[int, ...] = (0, 1)) -> tuple[int, dict]:
    """``batchspec inspect PATH --json ARGS...``: its exit status, which must be one of
    ``exits`` (by default an inspection that ran: 0, or 1 for an error it found), and its JSON."""
    result = run("inspect", path, "--json", *args)
    assert result.exit_code in exits, result.output
    return result.exit_code, json.loads(result.stdout)


def inspected(path, *args, exits: tuple[int, ...] = (0, 1)) -> dict:
    """The JSON of :func:`inspect`."""
    return inspect(path, *args, exits=exits)[1]


def model_of(path, *args) -> dict | None:
    """The model :func:`inspect` names for ``path``: its JSON's ``model``."""
    return inspected(path, *args)["model"]


def inspect_job(
    script: str, *args, name: str | Path = "job.sh", shebang: bool = True
) -> tuple[int, dict]:
    """:func:`inspect` of the job ``name`` in the current folder, written to hold ``script``
    (after a ``#!/bin/bash`` line unless ``shebang`` is false: a script that has its own)."""
    path = Path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/bash\n" * shebang + script)
    return inspect(name, *args)


def batch(out: dict) -> tuple:
    """(world, micro-batch, accumulation, global batch) of an ``inspect --json`` output."""
    keys = ("world_size", "micro_batch_size", "gradient_accumulation_steps", "global_batch_size")
    return tuple(out[k] for k in keys)


def read_and_inspect(
    framework: Framework, text: str, world: int | None = None, name: str = "cfg.yaml", **sizes
) -> Inspection:
    """``text``, a file ``name`` of ``framework``, read by its reader and inspected at ``world``
    and the parallel ``sizes`` a launch gives."""
    return inspect_reading(framework, framework.read(text, name), Launch(world, **sizes))


def codes(found) -> dict:
    """Each finding by its code (the last of a code): of an ``--json`` output or an
    :class:`Inspection`."""
    if isinstance(found, dict):
        return {f["code"]: f for f in found["findings"]}
    return {f.code: f for f in found.findings}


def code_list(findings) -> list[str]:
    """The codes of ``findings``, in order, a repeated one repeated."""
    return [f.code for f in findings]
