"""Megatron-Bridge and NeMo 2 launches read as jobs: the recipe runner's options and trailing
``KEY=VALUE`` overrides (the last one wins), ``--config-file`` YAML under them, ``nemo llm``'s
NeMo-Run overrides, and ``update`` editing the literal an override's variable holds."""

import pytest
from run_batchspec import codes, inspect, run

from translator.frameworks.megatron_bridge import rules


def write(folder, name: str, text: str):
    path = folder / name
    path.write_text(text)
    return path


RUNNER = """\
#!/bin/bash
GBS=128
torchrun --nproc_per_node=8 scripts/training/run_recipe.py --recipe llama3_8b_pretrain_config \\
    --step_func gpt_step -gb 256 -mb 1 -tp 2 \\
    train.global_batch_size=$GBS train.micro_batch_size=2 \\
    +model.pipeline_model_parallel_size=1 model.context_parallel_size=1
"""


def test_the_trailing_override_wins_over_the_runners_options(tmp_path):
    code, out = inspect(write(tmp_path, "run.sh", RUNNER))
    assert code == 0 and out["framework"] == "megatron-bridge"
    assert [out[k] for k in ("world_size", "global_batch_size", "micro_batch_size")] == [8, 128, 2]
    assert (out["tensor_parallel_size"], out["gradient_accumulation_steps"]) == (2, 16)
    lost = [s for s in out["sources"] if s["field"] == "global_batch_size" and not s["won"]]
    assert [s["where"] for s in lost] == [f"{tmp_path / 'run.sh'}:4 -gb"]


#: Recipe values as scripts/megatron_bridge_recipes.py writes them, for a recipe of these tests.
TABLE = {
    "toy_8b_pretrain_config": {
        "dataset.seq_length": 8192,
        "model.context_parallel_size": 2,
        "model.pipeline_model_parallel_size": 4,
        "train.micro_batch_size": 4,
    }
}
#: A launch of that recipe on 16 GPUs that leaves the context-parallel size and the sequence to it.
TOY = """\
#!/bin/bash
torchrun --nnodes 2 --nproc_per_node 8 scripts/training/run_recipe.py \\
    --recipe toy_8b_pretrain_config \\
    train.global_batch_size=256 train.micro_batch_size=2 \\
    model.tensor_model_parallel_size=2 model.pipeline_model_parallel_size=2
"""


@pytest.fixture
def table(monkeypatch):
    monkeypatch.setattr(rules, "RECIPES", TABLE)


def shown(out: dict, field: str) -> list[str]:
    return [s["where"] for s in out["sources"] if s["field"] == field and s["won"]]


def test_a_size_the_launch_leaves_out_is_the_recipe_functions(tmp_path, table):
    code, out = inspect(write(tmp_path, "run.sh", TOY))
    assert code == 0
    assert (out["context_parallel_size"], out["sequence_length"]) == (2, 8192)
    assert (out["data_parallel_size"], out["gradient_accumulation_steps"]) == (2, 64)
    version = f"Megatron-Bridge {rules.SOURCE.rpartition('@')[2][:7]}"
    assert shown(out, "context_parallel_size") == [f"the recipe toy_8b_pretrain_config ({version})"]
    (note,) = [f for f in out["findings"] if f["code"] == "megatron-bridge-recipe-table"]
    assert "model.context_parallel_size = 2" in note["message"] and rules.SOURCE in note["message"]
    assert "megatron-bridge-recipe-value" not in codes(out)


def test_a_recipe_the_table_does_not_hold_leaves_its_sizes_unknown(tmp_path, table):
    known = inspect(write(tmp_path, "known.sh", TOY))[1]
    other = TOY.replace("toy_8b_pretrain_config", "my_own_recipe_config")
    code, out = inspect(write(tmp_path, "other.sh", other))
    assert known["data_parallel_size"] == 2
    assert code == 0 and out["context_parallel_size"] is None
    assert out["data_parallel_size"] is None and out["gradient_accumulation_steps"] is None
    (note,) = [f for f in out["findings"] if f["code"] == "megatron-bridge-recipe-value"]
    assert "model.context_parallel_size" in note["message"]
    assert "my_own_recipe_config" in note["message"]
    assert "megatron-bridge-recipe-table" not in codes(out)


