"""The model smoke, tune and estimate build (issue 27, items 2, 3, 6 and 7, and its bad input):
the job's own by default, built by transformers' ``from_config`` with random weights, its depth
cut by ``--layers``; the stand-in only when asked for (or, in smoke, when the job names none);
every model that cannot be built refused in one line before anything is written or started."""

import json
from pathlib import Path

import pytest
from paths import ROOT
from run_batchspec import run
from test_named_model import LLAMA_8B, TINY, folder_with

from translator.inspection import read_source
from translator.launch import run_model
from translator.model import memory
from translator.model.named_model import config_json
from translator.rank.context import RunContext
from translator.spec import BatchSpec
from translator.words.errors import InputError

SPEC = "global_batch_size: 4\nmicro_batch_size: 2\nworld_size: 1\nsequence_length: 32\n"


def context(tmp_path: Path, config: dict) -> RunContext:
    """A rank's context whose model is ``config``, as the launcher writes it."""
    path = tmp_path / "model" / "config.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config))
    spec = BatchSpec(global_batch_size=2, micro_batch_size=1, world_size=1)
    return RunContext(spec, tmp_path, tmp_path, 1, "tiny", 32, 0, 0, 1, model_config=path)


@pytest.mark.parametrize("config, parameters", [(TINY, 156_480), (LLAMA_8B, 8_030_261_248)])
def test_the_ranks_build_the_jobs_model_with_the_analytic_count(tmp_path, config, parameters):
    """What the torch, HF, DeepSpeed and Axolotl engines build (the 8B on the meta device:
    its code path, no memory), counted as the ranks report it, equals the analytic count."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from translator.rank import hub_model

    ctx = context(tmp_path, config)
    with torch.device("meta"):
        built = hub_model.causal_lm(ctx)
    assert hub_model.count_parameters(built) == parameters
    assert config_json(ctx.model_config)[0].parameters == parameters
    assert hub_model.vocab(ctx) == config["vocab_size"]


def test_the_model_state_bytes_are_the_built_models_tensors(tmp_path):
    """On CPU (fp32, one rank), the estimate's weights, gradients and optimizer states are,
    byte for byte, the tensors of the built model after one AdamW step."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from translator.rank import hub_model

    net = hub_model.causal_lm(context(tmp_path, TINY))
    optimizer = torch.optim.AdamW(net.parameters(), lr=1e-4)
    net(torch.randint(0, 512, (2, 17))).backward()
    optimizer.step()
    params = list(net.parameters())
    tensors = {
        "weights": sum(p.numel() * p.element_size() for p in params),
        "gradients": sum(p.grad.numel() * p.grad.element_size() for p in params),
        "optimizer": sum(
            t.numel() * t.element_size()
            for p in params
            for name, t in optimizer.state[p].items()
            if name != "step"  # a scalar per tensor, not a per-parameter state
        ),
    }
    shape = config_json(Path(tmp_path / "model" / "config.json"))[0]
    run_ = memory.RunSettings(micro_batch_size=2, sequence_length=16, precision="fp32")
    estimated = {p.name: p.bytes for p in memory.model_states(shape, run_)}
    assert estimated == tensors


