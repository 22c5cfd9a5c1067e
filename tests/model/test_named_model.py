"""The model a job names, resolved at read time and offline (issue 27, items 1 and 7): where it
is found, what it counts, and the analytic count checked against transformers' own model built
on the meta device (no weights, nothing downloaded)."""

import json
from pathlib import Path

import pytest
from run_batchspec import inspected, run

from translator.inspection import inspect_file
from translator.model.memory import COUNTED, LAYER_BIASES, PRESETS, hf_shape

#: The tiny Llama of issue 27 (2 layers × 64, 4 heads, 2 KV heads, FFN 172, vocab 512).
TINY = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 172,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "num_hidden_layers": 2,
    "vocab_size": 512,
    "tie_word_embeddings": False,
}
LLAMA_8B = TINY | {
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "num_hidden_layers": 32,
    "vocab_size": 128256,
}


def model_of(path, *extra) -> dict:
    """The model ``inspect`` names for ``path`` at world 2."""
    return inspected(path, "--world-size", 2, *extra)["model"]


def folder_with(tmp_path: Path, name: str, config: dict) -> Path:
    folder = tmp_path / name
    folder.mkdir(parents=True)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


@pytest.mark.parametrize("config, parameters", [(TINY, 156_480), (LLAMA_8B, 8_030_261_248)])
def test_the_analytic_count_is_transformers_count(tmp_path, config, parameters):
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    folder_with(tmp_path, "m", config)
    (tmp_path / "ax.yml").write_text("base_model: ./m\nmicro_batch_size: 1\n")
    assert model_of(tmp_path / "ax.yml")["parameters"] == parameters
    with torch.device("meta"):
        built = transformers.LlamaForCausalLM(transformers.LlamaConfig(**config))
    assert sum(p.numel() for p in built.parameters()) == parameters


