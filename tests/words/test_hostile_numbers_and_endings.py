"""Issue 28, item 9: input found by an adversarial run. A number too long for Python to
convert is one exit-2 line naming the file and line, in every format a job may hold; a key that
``update`` adds after a last line with no newline starts a line of its own."""

import pytest
import yaml
from run_batchspec import run

DIGITS = "9" * 5001


@pytest.mark.parametrize(
    "name, text, line",
    [
        (
            "train.sh",
            f"#!/bin/bash\ntorchrun --nproc_per_node 8 pretrain_gpt.py "
            f"--micro-batch-size {DIGITS} --global-batch-size 64\n",
            2,
        ),
        (
            "deep.sh",
            f"#!/bin/bash\nMBS={DIGITS}\ndeepspeed train.py --per_device_train_batch_size $MBS\n",
            2,
        ),
        ("job.toml", f"[training]\nlocal_batch_size = {DIGITS}\n", 2),
        ("ds.json", f'{{"train_micro_batch_size_per_gpu": {DIGITS}}}\n', 1),
        ("axolotl.yml", f"base_model: x\nmicro_batch_size: {DIGITS}\n", 2),
    ],
)
@pytest.mark.parametrize("command", ["inspect", "validate"])
def test_a_number_of_5001_digits_is_one_line_exit_2(tmp_path, name, text, line, command):
    path = tmp_path / name
    path.write_text(text)
    result = run(command, path)
    assert result.exit_code == 2, result.output
    error = result.output.strip()
    assert len(error.splitlines()) == 1 and "internal error" not in error, error
    assert f"{path}:{line}: " in error and "5001" in error, error


@pytest.mark.parametrize("ending", ["\n", "\r\n"])
def test_update_adds_a_key_after_a_last_line_without_its_newline(tmp_path, ending):
    config = tmp_path / "axolotl.yml"
    config.write_bytes(f"base_model: x{ending}micro_batch_size: 2".encode())
    out = tmp_path / "out.yml"
    result = run(
        "update", config, "--world-size", 4, "--from-world-size", 2, "--global-batch", 32,
        "-o", out,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    written = out.read_bytes().decode()
    assert written == (
        f"base_model: x{ending}micro_batch_size: 2{ending}gradient_accumulation_steps: 4{ending}"
    )
    assert yaml.safe_load(written)["gradient_accumulation_steps"] == 4


@pytest.mark.parametrize(
    "text",
    [
        "a: " + "[" * 100_000 + "]" * 100_000,
        "".join(f"{' ' * i}a:\n" for i in range(300)) + "  b\n",
    ],
)
def test_a_document_too_deep_for_libyaml_is_refused_not_a_crash(text):
    """libyaml's composer recurses on the C stack: such a text goes to PyYAML's, which stops."""
    from translator.words.errors import InputError
    from translator.words.parsing import load_yaml

    with pytest.raises(InputError, match="x.yml"):
        load_yaml(text, "x.yml")


@pytest.mark.parametrize(
    "given, said",
    [(["--", DIGITS], "its argument $1"), (["--env", f"MBS={DIGITS}"], "--env MBS")],
)
def test_a_number_of_5001_digits_given_to_a_script_is_one_line_exit_2(tmp_path, given, said):
    """Given after -- or with --env, not written in the file (before: internal error)."""
    path = tmp_path / "train.sh"
    path.write_text(
        "#!/bin/bash\nMBS=${MBS:-$1}\ntorchrun --nproc_per_node 8 train.py "
        "--per_device_train_batch_size $MBS --output_dir o\n"
    )
    result = run("inspect", path, *given)
    assert result.exit_code == 2, result.output
    assert (
        result.output.strip()
        == f"batchspec: error: {path}: {said}: a number of 5001 digits; refused"
    )