def test_the_launchs_overrides_and_the_command_line_win_over_the_recipe(tmp_path, table):
    job = write(tmp_path, "run.sh", TOY)
    out = inspect(job, "--cp", "1")[1]
    # the table's PP 4, micro-batch 4 and CP 2 lose to the overrides' 2, 2 and --cp 1
    assert (out["pipeline_parallel_size"], out["micro_batch_size"]) == (2, 2)
    assert (out["context_parallel_size"], out["data_parallel_size"]) == (1, 4)
    assert out["sequence_length"] == 8192
    assert shown(out, "pipeline_parallel_size") == [f"{job}:5 model.pipeline_model_parallel_size"]
    (note,) = [f for f in out["findings"] if f["code"] == "megatron-bridge-recipe-table"]
    assert note["message"].startswith("dataset.seq_length = 8192 is the recipe")


def test_a_positional_word_is_refused_as_the_runner_refuses_it(tmp_path):
    code, out = inspect(
        write(tmp_path, "run.sh", RUNNER.replace("--step_func gpt_step", "gpt_step"))
    )
    assert code == 1
    assert [f["code"] for f in out["findings"] if f["severity"] == "error"] == [
        "megatron-bridge-bad-override"
    ]


def test_the_config_file_is_read_and_an_override_wins_over_it(tmp_path):
    write(
        tmp_path,
        "o.yaml",
        "train:\n  global_batch_size: 8\n  micro_batch_size: 1\nmodel:\n  tensor_model_parallel_size: 2\n  pipeline_model_parallel_size: 1\n  context_parallel_size: 1\n",
    )
    job = write(
        tmp_path,
        "d.sh",
        "torchrun --nproc_per_node=4 distill.py --config-file o.yaml train.global_batch_size=16\n",
    )
    code, out = inspect(job, "--run-dir", tmp_path)
    assert code == 0
    assert (
        out["global_batch_size"],
        out["data_parallel_size"],
        out["gradient_accumulation_steps"],
    ) == (16, 2, 8)
    micro = [s for s in out["sources"] if s["field"] == "micro_batch_size"]
    assert micro[0]["where"].endswith("o.yaml:3 train.micro_batch_size")


def test_nemo_llm_overrides_and_its_trainer_world(tmp_path):
    job = write(
        tmp_path,
        "nemo.sh",
        "nemo llm pretrain --factory llama3_8b data.micro_batch_size=4 data.global_batch_size=64 "
        "trainer.devices=8 trainer.num_nodes=2 trainer.strategy.tensor_model_parallel_size=2 "
        "trainer.strategy.pipeline_model_parallel_size=1 trainer.strategy.context_parallel_size=1 "
        "model.config.context_parallel_size=2\n",
    )
    code, out = inspect(job)
    assert code == 0
    assert (out["world_size"], out["data_parallel_size"], out["gradient_accumulation_steps"]) == (
        16,
        8,
        2,
    )
    found = {f["code"] for f in out["findings"]}
    assert {"megatron-bridge-generation", "megatron-bridge-nemo-overwritten"} <= found


def test_nemo_llm_without_the_trainer_sizes_has_no_world(tmp_path):
    job = write(
        tmp_path, "nemo.sh", "nemo llm pretrain --factory llama3_8b data.global_batch_size=64\n"
    )
    code, out = inspect(job)
    assert code == 0 and out["world_size"] is None and out["global_batch_size"] == 64


def test_update_edits_the_variable_an_override_takes(tmp_path):
    job = write(tmp_path, "run.sh", RUNNER)
    result = run("update", job, "--global-batch", "64", "--in-place")
    assert result.exit_code == 0, result.output
    assert job.read_text() == RUNNER.replace("GBS=128", "GBS=64")


def test_update_edits_a_literal_override_in_place(tmp_path):
    text = RUNNER.replace("train.micro_batch_size=2", "train.micro_batch_size=4")
    job = write(tmp_path, "run.sh", text)
    result = run("update", job, "--micro-batch", "2", "--in-place")
    assert result.exit_code == 0, result.output
    assert job.read_text() == RUNNER
