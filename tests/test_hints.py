"""Every fix batchspec offers can be followed as written: each value it names solves, and what
it says cannot change really cannot (issue 18, item 6)."""

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from translator.cli import main
from translator.errors import ConfigError
from translator.spec import BatchSpec

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def run_json(*args):
    result = run(*args, "--json")
    return result, json.loads(result.stdout)


#: How a hint names each spec field it offers a value for.
OFFERED = {
    "global": "global_batch_size",
    "micro-batch": "micro_batch_size",
    "accumulation": "gradient_accumulation_steps",
    "world size": "world_size",
    "a world size of": "world_size",
    "data-parallel size": "data_parallel_size",
    "tensor-parallel size": "tensor_parallel_size",
    "pipeline-parallel size": "pipeline_parallel_size",
    "context-parallel size": "context_parallel_size",
}


_OFFER = re.compile(
    r"(?:^use |, or )(" + "|".join(sorted(map(re.escape, OFFERED), key=len, reverse=True)) + r")"
    r" (\d+(?: or \d+)*)"
)


def offers(hint: str) -> list[tuple[str, int]]:
    """``(field, value)`` for every value the hint's "use ..." part offers (the clauses after
    a ";" say what cannot change and offer nothing)."""
    part = hint.split(";")[0]
    out = [
        (OFFERED[name], int(v))
        for name, values in _OFFER.findall(part)
        for v in values.split(" or ")
    ]
    assert out, f"no value offered in {hint!r}"
    return out


def refused(**values) -> ConfigError:
    with pytest.raises(ConfigError) as err:
        BatchSpec(**values)
    return err.value


def test_global_that_splits_on_no_micro_names_the_world_not_the_accumulation():
    result = run("plan", "--global-batch", 100, "--micro-batch", 4, "--world-size", 8)
    assert result.exit_code == 1
    assert "change the accumulation" not in result.stderr
    fix = "(fix: use global 96 or 128, or world size 5 or 25; no micro-batch gives global 100 "
    assert fix in result.stderr


def check_every_offer_solves(given_values: dict) -> None:
    """The spec ``given_values`` is refused; each value its hint offers, put in alone, solves;
    each factor the hint says cannot help has no value that would. (A world that does not
    divide by the parallel sizes, beside a global that no world splits, needs two changes: an
    offered world then leaves only the global's own error.)"""
    err = refused(**given_values)
    (f,) = err.findings
    per_rank = given_values.get("micro_batch_size", 1)
    two_changes = f.code == "world-not-divisible" and given_values["global_batch_size"] % per_rank
    for field, value in offers(f.hint):
        changed = given_values | {field: value}
        if two_changes:
            with pytest.raises(ConfigError) as then:
                BatchSpec(**changed)
            assert then.value.findings[0].code == "global-not-divisible"
        else:
            BatchSpec(**changed)  # raises if the offer does not solve
    for name, field in (
        ("micro-batch", "micro_batch_size"),
        ("accumulation", "gradient_accumulation_steps"),
    ):
        if f"no {name} gives" in f.hint:
            g = given_values["global_batch_size"]
            for v in range(1, g + 1):
                with pytest.raises(ConfigError):
                    BatchSpec(**(given_values | {field: v}))
    if "no world size gives" in f.hint:
        tp = given_values.get("tensor_parallel_size", 1)
        for dp in range(1, given_values["global_batch_size"] + 1):
            with pytest.raises(ConfigError):
                BatchSpec(**(given_values | {"world_size": dp * tp}))


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 600),
    st.integers(1, 32),
    st.integers(1, 64),
    st.sampled_from([1, 2, 4]),
)
def test_every_offer_for_an_infeasible_global_micro_world_solves(g, micro, world, tp):
    given_values = {
        "global_batch_size": g,
        "micro_batch_size": micro,
        "world_size": world,
        "tensor_parallel_size": tp,
    }
    assume(world % tp or g % (micro * world // tp))
    check_every_offer_solves(given_values)


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 600),
    st.none() | st.integers(1, 32),
    st.none() | st.integers(1, 32),
    st.none() | st.integers(1, 64),
)
def test_every_offer_solves_whatever_three_or_four_are_given(g, micro, accumulation, world):
    given_values = {
        k: v
        for k, v in {
            "global_batch_size": g,
            "micro_batch_size": micro,
            "gradient_accumulation_steps": accumulation,
            "world_size": world,
        }.items()
        if v is not None
    }
    assume(world is not None or (micro is not None and accumulation is not None))
    try:
        BatchSpec(**given_values)
    except ConfigError:
        check_every_offer_solves(given_values)


def test_all_four_given_offer_only_the_values_that_make_the_global():
    err = refused(
        global_batch_size=128, micro_batch_size=4, gradient_accumulation_steps=3, world_size=8
    )
    assert err.findings[0].hint == "use global 96, or accumulation 4"


