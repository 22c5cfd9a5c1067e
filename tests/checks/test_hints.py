"""Every fix batchspec offers can be followed as written: each value it names solves, and what
it says cannot change really cannot (issue 18, item 6)."""

import re

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from paths import ROOT
from run_batchspec import run, run_json

from translator.frameworks import get
from translator.spec import BatchSpec
from translator.words.errors import ConfigError
from translator.words.findings import counted

FIXTURES = ROOT / "fixtures"


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


# The solver's hints ----------------------------------------------------------------------------


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


# A spec file's conflicts name the file ------------------------------------------------------


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


# The learning rate ---------------------------------------------------------------------------


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


# "auto" values ------------------------------------------------------------------------------


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


# Megatron's interleaved schedule -------------------------------------------------------------


megatron = get("megatron")


def interleaved(**values) -> BatchSpec:
    return BatchSpec(virtual_pipeline_stages=2, **values)


def schedule_findings(spec):
    return [f for f in megatron.check(spec) if f.code == "virtual-pipeline-microbatches"]


def test_too_few_micro_batches_for_the_interleaved_schedule_is_said_plainly():
    spec = interleaved(
        global_batch_size=96, micro_batch_size=4, world_size=32, pipeline_parallel_size=4
    )
    (f,) = schedule_findings(spec)
    assert "[PP=" not in f.message
    assert f.message == (
        "the interleaved pipeline schedule needs at least PP=4 micro-batches per step; this step "
        "has 3"
    )
    assert f.hint == (
        "use micro-batch 3 (4 micro-batches, global 96 kept), or global 128 (4 micro-batches of 4)"
    )


def follow(spec: BatchSpec, hint: str) -> list[BatchSpec]:
    """The spec after each change the interleaved hint offers."""
    base = {
        "global_batch_size": spec.global_batch,
        "micro_batch_size": spec.micro,
        "data_parallel_size": spec.data_parallel,
        "pipeline_parallel_size": spec.pipeline_parallel_size,
        "virtual_pipeline_stages": spec.virtual_pipeline_stages,
        "microbatch_group_size_per_vp_stage": spec.microbatch_group_size_per_vp_stage,
    }
    if hint.startswith("drop microbatch_group_size_per_vp_stage"):
        base["microbatch_group_size_per_vp_stage"] = None
        hint = hint.split(" and ", 1)[1]
    out = []
    offered = re.sub(r"\([^)]*\)", "", hint)  # what a parenthesis says is not an offer
    for name, value in re.findall(
        r"(micro-batch|global|microbatch_group_size_per_vp_stage|accumulation) (\d+)", offered
    ):
        value = int(value)
        if name == "micro-batch":
            change = {"micro_batch_size": value}
        elif name == "global":
            change = {"global_batch_size": value}
        elif name == "accumulation":
            change = {"global_batch_size": value * spec.micro * spec.data_parallel}
        else:
            change = {"microbatch_group_size_per_vp_stage": value}
        out.append(BatchSpec(**{k: v for k, v in (base | change).items() if v is not None}))
    assert out, hint
    return out


@settings(max_examples=300, deadline=None)
@given(
    st.integers(2, 8),
    st.integers(1, 24),
    st.none() | st.integers(1, 16),
    st.integers(1, 6),
    st.integers(1, 4),
)
def test_every_change_the_interleaved_hint_offers_satisfies_the_schedule(
    pp, accumulation, group, micro, dp
):
    spec = interleaved(
        micro_batch_size=micro,
        gradient_accumulation_steps=accumulation,
        data_parallel_size=dp,
        pipeline_parallel_size=pp,
        microbatch_group_size_per_vp_stage=group,
    )
    found = schedule_findings(spec)
    assume(found)
    for changed in follow(spec, found[0].hint):
        assert schedule_findings(changed) == [], (found[0].hint, changed)


# Counts read as English ---------------------------------------------------------------------


