"""Megatron-Bridge's performance scripts (``scripts/performance/``): ``setup_experiment.py``
submits the run itself on ``--num_gpus`` GPUs, ``run_script.py`` runs on its launcher's ranks;
both take the recipe runner's options, long and short (``-tp 4``, ``--global_batch_size 128``),
and what they do not give is the performance recipe's (unknown, never a default)."""

from __future__ import annotations

from run_batchspec import inspect


def job(tmp_path, text: str):
    path = tmp_path / "perf.sh"
    path.write_text("#!/bin/bash\n" + text)
    return path


def test_setup_experiment_runs_on_its_num_gpus(tmp_path):
    path = job(
        tmp_path,
        "python scripts/performance/setup_experiment.py -m llama -mr llama3_70b --gpu h100 \\\n"
        "  -ng 32 -gn 8 -tp 4 -pp 4 -cp 1 -gb 128 -mb 1\n",
    )
    code, out = inspect(path, exits=(0,))
    assert out["framework"] == "megatron-bridge"
    assert (out["world_size"], out["tensor_parallel_size"], out["pipeline_parallel_size"]) == (
        32,
        4,
        4,
    )
    assert (out["data_parallel_size"], out["gradient_accumulation_steps"]) == (2, 64)


def test_setup_experiment_without_a_context_size_leaves_it_to_the_recipe(tmp_path):
    path = job(
        tmp_path,
        "python scripts/performance/setup_experiment.py --model_family_name llama \\\n"
        "  --model_recipe_name llama3_70b --num_gpus 32 --tensor_model_parallel_size 4 \\\n"
        "  --pipeline_model_parallel_size 4 --global_batch_size 128 --micro_batch_size 1\n",
    )
    code, out = inspect(path, exits=(0,))
    assert out["world_size"] == 32 and out["context_parallel_size"] is None
    assert out["data_parallel_size"] is None


def test_setup_experiment_without_num_gpus_has_no_world(tmp_path):
    path = job(
        tmp_path,
        "python scripts/performance/setup_experiment.py -m llama -mr llama3_8b -gb 128 -mb 1\n",
    )
    code, out = inspect(path, exits=(0, 2))
    assert out["world_size"] is None


def test_run_script_runs_on_its_launchers_ranks(tmp_path):
    path = job(
        tmp_path,
        "torchrun --nproc_per_node 8 scripts/performance/run_script.py -m llama \\\n"
        "  -mr llama3_8b --tensor_model_parallel_size 2 --pipeline_model_parallel_size 1 \\\n"
        "  --context_parallel_size 1 --global_batch_size 128 --micro_batch_size 2\n",
    )
    code, out = inspect(path, exits=(0,))
    assert out["framework"] == "megatron-bridge"
    assert (out["world_size"], out["data_parallel_size"]) == (8, 4)
    assert out["gradient_accumulation_steps"] == 16
