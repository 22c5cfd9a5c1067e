"""The model a Megatron-Bridge or NeMo job names, read without torch: a recipe's Hugging Face
model with the overrides over it, a model block written whole, NeMo 1's model block with its
tokenizer's vocabulary; unknown, with why, where the job does not fix it."""

import dataclasses

from paths import ROOT
from run_batchspec import model_of

from translator.inspection import read_source
from translator.launch import run_model
from translator.model.memory import PRESETS

TINY = ROOT / "fixtures" / "megatron_bridge" / "valid" / "tiny_llama_model_block.yaml"


def runner(folder, *overrides: str):
    path = folder / "train.sh"
    path.write_text(
        "torchrun --nproc_per_node=8 scripts/training/run_recipe.py "
        f"--recipe llama32_1b_pretrain_config {' '.join(overrides)}\n"
    )
    return path


def test_a_recipe_is_its_hugging_face_models_shape_with_the_overrides_over_it(tmp_path):
    # Llama 3.2 1B's published count (tied head); the recipe loads meta-llama/Llama-3.2-1B.
    assert model_of(runner(tmp_path))["parameters"] == 1_235_814_400
    cut = model_of(runner(tmp_path, "model.num_layers=2", "train.micro_batch_size=1"))
    assert cut["parameters"] == dataclasses.replace(PRESETS["llama3-1b"], layers=2).parameters
    assert "with model.num_layers" in cut["source"]
    # Before, the job named no model: inspect showed none and smoke ran the stand-in.


def test_what_the_job_does_not_fix_is_unknown_with_why(tmp_path):
    by_tokenizer = model_of(runner(tmp_path, "tokenizer.use_tokenizer_vocab_size=true"))
    assert by_tokenizer["parameters"] is None
    assert "the vocabulary is the tokenizer's" in by_tokenizer["why"]
    unknown_layers = model_of(runner(tmp_path, "model.num_layers=$LAYERS"))
    assert unknown_layers["parameters"] is None and "model.num_layers is" in unknown_layers["why"]
    moe = tmp_path / "moe.sh"
    moe.write_text("python run_recipe.py --recipe qwen3_30b_a3b_pretrain_config\n")
    assert "--model-config" in model_of(moe)["why"]
    experts = model_of(runner(tmp_path, "model.num_moe_experts=8"))
    assert experts["parameters"] is None, "a dense recipe made a mixture of experts"
    assert "model.num_moe_experts 8: a mixture of experts" in experts["why"]


def test_a_wrong_shape_counts_differently(tmp_path):
    """The tiny Llama's 156,480 depends on every switch of its block: a tied head drops the
    512 x 64 head, a plain MLP one 64 x 172 matrix a layer, and a field left out is the
    recipe's (unknown), never a default."""
    text = TINY.read_text()
    assert model_of(TINY)["parameters"] == 156_480
    for before, after, parameters in [
        ("output_weights: false", "output_weights: true", 156_480 - 512 * 64),
        ("gated_linear_unit: true", "gated_linear_unit: false", 156_480 - 2 * 64 * 172),
    ]:
        changed = tmp_path / "changed.yaml"
        changed.write_text(text.replace(before, after))
        assert model_of(changed)["parameters"] == parameters
    left_out = tmp_path / "left_out.yaml"
    left_out.write_text(text.replace("  qk_layernorm: false\n", ""))
    model = model_of(left_out)
    assert model["parameters"] is None and "does not write model.qk_layernorm" in model["why"]
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text(text.replace("add_bias_linear: false", "add_bias_linear: true"))
    assert "RMSNorm with add_bias_linear True" in model_of(wrong)["why"]


def test_nemo1_takes_its_vocabulary_from_the_tokenizer(tmp_path):
    nemo1 = ROOT / "fixtures" / "megatron_bridge" / "valid" / "nemo1_megatron_gpt_config.yaml"
    text = nemo1.read_text()
    assert model_of(nemo1)["parameters"] == 125_360_640
    # TP 1 pads GPT-2's 50,257 tokens to 50,304, not 50,432: 128 rows of 768 fewer.
    one = tmp_path / "tp1.yaml"
    one.write_text(text.replace("tensor_model_parallel_size: 2", "tensor_model_parallel_size: 1"))
    assert model_of(one)["parameters"] == 125_360_640 - 128 * 768
    piece = tmp_path / "sentencepiece.yaml"
    piece.write_text(text.replace("library: 'megatron'", "library: 'sentencepiece'"))
    assert "the vocabulary is the tokenizer's" in model_of(piece)["why"]
    # NeMo's Hyena config is a GPT block whose layers are not attention: not counted as one.
    hyena = tmp_path / "hyena.yaml"
    hyena.write_text(
        text.replace("  num_layers: 12\n", "  num_layers: 12\n  hyena:\n    order: 2\n")
    )
    assert "Hyena operators" in model_of(hyena)["why"]


def test_a_smoke_builds_the_named_shape_cut_to_layers():
    named = run_model.named_in(read_source(str(TINY)), None)
    assert named is not None
    chosen = run_model.choose(str(TINY), named, "megatron-bridge", "smoke", None, layers=1)
    assert chosen.file == "model/shape.json" and chosen.config is not None
    assert chosen.config["layers"] == 1 and chosen.config["kv_heads"] == 2
    assert chosen.shape.parameters == 156_480 - (156_480 - 512 * 64 * 2 - 64) // 2


def test_a_file_that_names_no_model_smokes_the_stand_in():
    path = ROOT / "fixtures" / "megatron_bridge" / "valid" / "rounds_down.yaml"
    assert "names no recipe and writes no model" in model_of(path)["why"]
    named = run_model.named_in(read_source(str(path)), None)
    chosen = run_model.choose(str(path), named, "megatron-bridge", "smoke", None)
    assert chosen.named is None and "names no model" in str(chosen.said)
