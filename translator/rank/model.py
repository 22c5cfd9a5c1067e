"""Small GPT-style models built in code, with random weights, and synthetic token batches.

Nothing is downloaded: ``tiny`` runs anywhere in seconds, ``125m`` has GPT-2 small's shape.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

from translator.model import memory

if TYPE_CHECKING:
    from translator.rank.context import RunContext

#: Vocabulary padded to a multiple of 64 (nanoGPT's 50257 -> 50304).
VOCAB = {"tiny": 512, "125m": 50304}


@dataclass(frozen=True)
class ModelShape:
    layers: int
    """Transformer blocks."""
    hidden: int
    """Model width."""
    heads: int
    """Attention heads."""
    vocab: int
    """Vocabulary size."""


SHAPES = {
    "tiny": ModelShape(layers=2, hidden=64, heads=4, vocab=VOCAB["tiny"]),
    "125m": ModelShape(layers=12, hidden=768, heads=12, vocab=VOCAB["125m"]),
}


def job_shape(ctx: RunContext) -> memory.Model:
    """The shape an engine that builds a shape (engine option ``model_shape``) builds: the
    job's (``ctx.model_config``, the fields of :class:`translator.model.memory.Model` as JSON, depth
    already cut to ``--layers``), else the stand-in's (GPT-style: 4h MLP, learned positions,
    tied head)."""
    if ctx.model_config is not None:
        return memory.Model(**json.loads(ctx.model_config.read_text(encoding="utf-8")))
    s = SHAPES[ctx.model]
    return memory.Model(ctx.model, s.layers, s.hidden, s.heads, s.heads, 4 * s.hidden, s.vocab)


def not_llama(shape: memory.Model, framework: str) -> str | None:
    """Why a framework whose model code is Llama's (SwiGLU, RMSNorm weights only, rotary, no
    biases, the head width ``hidden / heads``) cannot build ``shape``, else None."""
    differs = [
        (not shape.gated, "a GELU MLP (Llama's is SwiGLU)"),
        (
            shape.biases or shape.qkv_bias or shape.out_bias or shape.mlp_bias,
            "biases (Llama has none)",
        ),
        (shape.positions > 0, "learned positions (Llama's are rotary)"),
        (shape.qk_norm or shape.layer_norms != 2, "norms Llama does not have"),
        (bool(shape.head_dim), "a head width other than hidden / heads"),
        (shape.hidden % shape.heads or shape.heads % shape.kv_heads, "heads that do not divide"),
    ]
    found = [what for bad, what in differs if bad]
    if not found:
        return None
    return f"{framework}'s Llama cannot build {shape.name}: {', '.join(found)}; give --model tiny"


def layers(name: str, sequence_length: int) -> list:
    """The model as a list of layers, tokens in and logits out: embedding, blocks, head (a
    pipeline engine splits this list into stages)."""
    import torch
    from torch import nn

    shape = SHAPES[name]

    class Embed(nn.Module):
        def __init__(self):
            super().__init__()
            self.tokens = nn.Embedding(shape.vocab, shape.hidden)
            self.positions = nn.Embedding(sequence_length, shape.hidden)

        def forward(self, tokens):
            return self.tokens(tokens) + self.positions(
                torch.arange(tokens.shape[1], device=tokens.device)
            )

    class DecoderBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(shape.hidden), nn.LayerNorm(shape.hidden)
            self.attn = nn.MultiheadAttention(shape.hidden, shape.heads, batch_first=True)
            self.mlp = nn.Sequential(
                nn.Linear(shape.hidden, 4 * shape.hidden),
                nn.GELU(),
                nn.Linear(4 * shape.hidden, shape.hidden),
            )

        def forward(self, x):
            seq = x.shape[1]
            mask = torch.triu(torch.full((seq, seq), float("-inf"), device=x.device), 1)
            h = self.ln1(x)
            x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
            return x + self.mlp(self.ln2(x))

    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln = nn.LayerNorm(shape.hidden)
            self.proj = nn.Linear(shape.hidden, shape.vocab, bias=False)

        def forward(self, x):
            return self.proj(self.ln(x))

    torch.manual_seed(0)
    return [Embed(), *(DecoderBlock() for _ in range(shape.layers)), Head()]


#: A target that is not predicted (padding), as torch's cross-entropy skips it.
IGNORE = -100


def next_token_loss(logits, targets, divide_by=None):
    """Cross-entropy of the logits against the next tokens, skipping :data:`IGNORE` targets:
    their mean, or, with ``divide_by``, their sum divided by it (the tokens of a whole
    optimizer step, so that micro-batches of different lengths weigh by their tokens)."""
    from torch import nn

    flat = logits.reshape(-1, logits.shape[-1]), targets.reshape(-1)
    if divide_by is None:
        return nn.functional.cross_entropy(*flat, ignore_index=IGNORE)
    return nn.functional.cross_entropy(*flat, ignore_index=IGNORE, reduction="sum") / divide_by


def build(name: str, sequence_length: int, recompute: bool = False):
    """A causal language model whose ``forward(tokens, targets=None, divide_by=None)`` returns
    the next-token loss (:func:`next_token_loss`; the targets default to the tokens shifted by
    one, else ``tokens`` holds the inputs and one more position); the head shares the embedding's weights, as in GPT-2. ``recompute``: each block keeps only its
    input and recomputes the rest in the backward pass (``torch.utils.checkpoint``)."""
    from torch import nn
    from torch.utils.checkpoint import checkpoint

    class TinyGPT(nn.Module):
        def __init__(self):
            super().__init__()
            parts = layers(name, sequence_length)
            parts[-1].proj.weight = parts[0].tokens.weight  # tied, as GPT-2's
            self.layers = nn.Sequential(*parts)

        def forward(self, tokens, targets=None, divide_by=None):
            x = tokens[:, :-1]
            for i, layer in enumerate(self.layers):
                block = 0 < i < len(self.layers) - 1
                x = checkpoint(layer, x, use_reentrant=False) if recompute and block else layer(x)
            return next_token_loss(x, tokens[:, 1:] if targets is None else targets, divide_by)

    return TinyGPT()


def batch(micro_batch_size: int, sequence_length: int, vocab: int, generator, device="cpu"):
    """Random tokens, ``sequence_length + 1`` per sample (inputs and shifted targets)."""
    import torch

    return torch.randint(
        0, vocab, (micro_batch_size, sequence_length + 1), generator=generator, device="cpu"
    ).to(device)
