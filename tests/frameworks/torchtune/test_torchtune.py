"""torchtune without torchtune: reading recipe configs and tune run launches, the findings and
their fixes, render, update. Which torchtune counts a file is pinned per test (the installed
one decides; see translator/frameworks/torchtune/generation.py)."""

import json
from functools import partial

import pytest
from run_batchspec import codes, read_and_inspect, run

from translator.frameworks import get
from translator.frameworks.torchtune import generation, program
from translator.inspection import inspect_reading
from translator.reading import Launch
from translator.render import render
from translator.spec import BatchSpec

torchtune = get("torchtune")
#: A torchtune YAML ``cfg.yaml``, read and inspected at ``world`` (8 unless given).
inspect = partial(read_and_inspect, torchtune, world=8)


@pytest.fixture
def released(monkeypatch):
    """torchtune 0.6.1 is installed."""
    monkeypatch.setattr(generation, "installed", lambda: "0.6.1")


@pytest.fixture
def absent(monkeypatch):
    """No torchtune is installed: the file's own keys decide."""
    monkeypatch.setattr(generation, "installed", lambda: None)
    monkeypatch.setattr(program, "builtin", lambda name: None)


BASE = "model:\n  _component_: torchtune.models.llama3_2.llama3_2_1b\n"


def test_the_global_batch_is_batch_size_times_accumulation_times_world(released):
    got = inspect(BASE + "batch_size: 4\ngradient_accumulation_steps: 8\n", world=4)
    assert got.spec.global_batch_size == 128 and got.spec.data_parallel_size == 4
    (said,) = [f for f in got.findings if f.code == "torchtune-batch"]
    assert "no global batch key" in said.message and said.where == "cfg.yaml:3"


def test_a_torchtune_config_is_claimed_by_torchtune():
    text = BASE + "batch_size: 4\ngradient_accumulation_steps: 8\n"
    assert torchtune.claims(text)
    assert not get("axolotl").claims(text) and not get("hf").claims(text)
    assert torchtune.claims("batch_size: 2\ngradient_accumulation_steps: 1\n")


def test_a_missing_accumulation_key_is_an_error(released):
    got = inspect(BASE + "batch_size: 4\n")
    assert "torchtune-missing-key" in codes(got) and got.spec is None


def test_a_config_without_either_batch_key_is_unknown_not_refused(released):
    got = inspect(BASE + "training:\n  batch_size: 2\n")
    assert "torchtune-no-batch-keys" in codes(got)
    assert got.spec is None and not any(f.severity == "error" for f in got.findings)


def test_optimizer_in_bwd_with_accumulation_is_refused_and_its_hint_keeps_the_batch(released):
    got = inspect(BASE + "batch_size: 2\ngradient_accumulation_steps: 4\noptimizer_in_bwd: true\n")
    (refusal,) = [f for f in got.findings if f.code == "torchtune-optimizer-in-bwd"]
    assert "batch_size: 8" in refusal.hint
    fixed = inspect(
        BASE + "batch_size: 8\ngradient_accumulation_steps: 1\noptimizer_in_bwd: true\n"
    )
    assert not any(f.severity == "error" for f in fixed.findings)
    assert fixed.spec.global_batch_size == 64


def test_tensor_parallel_needs_a_plan_and_a_world_it_divides(released):
    text = BASE + "batch_size: 2\ngradient_accumulation_steps: 1\ntensor_parallel_dim: 4\n"
    assert "torchtune-tp-plan" in codes(inspect(text))
    plan = "tensor_parallel_plan:\n  _component_: torchtune.models.llama3.base_llama_tp_plan\n"
    ok = inspect(text + plan, world=8)
    assert ok.spec.data_parallel_size == 2 and ok.spec.global_batch_size == 4
    assert "world-not-divisible" in codes(inspect(text + plan, world=6))


MAIN = (
    BASE + "batch_size: 2\ngradient_accumulation_steps: 2\ncontext_parallel_dim: 2\n"
    "data_parallel_shard_dim: -1\ndata_parallel_replicate_dim: 1\n"
)