def test_a_world_that_does_not_divide_names_worlds_and_parallel_sizes_that_do():
    given_values = {"global_batch_size": 64, "world_size": 6, "tensor_parallel_size": 4}
    (f,) = refused(**given_values).findings
    assert f.hint == "use a world size of 4 or 8, or tensor-parallel size 3 or 6"
    for field, value in offers(f.hint):
        BatchSpec(**(given_values | {field: value}))


@pytest.mark.parametrize(
    "text, where",
    [
        ("global_batch_size: 100\nmicro_batch_size: 4\nworld_size: 8\n", "conflict.yaml:1"),
        (
            "micro_batch_size: 4\nworld_size: 6\ntensor_parallel_size: 4\nglobal_batch_size: 8\n",
            "conflict.yaml:2",
        ),
        ("global_batch_size: 64\nworld_size: 8\nnodes: 2\ngpus_per_node: 2\n", "conflict.yaml:2"),
    ],
)
def test_plan_of_a_file_whose_values_conflict_names_the_file_and_line(tmp_path, text, where):
    path = tmp_path / "conflict.yaml"
    path.write_text(text)
    result, out = run_json("plan", path)
    assert result.exit_code == 1
    assert out["findings"][0]["where"] == f"{tmp_path}/{where}"
    assert result.stderr.startswith(f"batchspec: error: {tmp_path}/{where}: ")


def test_a_flag_that_replaces_the_value_is_not_blamed_on_its_line(tmp_path):
    path = tmp_path / "conflict.yaml"
    path.write_text("global_batch_size: 64\nmicro_batch_size: 4\nworld_size: 8\n")
    result, out = run_json("plan", path, "--global-batch", 100)
    assert result.exit_code == 1 and out["findings"][0]["where"] == str(path)


def test_too_little_in_a_file_names_the_file(tmp_path):
    path = tmp_path / "short.yaml"
    path.write_text("global_batch_size: 64\n")
    result = run("plan", path)
    assert result.exit_code == 2
    assert result.stderr.startswith(f"batchspec: error: {path}: not enough to solve")


def test_plan_lr_without_lr_batch_is_refused():
    result = run("plan", "--global-batch", 256, "--micro-batch", 4, "--world-size", 8, "--lr", 3e-4)
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr.strip() == (
        "batchspec: error: --lr needs --lr-batch, the global batch the learning rate was tuned "
        "for: batchspec only scales it from that batch"
    )


def test_a_learning_rate_in_a_file_without_its_batch_is_refused_at_its_line(tmp_path):
    path = tmp_path / "lr.yaml"
    path.write_text("global_batch_size: 256\nworld_size: 8\nlearning_rate: 0.0003\n")
    result = run("plan", path)
    assert result.exit_code == 2
    assert result.stderr.startswith(
        f"batchspec: error: {path}:3: learning_rate needs reference_global_batch_size (or --lr-batch)"
    )
    # With the batch from a flag, or --lr beside the file's batch, it is advice again.
    assert run("plan", path, "--lr-batch", 128).exit_code == 0
    path.write_text("global_batch_size: 256\nworld_size: 8\nreference_global_batch_size: 128\n")
    _, out = run_json("plan", path, "--lr", 1e-3)
    assert [f["code"] for f in out["findings"]] == ["lr-scaling"]


