"""The README's examples, and those of the guides under docs/, print what the code prints today.

A ```console block in README.md (or a docs/ page) is a transcript: each `$ ` line is a command,
run with bash in one temporary folder shared by the whole page (so a file `render` writes can
be inspected further down), and the lines under it, up to the next `$ ` line, are what it must print
(stdout and stderr together). A `...` line stands for any number of lines, and `...` inside a
line for any text (timings, paths). A fenced block right under `<!-- file: NAME -->` is
written to NAME in that folder before the transcripts run.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from paths import ROOT

README = ROOT / "README.md"
#: The pages whose transcripts are run: the README, then each page of docs/.
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\S*)\s*$")
FILE_MARK = re.compile(r"^<!--\s*file:\s*(\S+)\s*-->\s*$")


@dataclass(frozen=True)
class Example:
    """One command of a console block and what it must print."""

    command: str
    """The shell command after `$ `."""
    expected: list[str]
    """The lines it prints, `...` lines and `...` inside lines being wildcards."""
    line: int
    """Its line in its page."""
    page: str = "README.md"
    """The page it stands in, relative to the repository."""


def _blocks(text: str) -> list[tuple[str, int, list[str], str | None]]:
    """Every fenced block: language, first line number, its lines, the file it is written to."""
    blocks = []
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        mark = FILE_MARK.match(lines[index - 1]) if index else None
        end = index + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        blocks.append((opening.group(1), index + 2, lines[index + 1 : end], mark and mark.group(1)))
        index = end + 1
    return blocks


def _examples(lines: list[str], first: int, page: str) -> list[Example]:
    examples: list[Example] = []
    for offset, line in enumerate(lines):
        if line.startswith("$ "):
            examples.append(Example(line[2:], [], first + offset, page))
        elif examples:
            examples[-1].expected.append(line)
    return examples


def _matches(expected: list[str], printed: list[str]) -> bool:
    """Whether the printed lines fit the expected ones, with `...` wildcards."""
    if not expected:
        return not printed
    head, rest = expected[0], expected[1:]
    if head == "...":
        return any(_matches(rest, printed[skip:]) for skip in range(len(printed) + 1))
    if not printed:
        return False
    pattern = ".*".join(re.escape(piece) for piece in head.split("..."))
    return re.fullmatch(pattern, printed[0].rstrip()) is not None and _matches(rest, printed[1:])


def _page(path: Path) -> tuple[dict[str, str], list[Example]]:
    files: dict[str, str] = {}
    examples: list[Example] = []
    page = str(path.relative_to(ROOT))
    for language, first, lines, name in _blocks(path.read_text(encoding="utf-8")):
        if name:
            files[name] = "\n".join(lines) + "\n"
        elif language == "console":
            examples.extend(_examples(lines, first, page))
    return files, examples


PAGE_FILES: dict[str, dict[str, str]] = {}
EXAMPLES: list[Example] = []
for _path in PAGES:
    _files, _found = _page(_path)
    PAGE_FILES[str(_path.relative_to(ROOT))] = _files
    EXAMPLES += _found


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One folder per page, holding the files the page writes."""
    out = {}
    for page, files in PAGE_FILES.items():
        here = tmp_path_factory.mktemp(Path(page).stem)
        for name, text in files.items():
            (here / name).parent.mkdir(parents=True, exist_ok=True)
            (here / name).write_text(text, encoding="utf-8")
        out[page] = here
    return out


def test_the_readme_has_transcripts() -> None:
    readme = [e for e in EXAMPLES if e.page == "README.md"]
    assert len(readme) >= 5 and len(EXAMPLES) > len(readme)
    assert all(example.command.startswith("batchspec ") for example in EXAMPLES)


# A page's examples run in order in one folder (an update, then what it wrote): each page is
# one xdist group, so ``--dist loadgroup`` keeps it on one worker.
@pytest.mark.parametrize(
    "example",
    [pytest.param(e, marks=pytest.mark.xdist_group(f"page-{e.page}")) for e in EXAMPLES],
    ids=lambda example: f"{Path(example.page).stem}-line{example.line}",
)
def test_readme_example_prints_what_it_says(example: Example, folders: dict[str, Path]) -> None:
    folder = folders[example.page]
    bin_folder = str(Path(sys.executable).parent)
    command = shutil.which("batchspec", path=bin_folder)
    assert command, "batchspec is not installed beside this Python"
    environment = {
        **os.environ,
        "PATH": f"{bin_folder}{os.pathsep}{os.environ.get('PATH', '')}",
        "COLUMNS": "100",
        "NO_COLOR": "1",
    }
    done = subprocess.run(
        ["bash", "-c", example.command],
        cwd=folder,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=600,
    )
    printed = done.stdout.rstrip("\n").splitlines()
    assert _matches(example.expected, printed), (
        f"{example.page} line {example.line}: `{example.command}` printed:\n{done.stdout}"
    )


def test_the_matcher_refuses_a_wrong_transcript() -> None:
    assert _matches(["a", "...", "d"], ["a", "b", "c", "d"])
    assert _matches(["took ... s"], ["took 1.2 s"])
    assert not _matches(["a", "d"], ["a", "b", "d"])
    assert not _matches(["took ... s"], ["took 1.2 min"])
