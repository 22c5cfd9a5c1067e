"""A key left blank (``deepspeed:`` with no value, YAML's null; ``null`` in JSON) reads the way
its framework reads it.

For every key our readers check, whether the framework takes a null is asked of the installed
framework's own schema: Axolotl's ``AxolotlInputConfig`` fields, the type hints of
``TrainingArguments`` (and of the ``AcceleratorConfig`` and accelerate ``ParallelismConfig``
it nests), TRL's ``SFTConfig``, accelerate's ``ClusterConfig`` and its launch parser, and
DeepSpeed's own ``DeepSpeedConfig``. Where the schema allows None, a file with that key blank
is not an error. The few keys whose schema allows None but whose framework then fails on it
are listed, and each is shown failing in the framework's own code. Megatron-LM is not here:
its values are command-line flags, which have no null.
"""

from __future__ import annotations

import json
import types
import typing

import pytest
import yaml
from click.testing import CliRunner
from paths import ROOT

from translator.cli import main
from translator.frameworks.accelerate import rules as accelerate_rules
from translator.frameworks.axolotl import rules as axolotl_rules
from translator.frameworks.deepspeed import config_json as deepspeed_json
from translator.frameworks.megatron_bridge import rules as bridge_rules
from translator.frameworks.nanotron import rules as nanotron_rules

WORLD = 8
#: A valid file of each framework; the blank key replaces that key's line or is added.
AXOLOTL = "base_model: x\nmicro_batch_size: 2\ngradient_accumulation_steps: 4\n"
TRAINER = "output_dir: o\nper_device_train_batch_size: 2\ngradient_accumulation_steps: 4\n"
LLAMAFACTORY = (
    "stage: sft\nfinetuning_type: full\nper_device_train_batch_size: 2\n"
    "gradient_accumulation_steps: 4\n"
)
ACCELERATE = (
    "compute_environment: LOCAL_MACHINE\ndistributed_type: DEEPSPEED\n"
    "deepspeed_config:\n  zero_stage: 2\nnum_machines: 1\nnum_processes: 8\n"
)
ACCELERATE_FSDP = (
    "compute_environment: LOCAL_MACHINE\ndistributed_type: FSDP\nnum_machines: 1\n"
    "num_processes: 8\nparallelism_config:\n  parallelism_config_dp_shard_size: 8\n"
)
DEEPSPEED = {
    "train_batch_size": 64,
    "train_micro_batch_size_per_gpu": 2,
    "gradient_accumulation_steps": 4,
}
#: The TrainingArguments keys the HF Trainer's reader checks (LLaMA-Factory's too).
TRAINER_KEYS = (
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "auto_find_batch_size",
    "deepspeed",
    "dataloader_drop_last",
    "accelerator_config.split_batches",
    *(
        f"parallelism_config.{k}"
        for k in ("tp_size", "cp_size", "sp_size", "dp_shard_size", "dp_replicate_size")
    ),
)
#: Keys whose schema allows None but whose framework fails on a null, with where it fails.
FAILS_ON_NULL = {
    ("axolotl", "micro_batch_size"): "axolotl-null-batch",  # normalize_config: None * int
    ("axolotl", "gradient_accumulation_steps"): "axolotl-null-batch",  # batch_size // None
    **{  # accelerate launch exports "None", which ParallelismConfig reads with int()
        ("accelerate", f"parallelism_config.parallelism_config_{size}"): "invalid-value"
        for size in accelerate_rules.SIZES
    },
}


def allows_none(annotation) -> bool:
    """Whether a type annotation (``int | None``, ``Optional[dict]``) admits None."""
    return annotation is type(None) or (
        typing.get_origin(annotation) in (typing.Union, types.UnionType)
        and type(None) in typing.get_args(annotation)
    )


def yaml_with_blank(base: str, key: str) -> str:
    """``base`` with ``key`` (dotted: one mapping down) blank, in place of its own line."""
    block, _, inner = key.rpartition(".")
    own = f"  {inner}:" if block else f"{key}:"
    lines = [line for line in base.splitlines() if not line.startswith(own)]
    if not block:
        return "\n".join([*lines, f"{key}:"]) + "\n"
    if f"{block}:" in lines:  # the block is there: the blank key goes in it
        at = lines.index(f"{block}:") + 1
        return "\n".join([*lines[:at], f"  {inner}:", *lines[at:]]) + "\n"
    return "\n".join([*lines, f"{block}:", f"  {inner}:"]) + "\n"


