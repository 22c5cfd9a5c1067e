"""``check_writable`` (what ``tune --write`` and ``tune --out`` ask before the first probe)
refuses a target whose folder cannot take the new file, as the write at the end would: a
read-only folder was found only after every probe had run."""

import os

import pytest

from translator.words import files
from translator.words.errors import InputError


def test_a_read_only_folder_is_refused_before_anything_runs(tmp_path, monkeypatch):
    target = tmp_path / "job.sh"
    target.write_text("#!/bin/bash\n")
    real = os.access
    monkeypatch.setattr(
        os, "access", lambda p, mode: False if str(p) == str(tmp_path) else real(p, mode)
    )  # as root, which this machine runs as, every folder is writable
    with pytest.raises(InputError, match=f"its folder {tmp_path} is not writable"):
        files.check_writable([target], force=True)


def test_a_folder_still_to_be_made_is_judged_by_the_one_it_is_made_in(tmp_path):
    files.check_writable([tmp_path / "new" / "deeper" / "out.png"], force=False)


def test_a_writable_folder_passes(tmp_path):
    target = tmp_path / "job.sh"
    target.write_text("#!/bin/bash\n")
    files.check_writable([target], force=True)
