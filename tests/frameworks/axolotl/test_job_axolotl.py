"""Axolotl's launches read as jobs: ``axolotl train`` and the ``axolotl.cli.train`` module, their
overrides over the YAML, the DeepSpeed JSON, the world each launcher starts, and update."""

import pytest
from calls import only_call
from run_batchspec import batch, codes, inspect_job, run

from translator import shell
from translator.edit import update
from translator.frameworks import FRAMEWORKS
from translator.frameworks.axolotl import program
from translator.inspection import read_file
from translator.shell import launchers
from translator.spec import BatchSpec
from translator.words.errors import ConfigError

YAML = """\
base_model: NousResearch/Llama-3.2-1B
sequence_len: 2048
micro_batch_size: 2
gradient_accumulation_steps: 4
"""
AUTO = (
    '{"zero_optimization": {"stage": 2}, "train_micro_batch_size_per_gpu": "auto", '
    '"gradient_accumulation_steps": "auto", "train_batch_size": "auto"}\n'
)


@pytest.fixture
def run_dir(in_tmp_path):
    """A folder the job runs in, holding the YAML; batchspec runs there."""
    (in_tmp_path / "examples").mkdir()
    (in_tmp_path / "examples" / "lora.yml").write_text(YAML)
    return in_tmp_path


# Overrides and precedence --------------------------------------------------------------------


def test_a_dashed_option_overrides_the_yaml_and_both_sources_are_listed(run_dir):
    rc, out = inspect_job(
        "axolotl train examples/lora.yml --micro-batch-size 4 --launcher torchrun "
        "-- --nproc_per_node 8 --nnodes 2\n"
    )
    assert rc == 0 and out["framework"] == "axolotl"
    assert batch(out) == (16, 4, 4, 256)  # 4 × 4 × 16
    micro = [s for s in out["sources"] if s["field"] == "micro_batch_size"]
    assert micro == [
        {
            "field": "micro_batch_size",
            "value": 2,
            "where": "examples/lora.yml:3 micro_batch_size",
            "won": False,
            "why": "a command-line override wins over the YAML (Axolotl's load_cfg)",
        },
        {
            "field": "micro_batch_size",
            "value": 4,
            "where": "job.sh:2 --micro-batch-size",
            "won": True,
            "why": None,
        },
    ]
    (world,) = [s for s in out["sources"] if s["field"] == "world_size"]
    assert world["where"] == "job.sh:2 --nproc_per_node; job.sh:2 --nnodes" and world["value"] == 16


def test_the_module_takes_fire_flags_underscores_and_equals_alike(run_dir):
    rc, out = inspect_job(
        "accelerate launch --num_processes 4 -m axolotl.cli.train examples/lora.yml "
        "--gradient_accumulation_steps=2 --micro-batch-size 1\n"
    )
    assert rc == 0 and batch(out) == (4, 1, 2, 8)


def test_the_last_of_two_overrides_wins(run_dir):
    _, out = inspect_job(
        "python -m axolotl.cli.train examples/lora.yml --micro_batch_size 3 --micro_batch_size 5\n"
    )
    assert out["micro_batch_size"] == 5
    lost = [s for s in out["sources"] if s["field"] == "micro_batch_size" and not s["won"]]
    assert [s["value"] for s in lost] == [2, 3]


def test_strict_drops_an_override_of_a_key_the_yaml_lacks(run_dir):
    (run_dir / "strict.yml").write_text("base_model: x\nstrict: true\nmicro_batch_size: 2\n")
    _, out = inspect_job(
        "axolotl train strict.yml --gradient-accumulation-steps 4 --num-processes 2\n"
    )
    assert batch(out) == (2, 2, 1, 4)  # accumulation keeps Axolotl's default 1
    (dropped,) = [s for s in out["sources"] if s["field"] == "gradient_accumulation_steps"]
    assert not dropped["won"] and "strict: true" in dropped["why"]


def test_an_underscore_option_of_axolotl_train_goes_to_the_launcher_and_is_refused(run_dir):
    rc, out = inspect_job(
        "axolotl train examples/lora.yml --micro_batch_size 8 --num-processes 2\n"
    )
    assert rc == 1
    f = codes(out)["axolotl-option-to-launcher"]
    assert f["severity"] == "error" and f["where"] == "job.sh:2"
    assert "--micro-batch-size" in f["message"] and "the YAML's micro_batch_size 2" in f["message"]
    assert out["micro_batch_size"] == 2


