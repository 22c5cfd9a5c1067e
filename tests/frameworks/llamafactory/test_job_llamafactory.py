"""LLaMA-Factory's launches read as jobs: ``llamafactory-cli train`` (its YAML, ``key=value``
overrides, the variables that size its torchrun), and a program given its YAML."""

import dataclasses
from pathlib import Path

import pytest
from calls import only_call
from run_batchspec import batch, codes, inspect_job, run

from translator import shell
from translator.edit import update
from translator.frameworks import FRAMEWORKS
from translator.frameworks.llamafactory import program
from translator.inspection import inspect_reading, read_file
from translator.plugin.registry import launchers as known_launchers
from translator.reading import Call, Launch
from translator.shell import launchers
from translator.shell.values import Script, Word
from translator.spec import BatchSpec
from translator.words.errors import ConfigError

YAML = """\
model_name_or_path: Qwen/Qwen3-4B-Instruct-2507
stage: sft
do_train: true
finetuning_type: lora
template: qwen3_nothink
cutoff_len: 2048
per_device_train_batch_size: 1
gradient_accumulation_steps: 8
"""
DS_YAML = YAML + "deepspeed: examples/deepspeed/ds_z3_config.json\n"
AUTO = (
    '{"train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto", '
    '"gradient_accumulation_steps": "auto", "zero_optimization": {"stage": 3}}\n'
)
LF = FRAMEWORKS["llamafactory"]
#: Whether the shell reader gives each command its environment (``X=1 cmd``, ``export X``).
ENVIRONMENTS = "environments" in {f.name for f in dataclasses.fields(Script)}
#: A test of a command's environment through the CLI (``FORCE_TORCHRUN=1 llamafactory-cli``):
#: until the shell reader gives it (Script.environments), the same rules are tested below on a
#: command given its environment directly.
NEEDS_ENVIRONMENT = pytest.mark.xfail(
    not ENVIRONMENTS,
    strict=True,
    reason="waits on the shell reader's Script.environments (a command's X=1 prefix, exports)",
)


@pytest.fixture
def run_dir(in_tmp_path):
    """The repository root the CLI runs from, with LLaMA-Factory's example layout."""
    (in_tmp_path / "examples" / "train_lora").mkdir(parents=True)
    (in_tmp_path / "examples" / "deepspeed").mkdir()
    (in_tmp_path / "examples" / "train_lora" / "sft.yaml").write_text(YAML)
    (in_tmp_path / "examples" / "train_lora" / "sft_ds3.yaml").write_text(DS_YAML)
    (in_tmp_path / "examples" / "deepspeed" / "ds_z3_config.json").write_text(AUTO)
    return in_tmp_path


def with_environment(command: str, environment: dict[str, str]):
    """``command`` (in job.sh) read by LLaMA-Factory's program reader with ``environment`` as
    its processes see it, each value a literal of a ``NAME=VALUE`` line above it: the
    inspection of what the job reader would give it."""
    lines = [f"{k}={v}" for k, v in environment.items()]
    text = "#!/bin/bash\n" + "".join(f"{line}\n" for line in lines) + command + "\n"
    Path("job.sh").write_text(text)
    script = shell.parse(text, "job.sh")
    words = script.commands[-1]
    env = {}
    for i, (name, value) in enumerate(environment.items()):
        start = text.index(f"\n{name}=") + len(name) + 2
        env[name] = Word(value, i + 2, (start, start + len(value)))
    split = launchers.call_of(words, program.TOOLS)
    assert split is not None
    sizes = launchers.sizes(split.launch, script.variables, env, known=known_launchers())

    call = Call("job.sh", text, words[0].line, split, sizes, env, script, (Path(),))
    reading = program.program(call)
    assert reading is not None
    return inspect_reading(LF, reading, Launch())


# The world of llamafactory-cli train -----------------------------------------------------