def test_counts_are_pluralised():
    assert counted(1, "micro-batch", "micro-batches") == "1 micro-batch"
    assert counted(3, "micro-batch", "micro-batches") == "3 micro-batches"
    assert counted(1, "rank") == "1 rank" and counted(2, "rank") == "2 ranks"
    spec = BatchSpec(
        global_batch_size=16, micro_batch_size=2, world_size=16, pipeline_parallel_size=2
    )
    (implied,) = [f for f in megatron.check(spec) if f.code == "megatron-accumulation-implied"]
    assert implied.message.endswith("= 1 micro-batch per step")
    (pipe,) = [f for f in get("deepspeed").check(spec) if "pipeline-accumulation" in f.code]
    assert "gradient_accumulation_steps = 1 micro-batch per optimizer step" in pipe.message


def test_a_deepspeed_json_valid_on_one_rank_says_rank(tmp_path):
    path = tmp_path / "ds.json"
    path.write_text(
        '{"train_batch_size": 8, "train_micro_batch_size_per_gpu": 4, '
        '"gradient_accumulation_steps": 2}'
    )
    _, out = run_json("inspect", path)
    (implied,) = [f for f in out["findings"] if f["code"] == "world-implied"]
    assert implied["message"].endswith("only where it counts 1 rank")


# convert names the file it read ---------------------------------------------------------------


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


def test_render_to_a_framework_that_refuses_the_layout_names_the_spec(tmp_path):
    """As convert does: the refusal is of the file's batch, so it names the file."""
    path = tmp_path / "spec.yaml"
    path.write_text(
        "global_batch_size: 64\nmicro_batch_size: 4\nworld_size: 8\npipeline_parallel_size: 2\n"
    )
    result, out = run_json("render", path, "--to", "axolotl", "--out", tmp_path / "o")
    assert result.exit_code == 1 and out["findings"][0]["where"] == str(path)
    assert result.stderr.startswith(f"batchspec: error: {path}: Axolotl has no pipeline")
    assert not (tmp_path / "o").exists()


def test_render_of_a_spec_that_leaves_the_micro_batch_open_names_it(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text("global_batch_size: 64\nworld_size: 8\n")
    result = run("render", path, "--to", "deepspeed", "--out", tmp_path / "o")
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1
    assert result.stderr.startswith(
        f"batchspec: error: {path}: the spec leaves the micro-batch open; set micro_batch_size"
    )


def test_axolotl_no_pipeline_hint_names_the_accumulation_that_keeps_the_global():
    spec = BatchSpec(
        global_batch_size=256, micro_batch_size=4, world_size=16, pipeline_parallel_size=2
    )
    (f,) = get("axolotl").check(spec)
    assert f.hint.endswith("data-parallel 16: accumulation 4 keeps global 256")
    BatchSpec(
        global_batch_size=256, micro_batch_size=4, gradient_accumulation_steps=4, world_size=16
    )
    odd = BatchSpec(
        global_batch_size=12, micro_batch_size=2, world_size=4, pipeline_parallel_size=2
    )
    (f,) = get("axolotl").check(odd)
    for field, value in offers(f.hint.split(", so ", 1)[1]):
        BatchSpec(
            **({"global_batch_size": 12, "micro_batch_size": 2, "world_size": 4} | {field: value})
        )


# Other hints that named what could not be done ------------------------------------------------


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
    from translator.checks.advice import expert_findings

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


def test_uneven_machines_offer_process_counts_accelerate_splits(tmp_path):
    path = tmp_path / "acc.yaml"
    path.write_text("distributed_type: MULTI_GPU\nnum_processes: 6\nnum_machines: 4\n")
    _, out = run_json("inspect", path)
    (f,) = [f for f in out["findings"] if f["code"] == "accelerate-uneven-machines"]
    assert f["hint"].startswith("use num_processes 4 or 8 ")
    for n in (4, 8):
        path.write_text(f"distributed_type: MULTI_GPU\nnum_processes: {n}\nnum_machines: 4\n")
        _, out = run_json("inspect", path)
        assert "accelerate-uneven-machines" not in [f["code"] for f in out["findings"]]