def json_with_null(base: dict, key: str) -> str:
    block, _, inner = key.rpartition(".")
    config = dict(base)
    if block:
        config[block] = {inner: None}
    else:
        config[key] = None
    return json.dumps(config, indent=2)


# What each framework's schema says -------------------------------------------------------------


def axolotl_schema() -> dict[str, bool]:
    pytest.importorskip("axolotl")
    from axolotl.utils.schemas.config import AxolotlInputConfig

    fields = AxolotlInputConfig.model_fields
    keys = [*axolotl_rules.KEYS, *axolotl_rules.OTHER_KEYS]
    return {key: allows_none(fields[key].annotation) for key in dict.fromkeys(keys)}


def trainer_schema() -> dict[str, bool]:
    pytest.importorskip("transformers")
    from accelerate.parallelism_config import ParallelismConfig
    from transformers import TrainingArguments
    from transformers.trainer_pt_utils import AcceleratorConfig

    nested = {"accelerator_config": AcceleratorConfig, "parallelism_config": ParallelismConfig}
    out = {}
    for key in TRAINER_KEYS:
        block, _, inner = key.rpartition(".")
        holder = nested[block] if block else TrainingArguments
        out[key] = allows_none(typing.get_type_hints(holder)[inner or key])
    return out


def sft_schema() -> dict[str, bool]:
    """TRL's sequence length key (the HF Trainer's reader takes it from an SFTConfig file)."""
    trl = pytest.importorskip("trl")
    return {"max_length": allows_none(typing.get_type_hints(trl.SFTConfig)["max_length"])}


def accelerate_schema() -> dict[str, bool]:
    pytest.importorskip("accelerate")
    from accelerate.commands.config.config_args import ClusterConfig
    from accelerate.commands.launch import launch_command_parser
    from accelerate.parallelism_config import ParallelismConfig

    cluster = typing.get_type_hints(ClusterConfig)
    sizes = typing.get_type_hints(ParallelismConfig)
    # deepspeed_config's keys become the launch's own flags (its --gradient_accumulation_steps)
    launch = {a.dest: a.default for a in launch_command_parser()._actions}
    return {
        "num_processes": allows_none(cluster["num_processes"]),
        "num_machines": allows_none(cluster["num_machines"]),
        "deepspeed_config.gradient_accumulation_steps": launch["gradient_accumulation_steps"]
        is None,
        **{
            f"parallelism_config.parallelism_config_{s}": allows_none(sizes[s])
            for s in accelerate_rules.SIZES
        },
    }


def deepspeed_accepts(key: str) -> bool:
    """Whether DeepSpeed's own ``DeepSpeedConfig`` takes the valid config with ``key`` null."""
    pytest.importorskip("deepspeed")
    from translator.frameworks.deepspeed.verdict import resolve

    try:
        resolve(json.loads(json_with_null(DEEPSPEED, key)), WORLD)
    except Exception:  # DeepSpeed's TypeError or pydantic's ValidationError: it refuses null
        return False
    return True


DEEPSPEED_KEYS = (
    *deepspeed_json.BATCH_KEYS,
    "sequence_parallel_size",
    "zero_optimization.stage",
    "tensor_parallel.autotp_size",
)


def files() -> dict[str, tuple]:
    """Framework -> (its schema, the keys our reader checks, file name, the valid file)."""
    trainer = ("hf.yaml", TRAINER)
    return {
        "axolotl": (
            axolotl_schema,
            [*axolotl_rules.KEYS, *axolotl_rules.OTHER_KEYS],
            "ax.yml",
            AXOLOTL,
        ),
        "hf": (trainer_schema, TRAINER_KEYS, *trainer),
        "trl": (sft_schema, ["max_length"], *trainer),
        "llamafactory": (trainer_schema, TRAINER_KEYS, "lf.yaml", LLAMAFACTORY),
        "accelerate": (
            accelerate_schema,
            [
                *accelerate_rules.KEYS,
                *(accelerate_rules.PARALLEL + s for s in accelerate_rules.SIZES),
            ],
            "acc.yaml",
            ACCELERATE,
        ),
    }


