"""A file the job copies before it runs (``cp config.yaml repo/recipes/custom.yaml``, then
``cd repo`` and the program reads ``recipes/custom.yaml``) is read from the copy's source
(issue 34: files written any way, then run)."""

from __future__ import annotations

import pytest
from run_batchspec import inspect

CONFIG = "per_device_train_batch_size: 2\ngradient_accumulation_steps: 4\noutput_dir: out\n"


@pytest.mark.parametrize(
    "copy",
    [
        "cp config.yaml repo/recipes/custom.yaml",
        "cp -f config.yaml repo/recipes/",  # into a folder: the same name there
        "mkdir -p repo/recipes && cp ./config.yaml repo/recipes/custom.yaml",
    ],
)
def test_a_copy_the_job_makes_is_read_from_its_source(tmp_path, copy):
    (tmp_path / "config.yaml").write_text(CONFIG)
    name = "custom.yaml" if copy.endswith("custom.yaml") else "config.yaml"
    job = tmp_path / "train.sh"
    job.write_text(
        "#!/bin/bash\ngit clone https://example.com/repo.git\n"
        f"{copy}\ncd repo\n"
        f"accelerate launch --num_processes 2 scripts/run_sft.py recipes/{name}\n"
    )
    code, out = inspect(job, exits=(0,))
    assert (out["micro_batch_size"], out["gradient_accumulation_steps"]) == (2, 4)
    assert out["global_batch_size"] == 16


def test_without_the_copy_the_file_is_not_found(tmp_path):
    (tmp_path / "config.yaml").write_text(CONFIG)
    job = tmp_path / "train.sh"
    job.write_text(
        "#!/bin/bash\ncd repo\naccelerate launch --num_processes 2 scripts/run_sft.py "
        "recipes/custom.yaml\n"
    )
    code, out = inspect(job, exits=(0,))
    assert out["micro_batch_size"] is None
    assert any(f["code"] == "job-file-not-found" for f in out["findings"])
