"""``update --in-place`` of a job that spans three files is all-or-none even when the process is
killed between two renames: SIGKILL at each rename leaves a journal the next run rolls forward or
back (every file old, or every file new, and that run completes); SIGTERM and SIGINT at each
rename wait for the last one. Another program's change to a file after batchspec read it is
refused, not overwritten."""

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import test_update_whole_job as whole_job
from run_batchspec import run
from test_update_whole_job import ACCELERATE, DEEPSPEED, JOB, texts

from translator.words import files
from translator.words.journal import JOURNAL

#: The accelerate job of three files in two folders, as the whole-job tests write it.
three_files = whole_job.job
#: The job moved from 2 nodes of 8 to 4: every file changes.
NEW = {
    "job": JOB.replace("accumulation_steps 2", "accumulation_steps 1"),
    "accelerate": ACCELERATE.replace("machines: 2", "machines: 4").replace(
        "processes: 16", "processes: 32"
    ),
    "deepspeed": DEEPSPEED.replace(
        '"gradient_accumulation_steps": 2', '"gradient_accumulation_steps": 1'
    ),
}
OLD = {"job": JOB, "accelerate": ACCELERATE, "deepspeed": DEEPSPEED}
#: ``batchspec update`` in a process that sends itself ``SIGNAL`` at its ``AT``-th rename.
DRIVER = """
import os, signal, sys
real, calls = os.replace, []
def replace(*args, **kwargs):
    calls.append(args)
    if len(calls) == int(sys.argv[1]):
        os.kill(os.getpid(), int(sys.argv[2]))
    return real(*args, **kwargs)
os.replace = replace
from translator.cli import main
main(["update", "train.sh", "--world-size", "32", "--in-place"])
"""


def update_with(signum: int, at: int) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", DRIVER, str(at), str(int(signum))],
        capture_output=True,
        text=True,
        timeout=120,
    )


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.rglob(".*") if p.is_file())


@pytest.mark.parametrize("at", [1, 2, 3])
def test_a_kill_at_any_rename_is_rolled_forward_or_back_by_the_next_run(three_files, at):
    killed = update_with(signal.SIGKILL, at)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert (Path(JOURNAL)).exists()  # what the kill left
    assert run("inspect", "train.sh").exit_code == 0
    assert texts(three_files) in (OLD, NEW)
    assert leftovers(Path(".")) == []
    again = run("update", "train.sh", "--world-size", "32", "--in-place")
    assert again.exit_code == 0, again.output
    assert texts(three_files) == NEW


def test_a_kill_is_rolled_forward_when_every_new_file_is_there(three_files):
    """Killed at its second rename, every new file was written and fsynced: the next run
    finishes the write."""
    update_with(signal.SIGKILL, 2)
    assert texts(three_files) not in (OLD, NEW)  # mixed, until the next run
    run("validate", "train.sh")
    assert texts(three_files) == NEW


def test_a_kill_is_rolled_back_when_a_new_file_is_lost(three_files):
    """A temporary file gone (cleaned by hand) cannot be moved: the old files come back."""
    update_with(signal.SIGKILL, 2)
    for tmp in Path(".").rglob(".*.tmp"):
        tmp.unlink()
    run("validate", "train.sh")
    assert texts(three_files) == OLD


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
@pytest.mark.parametrize("at", [1, 2, 3])
def test_sigterm_and_sigint_wait_for_the_last_rename(three_files, signum, at):
    stopped = update_with(signum, at)
    assert stopped.returncode != 0
    assert texts(three_files) == NEW
    assert leftovers(Path(".")) == []


def test_a_write_by_a_kill_leaves_no_second_link_that_blocks_the_next_update(three_files):
    """The kept-aside hard link of a replaced file is removed by the recovery, so the original
    has one link again and the next update does not refuse it."""
    update_with(signal.SIGKILL, 3)
    assert any(os.stat(p).st_nlink == 2 for p in three_files.values())  # kept aside when killed
    again = run("update", "train.sh", "--world-size", "16", "--in-place")
    assert again.exit_code == 0, again.output
    assert texts(three_files) == OLD
    assert all(os.stat(p).st_nlink == 1 for p in three_files.values())


def test_a_file_changed_after_it_was_read_is_not_overwritten(three_files, monkeypatch):
    """Another program edits the DeepSpeed JSON between batchspec's read and its write: the
    update is refused and nothing is written."""
    real = files._write_temporary

    def edited_meanwhile(plan):
        if plan.target.name == "ds_zero2.json":
            three_files["deepspeed"].write_text(DEEPSPEED.replace('"stage": 2', '"stage": 3'))
        return real(plan)

    monkeypatch.setattr(files, "_write_temporary", edited_meanwhile)
    result = run("update", "train.sh", "--world-size", "32", "--in-place")
    assert result.exit_code == 2
    assert "ds_zero2.json: changed since batchspec read it" in result.stderr
    assert texts(three_files) == OLD | {"deepspeed": DEEPSPEED.replace('"stage": 2', '"stage": 3')}
    assert leftovers(Path(".")) == []


def test_a_replace_refused_half_way_puts_every_file_back(three_files, monkeypatch):
    """EPERM on the second replace (an immutable file): one line, and every file as it was."""
    real, calls = os.replace, []

    def immutable(src, dst, *args, **kwargs):
        calls.append(dst)
        if len(calls) == 2:
            raise PermissionError(1, "Operation not permitted")
        return real(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", immutable)
    result = run("update", "train.sh", "--world-size", "32", "--in-place")
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and "Operation not permitted" in result.stderr
    assert texts(three_files) == OLD
    assert leftovers(Path(".")) == []


def test_a_journal_a_live_run_holds_is_left_alone(three_files, tmp_path):
    """A second batchspec writing in a folder whose journal another holds is refused."""
    import fcntl

    held = Path(JOURNAL)
    held.write_text("{}")
    with open(held) as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        result = run("update", "train.sh", "--world-size", "32", "--in-place")
    assert result.exit_code == 2
    assert "another batchspec run is writing files here" in result.stderr
    assert texts(three_files) == OLD
