"""Hypothesis strategies for batch layouts."""

from hypothesis import strategies as st

from translator.spec import BatchSpec

SIZES = st.sampled_from([1, 2, 4, 8])


@st.composite
def layouts(draw, pipeline=True, autotp=None):
    """A consistent layout as a dict of all its numbers (no spec built yet)."""
    tp, cp = draw(SIZES), draw(st.sampled_from([1, 2, 4]))
    pp = draw(st.sampled_from([1, 2, 4])) if pipeline else 1
    dp, micro, accum = draw(st.integers(1, 128)), draw(st.integers(1, 64)), draw(st.integers(1, 64))
    use_autotp = draw(st.booleans()) if autotp is None else autotp
    return {
        "global_batch_size": micro * accum * dp,
        "micro_batch_size": micro,
        "gradient_accumulation_steps": accum,
        "data_parallel_size": dp,
        "world_size": dp * tp * pp * cp,
        "tensor_parallel_size": tp,
        "pipeline_parallel_size": pp,
        "context_parallel_size": cp,
        "sequence_length": draw(st.none() | st.integers(1, 1 << 17)),
        "deepspeed_autotp": use_autotp and tp > 1 and pp == 1,
    }


@st.composite
def specs(draw, **kwargs):
    """A BatchSpec built from three of the four numbers, as a user would give it."""
    layout = draw(layouts(**kwargs))
    left_out = draw(
        st.sampled_from(
            ["global_batch_size", "micro_batch_size", "gradient_accumulation_steps", "world_size"]
        )
    )
    given = {
        k: v
        for k, v in layout.items()
        if k not in (left_out, "data_parallel_size") and v is not None
    }
    if draw(st.booleans()) and "world_size" in given:
        nodes = draw(st.sampled_from([d for d in (1, 2, 4, 8) if given["world_size"] % d == 0]))
        given["nodes"], given["gpus_per_node"] = nodes, given.pop("world_size") // nodes
    spec = BatchSpec(**given)
    return spec


#: Attention-head counts of published models (GPT-2 12/16/20/25, Llama 32/40/64, Qwen 28/40,
#: Falcon 71, and odd ones).
HEADS = st.sampled_from([4, 6, 12, 14, 16, 20, 25, 28, 32, 40, 48, 56, 64, 71, 96, 128])


@st.composite
def model_parts(draw):
    """A model's layers, heads and key/value heads (a divisor of the heads: grouped-query
    attention, multi-query or none)."""
    from translator.model.model_split import ModelParts

    heads = draw(HEADS)
    kv = draw(st.sampled_from([d for d in range(1, heads + 1) if heads % d == 0]))
    return ModelParts(draw(st.integers(1, 128)), heads, kv, "the drawn model")


@st.composite
def cluster_layouts(draw):
    """Batch values on a cluster of nodes, with parallel sizes that need not fit it or a model:
    what a user may write."""
    return {
        "nodes": draw(st.integers(1, 8)),
        "gpus_per_node": draw(st.sampled_from([1, 2, 4, 6, 8, 16])),
        "tensor_parallel_size": draw(st.sampled_from([1, 2, 3, 4, 5, 6, 8, 16])),
        "pipeline_parallel_size": draw(st.sampled_from([1, 2, 3, 4, 5, 6, 8])),
        "global_batch_size": draw(st.integers(1, 1024)),
        "micro_batch_size": draw(st.integers(1, 8)),
    }
