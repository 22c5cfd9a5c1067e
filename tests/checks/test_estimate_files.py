"""estimate of a file: the settings it gives (ZeRO, offload, FSDP, Megatron's flags) and the flags given beside it."""

import json

import pytest
from paths import ROOT
from run_batchspec import run
from test_estimate import estimate_json, part

from translator.model import memory
from translator.model.memory import GIB, PRESETS, RunSettings

# A file's settings, and the flags given beside it ---------------------------------------------

FIXTURES = ROOT / "fixtures"
#: Megatron-LM's llama3-8b example in NVIDIA's style, TP 2 on 8 GPUs (DP 4).
LLAMA_TP2 = FIXTURES / "megatron/valid/pretrain_llama3_8b_fp8.sh"
#: The same, as NVIDIA's example runs it: TP 1 (DP 8), gradients reduced in bf16, FP8.
LLAMA_DP8 = FIXTURES / "megatron/valid/llama3_8b_h100_dp8_distopt.sh"


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
    result = run("estimate", LLAMA_TP2, "--model", "llama3-8b", "--seq-len", 4096)
    code, out = result.exit_code, result.output
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
    result = run("estimate", ds_json, "--world-size", 8, "--micro-batch", 3)
    code, out = result.exit_code, result.output
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
    result = run("estimate", LLAMA_TP2, *args)
    code, out = result.exit_code, result.output
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
    p = memory.shard_parameters(PRESETS["llama3-8b"], RunSettings(1, 1))
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
    result = run("estimate", "--framework", "nope")
    code, out = result.exit_code, result.output
    assert code == 2 and "'nope' is not one of" in out and all(n in out for n in names())


def test_framework_without_a_file_is_refused():
    result = run("estimate", "--framework", "deepspeed")
    code, out = result.exit_code, result.output
    assert code == 2 and "--framework names how to read FILE: give a FILE" in out


def test_deepspeed_offload_matches_deepspeeds_own_estimators(tmp_path):
    """ZeRO-Offload keeps the optimizer states and gradients on the CPU (and at stage 3 the
    weights with offload_param): DeepSpeed's estimate_zero2/3_model_states_mem_needs."""
    pytest.importorskip("deepspeed")
    from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs
    from deepspeed.runtime.zero.stage_1_and_2 import estimate_zero2_model_states_mem_needs

    model, n = PRESETS["llama3-8b"], 8
    p = memory.shard_parameters(model, RunSettings(1, 1))

    def states(stage, *offload):
        config = {"stage": stage} | {f"offload_{k}": {"device": "cpu"} for k in offload}
        path = tmp_path / f"ds{stage}{''.join(offload)}.json"
        path.write_text(
            json.dumps({"train_micro_batch_size_per_gpu": 1, "zero_optimization": config})
        )
        code, data = estimate_json(path, "--world-size", n, "--model", "llama3-8b")
        assert code == 0, data
        names = ("weights", "gradients", "optimizer", "gathered")
        return sum(p["bytes"] for p in data["parts"] if p["name"] in names)

    largest = model.largest_layer
    _, gpu2 = estimate_zero2_model_states_mem_needs(p, n, 1, cpu_offload=True)
    assert states(2, "optimizer") == gpu2
    _, gpu3, _ = estimate_zero3_model_states_mem_needs(p, largest, n, 1, True, False)
    assert states(3, "optimizer") == gpu3
    _, gpu3, gathered = estimate_zero3_model_states_mem_needs(p, largest, n, 1, True, True)
    assert states(3, "optimizer", "param") == gpu3 == gathered > 0  # the largest layer


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


@pytest.mark.parametrize(
    "path, engine",
    [
        # the Trainer under DeepSpeed: the ZeRO stage of the JSON its --deepspeed names
        ("fixtures/hf/jobs/torchrun_qwen_style.sh", {"framework": "hf", "deepspeed_zero_stage": 3}),
        # Megatron's distributed optimizer shards as ZeRO 1 does, but no DeepSpeed runs
        (
            "fixtures/megatron/valid/llama3_8b_h100_dp8_distopt.sh",
            {"framework": "megatron", "deepspeed_zero_stage": None},
        ),
    ],
)
def test_the_estimate_says_whose_engine_and_zero_stage_it_counts(path, engine):
    code, out = estimate_json(ROOT / path, "--seq-len", 1024, "--world-size", 8)
    assert code in (0, 1) and out["engine"] == engine
    assert out["zero_stage"] == (3 if engine["deepspeed_zero_stage"] else 1)