def test_switches_take_no_value_so_the_yaml_after_them_is_the_config(run_dir):
    _, out = inspect_job(
        "axolotl train --debug --sample-packing examples/lora.yml --num-processes 2\n"
    )
    assert batch(out) == (2, 2, 4, 16) and "axolotl-sample-packing" in codes(out)
    _, out = inspect_job("axolotl train examples/lora.yml --no-sample-packing --num-processes 2\n")
    assert "axolotl-sample-packing" not in codes(out)


def test_an_unknown_launcher_leaves_the_world_unknown(run_dir):
    _, out = inspect_job("axolotl train examples/lora.yml --launcher $LAUNCHER\n")
    assert out["world_size"] is None
    assert "axolotl train's --launcher is $LAUNCHER" in codes(out)["world-unknown"]["message"]


def test_an_override_from_an_unset_variable_is_unknown(run_dir):
    _, out = inspect_job(
        "axolotl train examples/lora.yml --micro-batch-size $MBS --num-processes 2\n"
    )
    assert out["micro_batch_size"] is None and out["global_batch_size"] is None
    assert "$MBS" in codes(out)["unknown-value"]["message"]


# The world ---------------------------------------------------------------------------------


def test_axolotl_train_with_accelerate_defaults_has_an_unknown_world_and_says_why(run_dir):
    rc, out = inspect_job("axolotl train examples/lora.yml\n")
    assert rc == 0 and batch(out) == (None, 2, 4, None)
    message = codes(out)["world-unknown"]["message"]
    assert "axolotl train starts accelerate launch (its default launcher)" in message
    assert "default config" in message


@pytest.mark.parametrize(
    "launch, world",
    [
        ("--num-processes 4", 4),  # not Axolotl's option: accelerate launch gets it
        ("-- --num_processes 3", 3),
        ("--launcher torchrun", 1),  # torchrun starts one process by default
        ("--launcher=torchrun -- --nproc-per-node 8", 8),
        ("--launcher python", 1),
    ],
)
def test_the_launcher_axolotl_train_starts_gives_the_world(run_dir, launch, world):
    _, out = inspect_job(f"axolotl train examples/lora.yml {launch}\n")
    assert out["world_size"] == world and out["global_batch_size"] == 8 * world


def test_use_ray_trains_in_ray_num_workers_workers(run_dir):
    (run_dir / "ray.yml").write_text(YAML + "use_ray: true\nray_num_workers: 4\n")
    _, out = inspect_job("axolotl train ray.yml --use-ray\n")
    assert batch(out) == (4, 2, 4, 32)
    # no --use-ray: accelerate's processes each run Ray
    _, out = inspect_job("axolotl train ray.yml\n")
    assert out["world_size"] is None and "use_ray" in codes(out)["world-unknown"]["message"]


def test_a_world_that_does_not_divide_by_tensor_parallel_is_an_error(run_dir):
    (run_dir / "tp.yml").write_text(YAML + "tensor_parallel_size: 4\n")
    rc, out = inspect_job("axolotl train tp.yml -- --num_processes 6\n")
    assert rc == 1 and "axolotl-world-rounding" in codes(out)


# Files the job names -----------------------------------------------------------------------


def test_the_yaml_is_looked_for_where_the_job_runs_first_then_beside_the_script(run_dir):
    scripts = run_dir / "scripts"
    scripts.mkdir()
    (scripts / "lora.yml").write_text(YAML.replace("micro_batch_size: 2", "micro_batch_size: 7"))
    (run_dir / "lora.yml").write_text(YAML)
    _, out = inspect_job("axolotl train lora.yml --num-processes 1\n", name="scripts/job.sh")
    assert out["micro_batch_size"] == 2  # the run folder's
    (run_dir / "lora.yml").unlink()
    _, out = inspect_job("axolotl train lora.yml --num-processes 1\n", name="scripts/job.sh")
    assert out["micro_batch_size"] == 7  # then the script's folder


