"""Small GPT-style models built in code, with random weights, and synthetic token batches.

Nothing is downloaded: ``tiny`` runs anywhere in seconds, ``125m`` has GPT-2 small's shape.
"""

from __future__ import annotations

from dataclasses import dataclass

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


def build(name: str, sequence_length: int):
    """A causal language model whose ``forward(tokens)`` returns the mean next-token loss."""
    import torch
    from torch import nn

    shape = SHAPES[name]

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(shape.hidden), nn.LayerNorm(shape.hidden)
            self.attn = nn.MultiheadAttention(shape.hidden, shape.heads, batch_first=True)
            self.mlp = nn.Sequential(nn.Linear(shape.hidden, 4 * shape.hidden), nn.GELU(),
                                     nn.Linear(4 * shape.hidden, shape.hidden))

        def forward(self, x, mask):
            h = self.ln1(x)
            x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
            return x + self.mlp(self.ln2(x))

    class TinyGPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(shape.vocab, shape.hidden)
            self.pos = nn.Embedding(sequence_length, shape.hidden)
            self.blocks = nn.ModuleList(Block() for _ in range(shape.layers))
            self.ln = nn.LayerNorm(shape.hidden)
            self.head = nn.Linear(shape.hidden, shape.vocab, bias=False)
            self.head.weight = self.embed.weight

        def forward(self, tokens):
            seq = tokens.shape[1] - 1
            inputs, targets = tokens[:, :-1], tokens[:, 1:]
            mask = torch.triu(torch.full((seq, seq), float("-inf"), device=tokens.device), 1)
            x = self.embed(inputs) + self.pos(torch.arange(seq, device=tokens.device))
            for block in self.blocks:
                x = block(x, mask)
            logits = self.head(self.ln(x))
            return nn.functional.cross_entropy(logits.reshape(-1, shape.vocab),
                                               targets.reshape(-1))

    torch.manual_seed(0)
    return TinyGPT()


def batch(micro_batch_size: int, sequence_length: int, vocab: int, generator, device="cpu"):
    """Random tokens, ``sequence_length + 1`` per sample (inputs and shifted targets)."""
    import torch

    return torch.randint(0, vocab, (micro_batch_size, sequence_length + 1), generator=generator,
                         device="cpu").to(device)