def test_main_branch_keys_under_torchtune_0_6_1_are_ignored_and_said_so(released):
    got = inspect(MAIN, world=8)
    (said,) = [f for f in got.findings if f.code == "torchtune-unreleased-keys"]
    assert "context_parallel_dim 2" in said.message and "0.6.1" in said.message
    assert got.spec.context_parallel_size == 1 and got.spec.global_batch_size == 32


def test_without_torchtune_main_branch_keys_count_as_parallel_dims(absent):
    got = inspect(MAIN, world=8)
    assert "torchtune-unreleased-keys" not in codes(got)
    assert got.spec.context_parallel_size == 2 and got.spec.data_parallel_size == 4
    assert got.spec.global_batch_size == 16
    assert "torchtune-epoch-tail" not in codes(got)  # main's loop drops the tail


def test_parallel_dims_that_do_not_make_the_world_are_refused_and_the_hint_fixes_it(absent):
    text = BASE + "batch_size: 2\ngradient_accumulation_steps: 1\ndata_parallel_shard_dim: 4\n"
    (refusal,) = [f for f in inspect(text, world=8).findings if f.code == "torchtune-mesh"]
    assert "WORLD_SIZE(8)" in refusal.message and "launch 4 processes" in refusal.hint
    assert inspect(text, world=4).spec.global_batch_size == 8
    # without a world, explicit dims give it (ParallelDims asserts their product is the world)
    assert inspect(text, world=None).spec.world_size == 4


def test_the_epoch_tail_is_said_for_0_6_1_with_accumulation(released):
    assert "torchtune-epoch-tail" in codes(
        inspect(BASE + "batch_size: 1\ngradient_accumulation_steps: 2\n")
    )
    assert "torchtune-epoch-tail" not in codes(
        inspect(BASE + "batch_size: 1\ngradient_accumulation_steps: 1\n")
    )


def test_a_misspelt_batch_key_is_named(released):
    got = inspect(BASE + "batch_size: 1\ngradient_accumulation_steps: 1\ntensor_paralel_dim: 2\n")
    (typo,) = [f for f in got.findings if f.code == "batch-key-typo"]
    assert "tensor_parallel_dim" in typo.hint


@pytest.mark.parametrize("released_too", [True, False])
def test_render_refuses_what_torchtune_cannot_run(monkeypatch, released_too):
    monkeypatch.setattr(generation, "installed", lambda: "0.6.1" if released_too else None)
    cp = BatchSpec(global_batch_size=16, micro_batch_size=2, world_size=8, context_parallel_size=2)
    (refusal,) = torchtune.check(cp)
    assert refusal.code == "torchtune-no-context-parallel"
    assert "accumulation 1 keeps global 16" in refusal.hint
    pp = BatchSpec(global_batch_size=16, micro_batch_size=2, world_size=8, pipeline_parallel_size=2)
    assert [f.code for f in torchtune.check(pp)] == ["torchtune-no-pipeline"]


def test_a_tensor_parallel_spec_renders_with_a_plan_and_reads_back(released):
    spec = BatchSpec(global_batch_size=32, micro_batch_size=2, world_size=8, tensor_parallel_size=2)
    text = render(spec, torchtune).text
    assert "tensor_parallel_dim: 2" in text and "base_llama_tp_plan" in text
    got = inspect_reading(torchtune, torchtune.read(text, "t.yaml"), Launch.of(spec))
    assert not any(f.severity == "error" for f in got.findings)
    assert got.spec.gradient_accumulation_steps == 4


def test_update_changes_the_batch_values_and_keeps_every_other_byte(released, tmp_path):
    text = (
        "# my run\nbatch_size: 4  # per rank\n"
        "model:\n  _component_: torchtune.models.llama3_2.llama3_2_1b\n"
        "gradient_accumulation_steps: 8  # Use to increase effective batch size\n"
    )
    path = tmp_path / "cfg.yaml"
    path.write_text(text)
    result = run("update", path, "--from-world-size", 4, "--world-size", 8)
    assert result.exit_code == 0
    assert result.stdout == text.replace("steps: 8", "steps: 4")


