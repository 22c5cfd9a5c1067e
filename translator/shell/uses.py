"""Which words each literal of a script feeds, so that ``update`` does not change a literal that
also feeds something else (a variable behind two flags)."""

from __future__ import annotations

from translator.reading import Use
from translator.shell.values import Script

#: Commands whose words are printed, not run: editing a logged value harms nothing.
PRINTERS = ("echo", "printf")


def uses_of(script: Script) -> dict:
    """Every literal that feeds a word of a command (span -> its uses), ``echo`` and
    ``printf`` lines aside."""
    uses: dict = {}
    for command in script.commands:
        if command[0].text in PRINTERS:
            continue
        for i, word in enumerate(command):
            before = command[i - 1].text if i else None
            if word.text and word.text.startswith("--") and "=" in word.text:
                name = word.text.split("=", 1)[0]
            elif before and before.startswith("--"):
                name = before
            else:
                name = repr(word.text) if word.text is not None else "a word"
            for span in word.sources:
                uses.setdefault(span, []).append(Use(name, word.line))
    return uses
