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
