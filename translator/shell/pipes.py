"""What a command substitution of text tools prints, when its input is text the script knows:
``$(echo "$SKYPILOT_NODE_IPS" | wc -l)`` counts the lines of a known value, ``| head -n1``
takes its first. Such a pipeline starts with ``echo``, or with a question to the node whose
answer is its GPU count, when that is known: ``nvidia-smi -L`` (a line per GPU of the node),
``nvidia-smi --query-gpu=... --format=csv,noheader`` (the same), ``python -c "import torch;
print(torch.cuda.device_count())"`` (the GPUs ``CUDA_VISIBLE_DEVICES`` leaves it). Each filter
is read as its coreutils manual (or POSIX awk) says; anything else leaves the output
unknown."""

from __future__ import annotations

import re
from collections.abc import Callable

#: ``head``/``tail``'s count: ``-n N``, ``-nN``, ``-N`` (``-n +N`` and ``-c`` are not read).
COUNT = re.compile(r"-n?(\d+)")
#: ``python -c`` code that prints the GPUs torch sees.
DEVICE_COUNT = re.compile(
    r"\s*import torch\s*[;\n]\s*print\(\s*torch\.cuda\.device_count\(\)\s*\)\s*;?\s*"
)
#: awk's one program read: print one field of each line.
AWK_FIELD = re.compile(r"\{\s*print\s+\$(\d+)\s*;?\s*\}")


def output(
    commands: list[list[str]], gpus: int | None = None, visible: int | None = None
) -> str | None:
    """What ``commands`` (a pipeline, each command's words known) print, trailing newlines
    removed as ``$(...)`` removes them; ``None`` when a command is not one read here.
    ``gpus``: the node's GPUs; ``visible``: those its processes see."""
    if not commands or not commands[0]:
        return None
    text = _first(commands[0], gpus, visible)
    for words in commands[1:]:
        step = FILTERS.get(words[0]) if words else None
        if step is None or text is None:
            return None
        text = step(words[1:], text)
    return None if text is None else text.rstrip("\n")


def _first(words: list[str], gpus: int | None, visible: int | None) -> str | None:
    """What the pipeline's first command prints."""
    name = words[0].rsplit("/", 1)[-1]
    if name == "echo":
        return _echo(words[1:])
    if name == "nvidia-smi" and gpus is not None:
        args = words[1:]
        listing = args in (["-L"], ["--list-gpus"])
        query = len(args) == 2 and args[0].startswith("--query-gpu=")
        if listing or (query and args[1] == "--format=csv,noheader"):
            return "".join(f"GPU {i}\n" for i in range(gpus))
    if name.startswith("python") and words[1:2] == ["-c"] and len(words) == 3:
        if visible is not None and DEVICE_COUNT.fullmatch(words[2]):
            return f"{visible}\n"
    return None


def _echo(args: list[str]) -> str | None:
    newline = "\n"
    while args and args[0] in ("-n", "-e", "-E"):
        if args[0] == "-n":
            newline = ""
        elif args[0] == "-e" and "\\" in " ".join(args[1:]):
            return None  # escapes are not followed
        args = args[1:]
    return " ".join(args) + newline


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def _wc(args: list[str], text: str) -> str | None:
    return f"{text.count(chr(10))}\n" if args == ["-l"] else None


def _count(args: list[str]) -> int | None:
    joined = "".join(args) if len(args) <= 2 else ""
    if not args:
        return 10
    m = COUNT.fullmatch(joined)
    return int(m.group(1)) if m else None


def _head(args: list[str], text: str) -> str | None:
    n = _count(args)
    return None if n is None else "".join(_lines(text)[:n])


def _tail(args: list[str], text: str) -> str | None:
    n = _count(args)
    return None if n is None else "".join(_lines(text)[-n:] if n else [])


def _cut(args: list[str], text: str) -> str | None:
    """``cut -d D -f N`` (one field; a line without the delimiter is printed whole, as
    coreutils does without ``-s``)."""
    options: dict[str, str] = {}
    rest = list(args)
    while rest:
        arg = rest.pop(0)
        if arg[:2] not in ("-d", "-f"):
            return None
        options[arg[:2]] = arg[2:] if len(arg) > 2 else (rest.pop(0) if rest else "")
    sep, field = options.get("-d", "\t"), options.get("-f", "")
    if len(sep) != 1 or not field.isdigit() or int(field) < 1:
        return None
    n = int(field)
    out = []
    for line in text.splitlines():
        parts = line.split(sep)
        out.append(line if len(parts) == 1 else (parts[n - 1] if n <= len(parts) else ""))
    return "".join(x + "\n" for x in out)


def _awk(args: list[str], text: str) -> str | None:
    m = AWK_FIELD.fullmatch(args[0].strip()) if len(args) == 1 else None
    if m is None:
        return None
    n = int(m.group(1))
    return "".join(
        ((line.split()[n - 1] if n <= len(line.split()) else "") if n else line) + "\n"
        for line in text.splitlines()
    )


FILTERS: dict[str, Callable[[list[str], str], str | None]] = {
    "wc": _wc,
    "head": _head,
    "tail": _tail,
    "cut": _cut,
    "awk": _awk,
    "cat": lambda args, text: text if not args else None,
}