def validate(tmp_path, name: str, text: str) -> tuple[int, dict]:
    path = tmp_path / name
    path.write_text(text)
    result = CliRunner().invoke(main, ["validate", str(path), "--world-size", WORLD, "--json"])
    (out,) = json.loads(result.stdout)["files"]
    return result.exit_code, out


def errors(out: dict) -> list[str]:
    return [f"{f['code']}: {f['message']}" for f in out["findings"] if f["severity"] == "error"]


# The tests -------------------------------------------------------------------------------------


@pytest.mark.parametrize("framework", ["axolotl", "hf", "trl", "llamafactory", "accelerate"])
def test_a_blank_key_the_schema_allows_is_not_an_error(tmp_path, framework):
    schema, keys, name, base = files()[framework]
    allowed = schema()
    nullable = [
        k for k in dict.fromkeys(keys) if allowed[k] and (framework, k) not in FAILS_ON_NULL
    ]
    assert nullable  # the schema allows None somewhere: there is something to check
    read_as = "hf" if framework == "trl" else framework  # a TRL file is the HF Trainer's
    wrong = {}
    for key in nullable:
        code, out = validate(tmp_path, name, yaml_with_blank(base, key))
        if out["framework"] != read_as or errors(out) or code:
            wrong[key] = (out["framework"], code, errors(out))
    assert wrong == {}
    stale = [k for (f, k) in FAILS_ON_NULL if f == framework and not allowed[k]]
    assert stale == []  # an exception is for a key the schema allows None for


@pytest.mark.parametrize("key", DEEPSPEED_KEYS)
def test_a_null_in_a_deepspeed_json_reads_as_deepspeed_takes_it(tmp_path, key):
    """DeepSpeed's batch keys default to None (``get_scalar_param``), so a null is not set;
    ``sequence_parallel_size`` is divided by and the ZeRO stage and AutoTP size are typed
    pydantic fields: a null there is refused, and so is it here."""
    accepted = deepspeed_accepts(key)
    code, out = validate(tmp_path, "ds.json", json_with_null(DEEPSPEED, key))
    assert out["framework"] == "deepspeed"
    assert bool(errors(out)) is not accepted, (key, accepted, errors(out))
    assert code == (0 if accepted else 1)


def test_the_deepspeed_json_an_axolotl_or_trainer_file_names_may_hold_a_null(tmp_path):
    """The HF Trainer fills "auto" and compares only a DeepSpeed value that is not None, and
    DeepSpeed then takes the null as not set."""
    config = dict(DEEPSPEED, train_batch_size=None)
    (tmp_path / "ds.json").write_text(json.dumps(config))
    for name, base in (("ax.yml", AXOLOTL), ("hf.yaml", TRAINER)):
        code, out = validate(tmp_path, name, base + "deepspeed: ds.json\n")
        assert not errors(out) and code == 0, errors(out)


@pytest.mark.parametrize("framework, key", sorted(FAILS_ON_NULL))
def test_the_keys_whose_framework_fails_on_null_are_errors(tmp_path, framework, key):
    base, name = {"axolotl": (AXOLOTL, "ax.yml"), "accelerate": (ACCELERATE_FSDP, "acc.yaml")}[
        framework
    ]
    code, out = validate(tmp_path, name, yaml_with_blank(base, key))
    assert FAILS_ON_NULL[framework, key] in [e.split(":")[0] for e in errors(out)] and code == 1


@pytest.mark.parametrize("key", ["micro_batch_size", "gradient_accumulation_steps"])
def test_axolotl_fails_on_a_null_micro_batch_or_accumulation(tmp_path_factory, key):
    pytest.importorskip("axolotl")
    from translator.frameworks.axolotl.verdict import make_tiny_model, resolve

    base = tmp_path_factory.mktemp("axolotl")
    make_tiny_model(base)
    with pytest.raises(TypeError, match="NoneType"):
        resolve(yaml_with_blank(AXOLOTL, key), WORLD, base)


