"""``tune --write`` checks the files it will write before the first probe (issue 37): one it
would refuse at the end (a second hard link, a folder in its place) is refused first, with the
same error, and no probe runs, whether it is the tuned file or another file of its job."""

import os
from pathlib import Path

import pytest
from run_batchspec import run

pytestmark = pytest.mark.framework

#: A DeepSpeed config of global batch 8 on one rank (2 × 4).
DEEPSPEED = (
    '{\n  "train_batch_size": 8,\n  "train_micro_batch_size_per_gpu": 2,\n'
    '  "gradient_accumulation_steps": 4\n}\n'
)
#: An HF TrainingArguments YAML whose DeepSpeed JSON writes the same batch out.
ARGS = (
    "output_dir: o\nper_device_train_batch_size: 2\ngradient_accumulation_steps: 4\n"
    "deepspeed: ds.json\n"
)


def tune(*args):
    return run("tune", *args, "--nproc", 1, "--model", "tiny", "--workdir", "w", "--write")


@pytest.fixture
def here(tmp_path, monkeypatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def refused_before_any_probe(result, error: str) -> None:
    assert result.exit_code == 2, result.output
    assert result.stderr.strip() == f"batchspec: error: {error}"
    assert not Path("w").exists()


def test_the_tuned_file_with_a_second_hard_link(here):
    Path("ds.json").write_text(DEEPSPEED)
    os.link("ds.json", "ds-copy.json")
    refused_before_any_probe(
        tune("ds.json"),
        "ds.json: has 2 hard links; replacing it would split them, so it is left alone: write "
        "to a new file (-o/--out) instead",
    )
    assert Path("ds.json").read_text() == DEEPSPEED


def test_another_file_of_the_job_with_a_second_hard_link(here):
    """The DeepSpeed JSON the Trainer's YAML names: --write edits it with the YAML."""
    Path("args.yaml").write_text(ARGS)
    Path("ds.json").write_text(DEEPSPEED)
    os.link("ds.json", "ds-copy.json")
    refused_before_any_probe(
        tune("args.yaml"),
        "ds.json: has 2 hard links; replacing it would split them, so it is left alone: write "
        "to a new file (-o/--out) instead",
    )
