"""A key left blank (YAML's null) reads the way litgpt, torchtune and torchtitan read it: for
every key our readers check, the installed framework's own schema or code is asked whether
it takes a null, and ``validate`` must agree. These frameworks live in the native venv:
``pytest -m native tests/job/test_nullable_keys_native.py``; each test imports its framework
inside."""

from __future__ import annotations

import json
import typing

import pytest
from click.testing import CliRunner
from test_nullable_keys import allows_none, errors, yaml_with_blank

from translator.cli import main
from translator.frameworks.litgpt import rules as litgpt_rules
from translator.frameworks.torchtitan import keys as torchtitan_keys
from translator.frameworks.torchtune import rules as torchtune_rules

pytestmark = [pytest.mark.framework, pytest.mark.native]
WORLD = 8
LITGPT = """\
model_name: pythia-14m
out_dir: out/pretrain
train:
  global_batch_size: 64
  micro_batch_size: 4
  max_tokens: 1000000
devices: 8
num_nodes: 1
"""


def validate(tmp_path, name: str, text: str) -> tuple[int, dict]:
    path = tmp_path / name
    path.write_text(text)
    result = CliRunner().invoke(main, ["validate", str(path), "--world-size", WORLD, "--json"])
    (out,) = json.loads(result.stdout)["files"]
    return result.exit_code, out


# litgpt ----------------------------------------------------------------------------------------


def litgpt_schema() -> dict[str, bool]:
    """Each key the litgpt reader checks -> whether litgpt allows None for it: ``TrainArgs``'s
    type hints for the ``train:`` keys, ``litgpt.pretrain.setup``'s for the top ones (an old
    optimizer key has no field in litgpt 0.4 and later: False)."""
    from litgpt.args import TrainArgs
    from litgpt.pretrain import setup

    train, top = typing.get_type_hints(TrainArgs), typing.get_type_hints(setup)
    out = {}
    for key in litgpt_rules.READ:
        block, _, inner = key.rpartition(".")
        hints = train if block == "train" else top
        out[key] = inner in hints and allows_none(hints[inner])
    return out


def litgpt_runs(text: str) -> bool:
    """Whether litgpt takes the file as far as its batch: ``litgpt pretrain``'s jsonargparse
    parser, then what ``setup`` and ``fit`` do with the values (``parse_devices``, then
    ``TrainArgs.gradient_accumulation_iters(devices, num_nodes)``)."""
    from litgpt.args import TrainArgs
    from litgpt.utils import parse_devices

    from translator.frameworks.litgpt.verdict import parse

    parsed = parse(text, "pretrain")  # jsonargparse takes a null for every one of these keys
    try:
        devices = parse_devices(parsed.devices)
        TrainArgs(**parsed.train.as_dict()).gradient_accumulation_iters(devices, parsed.num_nodes)
    except (TypeError, ValueError):  # None // int, or parse_devices' "got: None"
        return False
    return True


@pytest.mark.parametrize(
    "key", [k for k in litgpt_rules.READ if k not in litgpt_rules.OLD_OPTIMIZER]
)
def test_a_blank_litgpt_key_reads_as_litgpt_runs_it(tmp_path, key):
    """jsonargparse takes a null for any of these keys, but litgpt then runs with it only
    where ``TrainArgs`` types it ``Optional`` (``max_seq_length``: the model's block size); a
    blank batch size, ``devices`` or ``num_nodes`` fails in litgpt's own arithmetic, and is an
    error here."""
    pytest.importorskip("litgpt")
    text = yaml_with_blank(LITGPT, key)
    runs = litgpt_runs(text)
    assert runs is litgpt_schema()[key]  # litgpt does what the type hints say
    code, out = validate(tmp_path, "litgpt.yaml", text)
    assert out["framework"] == "litgpt"
    assert bool(errors(out)) is not runs, (key, runs, errors(out))
    assert code == (0 if runs else 1)


def test_a_blank_litgpt_devices_is_refused_in_litgpt_s_words(tmp_path):
    pytest.importorskip("litgpt")
    from litgpt.utils import parse_devices

    with pytest.raises(ValueError, match="Devices must be 'auto' or a positive integer"):
        parse_devices(None)
    _, out = validate(tmp_path, "litgpt.yaml", yaml_with_blank(LITGPT, "devices"))
    assert errors(out) == [
        "invalid-value: devices is None (NoneType); it must be a positive integer or auto"
    ]


# torchtune -------------------------------------------------------------------------------------