@pytest.mark.parametrize("kind", sorted(COUNTED))
def test_every_counted_architecture_is_counted_as_transformers_builds_it(kind):
    """Each model type batchspec counts, as transformers' own config class fills a small one
    (its defaults for what the config leaves out: tied or not, biases, norms) and builds it on
    the meta device. A type that failed this is refused instead (GPT-NeoX, OLMo 2, Phi-2...)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    small = {k: v for k, v in TINY.items() if k not in ("architectures", "tie_word_embeddings")}
    if kind == "gpt2":
        small = {"n_embd": 64, "n_head": 4, "n_layer": 2, "vocab_size": 512, "n_positions": 64}
    config = transformers.CONFIG_MAPPING[kind](**small, pad_token_id=0)
    with torch.device("meta"):
        built = transformers.AutoModelForCausalLM.from_config(config)
    data = config.to_dict() | {"model_type": kind}
    assert hf_shape(data, kind, kind).parameters == sum(p.numel() for p in built.parameters())


#: The config keys transformers' modeling code reads for a projection's ``bias=``.
BIAS_KEYS = ("attention_bias", "attention_out_bias", "mlp_bias", "use_bias")
#: Biases a config may ask for: each key alone, and all of them.
BIASES = [{key: True} for key in BIAS_KEYS] + [dict.fromkeys(BIAS_KEYS, True)]


@pytest.mark.parametrize("biases", [{}, *BIASES], ids=["defaults", *BIAS_KEYS, "all"])
@pytest.mark.parametrize("kind", sorted(COUNTED - {"gpt2"}))
def test_biases_are_counted_as_transformers_builds_them(kind, biases):
    """Each counted type with the bias keys its config may write, and with none (its config
    class's defaults: GLM's and Seed-OSS's attention_bias are true), built on the meta device.
    Before: attention_bias dropped o_proj's bias (Llama, Granite, Qwen 3, SmolLM3, Gemma),
    added q/k/v biases Mistral never builds, and mlp_bias, use_bias were not read."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    small = {k: v for k, v in TINY.items() if k not in ("architectures", "tie_word_embeddings")}
    config = transformers.CONFIG_MAPPING[kind](**small, **biases, pad_token_id=0)
    with torch.device("meta"):
        built = transformers.AutoModelForCausalLM.from_config(config)
    # as a config.json that writes only the bias keys given (the class's defaults for the rest)
    data = {k: v for k, v in config.to_dict().items() if k not in BIAS_KEYS or k in biases}
    counted = hf_shape(data | {"model_type": kind}, kind, kind).parameters
    assert counted == sum(p.numel() for p in built.parameters())


def test_every_counted_type_says_where_its_biases_are():
    assert set(LAYER_BIASES) == COUNTED


#: Phi-3-mini-4k-instruct's published config.json: a model type transformers has, with the
#: auto_map of the code its repository also carries.
PHI3 = {
    "architectures": ["Phi3ForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "auto_map": {
        "AutoConfig": "configuration_phi3.Phi3Config",
        "AutoModelForCausalLM": "modeling_phi3.Phi3ForCausalLM",
    },
    "bos_token_id": 1,
    "embd_pdrop": 0.0,
    "eos_token_id": 32000,
    "hidden_act": "silu",
    "hidden_size": 3072,
    "initializer_range": 0.02,
    "intermediate_size": 8192,
    "max_position_embeddings": 4096,
    "model_type": "phi3",
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 32,
    "original_max_position_embeddings": 4096,
    "pad_token_id": 32000,
    "resid_pdrop": 0.0,
    "rms_norm_eps": 1e-05,
    "rope_scaling": None,
    "rope_theta": 10000.0,
    "sliding_window": 2047,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.40.2",
    "use_cache": True,
    "vocab_size": 32064,
}


def test_a_native_model_type_with_auto_map_is_counted_as_transformers_builds_it(tmp_path):
    """transformers builds its own Phi3ForCausalLM for Phi-3's config.json (auto_map is read
    only for a model type it does not have, and only with trust_remote_code): --model-config
    DIR refused it, --model FILE counted it; both count it now, and --model DIR too."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    folder = folder_with(tmp_path, "phi3", PHI3)
    config = transformers.AutoConfig.from_pretrained(folder)
    assert type(config).__module__.startswith("transformers.models.phi3")
    with torch.device("meta"):
        built = transformers.AutoModelForCausalLM.from_config(config)
    parameters = sum(p.numel() for p in built.parameters())
    (tmp_path / "ax.yml").write_text("base_model: ./phi3\nmicro_batch_size: 1\n")
    assert model_of(tmp_path / "ax.yml")["parameters"] == parameters
    assert model_of(tmp_path / "ax.yml", "--model-config", folder)["parameters"] == parameters
    flags = ("--micro-batch", 1, "--world-size", 1, "--accumulation", 1, "--json")
    for given in (folder, folder / "config.json"):
        result = run("estimate", "--model", given, *flags)
        assert result.exit_code == 0, result.output
        assert json.loads(result.output)["parameters"] == parameters


def test_the_8b_preset_is_the_published_shape():
    assert PRESETS["llama3-8b"].parameters == 8_030_261_248


def test_a_hub_name_is_found_in_the_local_cache(tmp_path, monkeypatch):
    cache = tmp_path / "hub"
    repo = cache / "models--acme--tiny-llama"
    folder_with(repo / "snapshots", "abc123", TINY)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("abc123")
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    (tmp_path / "ax.yml").write_text("base_model: acme/tiny-llama\nmicro_batch_size: 1\n")
    model = model_of(tmp_path / "ax.yml")
    assert model["parameters"] == 156_480 and "abc123" in model["source"]


def test_a_name_not_here_is_unknown_and_says_what_to_give(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty"))
    (tmp_path / "ax.yml").write_text("base_model: acme/absent\nmicro_batch_size: 1\n")
    model = model_of(tmp_path / "ax.yml")
    assert model["parameters"] is None and "--model-config" in model["why"]
    assert "nothing is downloaded" in model["why"]
    folder_with(tmp_path, "given", TINY)
    given = model_of(tmp_path / "ax.yml", "--model-config", tmp_path / "given")
    assert given["parameters"] == 156_480


@pytest.mark.parametrize(
    "text, says",
    [
        # a model type transformers does not have: auto_map names the code that would run
        (json.dumps(TINY | {"model_type": "acme", "auto_map": {"AutoModel": "x.M"}}), "auto_map"),
        ('{"hidden_size": 64,', "not a JSON config.json"),
        (json.dumps({"model_type": "llama"}), "no hidden_size"),
        (
            json.dumps(
                {k: v for k, v in TINY.items() if k not in ("tie_word_embeddings", "model_type")}
            ),
            "no tie_word_embeddings and no model_type whose default batchspec knows",
        ),
        # GPT-NeoX's biases and plain MLP are not the Llama formula's: it was counted as one
        (json.dumps(TINY | {"model_type": "gpt_neox"}), "model_type 'gpt_neox' is not an"),
        # a multimodal model's vision tower is no part of its text_config's count
        (json.dumps({"model_type": "gemma3", "text_config": TINY}), "model_type 'gemma3' is not"),
    ],
)
def test_a_config_that_cannot_be_used_is_refused_naming_it(tmp_path, text, says):
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "config.json").write_text(text)
    (tmp_path / "ax.yml").write_text("base_model: ./m\nmicro_batch_size: 1\n")
    model = model_of(tmp_path / "ax.yml")
    assert model["parameters"] is None and says in model["why"]
    given = run("inspect", tmp_path / "ax.yml", "--model-config", tmp_path / "m")
    assert given.exit_code == 2 and says in given.output
    assert len(given.output.strip().splitlines()) == 1


def test_megatron_flags_carry_the_model(tmp_path):
    job = tmp_path / "pretrain.sh"
    job.write_text(
        "#!/bin/bash\nLAYERS=32\ntorchrun --nproc_per_node 8 pretrain_gpt.py \\\n"
        "  --num-layers $LAYERS --hidden-size 4096 --num-attention-heads 32 \\\n"
        "  --group-query-attention --num-query-groups 8 --ffn-hidden-size 14336 \\\n"
        "  --vocab-size 128256 --swiglu --untie-embeddings-and-output-weights \\\n"
        "  --disable-bias-linear --normalization RMSNorm --position-embedding-type rope \\\n"
        "  --micro-batch-size 1 --global-batch-size 64\n"
    )
    model = model_of(job)
    assert model["architecture"] == "GPT (Megatron flags)"
    assert model["parameters"] == 8_030_261_248


def test_megatron_flags_without_a_vocabulary_leave_it_unknown(tmp_path):
    job = tmp_path / "pretrain.sh"
    job.write_text(
        "torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 2 --hidden-size 64 "
        "--num-attention-heads 4 --micro-batch-size 1 --global-batch-size 16\n"
    )
    model = model_of(job)
    assert model["parameters"] is None and "--vocab-size" in model["why"]


#: Mixtures of experts as their published config.json files write them (the keys that count).
MOE_CONFIGS = {
    "Qwen3-30B-A3B": {"model_type": "qwen3_moe", "num_experts": 128, "moe_intermediate_size": 768},
    "Mixtral-8x7B": {"model_type": "mixtral", "num_local_experts": 8, "num_experts_per_tok": 2},
    "DeepSeek-V2-Lite": {"model_type": "deepseek_v2", "n_routed_experts": 64},
}


@pytest.mark.parametrize("name", sorted(MOE_CONFIGS))
def test_a_mixture_of_experts_is_not_counted_as_its_dense_twin(tmp_path, name):
    """Counted from its dense keys, Qwen3-30B-A3B was 3,340,449,792 parameters (it has about
    30.5 billion): unknown is never a number. Its heads still split as a dense model's."""
    config = LLAMA_8B | MOE_CONFIGS[name]
    folder_with(tmp_path, "moe", config)
    (tmp_path / "ax.yml").write_text("base_model: ./moe\nmicro_batch_size: 1\n")
    model = model_of(tmp_path / "ax.yml")
    assert model["parameters"] is None
    assert "a mixture of experts" in model["why"] and "--model-config" in model["why"]
    parts = inspect_file(str(tmp_path / "ax.yml")).model.parts
    assert (parts.layers, parts.heads, parts.kv_heads) == (32, 32, 8)
    given = run("estimate", tmp_path / "ax.yml", "--world-size", 6, "--seq-len", 128)
    assert given.exit_code == 2 and "a mixture of experts" in given.output
    dense = {k: v for k, v in config.items() if k not in MOE_CONFIGS[name]}
    folder_with(tmp_path, "dense", dense)
    (tmp_path / "ax.yml").write_text("base_model: ./dense\nmicro_batch_size: 1\n")
    assert model_of(tmp_path / "ax.yml")["parameters"] == 8_030_261_248


def test_megatron_flags_of_a_mixture_of_experts_are_not_counted(tmp_path):
    """A Mixtral 8x7B written as Megatron flags was counted as Mistral 7B (7,241,732,096)."""
    job = tmp_path / "pretrain.sh"
    job.write_text(
        "torchrun --nproc_per_node 8 pretrain_gpt.py --num-layers 32 --hidden-size 4096 "
        "--num-attention-heads 32 --group-query-attention --num-query-groups 8 "
        "--ffn-hidden-size 14336 --vocab-size 32000 --swiglu --disable-bias-linear "
        "--normalization RMSNorm --position-embedding-type rope "
        "--untie-embeddings-and-output-weights --num-experts 8 --moe-router-topk 2 "
        "--expert-model-parallel-size 8 --micro-batch-size 1 --global-batch-size 64\n"
    )
    model = model_of(job)
    assert model["parameters"] is None and "--num-experts 8" in model["why"]
    three = job.read_text().replace("--nproc_per_node 8", "--nproc_per_node 6")
    job.write_text(three.replace("--expert-model-", "--tensor-model-").replace("size 8", "size 3"))
    result = run("inspect", job, "--json")
    assert "model-tensor-heads" in [f["code"] for f in json.loads(result.stdout)["findings"]]
    job.write_text(job.read_text().replace("--num-experts 8 ", "--num-experts 1 "))
    assert model_of(job)["parameters"] == 7_241_732_096


def test_an_hf_job_names_its_model_by_flag(tmp_path):
    folder_with(tmp_path, "tiny", TINY)
    job = tmp_path / "train.sh"
    job.write_text(
        f"torchrun --nproc_per_node 2 train.py --model_name_or_path {tmp_path / 'tiny'} "
        "--per_device_train_batch_size 2 --output_dir o\n"
    )
    assert model_of(job)["parameters"] == 156_480


def test_a_carried_model_config_and_a_torchtune_builder(tmp_path):
    nanotron = tmp_path / "nanotron.yaml"
    config = {k: v for k, v in TINY.items() if k != "architectures"}
    nanotron.write_text(
        "model:\n  model_config:\n"
        + "".join(f"    {k}: {json.dumps(v)}\n" for k, v in config.items())
    )
    result = run("inspect", nanotron, "--framework", "nanotron", "--json")
    assert json.loads(result.stdout)["model"]["parameters"] == 156_480, result.output
    tune = tmp_path / "tune.yaml"
    tune.write_text("model:\n  _component_: torchtune.models.llama3_1.llama3_1_8b\nbatch_size: 2\n")
    result = run("inspect", tune, "--framework", "torchtune", "--json")
    assert json.loads(result.stdout)["model"]["parameters"] == 8_030_261_248, result.output


def test_inspect_prints_the_model_first(tmp_path):
    folder_with(tmp_path, "tiny", TINY)
    (tmp_path / "ax.yml").write_text("base_model: ./tiny\nmicro_batch_size: 2\n")
    result = run("inspect", tmp_path / "ax.yml", "--world-size", 2)
    assert result.output.splitlines()[1].startswith("model: LlamaForCausalLM, 156,480 parameters")


def test_a_torchtitan_flavor_names_its_shape(tmp_path):
    toml = tmp_path / "job.toml"
    toml.write_text('[model]\nname = "llama3"\nflavor = "8B"\n[training]\nlocal_batch_size = 1\n')
    result = run("inspect", toml, "--framework", "torchtitan", "--json")
    assert json.loads(result.stdout)["model"]["parameters"] == 8_030_261_248, result.output
