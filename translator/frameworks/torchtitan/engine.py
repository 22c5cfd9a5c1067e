"""torchtitan: its real ``Trainer`` (``torchtitan.trainer``) on the rendered launch's flags,
parsed by its own ``ConfigManager`` over the ``llama3`` ``debugmodel`` config function, with
only the run's settings on top (the steps, the sequence length, a work folder, no checkpoint,
compile or validation). The tokenizer and the data are stand-ins built in code: random tokens,
the positions of one document per row; nothing is downloaded.

Counted through the harness: the rows of each batch as the Trainer takes it (one per forward;
a forward hook would count twice under its replicate wrapper), and a post-step hook on torchtitan's own optimizer closes the step, so the
accumulation measured is ``Trainer.__init__``'s.

On a CPU rank four things of torchtitan assume a GPU and are bridged for the run (:func:`_cpu`):
its device lookup (``torch._utils._get_available_device_type`` answers ``cpu``), the memory
monitor's calls (``torch.cpu`` lacks ``get_device_name``, ``memory_stats``...), the barrier it
sets timeouts with (it passes ``device_ids``, which gloo refuses), and FlexAttention, which has
no backward on CPU: its kernel is replaced by causal SDPA, which is what its block mask computes
for rows of one document each. Data parallelism only: tensor, pipeline and context parallel
layouts are refused before launch (:func:`refuse`)."""

from __future__ import annotations

import os
import types

from translator.launch.context import RunContext
from translator.launch.engines import data_parallel_only
from translator.launch.harness import Harness

#: The config function the run builds on (torchtitan's smallest llama3).
MODULE, CONFIG = "llama3", "llama3_debugmodel"
#: Its vocabulary (``debugmodel``), which the random tokens stay below.
VOCAB = 2048


def refuse(spec, device: str) -> str | None:
    """Why this engine cannot run ``spec``'s layout (it is data-parallel only), else None."""
    return data_parallel_only("torchtitan", spec)


def flags(ctx: RunContext, on_gpu: bool) -> list[str]:
    """The rendered launch's flags (read back by the framework's reader), the run's on top. On
    CPU the data-parallel degree runs as replicas (DDP) on the ``full_dtensor`` backend: FSDP's
    reduce-scatter takes ``PREMUL_SUM``, which gloo lacks, and the default ``spmd_types``
    backend refuses the replicas' plain parameters; the batch's degree (replicate × shard) is
    the same."""
    from translator.frameworks.torchtitan import keys, rules

    reading = rules.read(ctx.config.read_text(), str(ctx.config))
    out = []
    for key in keys.DEFAULTS:
        v = reading.values.get(key)
        if v is not None and v.value is not None:
            out += [f"--{key}"] if v.value is True else [f"--{key}", str(v.value)]
    if not on_gpu:
        out += [
            "--parallelism.data_parallel_replicate_degree",
            str(ctx.spec.data_parallel),
            "--parallelism.data_parallel_shard_degree",
            "1",
            "--parallelism.spmd_backend",  # spmd_types wants DTensor parameters there
            "full_dtensor",
        ]
    return [
        *out,
        "--training.steps",
        str(ctx.steps),
        "--training.seq_len",
        str(ctx.sequence_length),
    ]


def run(ctx: RunContext):
    import torch

    harness = Harness(ctx)
    if not harness.on_gpu:
        _cpu()
    from torchtitan.config.manager import ConfigManager

    with harness.process_group():
        config = ConfigManager().parse_args(
            ["--module", MODULE, "--config", CONFIG, *flags(ctx, harness.on_gpu)]
        )
        config.dump_folder = str(ctx.workdir / "torchtitan")
        config.checkpoint.enable = False
        config.compile.enable = False
        config.validator.enable = False
        config.tokenizer = _Built(types.SimpleNamespace(eos_id=0, bos_id=1, pad_id=0))
        config.dataloader = _Data(ctx.rank, harness)
        torch.manual_seed(0)
        trainer = config.build()
        try:
            model = trainer.model_parts[0]
            harness.watch(trainer.optimizers.optimizers[0])
            trainer.train()
        finally:
            trainer.close()
        rank = trainer.parallel_dims.get_mesh("batch").get_local_rank() if ctx.world_size > 1 else 0
        return harness.result(
            replica=rank, counts=True, parameters=sum(p.numel() for p in model.parameters())
        )


class _Built:
    """A config whose ``build`` returns a made object (torchtitan builds its parts so)."""

    def __init__(self, made):
        self.made = made

    def build(self, **_):
        return self.made


class _Data:
    """torchtitan's dataloader config, duck-typed: ``build`` gives endless random batches of
    the size and length the Trainer asks for (``{"input", "positions"}``, labels)."""

    def __init__(self, seed: int, harness: Harness):
        self.seed, self.harness = seed, harness

    def build(self, *, local_batch_size: int, seq_len: int, **_):
        return _Batches(local_batch_size, seq_len, self.seed, self.harness)


class _Batches:
    """Each batch is counted as the Trainer takes it: it pulls one per forward (its
    ``batch_generator``), so these are the rows that enter the model."""

    def __init__(self, rows: int, length: int, seed: int, harness: Harness):
        self.rows, self.length, self.seed, self.harness = rows, length, seed, harness

    def __iter__(self):
        import torch

        generator = torch.Generator().manual_seed(1000 + self.seed)
        positions = torch.arange(self.length).repeat(self.rows, 1)
        while True:
            tokens = torch.randint(0, VOCAB, (self.rows, self.length + 1), generator=generator)
            self.harness.add(tokens[:, :-1])
            yield {"input": tokens[:, :-1], "positions": positions}, tokens[:, 1:]

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass


def _cpu() -> None:
    """torchtitan on a CPU rank: what it assumes of a GPU, bridged (see the module's text)."""
    import torch
    import torch._utils

    torch._utils._get_available_device_type = lambda: "cpu"  # before torchtitan is imported
    pages = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    stand_ins = {
        "get_device_name": lambda *_: "cpu",
        "get_device_properties": lambda *_: types.SimpleNamespace(total_memory=pages),
        "reset_peak_memory_stats": lambda *_: None,
        "empty_cache": lambda *_: None,
        "memory_stats": lambda *_: {},
    }
    for name, stand_in in stand_ins.items():
        if not hasattr(torch.cpu, name):
            setattr(torch.cpu, name, stand_in)
    import torchtitan.distributed.utils as distributed
    from torchtitan.models.common import attention

    distributed.set_pg_timeouts = lambda *_, **__: None  # its barrier passes gloo device_ids

    def causal(q, k, v, *, scale, enable_gqa, **_):
        out = torch.nn.functional.scaled_dot_product_attention(
            q, k, v, is_causal=True, scale=scale, enable_gqa=enable_gqa
        )
        return out, types.SimpleNamespace(lse=None, max_scores=None)

    attention.FlexAttention._compiled_flex_attn = staticmethod(causal)
