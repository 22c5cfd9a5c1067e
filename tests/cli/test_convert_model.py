"""convert carries the model the source trains (issue 35, item 8): a Megatron job of Llama-3-8B's
shape becomes torchtitan's ``llama3_8b``, litgpt's ``Llama-3-8B`` and nanotron's
``LlamaConfig`` of that shape, never a silent debug model; a shape no config function builds
stops the torchtitan script until one is picked, naming the nearest; a file that holds the
batch only says the model is set elsewhere. ``--tp``/``--pp`` given on the command line
override the file's sizes, the accumulation re-solved, or are refused in one line."""

import json
import os
import re
import subprocess

import pytest
from run_batchspec import model_of, run, run_json

#: Megatron-LM's flags for Llama-3-8B: grouped-query attention (megatron-core takes
#: --num-query-groups only with --group-query-attention), no linear biases, RMSNorm, rotary.
LLAMA3_8B_FLAGS = (
    "--num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32 "
    "--group-query-attention --num-query-groups 8 --seq-length 8192 "
    "--max-position-embeddings 8192 --swiglu --normalization RMSNorm "
    "--position-embedding-type rope --untie-embeddings-and-output-weights "
    "--disable-bias-linear --vocab-size 128256"
)
#: Llama-3-8B's parameters (published; as the source's flags count them).
LLAMA3_8B = 8_030_261_248


def megatron_job(tmp_path, flags: str = LLAMA3_8B_FLAGS, sizes: str = "--tp 2 --pp 2"):
    """A Megatron launch on 2 nodes × 8 with ``flags``, global 64, micro 1 and ``sizes``
    (``--tp 2 --pp 2``: tensor 2, pipeline 2)."""
    tp, pp = re.findall(r"\d+", sizes)
    path = tmp_path / "train.sh"
    path.write_text(
        "#!/bin/bash\ntorchrun --nnodes 2 --nproc_per_node 8 pretrain_gpt.py \\\n"
        f"    {flags} \\\n"
        f"    --tensor-model-parallel-size {tp} --pipeline-model-parallel-size {pp} \\\n"
        "    --micro-batch-size 1 --global-batch-size 64 --bf16\n"
    )
    return path


def converted(job, target: str, *args) -> tuple[str, dict]:
    """``convert JOB --to TARGET --out -``: the file written and the findings by code."""
    result, out = run_json("convert", job, "--to", target, "--out", "-", *args)
    assert result.exit_code == 0, result.output
    return out["text"], {f["code"]: f for f in out["findings"]}


def config_line(script: str, environment: dict | None = None) -> subprocess.CompletedProcess:
    """What real bash makes of a torchtitan script's ``MODULE``/``CONFIG`` lines."""
    lines = [line for line in script.splitlines() if line.startswith(("MODULE=", "CONFIG="))]
    return subprocess.run(
        ["bash", "-c", "\n".join([*lines, 'echo "$MODULE $CONFIG"'])],
        capture_output=True,
        text=True,
        env={"PATH": os.environ["PATH"], **(environment or {})},
    )


# torchtitan ------------------------------------------------------------------------------------


def test_llama3_8b_flags_run_torchtitans_llama3_8b_config(tmp_path):
    job = megatron_job(tmp_path)
    assert model_of(job)["parameters"] == LLAMA3_8B
    script, found = converted(job, "torchtitan")
    ran = config_line(script)
    assert ran.returncode == 0 and ran.stdout.split() == ["llama3", "llama3_8b"]
    assert "debugmodel" not in script
    assert "torchtitan.sh runs --config llama3_8b" in found["model-carried"]["message"]
    written = tmp_path / "torchtitan.sh"
    written.write_text(script)
    model = model_of(written)  # the written script, read as torchtitan's: the source's model
    assert model["architecture"] == "llama3 8B (llama3_8b)"
    assert model["parameters"] == LLAMA3_8B


def test_a_shape_no_config_function_builds_stops_the_script_naming_the_nearest(tmp_path):
    """Without --group-query-attention megatron-core builds 32 key/value heads: not
    llama3_8b, so the script names no config function and stops until CONFIG is set."""
    job = megatron_job(tmp_path, LLAMA3_8B_FLAGS.replace("--group-query-attention ", ""))
    script, found = converted(job, "torchtitan")
    ran = config_line(script)
    assert ran.returncode != 0 and ran.stdout == ""
    assert "set CONFIG: no torchtitan config function builds the source model" in ran.stderr
    assert config_line(script, {"CONFIG": "llama3_8b"}).stdout.split() == ["llama3", "llama3_8b"]
    assert "debugmodel" not in script
    warned = found["model-not-matched"]
    assert warned["severity"] == "warning"
    assert warned["message"].endswith(
        "; the nearest, llama3_8b, differs: key/value heads 32 where llama3_8b has 8"
    )
    assert warned["hint"].startswith("set CONFIG to llama3_8b if that is the model meant")
    assert "# No config function builds the source's model (the nearest, llama3_8b" in script