def test_a_missing_yaml_is_a_warning_naming_it_and_where_it_was_looked_for(run_dir):
    rc, out = inspect_job("accelerate launch -m axolotl.cli.train examples/tiny-llama/lora.yml\n")
    assert rc == 0 and out["framework"] == "axolotl"
    f = codes(out)["job-file-not-found"]
    assert f["severity"] == "warning" and f["where"] == "job.sh:2"
    assert (
        "examples/tiny-llama/lora.yml is not found (looked for examples/tiny-llama/lora.yml)"
        in (f["message"])
    )
    assert out["micro_batch_size"] is None and out["gradient_accumulation_steps"] is None


def test_the_deepspeed_json_of_an_override_is_read_where_the_job_runs(run_dir):
    (run_dir / "ds").mkdir()
    (run_dir / "ds" / "auto.json").write_text(AUTO)
    _, out = inspect_job(
        "axolotl train examples/lora.yml --deepspeed ds/auto.json --num-processes 2\n"
    )
    assert "hf-auto" in codes(out) and out["global_batch_size"] == 16


def test_a_deepspeed_json_that_disagrees_is_the_hf_trainers_mismatch_error(run_dir):
    (run_dir / "ds").mkdir()
    (run_dir / "ds" / "micro4.json").write_text(
        '{"train_micro_batch_size_per_gpu": 4, "gradient_accumulation_steps": "auto"}\n'
    )
    (run_dir / "ds.yml").write_text(YAML + "deepspeed: ds/micro4.json\n")
    rc, out = inspect_job("torchrun --nproc_per_node 2 -m axolotl.cli.train ds.yml\n")
    assert rc == 1
    f = codes(out)["axolotl-deepspeed-mismatch"]
    assert "ds train_micro_batch_size_per_gpu=4 vs hf per_device_train_batch_size=2" in f["message"]


def test_a_missing_deepspeed_json_is_a_warning(run_dir):
    (run_dir / "ds.yml").write_text(YAML + "deepspeed: deepspeed_configs/zero3.json\n")
    rc, out = inspect_job("axolotl train ds.yml --num-processes 2\n")
    assert rc == 0
    f = codes(out)["job-file-not-found"]
    assert "deepspeed_configs/zero3.json is not found" in f["message"]
    assert f["where"] == "ds.yml:5"


def test_installing_axolotl_runs_no_program():
    script = shell.parse("#!/bin/bash\npip install axolotl\n", "job.sh")
    assert launchers.call_of(script.commands[0], program.TOOLS) is None


@pytest.mark.parametrize("command", ["cd axolotl", "axolotl preprocess examples/lora.yml"])
def test_other_axolotl_commands_are_not_its_training(run_dir, command):
    call = only_call(command, program.TOOLS)
    assert call.split.name == "axolotl"
    assert program.program(call) is None


# update ------------------------------------------------------------------------------------


JOB = """\
#!/bin/bash
MBS=4
axolotl train examples/lora.yml --micro-batch-size $MBS --gradient-accumulation-steps=2 \\
    --launcher torchrun -- --nproc_per_node 8
"""


def test_update_edits_an_override_written_after_its_flag(run_dir):
    job = JOB.replace("MBS=4\n", "").replace("-size $MBS", "-size=4")
    (run_dir / "job.sh").write_text(job)
    framework, reading = read_file("job.sh")
    assert framework.name == "axolotl"
    spec = BatchSpec(global_batch_size=64, micro_batch_size=2, world_size=8)
    text, changes = update.apply(framework, reading, spec)
    assert text == job.replace("size=4", "size=2").replace("steps=2", "steps=4")
    assert {(c.key, c.old, c.new, c.line) for c in changes} == {
        ("micro_batch_size", 4, 2, 2),
        ("gradient_accumulation_steps", 2, 4, 2),
    }


def test_update_edits_the_variable_that_feeds_an_override(run_dir):
    (run_dir / "job.sh").write_text(JOB)
    framework, reading = read_file("job.sh")
    assert reading.values["micro_batch_size"].span == (16, 17)  # MBS=4's literal
    spec = BatchSpec(global_batch_size=64, micro_batch_size=2, world_size=8)
    text, _ = update.apply(framework, reading, spec)
    assert text == JOB.replace("MBS=4", "MBS=2").replace("steps=2", "steps=4")


