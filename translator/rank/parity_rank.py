"""One rank's part of a parity run (``smoke --parity``): the samples, the optimizer, and what
the rank writes for the launcher to compare (:mod:`translator.launch.parity`).

Both runs of a parity check take one optimizer step over the same samples, from the same
weights: sample ``i`` is the same row whatever the split (:func:`row`), with ``real_tokens(i)``
tokens (between :data:`MIN_TOKENS` and the row's width) and padding after them, so
micro-batches hold different numbers of predicted tokens, which is where a loss normalised
per micro-batch goes wrong. The optimizer is plain SGD (:data:`LEARNING_RATE`, no momentum,
weight decay or clipping), so the update is the gradient itself.

A rank writes ``parity-rank-<R>.pt`` into the results folder: the step's loss as the engine
computed it, and (on global rank 0) the initial weights' fingerprint and the update of every
parameter. Only layouts where each rank holds the whole model run here (data parallelism).
"""

from __future__ import annotations

import hashlib
import io
import os
from pathlib import Path

from translator.rank.model import IGNORE
from translator.words.contained import replace_unfollowed

#: SGD's learning rate: 1, so that the update is minus the gradient.
LEARNING_RATE = 1.0
#: The fewest tokens a sample holds (the rest of its row is padding).
MIN_TOKENS = 4
#: The token of padding positions (never predicted: their targets are ``IGNORE``).
PAD = 0
#: Set to 1, the torch engine normalises each micro-batch by its own tokens and divides by the
#: accumulation (the HF Trainer's bug before 4.46): how the tests show parity failing.
PER_MICRO_MEAN_ENV = "BATCHSPEC_PARITY_PER_MICRO_MEAN"
#: The file each rank writes.
FILE = "parity-rank-{rank}.pt"


def real_tokens(index: int, width: int) -> int:
    """The tokens of sample ``index`` in a row of ``width`` (the rest is padding): from
    :data:`MIN_TOKENS` to ``width``, varying from sample to sample."""
    return MIN_TOKENS + (index * 7) % (width - MIN_TOKENS + 1)


def row(index: int, width: int, vocab: int):
    """Sample ``index``: ``width`` token ids, its :func:`real_tokens` random ones (fixed by the
    index), then :data:`PAD`."""
    import torch

    ids = torch.full((width,), PAD, dtype=torch.long)
    real = real_tokens(index, width)
    ids[:real] = torch.randint(
        1, vocab, (real,), generator=torch.Generator().manual_seed(10_000 + index)
    )
    return ids


def shifted(indices, sequence_length: int, vocab: int):
    """``(tokens, targets)`` of the samples ``indices`` for the models of
    :mod:`translator.rank.model`: ``sequence_length + 1`` tokens a row, and the next token of
    each input position (:data:`IGNORE` past a sample's end)."""
    import torch

    tokens = torch.stack([row(i, sequence_length + 1, vocab) for i in indices])
    targets = tokens[:, 1:].clone()
    for n, i in enumerate(indices):
        targets[n, real_tokens(i, sequence_length + 1) - 1 :] = IGNORE
    return tokens, targets


def micro_batches(replica: int, replicas: int, micro: int, sequence_length: int, vocab: int):
    """Endless parity micro-batches of data-parallel rank ``replica`` (:func:`shifted`): its
    ``k``-th holds samples ``(k·DP + replica)·micro`` onwards, so each optimizer step takes the
    next ``G`` samples, whatever the split."""
    k = 0
    while True:
        first = (k * replicas + replica) * micro
        yield shifted(range(first, first + micro), sequence_length, vocab)
        k += 1


def predicted(targets) -> int:
    """The targets that are predicted (not :data:`IGNORE`)."""
    return int((targets != IGNORE).sum())


def step_tokens(micro_batches, device) -> int:
    """The predicted tokens of one optimizer step on every rank together (``micro_batches``:
    this rank's ``(tokens, targets)`` of the step): what a loss normalised over the whole step
    divides by."""
    import torch
    import torch.distributed as dist

    total = torch.tensor([sum(predicted(t) for _, t in micro_batches)], device=device)
    if dist.is_initialized():
        dist.all_reduce(total)
    return int(total.item())


def per_micro_mean() -> bool:
    """Whether the deliberately wrong normalisation is asked for (:data:`PER_MICRO_MEAN_ENV`)."""
    return os.environ.get(PER_MICRO_MEAN_ENV) == "1"


def sgd(parameters):
    """The parity optimizer: plain SGD, whose update is ``-LEARNING_RATE ×`` the gradient."""
    import torch

    return torch.optim.SGD(parameters, lr=LEARNING_RATE, momentum=0.0, weight_decay=0.0)


def snapshot(named_parameters) -> dict:
    """The weights as they are now (name -> float32 copy on the CPU)."""
    return {name: p.detach().float().cpu().clone() for name, p in named_parameters}


def gathered(named_parameters) -> list:
    """``(name, tensor)`` of every parameter, whole: a sharded one (a DTensor, as FSDP2 and
    torchtitan hold them) gathered from all ranks, so every rank must call it together."""
    return [
        (name, p.full_tensor() if hasattr(p, "full_tensor") else p) for name, p in named_parameters
    ]


def fingerprint(weights: dict) -> str:
    """A hash of the weights: two runs start from the same weights when theirs agree."""
    digest = hashlib.sha256()
    for name in sorted(weights):
        digest.update(name.encode())
        digest.update(weights[name].numpy().tobytes())
    return digest.hexdigest()[:16]


def held(samples: list[bytes]) -> dict:
    """What a step held, for comparing two runs: how many samples and a fingerprint of the set
    (each sample as the bytes of its tokens; the order does not matter)."""
    digest = hashlib.sha256()
    for sample in sorted(hashlib.sha256(s).digest() for s in samples):
        digest.update(sample)
    return {"count": len(samples), "fingerprint": digest.hexdigest()[:16]}


def write(
    folder: Path,
    rank: int,
    loss: float,
    before: dict | None,
    named_parameters,
    samples: dict | None = None,
) -> None:
    """This rank's part: its ``loss`` of the step (the launcher takes the mean over ranks) and,
    given the weights ``before`` the step (rank 0), their fingerprint and each update; with
    ``samples`` (:func:`held`), what the step held (an engine whose samples depend on the split,
    as packing's can)."""
    import torch

    record: dict = {"loss": float(loss)}
    if samples is not None:
        record["samples"] = samples
    if before is not None:
        named_parameters = list(named_parameters)
        if named_parameters:  # the precision the step ran its weights in
            record["dtype"] = str(named_parameters[0][1].dtype).removeprefix("torch.")
        after = snapshot(named_parameters)
        record["initial"] = fingerprint(before)
        record["update"] = {name: after[name] - before[name] for name in before}
    buffer = io.BytesIO()
    torch.save(record, buffer)
    replace_unfollowed(Path(folder) / FILE.format(rank=rank), buffer.getvalue())
