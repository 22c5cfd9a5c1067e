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