def test_a_model_not_known_stops_the_script_saying_why(tmp_path):
    job = megatron_job(tmp_path, LLAMA3_8B_FLAGS.replace(" --vocab-size 128256", ""))
    script, found = converted(job, "torchtitan")
    assert config_line(script).returncode != 0 and "debugmodel" not in script
    message = found["model-not-matched"]["message"]
    assert "(not known: --vocab-size not given as numbers" in message
    assert message.endswith("; batchspec does not know its shape")


def test_a_job_that_names_no_model_keeps_the_debug_model_default(tmp_path):
    job = megatron_job(tmp_path, flags="--seq-length 8192")
    script, found = converted(job, "torchtitan")
    assert "CONFIG=${CONFIG:-llama3_debugmodel}" in script
    assert not {"model-carried", "model-not-matched", "model-not-carried"} & set(found)


def test_a_hub_models_shape_torchtitan_030_lacks_names_its_older_flavor(tmp_path):
    """Llama-3.2-1B (a local config.json): 0.3.0 has no config function of its shape, 0.2.2's
    flavor 1B had; litgpt has its own Llama-3.2-1B, untied as litgpt trains every model."""
    (tmp_path / "Llama-3.2-1B").mkdir()
    (tmp_path / "Llama-3.2-1B" / "config.json").write_text(
        json.dumps(
            {
                "architectures": ["LlamaForCausalLM"],
                "model_type": "llama",
                "hidden_size": 2048,
                "intermediate_size": 8192,
                "num_attention_heads": 32,
                "num_key_value_heads": 8,
                "num_hidden_layers": 16,
                "vocab_size": 128256,
                "tie_word_embeddings": True,
            }
        )
    )
    job = tmp_path / "job.sh"
    job.write_text(
        "#!/bin/bash\ntorchrun --nnodes 2 --nproc_per_node 8 train.py --model_name_or_path "
        f"{tmp_path / 'Llama-3.2-1B'} --per_device_train_batch_size 4 --gradient_accumulation_steps 2 "
        "--output_dir out\n"
    )
    _, found = converted(job, "torchtitan")
    assert found["model-not-matched"]["hint"].endswith(
        "(torchtitan 0.2.2's llama3 flavor 1B builds it: [model] flavor)"
    )
    text, found = converted(job, "litgpt")
    assert "model_name: Llama-3.2-1B\n" in text
    assert found["model-carried"]["message"].endswith(
        "; litgpt unties its head (its GPT never ties)"
    )


# litgpt, nanotron, the HF Trainer ---------------------------------------------------------------


def test_litgpt_trains_its_llama3_8b_config_on_the_sizes_given(tmp_path):
    """litgpt has no tensor or pipeline parallelism: --tp 1 --pp 1 make every rank
    data-parallel (it refused them before), and the file names litgpt's own Llama-3-8B."""
    job = megatron_job(tmp_path)
    text, found = converted(job, "litgpt", "--tp", 1, "--pp", 1)
    assert "model_name: Llama-3-8B\n" in text
    assert "(the same shape: Llama-3.1-8B)" in found["model-carried"]["message"]
    written = tmp_path / "litgpt.yaml"
    written.write_text(text)
    model = model_of(written)
    assert (model["architecture"], model["parameters"]) == ("GPT (Llama-3-8B)", LLAMA3_8B)
    _, back = run_json("inspect", written)
    assert (back["world_size"], back["data_parallel_size"]) == (16, 16)
    assert (back["global_batch_size"], back["gradient_accumulation_steps"]) == (64, 4)


def test_a_shape_no_litgpt_config_has_is_written_as_its_model_config(tmp_path):
    small = (
        "--num-layers 4 --hidden-size 256 --ffn-hidden-size 704 --num-attention-heads 8 "
        "--group-query-attention --num-query-groups 2 --swiglu --normalization RMSNorm "
        "--position-embedding-type rope --untie-embeddings-and-output-weights "
        "--disable-bias-linear --vocab-size 1000 --seq-length 128"
    )
    job = megatron_job(tmp_path, small, "--tp 1 --pp 1")
    source = model_of(job)["parameters"]
    text, found = converted(job, "litgpt")
    assert "model_config:\n" in text and "model_name" not in text
    assert "no litgpt config has its shape" in found["model-carried"]["message"]
    written = tmp_path / "litgpt.yaml"
    written.write_text(text)
    assert model_of(written)["parameters"] == source


