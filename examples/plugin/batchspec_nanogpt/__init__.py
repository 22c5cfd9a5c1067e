"""nanoGPT as a batchspec framework: its ``config/*.py`` files, read without running them.

nanoGPT's ``train.py`` takes ``batch_size`` rows per process and micro-step, and
``gradient_accumulation_steps`` for the whole step: under DDP it asserts that the value divides
by the number of processes and divides it (``gradient_accumulation_steps //= ddp_world_size``).
So a step consumes ``gradient_accumulation_steps × batch_size`` samples at any world size, and
each process accumulates ``gradient_accumulation_steps / world`` micro-batches.
"""

from __future__ import annotations

import ast
from pathlib import Path

from translator.reading import Reading, Value
from translator.words.findings import Finding, register

NAME = "nanogpt"
TEMPLATE = str(Path(__file__).with_name("nanogpt_config.py.j2"))
FILENAME = "nanogpt_config.py"
EXTENSIONS = (".py",)
#: The keys of a nanoGPT config that shape the batch.
KEYS = ("batch_size", "gradient_accumulation_steps", "block_size")

register(
    "nanogpt-accumulation-not-divisible",
    "error",
    "nanoGPT asserts gradient_accumulation_steps % ddp_world_size == 0",
)
register(
    "nanogpt-accumulation-total",
    "info",
    "nanoGPT's gradient_accumulation_steps counts the micro-batches of all processes",
)


def claims(text: str) -> bool:
    return "gradient_accumulation_steps" in text and "block_size" in text


def holds_batch(text: str) -> bool:
    return any(key in text for key in KEYS[:2])


def context(spec) -> dict:
    return {"spec": spec, "total": spec.gradient_accumulation_steps * spec.data_parallel_size}


def read(text: str, where: str) -> Reading:
    """The top-level ``NAME = <int expression>`` assignments of KEYS, with the span of a plain
    literal (an expression such as ``5 * 8`` is read, but ``update`` will not edit it)."""
    from translator.words.errors import InputError

    try:
        tree = ast.parse(text, where)
    except SyntaxError as exc:
        raise InputError(f"{where}:{exc.lineno}: not valid Python: {exc.msg}") from None
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    reading = Reading(where, NAME, text)
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id in KEYS
        ):
            value = node.value
            span = None
            if isinstance(value, ast.Constant):
                span = (
                    starts[value.lineno - 1] + value.col_offset,
                    starts[value.end_lineno - 1] + value.end_col_offset,
                )
            reading.values[node.targets[0].id] = Value(_evaluate(value), node.lineno, span)
    return reading


def _evaluate(node):
    """An int from a literal or arithmetic of literals (``5 * 8``), else what the node is."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mult, ast.Add, ast.FloorDiv)):
        left, right = _evaluate(node.left), _evaluate(node.right)
        if (
            isinstance(left, int)
            and isinstance(right, int)
            and (not isinstance(node.op, ast.FloorDiv) or right)
        ):
            return {ast.Mult: left * right, ast.Add: left + right}.get(
                type(node.op), left // right if right else None
            )
    return ast.unparse(node)


def interpret(reading: Reading, launch) -> tuple[dict, list[Finding]]:
    findings: list[Finding] = []
    values: dict = {}
    micro, total = (reading.count(k) for k in KEYS[:2])
    if reading.count("block_size"):
        values["sequence_length"] = reading.count("block_size")
    if micro is None or total is None:
        return values, [
            Finding(
                "missing-batch-value",
                "error",
                "a nanoGPT config needs integer batch_size and gradient_accumulation_steps",
                reading.path,
            )
        ]
    values |= {"micro_batch_size": micro, "global_batch_size": micro * total}
    world = launch.world_size
    where = reading.where("gradient_accumulation_steps")
    if world is not None:
        if total % world:
            findings.append(
                Finding(
                    "nanogpt-accumulation-not-divisible",
                    "error",
                    f"gradient_accumulation_steps {total} does not divide by {world} DDP processes: "
                    "nanoGPT's train.py asserts it does",
                    where,
                    f"use a multiple of {world}, e.g. {(total // world + 1) * world}",
                )
            )
        else:
            values["gradient_accumulation_steps"] = total // world
    findings.append(
        Finding(
            "nanogpt-accumulation-total",
            "info",
            f"gradient_accumulation_steps {total} is the whole step's: nanoGPT divides it by the "
            "DDP processes, so the global batch is "
            f"{total} × batch_size {micro} = {total * micro} on any world size",
            where,
        )
    )
    return values, findings


def check(spec) -> list[Finding]:
    return []


def edits(reading: Reading, spec) -> dict:
    return {
        "batch_size": spec.micro_batch_size,
        "gradient_accumulation_steps": spec.gradient_accumulation_steps * spec.data_parallel_size,
    }