def test_recompute_checkpoints_the_jobs_model(tmp_path):
    """``tune --recompute`` on the torch engine: every layer of the job's model recomputed."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from translator.rank import hub_model

    net = hub_model.causal_lm(context(tmp_path, TINY), recompute=True)
    assert net.inner.is_gradient_checkpointing
    net(torch.randint(0, 512, (2, 9))).backward()
    assert all(p.grad is not None for p in net.parameters())


def test_layers_cut_the_depth_and_keep_the_architecture(tmp_path):
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from translator.rank import hub_model

    folder_with(tmp_path, "8b", LLAMA_8B)
    chosen = run_model.choose(
        "job", None, "torch", "smoke", None, layers=2, model_config=str(tmp_path / "8b")
    )
    assert chosen.config["num_hidden_layers"] == 2 and chosen.config["hidden_size"] == 4096
    with torch.device("meta"):
        built = hub_model.causal_lm(context(tmp_path / "cut", chosen.config))
    assert hub_model.count_parameters(built) == chosen.shape.parameters
    assert chosen.shape.parameters == 8_030_261_248 - 30 * chosen.shape.layer_parameters


def test_an_estimate_is_of_the_model_the_file_names(tmp_path):
    """The old estimate counted the 125m preset for any file that gave no --model."""
    folder_with(tmp_path, "m", LLAMA_8B)
    (tmp_path / "ax.yml").write_text(
        "base_model: ./m\nmicro_batch_size: 1\ngradient_accumulation_steps: 1\nsequence_len: 2048\n"
    )
    result = run("estimate", tmp_path / "ax.yml", "--world-size", 8, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["parameters"] == 8_030_261_248
    assert data["model"]["parameters"] == 8_030_261_248
    assert data["model"]["source"] == str(tmp_path / "m" / "config.json")
    assert data["model"]["architecture"] == "LlamaForCausalLM"
    weights = next(p for p in data["parts"] if p["name"] == "weights")
    assert weights["bytes"] == 2 * 8_030_261_248
    text = run("estimate", tmp_path / "ax.yml", "--world-size", 8, "--layers", 4).stdout
    assert text.splitlines()[0].startswith("model: LlamaForCausalLM, ")
    assert "cut to 4 layers" in text.splitlines()[0]


def test_a_smoke_dry_run_gives_the_ranks_the_cut_config(tmp_path):
    folder_with(tmp_path, "m", TINY)
    (tmp_path / "spec.yaml").write_text(SPEC)
    result = run(
        "smoke",
        tmp_path / "spec.yaml",
        "--model-config",
        tmp_path / "m",
        "--layers",
        1,
        "--device",
        "cpu",
        "--workdir",
        tmp_path / "w",
        "--dry-run",
        "--json",
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    argv = out["command"]
    assert argv[argv.index("--model-config") + 1] == str(tmp_path / "w" / "model/config.json")
    assert out["model"]["layers"] == 1 and out["model"]["estimated_parameters"] == (
        156_480 - 45_440  # one layer of the tiny Llama fewer
    )
    assert not (tmp_path / "w").exists()


# Bad input: one line naming the file or name, where it looked and what to give; exit 2 ---------


def bad(tmp_path, *args, command="smoke"):
    """``command`` with ``args``: exit 2, one line, and no work folder (nothing started)."""
    where = [] if command == "estimate" else ["--device", "cpu", "--workdir", tmp_path / "w"]
    result = run(command, *args, *where)
    assert result.exit_code == 2, result.output
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not (tmp_path / "w").exists()
    return result.stderr


def hf_job(tmp_path: Path, name: str) -> Path:
    job = tmp_path / "train.sh"
    job.write_text(
        f"torchrun --nproc_per_node 1 train.py --model_name_or_path {name} "
        "--per_device_train_batch_size 2 --gradient_accumulation_steps 2 --output_dir o\n"
    )
    return job


def test_a_hub_name_not_in_the_cache_is_refused_saying_where_it_looked(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    said = bad(tmp_path, hf_job(tmp_path, "acme/absent"), "--seq-len", 16)
    assert "--model_name_or_path acme/absent" in said and str(tmp_path / "hub") in said
    assert "nothing is downloaded" in said and "--model-config" in said
    assert "--model tiny" in said


@pytest.mark.parametrize(
    "text, says",
    [
        (None, "no such config.json"),
        ('{"hidden_size": 64,', "not a JSON config.json"),
        (json.dumps(TINY | {"model_type": "acme", "auto_map": {"AutoConfig": "m.C"}}), "auto_map"),
        (json.dumps(TINY | {"model_type": "t5"}), "model_type 't5' is not an architecture"),
        (
            json.dumps({k: v for k, v in TINY.items() if k != "model_type"}),
            "model_type None is not a causal language",
        ),
    ],
)
def test_a_model_config_that_cannot_be_built_is_refused_naming_it(tmp_path, text, says):
    (tmp_path / "spec.yaml").write_text(SPEC)
    (tmp_path / "m").mkdir()
    if text is not None:
        (tmp_path / "m" / "config.json").write_text(text)
    said = bad(tmp_path, tmp_path / "spec.yaml", "--model-config", tmp_path / "m")
    assert str(tmp_path / "m") in said and says in said


def test_a_model_too_big_for_this_machines_memory_is_refused_with_layers(tmp_path):
    """70B parameters in bf16 on each of 8 ranks is 1.1 TB of host memory."""
    folder_with(tmp_path, "70b", LLAMA_8B | {"num_hidden_layers": 80, "hidden_size": 8192})
    (tmp_path / "spec.yaml").write_text(
        "global_batch_size: 16\nmicro_batch_size: 2\nworld_size: 8\nsequence_length: 32\n"
    )
    args = (tmp_path / "spec.yaml", "--nproc-per-node", 8, "--model-config", tmp_path / "70b")
    said = bad(tmp_path, *args)
    assert "more than this machine's" in said and "--layers N" in said


@pytest.mark.parametrize("command", ["tune", "estimate"])
def test_tune_and_estimate_refuse_a_job_that_names_no_model(tmp_path, command):
    """The old tune probed the tiny toy and the old estimate counted the 125m preset, for a
    job whose model they never knew."""
    (tmp_path / "spec.yaml").write_text(SPEC)
    said = bad(tmp_path, tmp_path / "spec.yaml", command=command)
    assert "names no model" in said and "--model-config PATH" in said
    assert ("--model PRESET" if command == "estimate" else "--model tiny") in said


def test_tune_refuses_an_engine_that_does_not_build_the_jobs_model(tmp_path, monkeypatch):
    """An engine (a plugin's) whose ranks build no job's model: tuning it would tune a toy
    (smoke runs it and says so first). Every built-in engine builds the job's model."""
    from translator.plugin.contract import Engine

    job = tmp_path / "tune.yaml"
    job.write_text("model:\n  _component_: torchtune.models.llama3_1.llama3_1_8b\nbatch_size: 2\n")
    named = run_model.named_in(read_source(str(job)), None)
    monkeypatch.setattr(run_model, "engine", lambda name: Engine("plugin.engine"))
    with pytest.raises(InputError, match="the torchtune engine does not build the job's model"):
        run_model.choose(str(job), named, "torchtune", "tune", None)
    said = run_model.choose(str(job), named, "torchtune", "smoke", None).said
    assert said.startswith("the torchtune engine does not build the job's model")


def test_torchtitan_builds_the_shape_its_flavor_gives_cut_to_layers():
    """It ran its debug model whatever the job's flavor: tune refused the 8B job."""
    job = str(ROOT / "fixtures/torchtitan/valid/llama3_8b_fsdp.toml")
    chosen = run_model.choose(
        job, run_model.named_in(read_source(job), None), "torchtitan", "tune", None, 1
    )
    assert chosen.file == "model/shape.json" and chosen.architecture == "llama3 8B"
    assert memory.Model(**chosen.config) == chosen.shape
    assert (chosen.shape.layers, chosen.shape.ffn, chosen.shape.kv_heads) == (1, 14336, 8)


def test_a_shape_the_engines_llama_cannot_build_is_refused_before_launch(tmp_path, monkeypatch):
    """GPT-2's shape (a GELU MLP, biases, learned positions) is no llama3 torchtitan builds."""
    from translator.plugin import contract

    monkeypatch.setattr(contract, "_installed", lambda package: True)
    gpt2 = {"model_type": "gpt2", "n_embd": 64, "n_head": 4, "n_layer": 2, "vocab_size": 512}
    folder_with(tmp_path, "gpt2", gpt2)
    job = ROOT / "fixtures/torchtitan/jobs/run_train.sh"
    said = bad(tmp_path, job, "--nproc-per-node", 1, "--model-config", tmp_path / "gpt2")
    assert "torchtitan's Llama cannot build" in said and "a GELU MLP" in said
    assert "biases" in said and "learned positions" in said


def test_megatron_builds_the_shape_its_flags_give(tmp_path):
    job = tmp_path / "pretrain.sh"
    job.write_text(
        "torchrun --nproc_per_node 1 pretrain_gpt.py --num-layers 4 --hidden-size 64 "
        "--num-attention-heads 4 --vocab-size 512 --max-position-embeddings 64 "
        "--micro-batch-size 1 --global-batch-size 4\n"
    )
    named = run_model.named_in(read_source(str(job)), None)
    chosen = run_model.choose(str(job), named, "megatron", "tune", None, layers=2)
    assert chosen.file == "model/shape.json" and chosen.config["layers"] == 2
    assert memory.Model(**chosen.config) == chosen.shape


@pytest.mark.parametrize(
    "args, says",
    [
        (["--model", "tiny", "--layers", 1], "--model tiny is the stand-in built in code"),
        (["--layers", 9], "--layers 9: --model-config"),
    ],
)
def test_contradictory_model_flags_are_refused(tmp_path, args, says):
    folder_with(tmp_path, "m", TINY)
    (tmp_path / "spec.yaml").write_text(SPEC)
    said = bad(tmp_path, tmp_path / "spec.yaml", "--model-config", tmp_path / "m", *args)
    assert says in said and ("has 2 layers" in said or "stand-in" in said)


#: Published shapes where the count is more than the Llama formula, each in small (2 layers):
#: Qwen 2's biased q/k/v projections, Qwen 3's per-head q/k norms and head_dim set apart from
#: hidden / heads, Gemma 2's four norms a layer, head_dim apart and a tied head by default.
PUBLISHED_STYLES = {
    "qwen2": TINY
    | {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "max_window_layers": 2},
    "qwen3": TINY | {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "head_dim": 32},
    # LlamaConfig's head is untied unless the config says so (it was counted tied: 32,768 short
    # here, 525,336,576 for an 8B whose config.json leaves the key out)
    "llama-tie-unsaid": {k: v for k, v in TINY.items() if k != "tie_word_embeddings"},
    "gemma2": {k: v for k, v in TINY.items() if k != "tie_word_embeddings"}
    | {
        "architectures": ["Gemma2ForCausalLM"],
        "model_type": "gemma2",
        "head_dim": 32,
        "hidden_activation": "gelu_pytorch_tanh",
        "query_pre_attn_scalar": 32,
        "sliding_window": 16,
    },
}


@pytest.mark.parametrize("kind", sorted(PUBLISHED_STYLES))
def test_the_analytic_count_follows_what_transformers_builds(tmp_path, kind):
    """The estimate counted every model as a Llama: Qwen 2 (7.6B) came out 129,024 short,
    Qwen 3 8B 9,216 short, Gemma 2 2B 45.9 M over."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from translator.rank import hub_model

    ctx = context(tmp_path, PUBLISHED_STYLES[kind])
    with torch.device("meta"):
        built = hub_model.count_parameters(hub_model.causal_lm(ctx))
    assert config_json(ctx.model_config)[0].parameters == built


def test_the_jobs_model_runs_at_the_jobs_sequence_length_or_is_told_one(tmp_path):
    """The stand-in has a default length; the job's model has none batchspec could pick."""
    folder_with(tmp_path, "m", TINY)
    (tmp_path / "spec.yaml").write_text("global_batch_size: 4\nmicro_batch_size: 2\n")
    said = bad(tmp_path, tmp_path / "spec.yaml", "--model-config", tmp_path / "m")
    assert "does not say its sequence length: give --seq-len" in said


def test_the_jobs_model_without_transformers_is_refused_naming_it(tmp_path, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "transformers" else real(name, *a),
    )
    folder_with(tmp_path, "m", TINY)
    (tmp_path / "spec.yaml").write_text(SPEC)
    said = bad(tmp_path, tmp_path / "spec.yaml", "--model-config", tmp_path / "m")
    assert "transformers, which is not installed here" in said and "--model tiny" in said


def test_deepspeeds_pipeline_with_the_jobs_model_is_refused_before_launch(tmp_path):
    pytest.importorskip("deepspeed")
    folder_with(tmp_path, "m", TINY)
    (tmp_path / "pp.yaml").write_text(
        "global_batch_size: 8\nmicro_batch_size: 2\nsequence_length: 32\n"
        "pipeline_parallel_size: 2\n"
    )
    args = (tmp_path / "pp.yaml", "--framework", "deepspeed", "--nproc-per-node", 2)
    said = bad(tmp_path, *args, "--model-config", tmp_path / "m")
    assert "pipeline and Ulysses paths build the stand-in only" in said and "--model tiny" in said
