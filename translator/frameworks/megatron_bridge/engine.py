"""Megatron-Bridge's smoke engine: the rendered ConfigContainer overrides, trained by
megatron-core's own parts (:mod:`translator.frameworks.shared.mcore_engine`).

Megatron-Bridge needs Transformer Engine and does not install on a CPU machine, so its training
loop cannot run here; what it hands megatron-core is what this engine hands it: the layout read
back from the rendered file (``train.global_batch_size``, ``train.micro_batch_size``,
``model.*_model_parallel_size``, ``train.decrease_batch_size_if_needed``,
``ddp.use_distributed_optimizer``, ``model.calculate_per_token_loss``), the same
``initialize_model_parallel`` and micro-batch calculator, ``get_forward_backward_func`` with
``get_num_microbatches()`` micro-batches and megatron's DDP and optimizer, and the loss of
Bridge's ``masked_next_token_loss`` (training/losses.py: the masked sum and the token count of
each micro-batch, which megatron-core divides by). The model is the job's (engine option
``model_shape``): the shape :mod:`.model` reads from its recipe or model block, depth cut to
``--layers``, built with random weights as the TransformerConfig Bridge's GPTModelProvider hands
megatron-core (:func:`translator.frameworks.shared.mcore_engine.architecture`); a file that
names no model builds the stand-in. On CPU it runs data parallelism only; other layouts are
refused before launch."""

from __future__ import annotations

from pathlib import Path

from translator.frameworks.megatron_bridge import rules
from translator.frameworks.shared import mcore_engine
from translator.frameworks.shared.mcore_engine import EngineLayout
from translator.rank.context import RunContext


def parse_layout(text: str, path: str) -> EngineLayout:
    """The layout of a Megatron-Bridge config ``text`` (``path``: where it comes from); a
    value the engine cannot run is a ``RuntimeError`` naming the file and the key."""
    reading = rules.read(text, path)
    gen = rules.generation(reading)

    sized = 1 if not gen.recipe else None  # NeMo 1's sizes default to 1; a recipe's are unknown

    def count(field: str, default: int | None = None, required: bool = True) -> int | None:
        """The key's literal count; ``default`` for a null (or an absent optional) key."""
        key = gen.key(field)
        v = reading.values.get(key)
        if v is None and required and default is None:
            raise RuntimeError(f"{path}: no {key}; the smoke run needs it written")
        if v is None or v.value is None:
            return default
        if v.count is None:
            raise RuntimeError(f"{path}: {key} is not a literal count ({v.value!r})")
        return v.count

    rampup = reading.values.get(gen.rampup)
    if rampup is not None and rampup.value:
        raise RuntimeError(
            f"{path}: {gen.rampup} is not supported by smoke runs "
            "(the number of micro-batches would change from step to step)"
        )
    micro = count("micro_batch_size")
    assert micro is not None  # required
    decrease, optimizer = reading.values.get(rules.DECREASE), reading.values.get(rules.OPTIMIZER)
    per_token = per_token_loss(reading, path) if gen is rules.BRIDGE else False
    return EngineLayout(
        micro_batch_size=micro,
        global_batch_size=count("global_batch_size"),
        tensor_parallel_size=count("tensor_parallel_size", sized) or 1,
        pipeline_parallel_size=count("pipeline_parallel_size", sized) or 1,
        context_parallel_size=count("context_parallel_size", sized) or 1,
        virtual_pipeline_stages=count("virtual_pipeline_stages", required=False),
        decrease_batch_size_if_needed=decrease is not None and decrease.value is True,
        use_distributed_optimizer=optimizer is not None and optimizer.value is True,
        distributed_optimizer_switch=rules.OPTIMIZER,
        calculate_per_token_loss=per_token,
    )


def per_token_loss(reading, path: str) -> bool:
    """``model.calculate_per_token_loss`` as the file sets it. Left out (or null), it is the
    dataclass default, False: Bridge's ``GPTModelProvider`` (models/gpt_provider.py) inherits
    the field from megatron-core's ``TransformerConfig`` (``calculate_per_token_loss: bool =
    False``) through Bridge's own ``TransformerConfig`` (models/transformer_config.py), which
    does not change it; a recipe may set it (Bridge's Qwen3 and gpt-oss recipes set it true),
    and what the recipe sets is not in the file. (NeMo's generations keep the model config
    elsewhere; their runs take the default.)"""
    value = reading.values.get(rules.PER_TOKEN_LOSS)
    if value is None:
        return False
    if not isinstance(value.value, bool):  # a bool field: OmegaConf refuses null too
        shown = value.why_unknown or repr(value.value)
        raise RuntimeError(
            f"{path}:{value.line}: {rules.PER_TOKEN_LOSS} is {shown}, not true or false"
        )
    return value.value


#: Why this engine cannot run a spec's layout on a device (megatron-core's CPU limits).
refuse = mcore_engine.refuse


def refuse_config(config: str, partners, where: str, device: str) -> str | None:
    """Why this engine cannot run the config (from the file ``where``) on ``device``: what the
    ranks would raise on reading it, asked before they start."""
    try:
        layout = parse_layout(config, where)
    except RuntimeError as exc:  # its text names the file
        return str(exc)
    why = mcore_engine.layout_refusal(layout, device == "gpu")
    return f"{where}: {why}" if why else None


def run(ctx: RunContext):
    """The rendered config's layout, trained and counted on this rank."""
    return mcore_engine.run(ctx, parse_layout(Path(ctx.config).read_text(), str(ctx.config)))