@pytest.mark.parametrize(
    "environment, world",
    [
        ({"FORCE_TORCHRUN": "1", "NNODES": "2", "NPROC_PER_NODE": "8"}, 16),
        ({"FORCE_TORCHRUN": "true", "NPROC_PER_NODE": "4"}, 4),  # NNODES defaults to 1
        ({"FORCE_TORCHRUN": "1", "CUDA_VISIBLE_DEVICES": "0,1,2"}, 3),  # the visible GPUs
        ({"CUDA_VISIBLE_DEVICES": "0,1"}, 2),  # more than one visible: torchrun over them
        ({"CUDA_VISIBLE_DEVICES": "0"}, 1),  # one visible GPU: one process
        ({"FORCE_TORCHRUN": "0", "CUDA_VISIBLE_DEVICES": "0", "NPROC_PER_NODE": "8"}, 1),
        ({"USE_MCA": "1", "NPROC_PER_NODE": "2"}, 2),  # the Megatron paths force torchrun
        (  # an elastic range of one size: 2 nodes
            {"FORCE_TORCHRUN": "1", "NPROC_PER_NODE": "8", "RDZV_ID": "x"}
            | {"MIN_NNODES": "2", "MAX_NNODES": "2"},
            16,
        ),
    ],
)
def test_the_cli_world_follows_its_launcher_rules(run_dir, environment, world):
    got = with_environment("llamafactory-cli train examples/train_lora/sft.yaml", environment)
    assert got.values.get("world_size") == world
    assert got.values.get("global_batch_size") == 8 * world


@pytest.mark.parametrize(
    "environment, why",
    [
        ({}, "CUDA_VISIBLE_DEVICES is not set"),
        (
            {"FORCE_TORCHRUN": "1", "NNODES": "2"},
            "NPROC_PER_NODE is not set, so it is the visible GPU count, and CUDA_VISIBLE_DEVICES "
            "is not set",
        ),
        (
            {"FORCE_TORCHRUN": "1", "NPROC_PER_NODE": "8", "RDZV_ID": "lf"}
            | {"MIN_NNODES": "1", "MAX_NNODES": "3"},
            "elastic: torchrun --nnodes 1:3",
        ),
    ],
)
def test_an_unknown_cli_world_says_why(run_dir, environment, why):
    got = with_environment("llamafactory-cli train examples/train_lora/sft.yaml", environment)
    assert got.values.get("world_size") is None and got.values.get("global_batch_size") is None
    assert got.values["micro_batch_size"] == 1 and got.values["gradient_accumulation_steps"] == 8
    (unknown,) = [f for f in got.findings if f.code == "world-unknown"]
    assert why in unknown.message


def test_use_ray_trains_in_the_yamls_ray_workers(run_dir):
    Path("ray.yaml").write_text(YAML + "ray_num_workers: 4\n")
    got = with_environment("llamafactory-cli train ray.yaml", {"USE_RAY": "1"})
    assert (got.values["world_size"], got.values["global_batch_size"]) == (4, 32)
    got = with_environment(  # without USE_RAY, ray_num_workers is nothing
        "llamafactory-cli train ray.yaml", {"CUDA_VISIBLE_DEVICES": "0,1"}
    )
    assert got.values["world_size"] == 2


def test_deepspeed_in_one_process_is_refused(run_dir):
    got = with_environment(
        "llamafactory-cli train examples/train_lora/sft_ds3.yaml", {"CUDA_VISIBLE_DEVICES": "0"}
    )
    (refused,) = [f for f in got.findings if f.code == "llamafactory-deepspeed-one-process"]
    assert refused.severity == "error" and "FORCE_TORCHRUN=1" in refused.message
    got = with_environment(
        "llamafactory-cli train examples/train_lora/sft_ds3.yaml", {"FORCE_TORCHRUN": "1"}
    )
    assert not [f for f in got.findings if f.severity == "error"]