def test_update_refuses_a_value_the_yaml_holds_and_names_the_yaml(run_dir):
    (run_dir / "job.sh").write_text(
        "#!/bin/bash\naxolotl train examples/lora.yml -- --num_processes 8\n"
    )
    framework, reading = read_file("job.sh")
    spec = BatchSpec(global_batch_size=128, micro_batch_size=2, world_size=8)
    with pytest.raises(
        ConfigError, match="gradient_accumulation_steps is set in examples/lora.yml, not in job.sh"
    ):
        update.apply(framework, reading, spec)
    assert (run_dir / "job.sh").read_text().endswith("--num_processes 8\n")


def test_update_refuses_to_delete_a_key_the_yaml_holds_and_names_the_yaml(run_dir):
    """Axolotl's batch_size trap is deleted by update; set in the job's YAML, it is refused
    naming that file (it was 'cannot remove batch_size: its value is not a plain scalar')."""
    (run_dir / "x.yml").write_text("base_model: m\nmicro_batch_size: 2\nbatch_size: 16\n")
    (run_dir / "job.sh").write_text(
        "#!/bin/bash\ntorchrun --nproc_per_node 2 -m axolotl.cli.train x.yml\n"
    )
    framework, reading = read_file("job.sh")
    spec = BatchSpec(global_batch_size=32, micro_batch_size=2, world_size=2)
    with pytest.raises(
        ConfigError,
        match=r"batch_size is set in x.yml, not in job.sh; update that file \(delete batch_size\)",
    ):
        update.apply(framework, reading, spec)


def test_update_in_place_changes_the_launcher_flag_and_keeps_every_other_byte(run_dir):
    (run_dir / "job.sh").write_text(JOB)
    args = ["update", "job.sh", "--world-size", "16", "--nproc-per-node", "16", "--in-place"]
    result = run(*args)
    assert result.exit_code == 0, result.output
    assert (run_dir / "job.sh").read_text() == JOB.replace("steps=2", "steps=1").replace(
        "--nproc_per_node 8", "--nproc_per_node 16"
    )


def test_axolotl_is_asked_before_the_hf_trainer():
    assert FRAMEWORKS["axolotl"].claim_order < FRAMEWORKS["hf"].claim_order
    assert FRAMEWORKS["axolotl"].commands == ("axolotl",)


def test_the_accelerate_config_axolotl_train_hands_its_launcher_sizes_the_world(run_dir):
    (run_dir / "acc.yaml").write_text(
        "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\nnum_processes: 4\n"
    )
    _, out = inspect_job("axolotl train examples/lora.yml -- --config_file acc.yaml\n")
    assert batch(out) == (4, 2, 4, 32)
    world = [s for s in out["sources"] if s["field"] == "world_size"]
    assert world and world[0]["where"].endswith("acc.yaml:3 num_processes")
    _, out = inspect_job("axolotl train examples/lora.yml -- --config_file nope.yaml\n")
    assert out["world_size"] is None and "job-file-not-found" in codes(out)


@pytest.mark.parametrize("accumulation, refused", [(2, True), (4, False)])
def test_the_accelerate_deepspeed_accumulation_must_be_axolotls(
    tmp_path, monkeypatch, accumulation, refused
):
    """Axolotl's YAML names no DeepSpeed JSON, so the Trainer it builds takes accelerate's
    plugin config (accumulation 4) and refuses one of its own that differs."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "acc.yaml").write_text(
        "distributed_type: DEEPSPEED\ndeepspeed_config:\n  gradient_accumulation_steps: 4\n"
        "  zero_stage: 2\nnum_processes: 2\n"
    )
    (tmp_path / "cfg.yml").write_text(
        f"base_model: m\nmicro_batch_size: 2\ngradient_accumulation_steps: {accumulation}\n"
    )
    (tmp_path / "job.sh").write_text(
        "#!/bin/bash\naccelerate launch --config_file acc.yaml -m axolotl.cli.train cfg.yml\n"
    )
    result = run("validate", "job.sh")
    assert result.exit_code == (1 if refused else 0), result.output
    assert ("ds gradient_accumulation_steps=4 vs hf" in result.output) is refused