def test_render_reports_the_learning_rate_advice_plan_gives(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(
        "global_batch_size: 256\nmicro_batch_size: 4\nworld_size: 8\nlearning_rate: 0.0003\n"
        "reference_global_batch_size: 128\n"
    )
    _, planned = run_json("plan", path)
    result, rendered = run_json("render", path, "--to", "deepspeed", "--out", tmp_path / "o")
    assert result.exit_code == 0
    (advice,) = [f for f in planned["findings"] if f["code"] == "lr-scaling"]
    assert advice in rendered["findings"]
    assert "0.0003 → 0.0004243" in advice["hint"]


def test_render_stops_on_the_errors_plan_reports(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(
        "global_batch_size: 64\nmicro_batch_size: 2\nworld_size: 8\nnum_experts: 6\n"
        "expert_parallel_size: 4\n"
    )
    assert run("plan", path).exit_code == 1
    result = run("render", path, "--to", "deepspeed", "--out", tmp_path / "o")
    assert result.exit_code == 1 and "experts-not-divisible" not in result.stderr
    assert f"{path}: num_experts 6 does not divide" in result.stderr
    assert not (tmp_path / "o").exists()


def test_a_json_of_auto_values_says_auto_not_give_the_world(tmp_path):
    path = tmp_path / "ds.json"
    path.write_text(
        '{"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto", '
        '"gradient_accumulation_steps": "auto"}'
    )
    result = run("convert", path, "--to", "axolotl", "--out", tmp_path / "o", "--world-size", 8)
    assert result.exit_code == 2
    assert "give --world-size" not in result.stderr
    assert 'train_batch_size is "auto"' in result.stderr
    assert "inspect the launch script that runs it, or the TrainingArguments file" in result.stderr
    # Without the world both are missing; the world is named first.
    result = run("convert", path, "--to", "axolotl", "--out", tmp_path / "o")
    assert result.exit_code == 2 and "give --world-size" in result.stderr


def test_following_the_auto_hint_gives_the_batch(tmp_path):
    (tmp_path / "ds.json").write_text(
        '{"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto"}'
    )
    args = tmp_path / "args.yaml"
    args.write_text("output_dir: out\nper_device_train_batch_size: 4\ndeepspeed: ds.json\n")
    _, out = run_json("inspect", args, "--world-size", 8)
    assert out["global_batch_size"] == 32


def test_a_deepspeed_json_valid_on_one_rank_says_rank(tmp_path):
    path = tmp_path / "ds.json"
    path.write_text(
        '{"train_batch_size": 8, "train_micro_batch_size_per_gpu": 4, '
        '"gradient_accumulation_steps": 2}'
    )
    _, out = run_json("inspect", path)
    (implied,) = [f for f in out["findings"] if f["code"] == "world-implied"]
    assert implied["message"].endswith("only where it counts 1 rank")


@pytest.mark.parametrize(
    "path, flags",
    [
        (FIXTURES / "megatron/valid/mpirun_np.sh", ()),
        (
            FIXTURES / "deepspeed/valid/megatron_deepspeed_zero1.json",
            ("--world-size", 16, "--tp", 2, "--pp", 2),
        ),
    ],
)
def test_convert_to_a_framework_that_refuses_the_layout_names_the_file(tmp_path, path, flags):
    result, out = run_json("convert", path, "--to", "axolotl", "--out", tmp_path / "o", *flags)
    assert result.exit_code == 1
    assert out["findings"][0]["code"] == "axolotl-no-pipeline"
    assert out["findings"][0]["where"] == str(path)
    assert result.stderr.startswith(f"batchspec: error: {path}: Axolotl has no pipeline")


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 64), st.sampled_from([1, 2, 4, 8]), st.integers(1, 12), st.sampled_from([1, 2])
)
def test_every_expert_parallel_size_or_world_offered_builds_the_expert_grid(experts, ep, dp, pp):
    spec = BatchSpec(
        global_batch_size=dp * 6,
        world_size=dp * pp,
        pipeline_parallel_size=pp,
        num_experts=experts,
        expert_parallel_size=ep,
    )
    from translator.advice import expert_findings

    for f in expert_findings(spec):
        sizes = re.search(r"expert-parallel size of ([\d, ]+)", f.hint).group(1)
        for size in map(int, sizes.split(", ")):
            assert expert_findings(spec.model_copy(update={"expert_parallel_size": size})) == []
        for world in re.findall(r"world size of (\d+)(?: or (\d+))?", f.hint):
            for w in filter(None, world):
                moved = BatchSpec(
                    global_batch_size=dp * 6,
                    world_size=int(w),
                    pipeline_parallel_size=pp,
                    expert_parallel_size=ep,
                )
                assert not any(x.code == "expert-grid" for x in expert_findings(moved))


@pytest.mark.framework
def test_a_deepspeed_floor_with_explicit_accumulation_offers_sizes_deepspeed_accepts(tmp_path):
    path = tmp_path / "ds.json"
    path.write_text('{"train_batch_size": 31, "gradient_accumulation_steps": 2}')
    _, out = run_json("inspect", path, "--world-size", 8)
    (f,) = [f for f in out["findings"] if f["code"] == "deepspeed-floor"]
    assert f["hint"] == (
        "with gradient_accumulation_steps 2 on 8 ranks use train_batch_size 16 "
        "(train_micro_batch_size_per_gpu 1) or 32 (train_micro_batch_size_per_gpu 2)"
    )
    pytest.importorskip("deepspeed")
    from translator.frameworks.deepspeed.verdict import resolve

    for tbs in (16, 32):  # DeepSpeed's own DeepSpeedConfig takes each
        got = resolve({"train_batch_size": tbs, "gradient_accumulation_steps": 2}, 8)
        assert got["train_batch_size"] == tbs


def test_an_unknown_accumulation_is_not_offered_a_layout_flag(tmp_path):
    job = tmp_path / "job.sh"
    job.write_text(
        "#!/bin/bash\ntorchrun --nproc_per_node 8 train.py --per_device_train_batch_size 4 "
        "--output_dir o\n"
    )
    _, out = run_json("inspect", job)
    (f,) = [f for f in out["findings"] if f["code"] == "batch-depends-on-unknown"]
    assert f["hint"] == "write the value as a literal"