MOE = YAML + "pipeline_model_parallel_size: 4\nexpert_model_parallel_size: 2\n"


@pytest.mark.parametrize(
    "path, accumulation, global_batch, code",
    [
        ("USE_MCA", 8, 16, "llamafactory-megatron-batch"),  # 1 × 8 × DP (8 / PP 4)
        ("USE_MEGATRON_BRIDGE", 4, 8, "llamafactory-megatron-batch"),  # 1 × 8 × 8 // (4 × 2)
        (None, None, None, "llamafactory-megatron-paths"),  # the YAML alone cannot say
    ],
)
def test_the_environment_picks_the_megatron_path(run_dir, path, accumulation, global_batch, code):
    Path("moe.yaml").write_text(MOE)
    environment = {"FORCE_TORCHRUN": "1", "NPROC_PER_NODE": "8"} | ({path: "1"} if path else {})
    got = with_environment("llamafactory-cli train moe.yaml", environment)
    assert got.values["world_size"] == 8
    assert got.values.get("gradient_accumulation_steps") == accumulation
    assert got.values.get("global_batch_size") == global_batch
    assert code in {f.code for f in got.findings}


def test_the_bridge_path_refuses_a_global_batch_megatron_cannot_split(run_dir):
    Path("moe.yaml").write_text(MOE.replace("accumulation_steps: 8", "accumulation_steps: 3"))
    got = with_environment(
        "llamafactory-cli train moe.yaml", {"USE_MEGATRON_BRIDGE": "1", "NPROC_PER_NODE": "8"}
    )
    (error,) = [f for f in got.findings if f.severity == "error"]
    assert error.code == "global-not-divisible" and "= 3," in error.message


def test_the_world_sizes_are_the_variables_update_edits(run_dir):
    got = with_environment(
        "llamafactory-cli train examples/train_lora/sft.yaml",
        {"FORCE_TORCHRUN": "1", "NNODES": "2", "NPROC_PER_NODE": "8"},
    )
    reading = got.reading
    assert reading.launch_keys == {"nodes": "NNODES", "per_node": "NPROC_PER_NODE"}
    text = reading.text
    for key, literal in (("NNODES", "2"), ("NPROC_PER_NODE", "8")):
        start, end = reading.values[key].span
        assert text[start:end] == literal and text[start - len(key) - 1 : start] == f"{key}="
    (source,) = [s for s in reading.sources if s.name == "world_size"]
    assert source.where == "job.sh:3 NNODES; job.sh:4 NPROC_PER_NODE" and source.value == 16
    spec = BatchSpec(global_batch_size=256, micro_batch_size=1, world_size=32)
    new, changes = update.apply(LF, reading, spec)  # the YAML's accumulation 8 stays
    assert new == text.replace("NNODES=2", "NNODES=4")
    assert [(c.key, c.old, c.new) for c in changes] == [("NNODES", 2, 4)]


@NEEDS_ENVIRONMENT
def test_the_prefix_form_sizes_the_world(run_dir):
    _, out = inspect_job(
        "FORCE_TORCHRUN=1 NNODES=2 NPROC_PER_NODE=8 llamafactory-cli train "
        "examples/train_lora/sft.yaml\n"
    )
    assert batch(out) == (16, 1, 8, 128)


@NEEDS_ENVIRONMENT
def test_an_exported_visible_device_list_sizes_the_world(run_dir):
    _, out = inspect_job(
        "export CUDA_VISIBLE_DEVICES=0,1,2,3\nllamafactory-cli train examples/train_lora/sft.yaml\n"
    )
    assert batch(out) == (4, 1, 8, 32)


# The YAML, its overrides, and the flags form --------------------------------------------------


