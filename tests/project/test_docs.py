"""The generated reference under docs/ is what the code says now: a command's option or a
finding code changed without ``python scripts/docs.py`` fails here."""

import runpy
import subprocess
import sys

from paths import ROOT

docs = runpy.run_path(str(ROOT / "scripts" / "docs.py"), run_name="docs")


def test_the_generated_reference_is_current():
    """In a process of its own: tests here register codes and plugins of their own."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "docs.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr


def test_the_reference_lists_every_command_and_every_code():
    from translator.cli import main
    from translator.frameworks import FRAMEWORKS
    from translator.words.findings import CATALOGUE

    commands = (ROOT / "docs" / "commands.md").read_text()
    codes = (ROOT / "docs" / "codes.md").read_text()
    assert all(f"## batchspec {name}\n" in commands for name in main.commands)
    every = set(CATALOGUE) | {code for name in FRAMEWORKS for code in FRAMEWORKS[name].codes}
    assert all(f"| `{code}` |" in codes for code in every)


def test_a_changed_option_makes_the_page_stale(monkeypatch):
    from translator.cli import main

    option = main.commands["plan"].params[0]
    monkeypatch.setattr(option, "help", "a help text nobody generated")
    assert "commands.md" in docs["stale"]()
