"""A program named under the folder the job runs in (``$(pwd)/train.py``) or under the
script's own (``$(dirname "$0")/train.py``) is the one found there (issue 34: read the job as
its shell runs it); under sbatch the script's folder is Slurm's copy's, not known."""

from __future__ import annotations

import pytest
from run_batchspec import inspect

PROGRAM = (
    "from transformers import TrainingArguments\n"
    'TrainingArguments(output_dir="o", per_device_train_batch_size=2)\n'
)


@pytest.mark.parametrize(
    "folder",
    [
        'D=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)\n',
        'D=$(dirname "$0")\n',
        "D=$(realpath $(dirname $0))\n",
    ],
)
def test_a_program_in_the_scripts_own_folder(tmp_path, folder, monkeypatch):
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "train.py").write_text(PROGRAM)
    job = tmp_path / "jobs" / "run.sh"
    job.write_text(f"#!/bin/bash\n{folder}torchrun --nproc_per_node 4 $D/train.py\n")
    monkeypatch.chdir(tmp_path)
    code, out = inspect("jobs/run.sh", exits=(0,))
    assert out["global_batch_size"] == 2 * 4


def test_a_program_under_the_folder_the_job_runs_in(tmp_path, monkeypatch):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "train.py").write_text(PROGRAM)
    job = tmp_path / "run.sh"
    job.write_text("#!/bin/bash\ntorchrun --nproc_per_node 2 $(pwd)/src/train.py\n")
    monkeypatch.chdir(tmp_path)
    code, out = inspect("run.sh", exits=(0,))
    assert out["global_batch_size"] == 2 * 2


@pytest.mark.parametrize(
    "lines, program, exits, global_batch",
    [
        # sbatch runs a copy of the script in its spool folder: its folder is not known
        ('D=$(dirname "$0")\n', "$D/train.py", 2, None),
        ("cd $SLURM_SUBMIT_DIR\n", "${SLURM_SUBMIT_DIR}/train.py", 0, 8),  # where sbatch ran
    ],
)
def test_under_sbatch(tmp_path, monkeypatch, lines, program, exits, global_batch):
    (tmp_path / "train.py").write_text(PROGRAM)
    job = tmp_path / "job.slurm"
    job.write_text(
        f"#!/bin/bash\n#SBATCH --nodes=1\n{lines}srun torchrun --nproc_per_node 4 {program}\n"
    )
    monkeypatch.chdir(tmp_path)
    code, out = inspect("job.slurm", exits=(exits,))
    assert out["world_size"] == 4 and out["global_batch_size"] == global_batch


def test_cd_to_the_scripts_folder_moves_there(tmp_path, monkeypatch):
    (tmp_path / "jobs" / "conf").mkdir(parents=True)
    (tmp_path / "jobs" / "conf" / "args.yaml").write_text(
        "per_device_train_batch_size: 3\ngradient_accumulation_steps: 1\noutput_dir: o\n"
    )
    job = tmp_path / "jobs" / "run.sh"
    job.write_text(
        '#!/bin/bash\ncd "$(dirname "$0")"\ntorchrun --nproc_per_node 2 train.py conf/args.yaml\n'
    )
    monkeypatch.chdir(tmp_path)
    code, out = inspect("jobs/run.sh", exits=(0,))
    assert out["global_batch_size"] == 3 * 2
    assert not any("a folder not known" in f["message"] for f in out["findings"])
