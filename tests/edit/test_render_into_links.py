"""``render --into FOLDER`` and ``convert --into FOLDER`` do not write through a symlink in the
folder that leads out of it (issue 37), as ``render --out`` does not: the user named the folder,
not wherever its links lead. A link that stays inside it, and ``--into`` one file, still write."""

from pathlib import Path

import pytest
from run_batchspec import run

SPEC = "global_batch_size: 256\nmicro_batch_size: 4\nnodes: 4\ngpus_per_node: 8\n"
AXOLOTL = (
    "base_model: meta-llama/Llama-3.1-8B\nmicro_batch_size: 2\ngradient_accumulation_steps: 4\n"
)
#: A job of global batch 256 (4 × 2 × 32), as published torchrun jobs write it.
JOB = (
    "torchrun --nnodes 4 --nproc_per_node 8 train.py --per_device_train_batch_size 4 "
    "--gradient_accumulation_steps 2 --output_dir out\n"
)


@pytest.fixture
def linked(tmp_path, monkeypatch) -> Path:
    """``configs/lora.yml``, a link to an Axolotl config outside ``configs``."""
    monkeypatch.chdir(tmp_path)
    Path("spec.yaml").write_text(SPEC)
    Path("elsewhere").mkdir()
    outside = Path("elsewhere/lora.yml")
    outside.write_text(AXOLOTL)
    Path("configs").mkdir()
    Path("configs/lora.yml").symlink_to(outside.resolve())
    return outside


@pytest.mark.parametrize("command", ["render", "convert"])
def test_into_a_folder_refuses_a_link_out_of_it(linked, command):
    source = "spec.yaml"
    if command == "convert":
        Path("train.sh").write_text(JOB)
        source = "train.sh"
    result = run(command, source, "--to", "axolotl", "--into", "configs")
    assert result.exit_code == 2, result.output
    error = result.stderr.strip()
    assert error.startswith("batchspec: error: configs/lora.yml: is a symlink to ")
    assert "outside" in error and "\n" not in error
    assert linked.read_text() == AXOLOTL


def test_a_link_inside_the_folder_is_written_through(linked):
    Path("configs/lora.yml").unlink()
    inside = Path("configs/own/lora.yml")
    inside.parent.mkdir()
    inside.write_text(AXOLOTL)
    Path("configs/lora.yml").symlink_to(inside.resolve())
    result = run("render", "spec.yaml", "--to", "axolotl", "--into", "configs")
    assert result.exit_code == 0, result.output
    assert "micro_batch_size: 4\n" in inside.read_text()


def test_into_one_file_named_as_a_link_is_written_through(linked):
    """The user named that file: its link is theirs to follow, as ``update`` follows one."""
    result = run("render", "spec.yaml", "--to", "axolotl", "--into", "configs/lora.yml")
    assert result.exit_code == 0, result.output
    assert "micro_batch_size: 4\n" in linked.read_text()
