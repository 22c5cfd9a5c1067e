"""Which words each literal of a script feeds, so that ``update`` does not change a literal that
also feeds something else (a variable behind two flags)."""

from __future__ import annotations

import re

from translator.shell.following import shell_string
from translator.shell.notes import Use
from translator.shell.values import Script, Word

#: Commands whose words are printed, not run: editing a logged value harms nothing.
PRINTERS = ("echo", "printf")
#: A ``key=value`` override (OmegaConf, Hydra's ``+key=``/``++key=``, jsonargparse), by its key.
OVERRIDE = re.compile(r"\+{0,2}([A-Za-z_][\w.\-]*)=")


def uses_of(script: Script) -> dict:
    """Every literal that feeds a word of a command (span -> its uses), ``echo`` and
    ``printf`` lines aside. The string of ``bash -c STRING`` is no word of its own: it is
    read again as a command, whose words hold its literals' uses (``srun bash -c
    "$LAUNCHER --num_machines $N"`` uses ``$N`` for ``--num_machines``, not for the string)."""
    uses: dict = {}
    for command in script.commands:
        if command[0].text in PRINTERS:
            continue
        shell = shell_string(command)
        for i, word in enumerate(command):
            if shell is not None and word is shell[1]:
                continue
            before = command[i - 1].text if i else None
            head = word.text if word.text is not None else _literal_head(word)
            override = OVERRIDE.match(head) if i else None
            if head.startswith("--") and "=" in head:
                name = head.split("=", 1)[0]
            elif override:
                name = override.group(1)
            elif before and before.startswith("--"):
                name = before
            else:
                name = repr(word.text) if word.text is not None else "a word"
            for span in word.sources:
                uses.setdefault(span, []).append(Use(name, word.line))
    return uses


def _literal_head(word: Word) -> str:
    """The literal text a word starts with (``key=`` of ``key=$N``), or nothing."""
    first = word.parts[0] if word.parts else None
    return first.text if first is not None and first.text else ""