def test_update_adds_a_missing_accumulation_after_batch_size(released, tmp_path):
    path = tmp_path / "cfg.yaml"
    path.write_text(BASE + "batch_size: 4\ngradient_accumulation_steps: 2\nepochs: 1\n")
    result = run("update", path, "--from-world-size", 4, "--world-size", 2)
    assert (
        result.exit_code == 0
        and result.stdout == BASE + "batch_size: 4\ngradient_accumulation_steps: 4\nepochs: 1\n"
    )


# Jobs ------------------------------------------------------------------------------------


CONFIG = BASE + "batch_size: 4\ngradient_accumulation_steps: 8\n"


def job(tmp_path, script: str, *args):
    (tmp_path / "cfg.yaml").write_text(CONFIG)
    path = tmp_path / "train.sh"
    path.write_text(script)
    result = run("inspect", path, "--json", *args)
    out = json.loads(result.output)
    return result.exit_code, out["files"][0] if "files" in out else out


def test_tune_run_overrides_win_over_the_config_and_torchrun_options_size_the_world(
    released, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    code, got = job(
        tmp_path,
        "tune run --nnodes 2 --nproc_per_node 4 full_finetune_distributed --config cfg.yaml "
        "batch_size=2 dataset.packed=False\n",
    )
    assert code == 0
    assert (got["world_size"], got["micro_batch_size"], got["global_batch_size"]) == (8, 2, 128)
    lost = [s for s in got["sources"] if s["field"] == "micro_batch_size" and not s["won"]]
    assert lost and "_merge_yaml_and_cli_args" in lost[0]["why"]


def test_update_edits_the_override_and_the_torchrun_option_of_a_job(
    released, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cfg.yaml").write_text(CONFIG)
    script = (
        "#!/bin/bash\ntune run --nproc_per_node 4 full_finetune_distributed --config cfg.yaml "
        "gradient_accumulation_steps=8  # eight\n"
    )
    (tmp_path / "train.sh").write_text(script)
    result = run("update", tmp_path / "train.sh", "--world-size", 8, "--nproc-per-node", 8)
    assert result.exit_code == 0
    assert result.stdout == script.replace("steps=8", "steps=4").replace("node 4", "node 8")


def test_a_word_that_is_not_key_value_is_refused_in_torchtunes_words(
    released, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    code, got = job(
        tmp_path, "tune run --nproc_per_node 2 lora_finetune_distributed --config cfg.yaml --lr 1\n"
    )
    assert code == 1
    (bad,) = [f for f in got["findings"] if f["code"] == "torchtune-bad-override"]
    assert "must be in the form of key=value" in bad["message"]


def test_rendezvous_options_with_unset_values_after_tune_run_are_torchruns(
    released, tmp_path, monkeypatch
):
    """A multi-node launch passes ``--node_rank=$NODE_RANK --master_addr=$MASTER_ADDR`` to
    torchrun through ``tune run``; unset, they are still options, not the recipe and its
    overrides (was torchtune-bad-override, exit 1)."""
    monkeypatch.chdir(tmp_path)
    code, got = job(
        tmp_path,
        "tune run --nnodes=2 --nproc_per_node=8 --node_rank=$NODE_RANK "
        "--master_addr=$MASTER_ADDR --master_port=29500 --max_restarts 0 "
        "full_finetune_distributed --config cfg.yaml\n",
    )
    assert "torchtune-bad-override" not in {f["code"] for f in got["findings"]}
    assert got["world_size"] == 16


def test_a_distributed_recipe_without_torchrun_options_is_one_process_that_stops(
    released, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    code, got = job(tmp_path, "tune run full_finetune_distributed --config cfg.yaml\n")
    assert code == 1 and got["world_size"] == 1
    assert "torchtune-one-process" in {f["code"] for f in got["findings"]}


def test_a_removed_key_is_missing(released, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, got = job(
        tmp_path,
        "tune run --nproc_per_node 2 full_finetune_distributed --config cfg.yaml "
        "~gradient_accumulation_steps\n",
    )
    assert code == 1 and "torchtune-missing-key" in {f["code"] for f in got["findings"]}


def test_a_built_in_config_that_is_not_here_leaves_the_batch_unknown(absent, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, got = job(
        tmp_path,
        "tune run --nproc_per_node 8 full_finetune_distributed --config llama3_2/1B_full\n",
    )
    assert code == 0 and got["global_batch_size"] is None and got["world_size"] == 8
    assert "torchtune-builtin-config" in {f["code"] for f in got["findings"]}


def test_an_unknown_process_count_leaves_the_world_unknown(released, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, got = job(
        tmp_path,
        'tune run --nproc_per_node "$(nvidia-smi -L | wc -l)" full_finetune_distributed '
        "--config cfg.yaml\n",
    )
    assert got["world_size"] is None and got["global_batch_size"] is None
    assert got["micro_batch_size"] == 4


def test_update_edits_the_variable_an_override_takes(released, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "cfg.yaml").write_text(CONFIG)
    script = (
        "#!/bin/bash\nGA=8\ntune run --nproc_per_node 4 full_finetune_distributed "
        "--config cfg.yaml gradient_accumulation_steps=$GA\n"
    )
    (tmp_path / "train.sh").write_text(script)
    result = run("update", tmp_path / "train.sh", "--world-size", 8, "--nproc-per-node", 8)
    assert result.exit_code == 0
    assert result.stdout == script.replace("GA=8", "GA=4").replace("node 4", "node 8")


def test_an_interpolation_of_another_key_is_its_value_and_any_other_is_unknown(released):
    got = inspect("bs: 4\nbatch_size: ${bs}\ngradient_accumulation_steps: 2\n", world=2)
    assert got.spec.global_batch_size == 16
    env = inspect("batch_size: 4\ngradient_accumulation_steps: ${oc.env:GA}\n", world=2)
    assert env.spec is None and "unknown-value" in codes(env)
    assert not any(f.severity == "error" for f in env.findings)


def test_a_recipe_that_does_not_read_tensor_parallel_counts_every_rank(
    released, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    plan = "tensor_parallel_plan:\n  _component_: torchtune.models.llama3.base_llama_tp_plan\n"
    (tmp_path / "cfg.yaml").write_text(CONFIG + "tensor_parallel_dim: 2\n" + plan)
    (tmp_path / "lora.sh").write_text(
        "tune run --nproc_per_node 8 lora_finetune_distributed --config cfg.yaml\n"
    )
    got = json.loads(run("inspect", tmp_path / "lora.sh", "--json").output)
    assert got["data_parallel_size"] == 8 and got["global_batch_size"] == 256
    assert "torchtune-tp-ignored" in {f["code"] for f in got["findings"]}
    (tmp_path / "full.sh").write_text(
        "tune run --nproc_per_node 8 full_finetune_distributed --config cfg.yaml\n"
    )
    assert (
        json.loads(run("inspect", tmp_path / "full.sh", "--json").output)["data_parallel_size"] == 4
    )


def test_a_single_device_recipe_under_torchrun_options_is_refused(released, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, got = job(
        tmp_path, "tune run --nproc_per_node 2 full_finetune_single_device --config cfg.yaml\n"
    )
    assert code == 1 and "torchtune-single-device" in {f["code"] for f in got["findings"]}


def test_a_jobs_engine_config_holds_its_overrides_over_its_config(released, tmp_path, monkeypatch):
    from translator.inspection import inspect_file

    monkeypatch.chdir(tmp_path)
    (tmp_path / "cfg.yaml").write_text(CONFIG + "dataset:\n  packed: false\n")
    (tmp_path / "train.sh").write_text(
        "tune run --nproc_per_node 2 full_finetune_distributed --config cfg.yaml batch_size=1\n"
    )
    reading = inspect_file(str(tmp_path / "train.sh")).reading
    assert torchtune.job_config(reading) == "batch_size: 1\ngradient_accumulation_steps: 8\n"
