"""``update`` without ``--in-place`` prints the new file on stdout (to pipe or redirect) and
says on stderr what changed, one line per change, as ``--in-place`` does (it printed the file
alone, without a word about the change)."""

from run_batchspec import run

DEEPSPEED = '{"train_batch_size": 8, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 2}\n'


def test_the_new_file_goes_to_stdout_and_the_change_to_stderr(tmp_path):
    path = tmp_path / "ds.json"
    path.write_text(DEEPSPEED)
    result = run("update", path, "--from-world-size", 2, "--world-size", 4)
    assert result.exit_code == 0
    assert result.stdout == DEEPSPEED.replace(
        '"gradient_accumulation_steps": 2', '"gradient_accumulation_steps": 1'
    )
    assert result.stderr == f"{path}:1: gradient_accumulation_steps 2 → 1\n"
    assert path.read_text() == DEEPSPEED