TORCHTUNE = (
    "model:\n  _component_: torchtune.models.llama3_2.llama3_2_1b\n"
    "batch_size: 4\ngradient_accumulation_steps: 2\n"
)
#: Key -> the recipe's line that reads it, and the line that then uses the value: OmegaConf
#: hands both ``cfg.KEY`` and ``cfg.get(KEY, default)`` a null as None (the default is for a
#: missing key only), and the use fails on None.
TORCHTUNE_FAILS = {
    "gradient_accumulation_steps": (
        "self._gradient_accumulation_steps = cfg.gradient_accumulation_steps",
        "len(self._dataloader) // self._gradient_accumulation_steps",
    ),
    "tensor_parallel_dim": (
        'self.tensor_parallel_dim = cfg.get("tensor_parallel_dim", 1)',
        "self.tensor_parallel_dim > 1",
    ),
}
#: Keys the recipe reads only for their truth (or, ``max_steps_per_epoch``, tests for None):
#: a null is their default, false (or no limit), and not an error here.
TORCHTUNE_TAKES = {
    "optimizer_in_bwd": 'cfg.get("optimizer_in_bwd", False)',
    "enable_activation_checkpointing": '"enable_activation_checkpointing", False',
    "fsdp_cpu_offload": 'cfg.get("fsdp_cpu_offload", False)',
    "max_steps_per_epoch": "self.max_steps_per_epoch is not None",
    "dataset.packed": 'cfg_dataset.get("packed", False)',
}


def recipe_source() -> str:
    """The text of the recipe ``tune run full_finetune_distributed`` runs (torchtune's own
    ``recipes/``, beside the package)."""
    import inspect

    from translator.frameworks.torchtune.verdict import recipe_module

    return inspect.getsource(recipe_module())


def blank_cfg(key: str):
    from omegaconf import OmegaConf

    return OmegaConf.create(yaml_with_blank(TORCHTUNE, key))


@pytest.mark.parametrize("key", sorted(TORCHTUNE_FAILS))
def test_the_torchtune_recipe_fails_on_a_blank_count_and_so_do_we(tmp_path, key):
    pytest.importorskip("torchtune")
    reads, uses = TORCHTUNE_FAILS[key]
    source = recipe_source()
    assert reads in source and uses in source
    cfg = blank_cfg(key)
    value = cfg[key]
    assert value is None and cfg.get(key, 1) is None
    self = type("Recipe", (), {})()  # the recipe's attributes the line uses
    self._dataloader, self._gradient_accumulation_steps, self.tensor_parallel_dim = (
        [0],
        value,
        value,
    )
    with pytest.raises(TypeError, match="NoneType"):
        eval(uses, {}, {"self": self})
    code, out = validate(tmp_path, "tt.yaml", yaml_with_blank(TORCHTUNE, key))
    assert out["framework"] == "torchtune"
    assert errors(out) == [
        f"invalid-value: {key} is None (NoneType); it must be a positive integer"
    ]
    assert code == 1


def test_a_blank_torchtune_batch_size_is_refused_by_the_recipe_s_data_loader(tmp_path):
    """``batch_size=None`` turns the loader's batching off, which torch refuses beside the
    recipe's ``drop_last=True``."""
    pytest.importorskip("torchtune")
    from torchdata.stateful_dataloader import StatefulDataLoader

    source = recipe_source()
    assert "batch_size=cfg.batch_size" in source and "drop_last=True" in source
    assert blank_cfg("batch_size").batch_size is None
    with pytest.raises(ValueError, match="batch_size=None"):
        StatefulDataLoader(dataset=[0, 1], batch_size=None, drop_last=True)
    code, out = validate(tmp_path, "tt.yaml", yaml_with_blank(TORCHTUNE, "batch_size"))
    assert errors(out) and code == 1


@pytest.mark.parametrize("key", sorted(TORCHTUNE_TAKES))
def test_a_blank_torchtune_switch_is_its_default(tmp_path, key):
    pytest.importorskip("torchtune")
    assert TORCHTUNE_TAKES[key] in recipe_source()
    text = yaml_with_blank(TORCHTUNE, key)
    code, out = validate(tmp_path, "tt.yaml", text)
    assert out["framework"] == "torchtune" and not errors(out) and code == 0


@pytest.mark.parametrize("key", ["context_parallel_dim", *torchtune_rules.DP_KEYS])
def test_a_blank_torchtune_main_key_is_ignored_as_0_6_1_ignores_it(tmp_path, key):
    """torchtune 0.6.1's recipe does not read main's ParallelDims keys at all, blank or not:
    a warning that it ignores them, no error."""
    pytest.importorskip("torchtune")
    assert key not in recipe_source()
    code, out = validate(tmp_path, "tt.yaml", yaml_with_blank(TORCHTUNE, key))
    assert not errors(out) and code == 0
    assert "torchtune-unreleased-keys" in [f["code"] for f in out["findings"]]


