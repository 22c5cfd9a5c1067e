"""The accelerate backend against accelerate's own code: load_config_from_file loads what
batchspec renders with the world it was given, ParallelismConfig agrees on the sizes, and a
TrainingArguments file inspected with its accelerate config takes the world from it."""

import re
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from strategies import specs

from translator.checks.inspect_files import inspect_files
from translator.frameworks import FRAMEWORKS
from translator.inspection import inspect_file
from translator.reading import Launch, Reading
from translator.render import render

pytest.importorskip("accelerate")
from paths import ROOT

from translator.frameworks.accelerate.verdict import load, parallelism_total  # noqa: E402

pytestmark = pytest.mark.framework
FIXTURES = ROOT / "fixtures" / "accelerate"


@settings(max_examples=60, deadline=None)
@given(specs(pipeline=False))
def test_accelerate_loads_the_rendered_config_with_its_world(spec):
    text = render(spec, FRAMEWORKS["accelerate"]).text
    config = load(Reading("accelerate.yaml", "accelerate", text))
    assert config.num_processes == spec.world_size
    assert config.num_machines * (spec.world_size // config.num_machines) == spec.world_size
    total = parallelism_total(config)
    if spec.tensor_parallel_size * spec.context_parallel_size > 1:
        assert total == spec.world_size
    else:
        assert total is None


@pytest.mark.parametrize(
    "name, agrees", [("valid/tp_hsdp.yaml", True), ("invalid/parallel_sizes_mismatch.yaml", False)]
)
def test_parallelism_sizes_checked_as_accelerate_does(name, agrees):
    path = FIXTURES / name
    config = load(Reading(str(path), "accelerate", path.read_text()))
    assert (parallelism_total(config) == config.num_processes) is agrees


def test_trainingarguments_take_the_world_from_accelerate_and_must_match_its_accumulation(
    tmp_path,
):
    args = tmp_path / "sft.yaml"
    args.write_text("per_device_train_batch_size: 4\ngradient_accumulation_steps: 8\n")
    accelerate = FIXTURES / "valid" / "deepspeed_zero2.yaml"
    done, unusable = inspect_files([str(accelerate), str(args)], None, Launch())
    assert not unusable
    hf = next(i for i in done if i.reading.framework == "hf")
    # 8 processes from the accelerate file; its DeepSpeed accumulation 4 is not the Trainer's 8,
    # which the Trainer refuses (trainer_config_finalize), naming both places
    assert hf.values["world_size"] == 8
    (wrong,) = [f for f in hf.findings if f.code == "hf-deepspeed-mismatch"]
    assert "ds gradient_accumulation_steps=4 vs hf gradient_accumulation_steps=8" in wrong.message
    assert f"{accelerate}:5" in wrong.message and str(args) in wrong.message


@settings(max_examples=60, deadline=None)
@given(spec=specs(pipeline=False), override=st.none() | st.integers(1, 64))
def test_the_files_together_give_the_batch_accelerate_launch_runs(tmp_path_factory, spec, override):
    """A rendered TrainingArguments file inspected with the rendered accelerate config, as
    `accelerate launch --config_file A train.py --config T` runs them: the world is
    accelerate's own ``num_processes`` (as its loader reads it), and an accumulation in its
    ``deepspeed_config`` must be the file's (the Trainer refuses another), so the global batch
    is micro × accumulation × DP."""
    assume(override is None or spec.tensor_parallel_size * spec.context_parallel_size == 1)
    folder = tmp_path_factory.mktemp("together")
    accelerate_yaml = render(spec, FRAMEWORKS["accelerate"]).text
    if override is not None:
        accelerate_yaml = accelerate_yaml.replace(
            "distributed_type: MULTI_GPU",
            f"distributed_type: DEEPSPEED\ndeepspeed_config:\n"
            f"  gradient_accumulation_steps: {override}",
        )
        accelerate_yaml = re.sub(
            r"(deepspeed_config:\n(?:  .*\n)*?  gradient_accumulation_steps:)"
            r" \d+",
            rf"\1 {override}",
            accelerate_yaml,
        )
    (folder / "accelerate.yaml").write_text(accelerate_yaml)
    # (hf.yaml written by hand: render refuses TP/CP in a TrainingArguments file)
    (folder / "hf.yaml").write_text(
        f"per_device_train_batch_size: {spec.micro_batch_size}\n"
        f"gradient_accumulation_steps: "
        f"{spec.gradient_accumulation_steps}\n"
    )
    config = load(Reading("accelerate.yaml", "accelerate", accelerate_yaml))
    done, unusable = inspect_files(
        [str(folder / "accelerate.yaml"), str(folder / "hf.yaml")], None, Launch()
    )
    assert not unusable
    hf = next(i for i in done if i.reading.framework == "hf")
    theirs = (config.deepspeed_config or {}).get("gradient_accumulation_steps")
    refused = override is not None and theirs != spec.gradient_accumulation_steps
    assert any(f.code == "hf-deepspeed-mismatch" for f in hf.findings) is refused
    if refused:
        return
    dp = config.num_processes // (spec.tensor_parallel_size * spec.context_parallel_size)
    assert hf.spec.world_size == config.num_processes == spec.world_size
    assert hf.spec.gradient_accumulation_steps == spec.gradient_accumulation_steps
    assert (
        hf.spec.global_batch_size == spec.micro_batch_size * spec.gradient_accumulation_steps * dp
    )


def test_split_batches_divides_over_the_data_parallel_ranks_of_the_accelerate_mesh(tmp_path):
    """split_batches with accelerate's TP 2 × dp_shard 2 on 4 processes: the 8 rows of a
    micro-step split over DP 2, so 4 per device, and the global batch stays 8 × 2."""
    (tmp_path / "a.yaml").write_text(
        "distributed_type: FSDP\nnum_machines: 1\nnum_processes: 4\nparallelism_config:\n"
        "  parallelism_config_dp_shard_size: 2\n  parallelism_config_tp_size: 2\n"
    )
    (tmp_path / "t.yaml").write_text(
        "per_device_train_batch_size: 8\n"
        "gradient_accumulation_steps: 2\n"
        "accelerator_config:\n  split_batches: true\n"
    )
    done, _ = inspect_files([str(tmp_path / "a.yaml"), str(tmp_path / "t.yaml")], None, Launch())
    hf = next(i for i in done if i.reading.framework == "hf")
    assert (hf.spec.micro_batch_size, hf.spec.data_parallel_size, hf.spec.global_batch_size) == (
        4,
        2,
        16,
    )


def launched(config: Path) -> dict[str, str]:
    """What accelerate's own ``accelerate launch --config_file`` code exports to the training
    process of a DeepSpeed launch (``_validate_launch_command``, ``prepare_deepspeed_cmd_env``)."""
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser
    from accelerate.utils.launch import prepare_deepspeed_cmd_env

    args = launch_command_parser().parse_args(["--config_file", str(config), "train.py"])
    args, defaults, precision_from_config = _validate_launch_command(args)
    fields = [*defaults.deepspeed_config] + (["mixed_precision"] if precision_from_config else [])
    args.deepspeed_fields_from_accelerate_config = ",".join(fields)
    _, env = prepare_deepspeed_cmd_env(args)
    return {k: v for k, v in env.items() if k.startswith("ACCELERATE_")}


def trainer_refusal(env: dict, per_device: int, accumulation: int, world: int) -> str | None:
    """accelerate's DeepSpeedPlugin built in that environment, then transformers' check of its
    config against the TrainingArguments (propagate_args_to_deepspeed): the refusal, or None."""
    import os
    from unittest import mock

    from accelerate.utils import DeepSpeedPlugin
    from transformers import TrainingArguments

    from translator.frameworks.shared.hf_verdict import deepspeed_mismatch

    try:
        with mock.patch.dict(os.environ, env):
            config = DeepSpeedPlugin().hf_ds_config.config
        args = TrainingArguments(
            output_dir="out",
            per_device_train_batch_size=per_device,
            gradient_accumulation_steps=accumulation,
            use_cpu=True,
            report_to="none",
        )
        deepspeed_mismatch(config, args, world)
    except ValueError as exc:
        return str(exc)
    return None


ZERO = '"zero_optimization": {"stage": 2}'
DS_BLOCK = "distributed_type: DEEPSPEED\nnum_machines: 1\nnum_processes: 8\ndeepspeed_config:\n"


@pytest.mark.parametrize(
    "block, ds, accumulation",
    [
        (
            "  deepspeed_config_file: ds.json\n",
            '{"gradient_accumulation_steps": 4, ' + ZERO + "}",
            2,
        ),
        (
            "  deepspeed_config_file: ds.json\n",
            '{"gradient_accumulation_steps": 4, ' + ZERO + "}",
            4,
        ),
        (
            "  deepspeed_config_file: ds.json\n",
            '{"gradient_accumulation_steps": "auto", ' + ZERO + "}",
            2,
        ),
        ("  deepspeed_config_file: ds.json\n", "{" + ZERO + "}", 2),  # the plugin sets 1
        ("  deepspeed_config_file: ds.json\n", "{" + ZERO + "}", 1),
        (
            "  deepspeed_config_file: ds.json\n",
            '{"train_micro_batch_size_per_gpu": 8, ' + ZERO + "}",
            1,
        ),
        ("  deepspeed_config_file: ds.json\n", '{"gradient_accumulation_steps": "auto"}', 2),
        (
            "  deepspeed_config_file: ds.json\n  gradient_accumulation_steps: 2\n",
            "{" + ZERO + "}",
            2,
        ),
        (
            "  deepspeed_config_file: ds.json\nmixed_precision: bf16\n",
            '{"gradient_accumulation_steps": "auto", ' + ZERO + "}",
            2,
        ),
        ("  gradient_accumulation_steps: 4\n  zero_stage: 3\n", None, 2),
        ("  gradient_accumulation_steps: 2\n  zero_stage: 3\n", None, 2),
        ("  zero_stage: 1\n", None, 2),
    ],
)
def test_an_accelerate_deepspeed_job_is_refused_where_accelerate_and_the_trainer_refuse_it(
    tmp_path, monkeypatch, block, ds, accumulation
):
    """The job `accelerate launch --config_file acc.yaml train.py --per_device_train_batch_size 4
    --gradient_accumulation_steps N`: batchspec's error, and accelerate's launch + DeepSpeedPlugin
    + transformers' DeepSpeed check, refuse the same jobs; the table's accumulation is the one
    the run takes."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "acc.yaml").write_text(DS_BLOCK + block)
    if ds is not None:
        (tmp_path / "ds.json").write_text(ds)
    (tmp_path / "job.sh").write_text(
        "accelerate launch --config_file acc.yaml train.py --output_dir out "
        f"--per_device_train_batch_size 4 --gradient_accumulation_steps {accumulation}\n"
    )
    found = inspect_file("job.sh")
    ours = [f for f in found.findings if f.severity == "error"]
    theirs = trainer_refusal(launched(tmp_path / "acc.yaml"), 4, accumulation, 8)
    assert bool(ours) is (theirs is not None), (ours, theirs)
    if theirs is None:
        assert found.spec is not None and found.spec.gradient_accumulation_steps == accumulation
    elif "mismatch" in theirs:  # both name the same values
        pair = re.search(r"ds (\S+)=(\S+) vs hf", theirs)
        assert pair and f"ds {pair[1]}={pair[2]} vs hf" in ours[0].message


def test_a_deepspeed_accumulation_the_job_leaves_to_the_program_is_the_one_it_runs(
    tmp_path, monkeypatch
):
    """Without --gradient_accumulation_steps the Trainer's is train.py's own default, which the
    job does not show; the DeepSpeed file's 4 is the only one the Trainer accepts, so that is
    the job's (a warning says the default must be it), listed in the sources."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "acc.yaml").write_text(DS_BLOCK + "  deepspeed_config_file: ds.json\n")
    (tmp_path / "ds.json").write_text('{\n  "gradient_accumulation_steps": 4,\n  ' + ZERO + "\n}\n")
    (tmp_path / "job.sh").write_text(
        "accelerate launch --config_file acc.yaml train.py --per_device_train_batch_size 4\n"
    )
    found = inspect_file("job.sh")
    assert (found.spec.gradient_accumulation_steps, found.spec.global_batch_size) == (4, 128)
    assert any(f.code == "hf-deepspeed-fixes" for f in found.findings)
    assert any(
        s.name == "gradient_accumulation_steps" and s.where.startswith("ds.json:2")
        for s in found.reading.sources
    )
    for accumulation, refused in ((4, False), (2, True)):
        assert (
            trainer_refusal(launched(tmp_path / "acc.yaml"), 4, accumulation, 8) is not None
        ) is refused
