"""The framework's own verdict on a config, beside batchspec's (``validate --with-framework``)."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import sys
import tempfile

from translator.findings import Finding, finding
from translator.inspection import Inspection

#: Framework -> the module that must be importable to ask it.
PACKAGES = {"deepspeed": "deepspeed", "megatron": "megatron.core", "axolotl": "axolotl"}


def framework_verdict(inspection: Inspection) -> Finding:
    """Run the framework's validator on the file, or say plainly why it was not run."""
    name = inspection.reading.framework
    where = inspection.reading.path
    try:
        installed = importlib.util.find_spec(PACKAGES[name]) is not None
    except ModuleNotFoundError:
        installed = False
    if not installed:
        return finding("framework-not-run",
                       f"{name} is not installed here, so its own validator was not run",
                       hint=f"pip install 'batchspec[{name}]'", where=where)
    world = inspection.values.get("world_size")
    if world is None:
        return finding("framework-not-run",
                       f"{name}'s validator needs the world size, which is unknown",
                       hint="give --world-size", where=where)
    try:
        # Frameworks print banners on stdout, which belongs to --json alone.
        with contextlib.redirect_stdout(sys.stderr):
            verdict = ASK[name](inspection, world)
    except (NotEnoughKnown, ImportError) as exc:
        return finding("framework-not-run", f"{name}'s validator was not run: {exc}", where=where)
    except Exception as exc:  # the framework's refusal, in its own words
        text = " ".join(str(exc).split()) or type(exc).__name__
        return finding("framework-refuses", f"{name} refuses it: {type(exc).__name__}: {text}",
                       where=where)
    return finding("framework-accepts", f"{name} accepts it: {verdict}", where=where)


class NotEnoughKnown(Exception):
    """Too little is known to ask the framework, or the file is not for it alone."""


def _deepspeed(inspection: Inspection, world: int) -> str:
    from translator.crosscheck.deepspeed import resolve

    if '"auto"' in inspection.reading.text:
        raise NotEnoughKnown('its "auto" values are filled by the HF Trainer; DeepSpeed alone '
                             "refuses them")
    config = json.loads(inspection.reading.text)
    values = inspection.values
    model = values.get("tensor_parallel_size", 1) * values.get("pipeline_parallel_size", 1)
    mpu_dp = None if values.get("deepspeed_autotp") or model == 1 else values.get("data_parallel_size")
    got = resolve(config, world, mpu_dp)
    return (f"DeepSpeedConfig at world {world}: train_batch_size {got['train_batch_size']}, "
            f"micro {got['train_micro_batch_size_per_gpu']}, accumulation "
            f"{got['gradient_accumulation_steps']} (counting {got['world_size']:g} ranks)")


def _megatron(inspection: Inspection, world: int) -> str:
    from translator.crosscheck.megatron import num_microbatches

    v = inspection.values
    if None in (v.get("global_batch_size"), v.get("micro_batch_size"), v.get("data_parallel_size")):
        raise NotEnoughKnown("global batch, micro-batch or data-parallel size unknown")
    m = num_microbatches(v["global_batch_size"], v["micro_batch_size"], v["data_parallel_size"])
    return (f"megatron-core's micro-batch calculator runs {m} micro-batches per step (it checks "
            "global against micro × data-parallel only)")


def _axolotl(inspection: Inspection, world: int) -> str:
    from translator.crosscheck.axolotl import make_tiny_model, resolve

    with tempfile.TemporaryDirectory() as tmp:
        make_tiny_model(tmp)
        got = resolve(inspection.reading.text, world, tmp)
    return (f"validate_config + normalize_config at WORLD_SIZE {world}: batch_size "
            f"{got['batch_size']}, micro {got['micro_batch_size']}, accumulation "
            f"{got['gradient_accumulation_steps']}")


ASK = {"deepspeed": _deepspeed, "megatron": _megatron, "axolotl": _axolotl}