def test_a_blank_fsdp_reshard_after_forward_is_refused_by_fully_shard(tmp_path):
    """The recipe hands ``cfg.get("fsdp_reshard_after_forward", True)`` (None for a blank
    key) to torch's ``fully_shard``, which refuses anything but a bool or an int."""
    pytest.importorskip("torchtune")
    from torch.distributed.fsdp._fully_shard._fsdp_init import _get_post_forward_mesh_info

    assert 'reshard_after_forward=cfg.get("fsdp_reshard_after_forward", True)' in recipe_source()
    assert blank_cfg("fsdp_reshard_after_forward").get("fsdp_reshard_after_forward", True) is None
    with pytest.raises(ValueError, match="reshard_after_forward should be a bool or an int"):
        _get_post_forward_mesh_info(None, type("MeshInfo", (), {"shard_mesh_size": 1})())
    code, out = validate(
        tmp_path, "tt.yaml", yaml_with_blank(TORCHTUNE, "fsdp_reshard_after_forward")
    )
    (error,) = errors(out)
    assert error.startswith("invalid-value: fsdp_reshard_after_forward is None")
    assert "reshard_after_forward should be a bool or an int" in error and code == 1


# torchtitan ------------------------------------------------------------------------------------


def torchtitan_schema() -> dict[str, bool]:
    """Each key of torchtitan's own config our TOML reader checks -> whether the installed
    torchtitan's ``TrainingConfig`` / ``ParallelismConfig`` allows None for it."""
    from torchtitan.config.configs import ParallelismConfig, TrainingConfig

    hints = {
        "training": typing.get_type_hints(TrainingConfig),
        "parallelism": typing.get_type_hints(ParallelismConfig),
    }
    out = {}
    for key in torchtitan_keys.DEFAULTS:
        table, _, inner = key.partition(".")
        if inner in hints[table]:  # the fork-only and later keys have no field here
            out[key] = allows_none(hints[table][inner])
    return out


def test_torchtitan_types_every_key_we_read_without_none():
    pytest.importorskip("torchtitan")
    schema = torchtitan_schema()
    assert "training.local_batch_size" in schema and "parallelism.tensor_parallel_degree" in schema
    assert [k for k, allowed in schema.items() if allowed] == []


@pytest.mark.parametrize("key", sorted(torchtitan_keys.DEFAULTS))
def test_a_blank_torchtitan_key_is_not_toml(tmp_path, key):
    """TOML has no null: ``key =`` with no value is refused by ``tomllib`` (what torchtitan
    0.2.2's job config loader parses with) and by us, exit 2, naming the line, whatever the
    schema says."""
    import tomllib

    table, _, inner = key.partition(".")
    text = f"[{table}]\n{inner} =\n"
    with pytest.raises(tomllib.TOMLDecodeError):
        tomllib.loads(text)
    path = tmp_path / "job.toml"
    path.write_text(text)
    result = CliRunner().invoke(main, ["validate", str(path), "--world-size", WORLD])
    assert result.exit_code == 2
    assert f"{path}:2: not valid TOML" in result.output


# NeMo's trainer block (Lightning) --------------------------------------------------------------

NEMO1 = (
    "trainer:\n  devices: 8\n  num_nodes: 1\nmodel:\n  micro_batch_size: 4\n"
    "  global_batch_size: 256\n  tensor_model_parallel_size: 2\n"
)


@pytest.mark.parametrize(
    "key, refusal",
    [
        ("trainer.devices", (TypeError, "`devices` selected with `CPUAccelerator`")),
        ("trainer.num_nodes", (ValueError, "`num_nodes` must be a positive integer")),
    ],
)
def test_a_blank_nemo_trainer_world_is_refused_by_lightning_and_by_us(tmp_path, key, refusal):
    """NeMo hands ``trainer:`` to Lightning's ``Trainer`` (installed here with litgpt); a null
    is passed as None, which it refuses (on CPU in its CPU words; on GPUs "Device IDs (GPU/TPU)
    must be an int ... but you passed None", which our message quotes)."""
    pl = pytest.importorskip("lightning.pytorch")
    from lightning.fabric.utilities.device_parser import _check_data_type

    inner = key.removeprefix("trainer.")
    kind, words = refusal
    with pytest.raises(kind, match=words):
        pl.Trainer(accelerator="cpu", logger=False, enable_checkpointing=False, **{inner: None})
    with pytest.raises(TypeError, match="but you passed None"):
        _check_data_type(None)  # what the CUDA accelerator's parse_devices runs first
    code, out = validate(tmp_path, "nemo.yaml", yaml_with_blank(NEMO1, key))
    assert out["framework"] == "megatron-bridge"
    (error,) = errors(out)
    assert error.startswith(f"invalid-value: {key} is None") and "Lightning" in error
    assert code == 1
