"""What the rendered launch script holds: torchtitan 0.3.0's flags for a spec, written whole
(every batch key and degree, the shard degree explicit), so the config function's own values
do not enter the batch and another world fails at start instead of changing it."""

from __future__ import annotations

from translator.frameworks.torchtitan import keys, models
from translator.model.matching import nearest, source_model
from translator.model.memory import Model
from translator.model.named_model import NamedModel
from translator.render import comment_lines
from translator.spec import BatchSpec
from translator.words.findings import Finding, finding

#: The launch's config function where the source names no model (torchtitan's smallest).
DEBUG_CONFIG = "llama3_debugmodel"
#: What the launch does without a config function of the source's model: it stops, saying why.
PICK = "${CONFIG:?set CONFIG: no torchtitan config function builds the source model (see above)}"


def flags(spec: BatchSpec) -> dict[str, int | bool]:
    """torchtitan 0.3.0 key -> value for a solved spec. With pipeline parallelism the
    accumulation runs as pipeline micro-batches (``local_batch_size = micro × accumulation``,
    one torchtitan accumulation step, and CUDA graphs off, which 0.3.0 demands); without it,
    ``local_batch_size`` is the micro-batch. A switch that is on is ``True``."""
    pp = spec.pipeline_parallel_size
    out: dict[str, int | bool] = {
        "training.local_batch_size": spec.micro * spec.accumulation if pp > 1 else spec.micro,
        "training.global_batch_size": spec.global_batch,
    }
    if spec.sequence_length is not None:
        out["training.seq_len"] = spec.sequence_length
    if pp > 1:
        out["parallelism.pipeline_parallel_microbatch_size"] = spec.micro
        out[keys.NO_CUDA_GRAPHS] = True
    out |= {
        "parallelism.data_parallel_replicate_degree": 1,
        "parallelism.data_parallel_shard_degree": spec.data_parallel,
        "parallelism.tensor_parallel_degree": spec.tensor_parallel_size,
        "parallelism.pipeline_parallel_degree": pp,
        "parallelism.context_parallel_degree": spec.context_parallel_size,
    }
    if spec.expert_parallel_size > 1:
        out["parallelism.expert_parallel_degree"] = spec.expert_parallel_size
    return out


def context(spec: BatchSpec) -> dict:
    launch = [("--nnodes", spec.nodes or 1), ("--nproc_per_node", spec.gpus_per_node or spec.world)]
    return {"spec": spec, "flags": list(flags(spec).items()), "launch": launch}


def config_functions() -> dict:
    """Each llama3 flavor's config function in torchtitan 0.3.0 (the first that builds it:
    ``llama3_8b``, not its float8 variants) -> the shape it builds."""
    functions: dict = {}
    for function, flavor in models.LLAMA3_CONFIGS.items():
        if flavor not in functions.values():
            functions[function] = flavor
    return {f: models.torchtitan_model("llama3", flavor)[0] for f, flavor in functions.items()}


def model_context(spec: BatchSpec, named: NamedModel | None) -> tuple[dict, list[Finding]]:
    """The launch's ``CONFIG`` for the model the source trains: the config function that builds
    its shape; where none does (or the source's model is not known), none, so that the script
    stops until one is set, and the nearest named. A source that names no model: debugmodel."""
    if named is None:
        return {"config": f"${{CONFIG:-{DEBUG_CONFIG}}}", "model_lines": []}, []
    source = source_model(named)
    shape = named.model
    match = None if shape is None else nearest(shape, config_functions())
    if match is not None and match.exact:
        said = f"torchtitan.sh runs --config {match.name}, the source's model: {source}"
        return {
            "config": f"${{CONFIG:-{match.name}}}",
            "model_lines": comment_lines(f"The source's model is {match.name}'s shape: {source}."),
        }, [finding("model-carried", said)]
    if shape is None or match is None:
        why = "batchspec does not know its shape"
        hint = "set CONFIG (and MODULE) to the config function of that model"
    else:
        why = f"the nearest, {match.name}, differs: {'; '.join(match.differences)}"
        hint = (
            f"set CONFIG to {match.name} if that is the model meant, else to the config "
            "function of the source's model" + _older_flavor(shape)
        )
    said = (
        f"torchtitan.sh names no config function: none of torchtitan's llama3 config functions "
        f"builds the source's model, {source}; {why}"
    )
    lines = comment_lines(f"No config function builds the source's model ({why}): {source}.")
    return {"config": PICK, "model_lines": lines}, [finding("model-not-matched", said, hint=hint)]


def _older_flavor(shape: Model) -> str:
    """Where a flavor of torchtitan 0.2.2 (which 0.3.0 has no config function for: 1B, 3B)
    builds ``shape``: a clause that names it; else nothing."""
    flavors = {f: models.flavor_shape(f, flavor) for f, flavor in models.LLAMA3.items()}
    match = nearest(shape, flavors)
    if match is None or not match.exact:
        return ""
    return f" (torchtitan 0.2.2's llama3 flavor {match.name} builds it: [model] flavor)"
