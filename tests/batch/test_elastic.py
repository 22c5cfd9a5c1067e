"""``plan --world-sizes``: which world sizes keep the global batch, checked against brute force."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from translator.batch import elastic
from translator.cli import main
from translator.words.errors import InputError


def _brute(g: int, world: int, model: int, micro: int | None, accumulation: int | None):
    """Every (micro, accumulation) by trying every pair: the definition itself."""
    if world % model:
        return None
    dp = world // model
    pairs = [(m, g // (m * dp)) for m in range(g, 0, -1) if g % (m * dp) == 0]
    return [
        (m, a)
        for m, a in pairs
        if (micro is None or m == micro) and (accumulation is None or a == accumulation)
    ]


@settings(max_examples=150, deadline=None)
@given(
    g=st.integers(1, 300),
    world=st.integers(1, 64),
    model=st.sampled_from([1, 2, 3, 4, 8]),
    micro=st.none() | st.integers(1, 16),
    accumulation=st.none() | st.integers(1, 16),
)
def test_the_table_is_what_brute_force_finds(g, world, model, micro, accumulation) -> None:
    fit = elastic.fit(g, world, model, micro, accumulation)
    expected = _brute(g, world, model, micro, accumulation)
    if expected is None:
        assert fit.data_parallel_size is None and not fit.fits and not fit.nearest
        return
    assert list(fit.splits) == expected
    assert fit.fits == bool(expected)
    # A nearest global batch is one that does split, and none between it and g does.
    for near in fit.nearest:
        assert _brute(near, world, model, micro, accumulation)
        low, high = sorted((near, g))
        assert not any(_brute(x, world, model, micro, accumulation) for x in range(low + 1, high))
    if not fit.fits:
        assert fit.nearest
        if micro is None or accumulation is None:  # a larger one always splits
            assert any(n > g for n in fit.nearest)


@pytest.mark.parametrize(
    ("text", "per_node", "expected"),
    [
        ("8-12", None, [8, 9, 10, 11, 12]),
        ("8,16,8", None, [8, 16]),
        ("4-6,32", None, [4, 5, 6, 32]),
        ("8-128", 8, list(range(8, 129, 8))),
        ("5-30", 8, [8, 16, 24]),
        ("16,32", 8, [16, 32]),
    ],
)
def test_world_sizes_are_read_as_written(text, per_node, expected) -> None:
    assert elastic.parse_world_sizes(text, per_node) == expected


@pytest.mark.parametrize(
    ("text", "per_node", "says"),
    [
        ("eight", None, "'eight' is not a world size"),
        ("16-8", None, "not a range"),
        ("0-4", None, "not a range"),
        ("1-10000000", None, "at most"),
        ("12", 8, "12 is not a whole number of nodes of 8"),
        ("1-7", 8, "holds no whole node of 8"),
    ],
)
def test_bad_world_sizes_are_refused(text, per_node, says) -> None:
    with pytest.raises(InputError, match=says):
        elastic.parse_world_sizes(text, per_node)


def _plan(*args: str):
    return CliRunner().invoke(main, ["plan", *args])


def test_the_text_table_lists_each_world_with_its_split_or_nearest_batches() -> None:
    done = _plan(
        "--global-batch", "512", "--micro-batch", "4", "--tp", "2",
        "--world-sizes", "8-32", "--gpus-per-node", "8",
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    lines = done.output.splitlines()
    assert lines[0] == (
        "global batch 512, micro-batch 4, model-parallel 2: splits exactly on 3 of 4 world sizes"
    )
    assert "      8      1   4  4 × 32" in lines
    assert any(
        line.split()[:3] == ["24", "3", "12"] and "nearest global 480" in line and "528" in line
        for line in lines
    )


def test_the_json_gives_every_world_and_the_learning_rate_of_each_nearest_batch() -> None:
    done = _plan(
        "--global-batch", "500", "--micro-batch", "4", "--world-sizes", "8,10",
        "--lr", "3e-4", "--lr-batch", "500", "--json",
    )  # fmt: skip
    assert done.exit_code == 0, done.output
    out = json.loads(done.output)
    eight, ten = out["world_sizes"]
    assert not eight["fits"] and [n["global_batch_size"] for n in eight["nearest"]] == [480, 512]
    # Adam's square-root rule from the batch the rate was tuned at.
    assert eight["nearest"][0]["learning_rate"] == pytest.approx(3e-4 * (480 / 500) ** 0.5)
    assert ten["fits"] is False and ten["nearest"][0]["global_batch_size"] == 480
    assert (
        _plan("--global-batch", "480", "--micro-batch", "4", "--world-sizes", "10").exit_code == 0
    )


def test_a_spec_file_keeps_its_batch_and_its_world_is_replaced(tmp_path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text("global_batch_size: 256\nmicro_batch_size: 2\nworld_size: 16\n")
    done = _plan(str(spec), "--world-sizes", "16,24,32", "--json")
    assert done.exit_code == 0, done.output
    out = json.loads(done.output)
    assert out["replaced"] == ["world_size"]
    assert [w["fits"] for w in out["world_sizes"]] == [True, False, True]
    assert out["world_sizes"][0]["splits"] == [
        {"micro_batch_size": 2, "gradient_accumulation_steps": 8}
    ]


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--world-sizes", "8-16"], "needs the global batch"),
        (["--global-batch", "64", "--world-size", "8", "--world-sizes", "8-16"], "replaces"),
        (["--global-batch", "64", "--world-sizes", "x"], "'x' is not a world size"),
        (["--global-batch", "64", "--max-micro", "2"], "--max-micro is for --world-sizes"),
    ],
)
def test_bad_requests_are_one_line_exit_2(args, says) -> None:
    done = _plan(*args)
    assert done.exit_code == 2
    assert says in done.output and len(done.output.strip().splitlines()) == 1


def test_a_bad_value_in_the_spec_file_names_its_line(tmp_path) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text("global_batch_size: 256\nmicro_batch_size: two\n")
    done = _plan(str(spec), "--world-sizes", "8")
    assert done.exit_code == 2
    assert f"{spec}:2: micro_batch_size" in done.output


def test_an_update_that_cannot_keep_the_batch_names_the_command_that_lists_the_worlds(
    tmp_path,
) -> None:
    ds = tmp_path / "ds.json"
    ds.write_text(
        '{"train_batch_size": 128, "train_micro_batch_size_per_gpu": 1, '
        '"gradient_accumulation_steps": 16}\n'
    )
    done = CliRunner().invoke(
        main, ["update", str(ds), "--from-world-size", "8", "--world-size", "24"]
    )
    assert done.exit_code == 1
    named = done.output.split("`")[1]
    assert named == "batchspec plan --global-batch 128 --micro-batch 1 --world-sizes 1-48"
    listed = _plan(*named.split()[2:], "--json")
    assert listed.exit_code == 0, listed.output
    fitting = [w["world_size"] for w in json.loads(listed.output)["world_sizes"] if w["fits"]]
    assert 24 not in fitting and {16, 32} <= set(fitting)
