"""estimate: memory per GPU, part by part, against published formulas and DeepSpeed's own."""

import json
from dataclasses import replace

import pytest
from run_batchspec import run

from translator.model import memory
from translator.model.memory import GIB, PRESETS, RunSettings


def estimate_json(*args):
    """``estimate --json``; on the 125m preset unless the test names a model (these tests are
    about the layout and settings a file gives, not about its model)."""
    named = any(a in ("--model", "--model-config") for a in args)
    result = run("estimate", *args, *(() if named else ("--model", "125m")), "--json")
    return result.exit_code, json.loads(result.output)


def part(data: dict, name: str) -> dict:
    return next(p for p in data["parts"] if p["name"] == name)


def parts(estimate) -> dict:
    return {p.name: p.bytes for p in estimate.parts}


@pytest.mark.parametrize("name", list(PRESETS))
def test_every_preset_prints_a_breakdown_that_sums_to_its_total(name):
    result = run(
        "estimate",
        "--model",
        name,
        "--micro-batch",
        1,
        "--world-size",
        8,
        "--global-batch",
        64,
        "--seq-len",
        2048,
        "--json",
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert [p["name"] for p in data["parts"]] == [
        "weights",
        "gradients",
        "optimizer",
        "activations",
        "logits",
        "overhead",
    ]
    assert sum(p["bytes"] for p in data["parts"]) == data["total_bytes"] > 0
    assert data["parameters"] == memory.model_named(name, 2048).parameters


@pytest.mark.parametrize(
    "name, count",
    [
        ("125m", 124_439_808 + (50304 - 50257) * 768),  # GPT-2 small, vocabulary padded to 50304
        ("llama3-1b", 1_235_814_400),
        ("llama3-8b", 8_030_261_248),
        ("llama3-70b", 70_553_706_496),
    ],
)
def test_parameter_counts_match_the_published_models(name, count):
    assert PRESETS[name].parameters == count


@pytest.mark.parametrize("name, seq", [("tiny", 64), ("125m", 256)])
def test_the_smoke_models_have_the_parameters_their_preset_counts(name, seq):
    pytest.importorskip("torch")
    from translator.rank.model import build

    real = sum(p.numel() for p in build(name, seq).parameters())
    assert memory.model_named(name, seq).parameters == real


def test_a_local_config_json_is_read_like_the_preset_of_the_same_shape(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                "model_type": "llama",
                "hidden_size": 4096,
                "num_hidden_layers": 32,
                "num_attention_heads": 32,
                "num_key_value_heads": 8,
                "intermediate_size": 14336,
                "vocab_size": 128256,
                "tie_word_embeddings": False,
            }
        )
    )
    model = memory.read_hf_config(str(config))
    assert model.parameters == PRESETS["llama3-8b"].parameters
    result = run(
        "estimate",
        "--model",
        config,
        "--micro-batch",
        2,
        "--world-size",
        8,
        "--global-batch",
        64,
        "--seq-len",
        4096,
    )
    assert result.exit_code == 0
    assert "8,030,261,248 parameters" in result.output and "total" in result.output


def test_a_gpt2_config_json_has_its_learned_positions(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {"n_embd": 768, "n_layer": 12, "n_head": 12, "vocab_size": 50304, "n_positions": 1024}
        )
    )
    assert memory.read_hf_config(str(config)).parameters == PRESETS["125m"].parameters


def test_activations_follow_korthikanti_table_2():
    """GPT-style (F = 4h, multi-head): 34 + 5as/h without recompute, 34 with flash attention,
    10 + 24/t under TP, 34/t with sequence parallel too, 2 per layer under full recompute."""
    gpt, s, h, a = PRESETS["125m"], 1024, 768, 12
    base = RunSettings(micro_batch_size=1, sequence_length=s)
    assert memory.layer_activation_bytes(gpt, base) == pytest.approx(34)
    eager = replace(base, attention="eager")
    assert memory.layer_activation_bytes(gpt, eager) == pytest.approx(34 + 5 * a * s / h)
    assert memory.layer_activation_bytes(gpt, replace(base, tensor=4)) == pytest.approx(10 + 6)
    sp = replace(base, tensor=4, sequence_parallel=True)
    assert memory.layer_activation_bytes(gpt, sp) == pytest.approx(34 / 4)
    full = memory.activations(gpt, replace(base, recompute="full"))
    layer = memory.activations(gpt, replace(base, recompute="none")).bytes / gpt.layers
    assert full.bytes == pytest.approx(2 * s * h * gpt.layers + layer)