def test_nanotron_carries_the_model_as_its_own_llama_config(tmp_path):
    """The written model_config, loaded by nanotron's own Config beside the batch blocks, is a
    LlamaConfig that transformers builds (on the meta device) with Llama-3-8B's parameters."""
    pytest.importorskip("nanotron")
    import torch
    import yaml
    from transformers import LlamaConfig, LlamaForCausalLM

    from translator.frameworks.nanotron import native
    from translator.frameworks.nanotron.engine import whole_config
    from translator.rank.context import RunContext
    from translator.spec import BatchSpec

    text, found = converted(megatron_job(tmp_path), "nanotron")
    assert "carries the source's model as LlamaConfig" in found["model-carried"]["message"]
    blocks = yaml.safe_load(text)
    spec = BatchSpec(
        global_batch_size=64, micro_batch_size=1, world_size=16, tensor_parallel_size=2,
        pipeline_parallel_size=2, sequence_length=8192,
    )  # fmt: skip
    ctx = RunContext(spec, tmp_path / "nanotron.yaml", tmp_path, 1, "tiny", 8192, 0, 0, 16)
    whole = whole_config(ctx, blocks)
    whole["model"]["model_config"] = blocks["model"]["model_config"]
    llama = native.config().get_config_from_dict(whole).model.model_config
    assert type(llama).__name__ == "LlamaConfig"
    keys = ("hidden_size", "intermediate_size", "num_attention_heads", "num_hidden_layers")
    keys += ("num_key_value_heads", "vocab_size", "tie_word_embeddings")
    with torch.device("meta"):
        built = LlamaForCausalLM(LlamaConfig(**{k: getattr(llama, k) for k in keys}))
    assert sum(p.numel() for p in built.parameters()) == LLAMA3_8B


def test_a_file_of_the_batch_only_says_where_the_model_is_set(tmp_path):
    _, found = converted(megatron_job(tmp_path), "hf", "--tp", 1, "--pp", 1)
    said = found["model-not-carried"]
    assert said["message"].startswith("hf.yaml holds the batch only: it does not name the model")
    assert "train.sh: Megatron flags (GPT (Megatron flags): 32 layers" in said["message"]
    assert f"{LLAMA3_8B:,} parameters" in said["message"]


# --tp / --pp on the command line ------------------------------------------------------------------


def test_given_sizes_override_the_files_and_the_accumulation_follows(tmp_path):
    job = megatron_job(tmp_path)
    result, out = run_json("convert", job, "--to", "megatron", "--out", "-", "--tp", 1)
    assert result.exit_code == 0, result.output
    sizes = ("tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size")
    assert tuple(out[k] for k in sizes) == (1, 2, 8)
    assert (out["global_batch_size"], out["gradient_accumulation_steps"]) == (64, 8)
    assert "--tensor-model-parallel-size 1" in out["text"]
    (said,) = [f for f in out["findings"] if f["code"] == "convert-layout-changed"]
    assert said["message"] == (
        "the batch is written on tensor 2 → 1 (--tp), not the sizes "
        f"{job} sets: data-parallel 4 → 8, accumulation 16 → 8, global batch 64 kept"
    )


def test_given_sizes_the_world_cannot_take_are_refused_in_one_line(tmp_path):
    job = megatron_job(tmp_path)
    result = run("convert", job, "--to", "megatron", "--out", tmp_path / "out", "--tp", 3)
    assert result.exit_code == 1 and not (tmp_path / "out").exists()
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith(
        f"batchspec: error: {job} with --tp 3: world size 16 does not divide by tensor 3"
    )


def test_sizes_the_file_leaves_out_still_only_fill_them(tmp_path):
    """A DeepSpeed JSON under Megatron says no tensor size: --tp gives it, as before."""
    ds = tmp_path / "ds.json"
    ds.write_text(json.dumps({"train_batch_size": 64, "train_micro_batch_size_per_gpu": 2}))
    result, out = run_json(
        "convert", ds, "--to", "megatron", "--out", "-", "--world-size", 16, "--tp", 2
    )
    assert result.exit_code == 0, result.output
    assert (out["tensor_parallel_size"], out["data_parallel_size"]) == (2, 8)
    assert "convert-layout-changed" not in {f["code"] for f in out["findings"]}
