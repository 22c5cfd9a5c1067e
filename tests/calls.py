"""A job's one launch command as a program reader is handed it, for the tests that ask a
framework's ``program`` about a command directly."""

from translator import shell
from translator.plugin.registry import launchers as known_launchers
from translator.reading import Call
from translator.shell import launchers


def only_call(command: str, tools) -> Call:
    """The :class:`Call` of a script ``job.sh`` holding ``command`` alone, split by the
    framework's ``tools``; it must name one of them."""
    text = f"#!/bin/bash\n{command}\n"
    script = shell.parse(text, "job.sh")
    split = launchers.call_of(script.commands[0], tools)
    assert split is not None, command
    sizes = launchers.sizes(split.launch, {}, known=known_launchers())
    return Call("job.sh", text, 2, split, sizes, {}, script, ())