def test_pipeline_stages_hold_their_in_flight_micro_batches():
    """1F1B: the first stage holds min(p, m) micro-batches of its L / p layers; interleaved:
    L·(1 + (p−1)/(p·v)) layers (Megatron's report_theoretical_memory)."""
    model, run_ = PRESETS["llama3-8b"], RunSettings(micro_batch_size=1, sequence_length=4096)
    one = memory.activations(model, run_).bytes
    assert memory.activations(model, replace(run_, pipeline=4, micro_batches=8)).bytes == one
    assert memory.activations(model, replace(run_, pipeline=4, micro_batches=2)).bytes == one // 2
    vpp = memory.activations(model, replace(run_, pipeline=4, micro_batches=8, virtual_stages=2))
    assert vpp.bytes == pytest.approx(one * (1 + 3 / 8), rel=1e-6)


def test_model_states_are_megatrons_18_bytes_and_6_plus_12_over_dp_distributed():
    model, n = PRESETS["llama3-8b"], 8
    shard = memory.shard_parameters(model, RunSettings(1, 1))
    plain = parts(memory.estimate(model, RunSettings(1, 1, data_parallel=n)))
    assert plain["weights"] + plain["gradients"] + plain["optimizer"] == 18 * shard
    dist = parts(memory.estimate(model, RunSettings(1, 1, data_parallel=n, zero_stage=1)))
    assert dist["weights"] + dist["gradients"] + dist["optimizer"] == pytest.approx(
        (6 + 12 / n) * shard, rel=1e-6
    )


@pytest.mark.parametrize("stage", [1, 2, 3])
def test_context_parallel_ranks_share_the_model_state_shards(stage):
    """Megatron's distributed optimizer, DeepSpeed's ZeRO under Ulysses and FSDP with context
    parallelism all shard over the data-parallel and context-parallel ranks together (DP × CP,
    the ranks that hold the same layers): DP 4 × CP 2 shards as DP 8 does, not as DP 4."""
    model = PRESETS["llama3-8b"]
    with_cp = parts(
        memory.estimate(model, RunSettings(1, 8192, data_parallel=4, context=2, zero_stage=stage))
    )
    dp8 = parts(memory.estimate(model, RunSettings(1, 8192, data_parallel=8, zero_stage=stage)))
    dp4 = parts(memory.estimate(model, RunSettings(1, 8192, data_parallel=4, zero_stage=stage)))
    states = ("weights", "gradients", "optimizer")
    assert [with_cp[n] for n in states] == [dp8[n] for n in states]
    assert with_cp["optimizer"] < dp4["optimizer"]


def test_megatron_and_deepspeed_shard_over_the_context_parallel_ranks_too():
    """What the test above takes from the frameworks, in their own code: megatron-core builds
    its distributed optimizer on the data-parallel group with context parallelism (``dp_cp``),
    and DeepSpeed's engine gives ZeRO its sequence-data-parallel group (DP × Ulysses size)."""
    import inspect

    pytest.importorskip("megatron.core")
    pytest.importorskip("deepspeed")
    from deepspeed.runtime import engine
    from megatron.core import optimizer

    source = inspect.getsource(optimizer.get_megatron_optimizer)
    assert "data_parallel_group=intra_dp_cp_group" in source
    assert "dp_process_group=self.seq_data_parallel_group" in inspect.getsource(engine)


def test_the_estimate_of_a_context_parallel_script_divides_by_dp_times_cp(tmp_path):
    script = tmp_path / "train.sh"
    script.write_text(
        "torchrun --nproc_per_node 8 pretrain_gpt.py --micro-batch-size 1 --global-batch-size 64"
        " --seq-length 8192 --context-parallel-size 2 --use-distributed-optimizer\n"
    )
    code, data = estimate_json(script, "--model", "llama3-8b")
    assert code == 0 and data["layout"]["data_parallel_size"] == 4
    p = memory.shard_parameters(PRESETS["llama3-8b"], RunSettings(1, 1))
    assert part(data, "optimizer")["bytes"] == 12 * p // 8
    assert part(data, "optimizer")["formula"].endswith("/ DP×CP 8")


def test_zero_3_model_states_equal_deepspeeds_own_estimator():
    """DeepSpeed's estimate_zero3_model_states_mem_needs without offload: 18 P / N on the GPU
    and 4 B a parameter of the largest layer (gathered), under DeepSpeed's ZeRO optimizer."""
    pytest.importorskip("deepspeed")
    from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs

    model, n = PRESETS["llama3-8b"], 8
    run_ = RunSettings(1, 1, data_parallel=n, zero_stage=3, zero_optimizer=True)
    ours = parts(memory.estimate(model, run_))
    _, gpu, largest = estimate_zero3_model_states_mem_needs(
        model.parameters,
        model.largest_layer,
        num_gpus_per_node=n,
        num_nodes=1,
        cpu_offload=False,
        cpu_offload_params=False,
        zero_init=True,
    )
    assert ours["gathered"] == largest
    assert ours["weights"] + ours["gradients"] + ours["optimizer"] + ours["gathered"] == gpu