def test_a_key_value_override_wins_over_the_yaml_and_both_are_listed(run_dir):
    rc, out = inspect_job(
        "lmf train examples/train_lora/sft.yaml per_device_train_batch_size=4 learning_rate=1e-5\n"
    )
    assert rc == 0 and out["framework"] == "llamafactory"
    assert batch(out) == (None, 4, 8, None)
    micro = [s for s in out["sources"] if s["field"] == "micro_batch_size"]
    assert [(s["value"], s["won"]) for s in micro] == [(1, False), (4, True)]
    assert micro[0]["where"] == "examples/train_lora/sft.yaml:7 per_device_train_batch_size"
    assert "OmegaConf.merge" in micro[0]["why"]
    assert micro[1]["where"] == "job.sh:2 per_device_train_batch_size"


def test_flags_after_the_yaml_are_refused_as_llamafactory_refuses_them(run_dir):
    rc, out = inspect_job(
        "llamafactory-cli train examples/train_lora/sft.yaml --per_device_train_batch_size 4\n"
    )
    assert rc == 1 and out["micro_batch_size"] == 1
    f = codes(out)["llamafactory-bad-override"]
    assert "--per_device_train_batch_size 4" in f["message"] and f["where"] == "job.sh:2"


def test_a_misspelt_override_key_is_refused(run_dir):
    rc, out = inspect_job(
        "llamafactory-cli train examples/train_lora/sft.yaml gradient_accumulation_step=4\n"
    )
    assert rc == 1 and "batch-key-typo" in codes(out) and out["gradient_accumulation_steps"] == 8


def test_the_flags_form_reads_hfargumentparser_flags_with_the_trainers_defaults(run_dir):
    _, out = inspect_job(
        "MODEL=Qwen/Qwen3-4B\nllamafactory-cli train --model_name_or_path ${MODEL} "
        "--stage sft --do_train --per_device_train_batch_size 2 --bf16 --output_dir out\n"
    )
    assert out["framework"] == "llamafactory"
    assert (out["micro_batch_size"], out["gradient_accumulation_steps"]) == (2, 1)


def test_a_program_given_a_llamafactory_yaml_takes_its_launchers_world(run_dir):
    rc, out = inspect_job(
        "CUDA_VISIBLE_DEVICES=0,1,2,3 torchrun --nproc_per_node 4 --nnodes 2 \\\n"
        "    src/train.py examples/train_lora/sft_ds3.yaml gradient_accumulation_steps=2\n"
    )
    assert rc == 0 and out["framework"] == "llamafactory"
    assert batch(out) == (8, 1, 2, 16)
    assert "hf-auto" in codes(out)


def test_a_plain_hf_yaml_is_left_to_the_hf_trainer(run_dir):
    Path("hf.yaml").write_text("model_name_or_path: x\nper_device_train_batch_size: 2\n")
    _, out = inspect_job("torchrun --nproc_per_node 2 train.py hf.yaml\n")
    assert out["framework"] == "hf"


def test_plain_python_is_one_process_which_refuses_deepspeed(run_dir):
    rc, out = inspect_job("python src/train.py examples/train_lora/sft_ds3.yaml\n")
    assert rc == 1 and out["world_size"] == 1
    assert codes(out)["llamafactory-deepspeed-one-process"]["severity"] == "error"


def test_a_non_dividing_megatron_world_is_an_error(run_dir):
    Path("moe.yaml").write_text(
        YAML + "pipeline_model_parallel_size: 4\nexpert_model_parallel_size: 2\n"
    )
    rc, out = inspect_job("torchrun --nproc_per_node 6 src/train.py moe.yaml\n")
    assert rc == 1 and "world-not-divisible" in codes(out)


# Files -----------------------------------------------------------------------------------


