"""estimate: memory per GPU, part by part, against published formulas and DeepSpeed's own."""

import json
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner

from translator import memory
from translator.cli import main
from translator.memory import GIB, PRESETS, Run


def run(*args):
    result = CliRunner().invoke(main, ["estimate", *map(str, args)])
    return result.exit_code, result.output


def parts(estimate) -> dict:
    return {p.name: p.bytes for p in estimate.parts}


@pytest.mark.parametrize("name", list(PRESETS))
def test_every_preset_prints_a_breakdown_that_sums_to_its_total(name):
    code, out = run(
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
    assert code == 0, out
    data = json.loads(out)
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
    code, out = run(
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
    assert code == 0 and "8,030,261,248 parameters" in out and "total" in out


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
    base = Run(micro_batch_size=1, sequence_length=s)
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
    model, run_ = PRESETS["llama3-8b"], Run(micro_batch_size=1, sequence_length=4096)
    one = memory.activations(model, run_).bytes
    assert memory.activations(model, replace(run_, pipeline=4, micro_batches=8)).bytes == one
    assert memory.activations(model, replace(run_, pipeline=4, micro_batches=2)).bytes == one // 2
    vpp = memory.activations(model, replace(run_, pipeline=4, micro_batches=8, virtual_stages=2))
    assert vpp.bytes == pytest.approx(one * (1 + 3 / 8), rel=1e-6)


def test_model_states_are_megatrons_18_bytes_and_6_plus_12_over_dp_distributed():
    model, n = PRESETS["llama3-8b"], 8
    shard = memory.shard_parameters(model, Run(1, 1))
    plain = parts(memory.estimate(model, Run(1, 1, data_parallel=n)))
    assert plain["weights"] + plain["gradients"] + plain["optimizer"] == 18 * shard
    dist = parts(memory.estimate(model, Run(1, 1, data_parallel=n, zero_stage=1)))
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
        memory.estimate(model, Run(1, 8192, data_parallel=4, context=2, zero_stage=stage))
    )
    dp8 = parts(memory.estimate(model, Run(1, 8192, data_parallel=8, zero_stage=stage)))
    dp4 = parts(memory.estimate(model, Run(1, 8192, data_parallel=4, zero_stage=stage)))
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
    p = memory.shard_parameters(PRESETS["llama3-8b"], Run(1, 1))
    assert part(data, "optimizer")["bytes"] == 12 * p // 8
    assert part(data, "optimizer")["formula"].endswith("/ DP×CP 8")


def test_zero_3_model_states_equal_deepspeeds_own_estimator():
    """DeepSpeed's estimate_zero3_model_states_mem_needs without offload: 18 P / N on the GPU
    plus its largest-layer term, which batchspec leaves to the overhead."""
    pytest.importorskip("deepspeed")
    from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs

    model, n = PRESETS["llama3-8b"], 8
    ours = parts(memory.estimate(model, Run(1, 1, data_parallel=n, zero_stage=3)))
    _, gpu, largest = estimate_zero3_model_states_mem_needs(
        model.parameters,
        0,
        num_gpus_per_node=n,
        num_nodes=1,
        cpu_offload=False,
        cpu_offload_params=False,
        zero_init=True,
    )
    assert ours["weights"] + ours["gradients"] + ours["optimizer"] == pytest.approx(
        gpu - largest, rel=1e-6
    )


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
    code, out = run(*args, "--capacity", "80G")
    assert (
        code == 0
        and "fits in 80.0 GiB; the largest micro-batch that fits and keeps the global batch 64: 2"
        in out
    )
    code, out = run(*args, "--capacity", "40G")
    assert code == 1 and "memory-exceeds-capacity" in out and "no micro-batch fits" in out


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
    code, out = run(*args)
    assert code in (1, 2) and message in out, out
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
    code, out = run("--model", config)
    assert code == 2 and f"{config}: {message}" in out


def test_estimate_of_a_framework_config_takes_its_layout(tmp_path):
    ds = tmp_path / "ds.json"
    ds.write_text(
        '{"train_batch_size": 64, "train_micro_batch_size_per_gpu": 2, '
        '"gradient_accumulation_steps": 4, "zero_optimization": {"stage": 2}}'
    )
    code, out = run(ds, "--world-size", 8, "--model", "llama3-1b", "--json")
    data = json.loads(out)
    assert code == 0 and data["layout"]["micro_batch_size"] == 2
    grads = next(p for p in data["parts"] if p["name"] == "gradients")
    assert grads["formula"].endswith("/ DP 8")  # ZeRO 2 shards the gradients
    assert "ZeRO" not in json.dumps(data["findings"]) and GIB  # no finding without capacity


# A file's settings, and the flags given beside it ---------------------------------------------

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
#: Megatron-LM's llama3-8b example in NVIDIA's style, TP 2 on 8 GPUs (DP 4).
LLAMA_TP2 = FIXTURES / "megatron/valid/pretrain_llama3_8b_fp8.sh"
#: The same, as NVIDIA's example runs it: TP 1 (DP 8), gradients reduced in bf16, FP8.
LLAMA_DP8 = FIXTURES / "megatron/valid/llama3_8b_h100_dp8_distopt.sh"


def estimate_json(*args):
    """``estimate --json``; on the 125m preset unless the test names a model (these tests are
    about the layout and settings a file gives, not about its model)."""
    named = any(a in ("--model", "--model-config") for a in args)
    code, out = run(*args, *(() if named else ("--model", "125m")), "--json")
    return code, json.loads(out)


def part(data: dict, name: str) -> dict:
    return next(p for p in data["parts"] if p["name"] == name)


@pytest.fixture
def ds_json(tmp_path):
    path = tmp_path / "ds.json"
    path.write_text(
        '{"train_batch_size": 64, "train_micro_batch_size_per_gpu": 2,\n'
        ' "gradient_accumulation_steps": 4,\n'
        ' "zero_optimization": {"stage": 2}}\n'
    )
    return path


def test_seq_len_fills_a_file_that_has_none(ds_json):
    code, data = estimate_json(ds_json, "--world-size", 8, "--seq-len", 8192)
    assert code == 0 and data["sequence_length"] == 8192 == data["layout"]["sequence_length"]
    assert data["overrides"] == [] and "2048" not in json.dumps(data["notes"])
    activations = part(data, "activations")["formula"]
    assert "s=8192" in activations


def test_seq_len_overrides_the_files_own_and_says_so():
    code, data = estimate_json(LLAMA_TP2, "--model", "llama3-8b", "--seq-len", 4096)
    assert code == 0 and data["sequence_length"] == 4096
    assert [o["message"] for o in data["overrides"]] == ["--seq-len 4096 overrides the file's 8192"]
    code, out = run(LLAMA_TP2, "--model", "llama3-8b", "--seq-len", 4096)
    assert "sequence 4096" in out and "  --seq-len 4096 overrides the file's 8192" in out


def test_micro_batch_overrides_keeping_the_global_batch(ds_json):
    code, data = estimate_json(ds_json, "--world-size", 8, "--micro-batch", 4)
    layout = data["layout"]
    assert code == 0 and (layout["micro_batch_size"], layout["gradient_accumulation_steps"]) == (
        4,
        2,
    )
    assert layout["global_batch_size"] == 64
    assert data["overrides"][0]["message"] == "--micro-batch 4 overrides the file's 2"
    assert data["rederived"] == ["accumulation 4 → 2"]


def test_a_micro_batch_that_breaks_the_global_batch_is_refused(ds_json):
    code, out = run(ds_json, "--world-size", 8, "--micro-batch", 3)
    lines = [line for line in out.splitlines() if line.startswith("batchspec: error")]
    assert code == 2 and len(lines) == 1, out
    assert f"--micro-batch 3 beside {ds_json} breaks the file's batch" in lines[0]
    assert "micro-batches that keep the global batch 64 on DP 8: 1, 2, 4, 8" in lines[0]


def test_zero_stage_overrides_the_files_stage_and_names_where_it_is_set(ds_json):
    code, data = estimate_json(ds_json, "--world-size", 8, "--zero-stage", 3)
    assert code == 0 and data["zero_stage"] == 3
    assert part(data, "weights")["formula"].endswith("/ DP 8")
    (override,) = data["overrides"]
    assert override["message"] == (
        f"--zero-stage 3 overrides the file's 2 ({ds_json}:3 zero_optimization.stage)"
    )
    code, data = estimate_json(ds_json, "--world-size", 8)
    assert data["zero_stage"] == 2 and not part(data, "weights")["formula"].endswith("/ DP 8")
    assert data["settings"] == [
        {"field": "zero_stage", "value": 2, "where": f"{ds_json}:3 zero_optimization.stage"}
    ]


def test_zero_stage_without_a_file():
    code, data = estimate_json(
        "--micro-batch", 1, "--accumulation", 1, "--world-size", 4, "--zero-stage", 2
    )
    assert code == 0 and part(data, "gradients")["formula"].endswith("/ DP 4")
    assert not part(data, "weights")["formula"].endswith("/ DP 4")


@pytest.mark.parametrize(
    "args, message",
    [
        (["--lr", "1e-4"], "--lr beside {file}: it does not change the memory estimate"),
        (["--nnodes", 2], "give both --nnodes and --nproc-per-node, or --world-size alone"),
        (
            ["--zero-stage", 2, "--distributed-optimizer"],
            "--zero-stage 2 and --distributed-optimizer (ZeRO 1): give one of them",
        ),
        (["--tp", 3], "--tp 3 beside {file} breaks the file's batch: world size 8 does not divide"),
    ],
)
def test_a_flag_beside_a_file_that_cannot_be_used_is_one_line_exit_2(args, message):
    code, out = run(LLAMA_TP2, *args)
    lines = [line for line in out.splitlines() if line.startswith("batchspec: error")]
    assert code == 2 and len(lines) == 1 and message.format(file=LLAMA_TP2) in lines[0], out


def test_megatrons_distributed_optimizer_is_read_so_the_8b_example_fits_80g():
    """NVIDIA's llama3-8b on 8 H100 (TP 2, DP 4): 18 bytes a parameter without the distributed
    optimizer (94 GiB, exit 1 before it was read); with it 6 + 12/DP."""
    code, data = estimate_json(LLAMA_TP2, "--model", "llama3-8b", "--capacity", "80G")
    assert code == 0 and data["fits"] is True and data["zero_stage"] == 1
    assert part(data, "optimizer")["formula"].endswith("/ DP 4")
    assert not part(data, "gradients")["formula"].endswith("/ DP 4")  # the whole grad buffer
    assert data["sequence_parallel"] is True
    assert {s["where"].rsplit(" ", 1)[1] for s in data["settings"]} == {
        "--use-distributed-optimizer",
        "--sequence-parallel",
    }


def test_the_dp8_example_counts_as_megatron_does():
    """TP 1 on 8 GPUs: bf16 weights 2 P, bf16-reduced gradients 2 P, optimizer 12 P / 8 (P the
    8.03 B parameters): 15.0 + 15.0 + 11.2 GiB, 41.1 GiB of model states (Megatron's own
    6 + 12/8 bytes a parameter less the 2 its --grad-reduce-in-bf16 saves)."""
    code, data = estimate_json(LLAMA_DP8, "--model", "llama3-8b", "--capacity", "80G")
    p = memory.shard_parameters(PRESETS["llama3-8b"], Run(1, 1))
    states = {n: part(data, n)["bytes"] for n in ("weights", "gradients", "optimizer")}
    assert states == {"weights": 2 * p, "gradients": 2 * p, "optimizer": 12 * p // 8}
    assert sum(states.values()) / GIB == pytest.approx(41.1, abs=0.05)
    assert any("FP8 is not counted" in note for note in data["notes"])
    # at sequence 8192 without recomputation its bf16 activations (36 GiB) do not fit 80G ...
    assert code == 1 and data["fits"] is False
    # ... and with full recomputation beside it they do
    code, data = estimate_json(
        LLAMA_DP8, "--model", "llama3-8b", "--capacity", "80G", "--recompute", "full"
    )
    assert code == 0 and data["fits"] is True and data["recompute"] == "full"


def test_world_size_overrides_the_launch_lines_and_re_derives_accumulation():
    code, data = estimate_json(LLAMA_TP2, "--world-size", 16)
    assert code == 0 and data["layout"]["gradient_accumulation_steps"] == 16
    assert data["overrides"][0]["message"] == "--world-size 16 overrides the file's 8"
    assert data["rederived"] == ["accumulation 32 → 16", "DP 4 → 8"]


def test_framework_choices_are_the_registry():
    from translator.cli.estimate import estimate
    from translator.frameworks import names

    option = next(p for p in estimate.params if p.name == "framework")
    assert tuple(option.type.choices) == names()
    code, out = run("--framework", "nope")
    assert code == 2 and "'nope' is not one of" in out and all(n in out for n in names())


def test_framework_without_a_file_is_refused():
    code, out = run("--framework", "deepspeed")
    assert code == 2 and "--framework names how to read FILE: give a FILE" in out


def test_deepspeed_offload_matches_deepspeeds_own_estimators(tmp_path):
    """ZeRO-Offload keeps the optimizer states and gradients on the CPU (and at stage 3 the
    weights with offload_param): DeepSpeed's estimate_zero2/3_model_states_mem_needs."""
    pytest.importorskip("deepspeed")
    from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs
    from deepspeed.runtime.zero.stage_1_and_2 import estimate_zero2_model_states_mem_needs

    model, n = PRESETS["llama3-8b"], 8
    p = memory.shard_parameters(model, Run(1, 1))

    def states(stage, *offload):
        config = {"stage": stage} | {f"offload_{k}": {"device": "cpu"} for k in offload}
        path = tmp_path / f"ds{stage}{''.join(offload)}.json"
        path.write_text(
            json.dumps({"train_micro_batch_size_per_gpu": 1, "zero_optimization": config})
        )
        code, data = estimate_json(path, "--world-size", n, "--model", "llama3-8b")
        assert code == 0, data
        return sum(part(data, k)["bytes"] for k in ("weights", "gradients", "optimizer"))

    _, gpu2 = estimate_zero2_model_states_mem_needs(p, n, 1, cpu_offload=True)
    assert states(2, "optimizer") == gpu2
    _, gpu3, largest = estimate_zero3_model_states_mem_needs(p, 0, n, 1, True, False)
    assert states(3, "optimizer") == pytest.approx(gpu3 - largest, rel=1e-6)
    _, gpu3, largest = estimate_zero3_model_states_mem_needs(p, 0, n, 1, True, True)
    assert states(3, "optimizer", "param") == gpu3 - largest == 0


def test_offload_param_below_stage_3_is_a_note(tmp_path):
    path = tmp_path / "ds.json"
    path.write_text(
        '{"train_micro_batch_size_per_gpu": 1,\n'
        ' "zero_optimization": {"stage": 2, "offload_param": {"device": "cpu"}}}'
    )
    code, data = estimate_json(path, "--world-size", 8)
    assert code == 0 and data["offload"] == []
    assert data["notes"][0] == (
        f"{path}:2 zero_optimization.offload_param.device cpu: only ZeRO stage 3 offloads weights"
    )


def megatron_script(tmp_path, *flags: str):
    path = tmp_path / "train.sh"
    path.write_text(
        "torchrun --nproc_per_node 8 pretrain_gpt.py \\\n"
        "    --tensor-model-parallel-size 2 --micro-batch-size 1 --global-batch-size 64 \\\n"
        f"    --seq-length 2048 {' '.join(flags)}\n"
    )
    return path


@pytest.mark.parametrize(
    "flags, want",
    [
        (["--use-megatron-fsdp"], {"zero_stage": 3}),
        (
            ["--use-megatron-fsdp", "--data-parallel-sharding-strategy optim_grads"],
            {"zero_stage": 2},
        ),
        (["--use-torch-fsdp2"], {"zero_stage": 3}),
        (["--use-torch-fsdp2", "--torch-fsdp2-no-reshard-after-forward"], {"zero_stage": 2}),
        (["--use-distributed-optimizer", "--optimizer-cpu-offload"], {"offload": ["optimizer"]}),
        (["--recompute-activations"], {"recompute": "selective"}),
        (
            [
                "--recompute-granularity full",
                "--recompute-method uniform",
                "--recompute-num-layers 1",
            ],
            {"recompute": "full"},
        ),
        (["--sequence-parallel"], {"sequence_parallel": True}),
        (["--bf16", "--grad-reduce-in-bf16"], {"zero_stage": 0}),
    ],
)
def test_megatrons_sharding_and_recompute_flags_are_read(tmp_path, flags, want):
    code, data = estimate_json(megatron_script(tmp_path, *flags))
    assert code == 0 and {k: data[k] for k in want} == want, data["settings"]


def test_megatron_settings_it_cannot_count_are_notes(tmp_path):
    path = megatron_script(
        tmp_path,
        "--use-distributed-optimizer --num-distributed-optimizer-instances 2",
        "--recompute-granularity full --recompute-method block --recompute-num-layers 4",
        "$(cat extra.args)",
    )
    code, data = estimate_json(path, "--pp", 1, "--cp", 1)  # what the unknown word may set
    assert code == 0 and data["zero_stage"] == 1 and data["recompute"] == "full"
    notes = " | ".join(data["notes"])
    assert "--num-distributed-optimizer-instances 2: the optimizer is sharded over DP" in notes
    assert "--recompute-method block with --recompute-num-layers 4" in notes
    assert "$(cat extra.args)" in notes and "may hold more settings" in notes


def test_an_axolotl_config_gives_its_fsdp_and_gradient_checkpointing():
    code, data = estimate_json(
        FIXTURES / "axolotl/valid/llama31_8b_tp2_fsdp2.yml", "--world-size", 8
    )
    assert code == 0 and (data["zero_stage"], data["recompute"]) == (3, "full")
    code, data = estimate_json(
        FIXTURES / "axolotl/valid/qwen25_7b_fft_zero2.yml", "--world-size", 8, "--recompute", "none"
    )
    assert code == 0 and data["zero_stage"] == 2  # its DeepSpeed JSON's
    assert data["overrides"][0]["message"].startswith("--recompute none overrides the file's full")


#: A Trainer's ``fsdp`` and ``fsdp_config`` (YAML) -> (ZeRO stage, parts offloaded).
FSDP_CASES = [
    ('"full_shard auto_wrap"', None, (3, [])),
    ('"shard_grad_op auto_wrap offload"', None, (2, ["gradients", "optimizer", "weights"])),
    ("[full_shard]", "{version: 1, reshard_after_forward: SHARD_GRAD_OP}", (2, [])),
    ("true", "{reshard_after_forward: false}", (2, [])),
]


@pytest.mark.parametrize("fsdp, config, want", FSDP_CASES)
def test_an_hf_trainer_config_gives_its_fsdp(tmp_path, fsdp, config, want):
    path = tmp_path / "args.yaml"
    path.write_text(
        "per_device_train_batch_size: 2\ngradient_accumulation_steps: 1\n"
        f"fsdp: {fsdp}\n" + (f"fsdp_config: {config}\n" if config else "")
    )
    code, data = estimate_json(path, "--world-size", 8, "--framework", "hf")
    assert code == 0 and (data["zero_stage"], data["offload"]) == want


def test_the_fsdp_reading_agrees_with_transformers(tmp_path):
    """TrainingArguments' own plugin arguments for each case above give the same stage and
    offload (FSDP2 resharding after forward is ZeRO 3, not resharding ZeRO 2)."""
    pytest.importorskip("transformers")
    import yaml
    from transformers import TrainingArguments

    stages = {True: 3, False: 2, "full_shard": 3, "shard_grad_op": 2}
    for fsdp, config, want in FSDP_CASES:
        args = TrainingArguments(
            output_dir=str(tmp_path),
            use_cpu=True,
            fsdp=yaml.safe_load(fsdp),
            fsdp_config=yaml.safe_load(config) if config else None,
        )
        plugin = args.fsdp_plugin_args
        offload = ["gradients", "optimizer", "weights"] if plugin.get("cpu_offload") else []
        assert (stages[plugin["reshard_after_forward"]], offload) == want, (fsdp, config)


def test_hybrid_fsdp_is_a_note(tmp_path):
    path = tmp_path / "args.yaml"
    path.write_text(
        "per_device_train_batch_size: 2\nfsdp: hybrid_shard\nfsdp_config: {version: 1}\n"
    )
    code, data = estimate_json(path, "--world-size", 8, "--framework", "hf")
    assert code == 0 and data["zero_stage"] == 0
    assert "FSDP HYBRID_SHARD shards within a node only" in data["notes"][0]


def test_llamafactory_checkpoints_unless_disabled(tmp_path):
    path = tmp_path / "sft.yaml"
    text = "stage: sft\ntemplate: llama3\nfinetuning_type: full\nper_device_train_batch_size: 1\n"
    path.write_text(text)
    code, data = estimate_json(path, "--world-size", 8)
    assert code == 0 and data["recompute"] == "full"
    path.write_text(text + "disable_gradient_checkpointing: true\n")
    code, data = estimate_json(path, "--world-size", 8)
    assert code == 0 and data["recompute"] == "none"