def test_capacity_says_what_fits_and_exits_1_when_nothing_does():
    args = (
        "--model",
        "llama3-8b",
        "--micro-batch",
        1,
        "--world-size",
        8,
        "--global-batch",
        64,
        "--seq-len",
        8192,
        "--distributed-optimizer",
        "--recompute",
        "full",
    )
    fits = run("estimate", *args, "--capacity", "80G")
    assert (
        fits.exit_code == 0
        and "fits in 80.0 GiB; the largest micro-batch that fits and keeps the global batch 64: 2"
        in fits.output
    )
    short = run("estimate", *args, "--capacity", "40G")
    assert short.exit_code == 1
    assert "memory-exceeds-capacity" in short.output and "no micro-batch fits" in short.output


@pytest.mark.parametrize(
    "args, message",
    [
        (["--model", "gpt-5"], "--model 'gpt-5': not a preset"),
        (["--model", "missing.json"], "missing.json: cannot read it"),
        (["--capacity", "lots"], "--capacity 'lots': give a positive number"),
        (["--overhead", "-1G"], "--overhead '-1G'"),
        (
            ["--global-batch", 10, "--world-size", 4, "--micro-batch", 1],
            "global 10 does not split into micro 1 × DP 4 = 4: nearest are 8",
        ),
        (
            ["--global-batch", 64, "--world-size", 8, "--model", "125m"],
            "the micro-batch is not decided",
        ),
    ],
)
def test_bad_input_is_one_line_exit_2(tmp_path, args, message):
    result = run("estimate", *args)
    out = result.output
    assert result.exit_code in (1, 2) and message in out, out
    assert len([line for line in out.splitlines() if line.startswith("batchspec: error")]) == 1


@pytest.mark.parametrize(
    "text, message",
    [
        ("{", "not a JSON config.json"),
        ("[1, 2]", "a config.json is a JSON object, not list"),
        ('{"hidden_size": 64}', "no num_attention_heads or n_head"),
        (
            '{"hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": "2", '
            '"vocab_size": 10}',
            "num_hidden_layers is '2', not a positive integer",
        ),
    ],
)
def test_unreadable_config_json_is_exit_2_naming_the_file(tmp_path, text, message):
    config = tmp_path / "config.json"
    config.write_text(text)
    result = run("estimate", "--model", config)
    assert result.exit_code == 2 and f"{config}: {message}" in result.output


def test_estimate_of_a_framework_config_takes_its_layout(tmp_path):
    ds = tmp_path / "ds.json"
    ds.write_text(
        '{"train_batch_size": 64, "train_micro_batch_size_per_gpu": 2, '
        '"gradient_accumulation_steps": 4, "zero_optimization": {"stage": 2}}'
    )
    result = run("estimate", ds, "--world-size", 8, "--model", "llama3-1b", "--json")
    data = json.loads(result.output)
    assert result.exit_code == 0 and data["layout"]["micro_batch_size"] == 2
    grads = next(p for p in data["parts"] if p["name"] == "gradients")
    assert "/ DP 8" in grads["formula"]  # ZeRO 2 shards the gradients
    assert "ZeRO" not in json.dumps(data["findings"]) and GIB  # no finding without capacity


def test_a_checkpoint_folder_is_its_config_json(tmp_path):
    """``--model DIR`` reads DIR/config.json, as ``--model-config DIR`` does (it failed with
    "Is a directory"); a folder without one is a one-line input error."""
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "num_hidden_layers": 2,
        "vocab_size": 128,
        "tie_word_embeddings": False,
    }
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "config.json").write_text(json.dumps(config))
    flags = ("--global-batch", 8, "--micro-batch", 2, "--world-size", 2)
    code, folder = estimate_json(*flags, "--model", tmp_path / "ckpt")
    assert code == 0
    code, file = estimate_json(*flags, "--model", tmp_path / "ckpt" / "config.json")
    assert folder["total_bytes"] == file["total_bytes"] > 0
    (tmp_path / "empty").mkdir()
    result = run("estimate", *flags, "--model", tmp_path / "empty")
    assert result.exit_code == 2 and result.output.strip().endswith("a folder with no config.json")
