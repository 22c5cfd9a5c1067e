"""Cross-check a rendered Axolotl YAML against Axolotl's own batch arithmetic.

Axolotl's ``validate_config`` + ``normalize_config`` derive ``batch_size`` (the global batch)
from ``micro_batch_size``, ``gradient_accumulation_steps`` and the launcher's ``WORLD_SIZE``
divided by context- and tensor-parallel sizes. :func:`resolve` runs exactly those two calls,
offline and on CPU, against a tiny local model built by :func:`make_tiny_model`.

No ``deepspeed:`` or ``fsdp`` keys are needed for the multiplication: any ``WORLD_SIZE`` other
than 1 makes Axolotl set ``ddp``, which is enough. Context parallelism (> 1) is different:
Axolotl requires flash-attention 2 and imports ``ring_flash_attn`` while validating, so on a
host without that package :func:`resolve` raises Axolotl's ``ImportError``.

Axolotl, torch and transformers are imported inside the functions only, so importing this
module costs nothing when the ``axolotl`` extra is not installed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from translator.frameworks.shared.environ import environ

SPECIAL_TOKENS = ["<unk>", "<s>", "</s>", "<pad>"]
VOCAB_SIZE = 411
MODEL_DIR = "tiny-llama"
DATA_FILE = "alpaca.jsonl"

#: Set while Axolotl runs: never reach the Hub, never send telemetry.
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "AXOLOTL_DO_NOT_TRACK": "1"}

#: Keys that keep validation on the CPU path: no mixed precision, packing or flash kernels.
CPU_SAFE = {
    "sample_packing": False,
    "bf16": False,
    "fp16": False,
    "attn_implementation": "sdpa",
    "optimizer": "adamw_torch",
    "learning_rate": 1e-4,
    "num_epochs": 1,
    "dataset_num_proc": 1,
    "dataloader_num_workers": 0,
    "save_strategy": "no",
}

#: The keys taken from the checked file.
BATCH_KEYS = {
    "micro_batch_size",
    "gradient_accumulation_steps",
    "batch_size",
    "sequence_len",
    "eval_batch_size",
    "tensor_parallel_size",
    "context_parallel_size",
    "sample_packing",
    "dp_shard_size",
    "dp_replicate_size",
}

#: The keys :func:`resolve` reports, as Axolotl leaves them after ``normalize_config``.
REPORTED = ("batch_size", "micro_batch_size", "gradient_accumulation_steps", "world_size")


def synthetic_lines(count: int) -> list[str]:
    """Deterministic synthetic English-ish lines for the tokenizer and the dataset."""
    words = [
        "the",
        "model",
        "reads",
        "a",
        "batch",
        "of",
        "tokens",
        "and",
        "learns",
        "slowly",
        "quick",
        "brown",
        "fox",
        "jumps",
        "over",
        "lazy",
        "dog",
        "data",
    ]
    return [
        " ".join(words[(i * 7 + j * 3) % len(words)] for j in range(6 + i % 5))
        for i in range(count)
    ]


def write_tokenizer(directory: Path) -> None:
    """Train a small BPE tokenizer on synthetic lines and save it as a fast HF tokenizer."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.train_from_iterator(
        synthetic_lines(400),
        trainers.BpeTrainer(
            vocab_size=VOCAB_SIZE, special_tokens=SPECIAL_TOKENS, show_progress=False
        ),
    )
    PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="<unk>",
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
    ).save_pretrained(directory)


def write_dataset(path: Path, rows: int = 32) -> Path:
    """``rows`` short, distinct alpaca-style rows (``instruction``, ``input``, ``output``)."""
    with Path(path).open("w", encoding="utf-8") as out:
        for i, line in enumerate(synthetic_lines(rows)):
            out.write(json.dumps({"instruction": f"Line {i}.", "input": "", "output": line}) + "\n")
    return Path(path)


def make_tiny_model(directory: str | os.PathLike) -> Path:
    """Write a tiny random Llama, its tokenizer and an alpaca JSONL into ``directory``.

    Returns the model directory (``directory/tiny-llama``); the dataset is
    ``directory/alpaca.jsonl``. Nothing is downloaded.
    """
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)  # the same weights every time (both runs of a parity check)
    directory = Path(directory)
    model_dir = directory / MODEL_DIR
    model_dir.mkdir(parents=True, exist_ok=True)
    config = LlamaConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=VOCAB_SIZE,
        max_position_embeddings=256,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=3,
    )
    LlamaForCausalLM(config).save_pretrained(model_dir)
    write_tokenizer(model_dir)
    write_dataset(directory / DATA_FILE)
    return model_dir


def build_config(yaml_text: str, base_dir: Path) -> dict:
    """The file's batch keys plus what Axolotl needs to validate them."""
    import yaml

    base_dir = Path(base_dir)
    # Only the batch keys of the file are checked: its model, data and attention settings
    # would need the Hub or a GPU and say nothing about the batch.
    rendered = {k: v for k, v in (yaml.safe_load(yaml_text) or {}).items() if k in BATCH_KEYS}
    required = {}
    if (rendered.get("context_parallel_size") or 1) > 1:
        # Axolotl's only context-parallel path is ring attention on flash-attention 2; with
        # sdpa it refuses the config before reaching anything batch-related.
        required["attn_implementation"] = "flash_attention_2"
    return {
        "base_model": str(base_dir / MODEL_DIR),
        "datasets": [{"path": str(base_dir / DATA_FILE), "ds_type": "json", "type": "alpaca"}],
        "output_dir": str(base_dir / "out"),
        **CPU_SAFE,
        **required,
        **rendered,
    }


def resolve(yaml_text: str, world_size: int, base_dir: Path) -> dict:
    """Run Axolotl's ``validate_config`` + ``normalize_config`` on a rendered YAML.

    ``base_dir`` must hold what :func:`make_tiny_model` wrote. ``WORLD_SIZE`` is set to
    ``world_size`` for the call only. Returns Axolotl's ``batch_size`` (the global batch),
    ``micro_batch_size``, ``gradient_accumulation_steps`` and ``world_size``. Axolotl's own
    exceptions propagate unchanged (``context_parallel_size`` > 1 needs ``ring_flash_attn``).
    """
    with environ({**OFFLINE_ENV, "WORLD_SIZE": str(world_size)}):
        import torch
        from axolotl.utils.config import normalize_config, validate_config
        from axolotl.utils.dict import DictDefault

        capabilities = {
            "bf16": False,
            "fp8": False,
            "tf32": False,
            "n_gpu": world_size,
            "compute_capability": None,
        }
        env_capabilities = {"torch_version": torch.__version__.split("+", 1)[0]}
        cfg = validate_config(
            DictDefault(build_config(yaml_text, base_dir)),
            capabilities=capabilities,
            env_capabilities=env_capabilities,
        )
        normalize_config(cfg)
    return {key: cfg[key] for key in REPORTED}


def verdict(inspection, world: int) -> str:
    """Axolotl's own ``validate_config`` + ``normalize_config`` at ``WORLD_SIZE`` world."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        make_tiny_model(tmp)
        got = resolve(inspection.reading.text, world, Path(tmp))
    return (
        f"validate_config + normalize_config at WORLD_SIZE {world}: batch_size "
        f"{got['batch_size']}, micro {got['micro_batch_size']}, accumulation "
        f"{got['gradient_accumulation_steps']}"
    )