def test_accelerate_fails_on_a_null_parallelism_size(monkeypatch):
    """``accelerate launch`` copies the config's null into its flag and exports ``str(None)``;
    the training process's ``ParallelismConfig()`` reads it with ``int()``."""
    pytest.importorskip("accelerate")
    from accelerate.parallelism_config import ParallelismConfig

    monkeypatch.setenv("PARALLELISM_CONFIG_TP_SIZE", str(None))
    with pytest.raises(ValueError, match="None"):
        ParallelismConfig()


@pytest.mark.parametrize(
    "name, text",
    [
        ("ax.yml", yaml_with_blank(AXOLOTL, "sequence_len")),
        ("hf.yaml", yaml_with_blank(TRAINER, "per_device_train_batch_size")),
        ("hf.yaml", yaml_with_blank(TRAINER, "gradient_accumulation_steps")),
    ],
    ids=[
        "axolotl:sequence_len",
        "hf:per_device_train_batch_size",
        "hf:gradient_accumulation_steps",
    ],
)
def test_a_blank_key_the_schema_types_without_none_is_an_error(tmp_path, name, text):
    """Axolotl's ``sequence_len: int`` (its pydantic refuses None) and the Trainer's
    ``per_device_train_batch_size: int`` and ``gradient_accumulation_steps: int`` (the Trainer
    multiplies them): a blank one is an error, not an unknown value."""
    code, out = validate(tmp_path, name, text)
    assert [f["code"] for f in out["findings"] if f["severity"] == "error"] == ["invalid-value"]
    assert code == 1


def test_the_schemas_say_what_the_readers_assume():
    """The keys above that are typed without None really are, in the installed frameworks."""
    assert axolotl_schema()["sequence_len"] is False
    trainer = trainer_schema()
    assert not trainer["per_device_train_batch_size"]
    assert not trainer["gradient_accumulation_steps"]


def test_a_null_num_processes_is_left_to_the_command_line_as_minus_one_is(tmp_path):
    """``accelerate launch`` copies the null in, so a ``--num_processes`` flag wins over it and
    without one torchrun is handed ``nproc_per_node`` "None": what -1 means, in effect."""
    pytest.importorskip("accelerate")
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils.launch import prepare_multi_gpu_env

    text = yaml_with_blank(ACCELERATE.replace("DEEPSPEED", "MULTI_GPU"), "num_processes")
    (tmp_path / "acc.yaml").write_text(text)
    for flag, torchrun_gets in (([], "None"), (["--num_processes", "8"], "8")):
        parser = launch_command_parser()
        args = parser.parse_args(["--config_file", str(tmp_path / "acc.yaml"), *flag, "x.py"])
        args, _, _ = _validate_launch_command(args)
        prepare_multi_gpu_env(args)
        assert args.nproc_per_node == torchrun_gets
    code, out = validate(tmp_path, "acc.yaml", text)
    assert [f["code"] for f in out["findings"] if f["severity"] != "info"] == [
        "accelerate-processes-from-command-line"
    ]
    assert "num_processes is null" in out["findings"][0]["message"] and code == 0


# nanotron and Megatron-Bridge ------------------------------------------------------------------

NANOTRON = ROOT / "fixtures" / "nanotron" / "valid"


def nanotron_schema() -> dict[str, bool | None]:
    """Each key our nanotron reader checks -> whether ``ParallelismArgs`` / ``TokensArgs``
    allows None (None: the installed generation has no such field)."""
    pytest.importorskip("nanotron")
    from translator.frameworks.nanotron import native

    config = native.config()
    hints = {
        "parallelism": typing.get_type_hints(config.ParallelismArgs),
        "tokens": typing.get_type_hints(config.TokensArgs),
    }
    out: dict[str, bool | None] = {}
    for key in dict.fromkeys([*nanotron_rules.FIELDS, *nanotron_rules.REQUIRED, *NANOTRON_OTHER]):
        block, _, inner = key.partition(".")
        out[key] = allows_none(hints[block][inner]) if inner in hints[block] else None
    return out


#: Keys the nanotron reader reads beside its spec fields.
NANOTRON_OTHER = (nanotron_rules.EP, nanotron_rules.ENGINE)


def nanotron_loads(data: dict) -> bool:
    """Whether nanotron's own ``get_config_from_dict`` takes the config."""
    from translator.frameworks.nanotron import native

    config = native.config()
    try:
        config.get_config_from_dict(data, config_class=config.Config)
    except Exception:  # dacite's WrongTypeError / UnexpectedDataError: it refuses the file
        return False
    return True


