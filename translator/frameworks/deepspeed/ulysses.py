"""The smoke model under DeepSpeed-Ulysses sequence parallelism: each attention wrapped in
DeepSpeed's ``DistributedAttention``, each rank holding its slice of the sequence."""

from __future__ import annotations

from translator.rank.model import SHAPES, next_token_loss


def ulysses(name: str, sequence_length: int, group, rank: int, size: int):
    """The same causal language model for DeepSpeed-Ulysses sequence parallelism: each of the
    ``size`` ranks of ``group`` holds ``sequence_length / size`` consecutive tokens of the same
    samples; attention goes through DeepSpeed's ``DistributedAttention`` (an all-to-all to whole
    sequences and a share of the heads, and back). ``forward(tokens)`` takes this rank's slice
    of ``sequence_length + 1`` tokens and returns the mean next-token loss of its slice."""
    import torch
    from deepspeed.sequence.layer import DistributedAttention
    from torch import nn

    shape = SHAPES[name]
    if shape.heads % size or sequence_length % size:
        raise RuntimeError(
            f"sequence parallel {size} needs the heads ({shape.heads}) and the "
            f"sequence length ({sequence_length}) to divide by it"
        )
    local = sequence_length // size

    def causal(q, k, v, *args, **kwargs):  # [b, s, h, d] -> [b, s, h, d], whole sequences
        out = nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True
        )
        return out.transpose(1, 2)

    class UlyssesBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(shape.hidden), nn.LayerNorm(shape.hidden)
            self.qkv = nn.Linear(shape.hidden, 3 * shape.hidden)
            self.out = nn.Linear(shape.hidden, shape.hidden)
            self.attn = DistributedAttention(causal, group, scatter_idx=2, gather_idx=1)
            self.mlp = nn.Sequential(
                nn.Linear(shape.hidden, 4 * shape.hidden),
                nn.GELU(),
                nn.Linear(4 * shape.hidden, shape.hidden),
            )

        def forward(self, x):
            b, s, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(b, s, 3, shape.heads, -1).unbind(2)
            x = x + self.out(self.attn(q, k, v, None).reshape(b, s, -1))
            return x + self.mlp(self.ln2(x))

    class UlyssesGPT(nn.Module):
        def __init__(self):
            super().__init__()
            torch.manual_seed(0)
            self.tokens = nn.Embedding(shape.vocab, shape.hidden)
            self.positions = nn.Embedding(sequence_length, shape.hidden)
            self.blocks = nn.Sequential(*(UlyssesBlock() for _ in range(shape.layers)))
            self.head = nn.Linear(shape.hidden, shape.vocab, bias=False)
            self.head.weight = self.tokens.weight

        def forward(self, tokens):
            inputs, targets = tokens[:, :-1], tokens[:, 1:]
            mine = slice(rank * local, (rank + 1) * local)
            at = torch.arange(rank * local, (rank + 1) * local, device=tokens.device)
            x = self.tokens(inputs[:, mine]) + self.positions(at)
            return next_token_loss(self.head(self.blocks(x)), targets[:, mine])

    return UlyssesGPT()