def test_the_deepspeed_json_is_opened_where_the_cli_runs_then_beside_the_script(run_dir):
    scripts = run_dir / "scripts"
    scripts.mkdir()
    (scripts / "examples" / "deepspeed").mkdir(parents=True)
    (scripts / "examples" / "deepspeed" / "ds_z3_config.json").write_text(
        '{"train_micro_batch_size_per_gpu": 2}\n'
    )
    _, out = inspect_job(
        "torchrun --nproc_per_node 2 src/train.py examples/train_lora/sft_ds3.yaml\n",
        name="scripts/job.sh",
    )
    assert "hf-auto" in codes(out)  # the run folder's JSON (all "auto")
    (run_dir / "examples" / "deepspeed" / "ds_z3_config.json").unlink()
    rc, out = inspect_job(
        "torchrun --nproc_per_node 2 src/train.py examples/train_lora/sft_ds3.yaml\n",
        name="scripts/job.sh",
    )
    assert rc == 1  # then the script's folder: micro 2 against the YAML's 1
    assert "hf-deepspeed-mismatch" in codes(out)


def test_a_missing_deepspeed_json_is_a_warning_naming_where_it_was_looked_for(run_dir):
    Path("ds.yaml").write_text(YAML + "deepspeed: PATH-TO-DS-CONFIG\n")
    rc, out = inspect_job("torchrun --nproc_per_node 2 src/train.py ds.yaml\n")
    assert rc == 0
    f = codes(out)["job-file-not-found"]
    assert "PATH-TO-DS-CONFIG is not found (looked for PATH-TO-DS-CONFIG)" in f["message"]
    assert f["where"] == "ds.yaml:9"


def test_a_missing_yaml_leaves_the_batch_unknown(run_dir):
    _, out = inspect_job("llamafactory-cli train examples/train_full/gone.yaml\n")
    assert out["framework"] == "llamafactory"
    assert (out["micro_batch_size"], out["gradient_accumulation_steps"]) == (None, None)
    assert (
        "examples/train_full/gone.yaml is not found" in codes(out)["job-file-not-found"]["message"]
    )


def test_other_subcommands_are_not_its_training(run_dir):
    call = only_call("llamafactory-cli export examples/train_lora/sft.yaml", program.TOOLS)
    assert program.program(call) is None


# update ------------------------------------------------------------------------------------


def test_update_edits_the_override_and_refuses_the_yamls_value(run_dir):
    job = (
        "#!/bin/bash\ntorchrun --nproc_per_node 8 src/train.py examples/train_lora/sft.yaml "
        "gradient_accumulation_steps=8\n"
    )
    Path("job.sh").write_text(job)
    framework, reading = read_file("job.sh")
    assert framework.name == "llamafactory"
    text, changes = update.apply(
        framework,
        reading,
        BatchSpec(global_batch_size=64, micro_batch_size=1, nodes=1, gpus_per_node=16),
    )
    assert text == job.replace("steps=8", "steps=4").replace("node 8", "node 16")
    assert [(c.key, c.old, c.new) for c in changes] == [
        ("gradient_accumulation_steps", 8, 4),
        ("--nproc_per_node", 8, 16),
    ]
    with pytest.raises(
        ConfigError,
        match="sft.yaml:7: per_device_train_batch_size is set in examples/train_lora/sft.yaml, not in",
    ):
        update.apply(
            framework, reading, BatchSpec(global_batch_size=64, micro_batch_size=2, world_size=8)
        )


def test_update_in_place_changes_the_override_and_keeps_every_other_byte(run_dir):
    job = (
        "#!/bin/bash\n# two nodes\ntorchrun --nproc_per_node 8 --nnodes 1 src/train.py "
        "examples/train_lora/sft.yaml gradient_accumulation_steps=8  # global 64\n"
    )
    Path("job.sh").write_text(job)
    result = run("update", "job.sh", "--world-size", "16", "--in-place")
    assert result.exit_code == 0, result.output
    assert Path("job.sh").read_text() == job.replace("steps=8", "steps=4").replace(
        "--nnodes 1", "--nnodes 2"
    )


def test_llamafactory_is_asked_before_the_hf_trainer():
    assert LF.claim_order < FRAMEWORKS["hf"].claim_order
    assert LF.commands == ("llamafactory-cli", "lmf")