@pytest.mark.parametrize("key", [*nanotron_rules.FIELDS, "tokens.train_steps", *NANOTRON_OTHER])
def test_a_blank_nanotron_key_reads_as_nanotron_loads_it(tmp_path, key):
    """dacite loads a null only into an ``Optional`` field (``pp_engine``, which
    ``ParallelismArgs`` then makes afab, as our reader does); every size and token count is a
    plain ``int`` and a null there is refused, here too. A key the installed generation has no
    field for (``context_parallel_size`` in 0.4) is refused by the installed nanotron whatever
    its value."""
    allowed = nanotron_schema()[key]
    text = (NANOTRON / "tiny_llama_04.yaml").read_text()
    data = yaml.safe_load(text)
    block, _, inner = key.partition(".")
    data[block][inner] = None
    loads = nanotron_loads(data)
    assert loads is bool(allowed)  # the schema says it: a null loads where None is allowed
    code, out = validate(tmp_path, "nanotron.yaml", yaml.safe_dump(data, sort_keys=False))
    assert out["framework"] == "nanotron"
    assert bool(errors(out)) is not loads, (key, loads, errors(out))
    assert code == (0 if loads else 1)


BRIDGE = (
    "train:\n  train_iters: 10\n  global_batch_size: 64\n  micro_batch_size: 2\n"
    "model:\n  seq_length: 4096\n  tensor_model_parallel_size: 2\n"
    "  pipeline_model_parallel_size: 1\n  context_parallel_size: 1\n"
)


def bridge_model_schema() -> dict[str, bool]:
    """Megatron-Bridge is not installable here (Transformer Engine, Python 3.12): its model
    keys are megatron-core's ``TransformerConfig`` fields (the provider inherits them), asked
    of the installed megatron-core. -> whether each allows None."""
    pytest.importorskip("megatron.core")
    from megatron.core.transformer import TransformerConfig

    hints = typing.get_type_hints(TransformerConfig)
    keys = [k for k in bridge_rules.BRIDGE.fields if k.startswith("model.")]
    return {k: allows_none(hints[k.removeprefix("model.")]) for k in keys}


@pytest.mark.parametrize("key", [k for k in bridge_rules.BRIDGE.fields if k.startswith("model.")])
def test_a_blank_bridge_model_size_reads_as_megatron_core_types_it(tmp_path, key):
    """The parallel sizes are plain ``int`` (megatron-core divides the world by them): a blank
    one is an error; the virtual pipeline size and its micro-batch group are ``Optional``
    (None: no interleaving), and a blank one is not."""
    allowed = bridge_model_schema()[key]
    code, out = validate(tmp_path, "bridge.yaml", yaml_with_blank(BRIDGE, key))
    assert out["framework"] == "megatron-bridge"
    assert bool(errors(out)) is not allowed, (key, allowed, errors(out))
    assert code == (0 if allowed else 1)


def test_the_bridge_schema_allows_none_somewhere_and_not_everywhere():
    allowed = bridge_model_schema()
    assert allowed["model.virtual_pipeline_model_parallel_size"] is True
    assert allowed["model.tensor_model_parallel_size"] is False


def test_a_blank_bridge_micro_batch_fails_in_megatron_core_s_calculator(tmp_path):
    """A blank global batch is megatron-core's micro × data-parallel (what our verdict and
    reader say); a blank micro-batch fails in the calculator itself, and is an error here."""
    pytest.importorskip("megatron.core")
    from translator.frameworks.shared.mcore_calculator import calculate

    with pytest.raises(TypeError, match="NoneType"):
        calculate(64, None, 4, None, False)
    code, out = validate(tmp_path, "bridge.yaml", yaml_with_blank(BRIDGE, "train.micro_batch_size"))
    assert errors(out) == [
        "invalid-value: train.micro_batch_size is None (NoneType); it must be a positive integer"
    ]
    code, out = validate(
        tmp_path, "bridge.yaml", yaml_with_blank(BRIDGE, "train.global_batch_size")
    )
    assert not errors(out) and code == 0
    assert "megatron-bridge-global-default" in [f["code"] for f in out["findings"]]
