"""What real bash makes of a script, to check the reader against (``printf '<%s>'``)."""

import shutil
import subprocess

HAS_BASH = shutil.which("bash") is not None


def bash_words(text: str) -> list:
    """The words of the script's last command (an ``echo``) as bash splits them."""
    at = text.rindex("echo ")
    script = text[:at] + "printf '<%s>' " + text[at + len("echo ") :]
    out = subprocess.run(
        ["bash", "-c", script],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": "/usr/bin:/bin"},
    ).stdout
    return ["echo"] + out[1:-1].split("><") if out else ["echo"]


def consistent(reader: list, bash: list) -> bool:
    """Whether the reader's words say nothing bash contradicts: each known word is bash's, in
    order; an unknown one (``None``) may stand for any number of bash's words."""
    if not reader:
        return not bash
    if reader[0] is None:
        return any(consistent(reader[1:], bash[i:]) for i in range(len(bash) + 1))
    return bool(bash) and reader[0] == bash[0] and consistent(reader[1:], bash[1:])
