"""Axolotl's own validate_config + normalize_config must compute the batch we rendered."""

import importlib.util
import os

import pytest

pytest.importorskip("axolotl")

from translator.frameworks import FRAMEWORKS  # noqa: E402
from translator.frameworks.axolotl import rules as axolotl_rules  # noqa: E402
from translator.frameworks.axolotl.verdict import make_tiny_model, resolve  # noqa: E402
from translator.render import render  # noqa: E402
from translator.spec import BatchSpec  # noqa: E402

pytestmark = pytest.mark.framework

HAS_RING_FLASH_ATTN = importlib.util.find_spec("ring_flash_attn") is not None
RING_FLASH_ATTN_MISSING = "context_parallel_size > 1 but ring_flash_attn is not installed"


@pytest.fixture(scope="module")
def base_dir(tmp_path_factory):
    """One tiny model, tokenizer and dataset for the whole module."""
    directory = tmp_path_factory.mktemp("axolotl")
    make_tiny_model(directory)
    return directory


def rendered_yaml(spec: BatchSpec) -> str:
    return render(spec, FRAMEWORKS["axolotl"]).text


@pytest.mark.parametrize(
    "world, tensor, context, micro, accumulation",
    [
        (1, 1, 1, 4, 8),
        (2, 1, 1, 2, 4),
        (8, 1, 1, 1, 16),
        (16, 2, 1, 4, 4),
        (8, 2, 1, 8, 1),
        (2, 2, 1, 2, 3),
        (16, 1, 2, 2, 2),
        (16, 2, 2, 1, 8),
    ],
)
def test_axolotl_computes_the_rendered_global_batch(
    base_dir, world, tensor, context, micro, accumulation
):
    spec = BatchSpec(
        micro_batch_size=micro,
        gradient_accumulation_steps=accumulation,
        world_size=world,
        tensor_parallel_size=tensor,
        context_parallel_size=context,
        sequence_length=256,
    )
    text = rendered_yaml(spec)
    if context > 1 and not HAS_RING_FLASH_ATTN:
        # Axolotl validates context parallelism by importing ring_flash_attn (CUDA only).
        with pytest.raises(ImportError, match=RING_FLASH_ATTN_MISSING):
            resolve(text, world, base_dir)
        return
    assert resolve(text, world, base_dir) == {
        "batch_size": spec.global_batch_size,
        "micro_batch_size": spec.micro_batch_size,
        "gradient_accumulation_steps": spec.gradient_accumulation_steps,
        "world_size": world,
    }


@pytest.mark.parametrize("world", [1, 4])
def test_batch_size_without_accumulation_is_not_what_trains(base_dir, world):
    """The trap: ``batch_size`` next to ``micro_batch_size`` never becomes accumulation.

    Validation fills ``gradient_accumulation_steps: 1`` before ``normalize_config`` could
    derive it from ``batch_size``, so each rank trains on micro 2 x accumulation 1 while
    ``cfg.batch_size`` keeps 16 -- multiplied by the world size, as if it were per rank.
    """
    got = resolve("micro_batch_size: 2\nbatch_size: 16\nsequence_len: 256\n", world, base_dir)
    assert got == {
        "batch_size": 16 * world,
        "micro_batch_size": 2,
        "gradient_accumulation_steps": 1,
        "world_size": world,
    }
    trained = got["micro_batch_size"] * got["gradient_accumulation_steps"] * world
    assert trained == 2 * world != got["batch_size"]


def test_batch_size_next_to_accumulation_is_refused(base_dir):
    text = (
        rendered_yaml(
            BatchSpec(global_batch_size=32, micro_batch_size=4, world_size=2, sequence_length=256)
        )
        + "batch_size: 32\n"
    )
    with pytest.raises(
        ValueError, match="please set only one of gradient_accumulation_steps or batch_size"
    ):
        resolve(text, 2, base_dir)


def test_world_size_environment_is_restored(base_dir, monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "3")
    resolve("micro_batch_size: 1\ngradient_accumulation_steps: 1\n", 8, base_dir)
    assert os.environ["WORLD_SIZE"] == "3"


def test_batch_size_equal_to_micro_trains_what_it_says(base_dir, tmp_path):
    """``batch_size`` equal to ``micro_batch_size`` without accumulation: Axolotl trains
    micro x 1, which is what the file means, so batchspec warns (it does not refuse)."""
    text = "micro_batch_size: 4\nbatch_size: 4\nsequence_len: 256\n"
    got = resolve(text, 2, base_dir)
    assert got["micro_batch_size"] * got["gradient_accumulation_steps"] == 4
    path = tmp_path / "same.yml"
    path.write_text(text)
    from translator.inspection import inspect_file
    from translator.reading import Launch

    found = inspect_file(str(path), launch=Launch(world_size=2))
    codes = {f.code: f.severity for f in found.findings}
    assert codes["axolotl-batch-size-redundant"] == "warning"
    assert found.spec.gradient_accumulation_steps == got["gradient_accumulation_steps"]


def _real_keys() -> set[str]:
    """Every top-level key Axolotl's schema and its integrations (``plugins:``) accept."""
    import pathlib
    import re

    import axolotl
    from axolotl.utils.schemas.config import AxolotlInputConfig

    keys = set(AxolotlInputConfig.model_fields)
    for path in pathlib.Path(axolotl.__file__).parent.joinpath("integrations").rglob("args.py"):
        keys |= set(re.findall(r"^    ([a-z_]+)\s*:", path.read_text(), flags=re.M))
    return keys


def test_no_real_key_is_called_a_typo(tmp_path):
    """A key Axolotl (or one of its plugins) reads is never 'a misspelt batch key'."""
    keys = _real_keys()
    assert "expert_parallel_size" in keys  # the expert-parallel integration's key
    text = "micro_batch_size: 2\ngradient_accumulation_steps: 2\n" + "".join(
        f"{k}: 1\n" for k in sorted(keys - set(axolotl_rules.BATCH_KEYS))
    )
    reading = FRAMEWORKS["axolotl"].read(text, "all_keys.yml")
    assert [f.message for f in reading.findings if f.code == "batch-key-typo"] == []
