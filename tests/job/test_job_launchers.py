"""Each launcher's world rule on a job: how many processes the launch line starts, read from
its words the way the launcher counts them, and unknown where the machine decides."""

import json

import pytest
from run_batchspec import inspect_job, run, run_json

pytestmark = pytest.mark.usefixtures("in_tmp_path")

HF = "train.py --per_device_train_batch_size 2 --gradient_accumulation_steps 4 --output_dir o"


@pytest.mark.parametrize(
    "launch, world",
    [
        ("torchrun --nproc_per_node 4 --nnodes 2", 8),
        ("torchrun --standalone --nproc_per_node=8", 8),  # a switch, then its value
        ("python -m torch.distributed.run --nproc_per_node 2", 2),
        ("deepspeed --num_gpus 4", 4),  # no host file: this node alone
        ("deepspeed --num_gpus 4 --num_nodes 2 --hostfile hosts", 8),
        ("deepspeed --hostfile hosts", None),  # every host of the file
        ("deepspeed", None),  # every GPU it finds
        ("deepspeed --include localhost:0,1,2", 3),
        ("deepspeed --exclude localhost:0", None),
        ("export CUDA_VISIBLE_DEVICES=0,1,2,3\ndeepspeed", 4),  # becomes --include
        ("accelerate launch --num_processes 8", 8),  # the total
        ("accelerate launch --num_processes=16 --num_machines 2", 16),
        ("accelerate launch --multi_gpu", None),  # every GPU it finds
        ("accelerate launch", None),  # its default config
        ("srun --ntasks 8 python", 8),
        ("mpirun -np 4 python", 4),
    ],
)
def test_each_launcher_sizes_the_world(launch, world):
    _, out = inspect_job(f"{launch} {HF}\n")
    assert out["world_size"] == world
    assert out["framework"] == "hf"
    if world is None:
        assert any(f["code"] == "world-unknown" for f in out["findings"])
    else:
        assert out["global_batch_size"] == 2 * 4 * world


def test_plain_python_is_dataparallel_over_the_visible_gpus():
    _, out = inspect_job(f"CUDA_VISIBLE_DEVICES=0,1 python {HF}\n")
    assert out["world_size"] == 2 and out["global_batch_size"] == 16
    assert any(f["code"] == "hf-dataparallel" for f in out["findings"])
    _, unknown = inspect_job(f"python {HF}\n")
    assert unknown["world_size"] is None and unknown["global_batch_size"] is None
    assert "DataParallel" in next(
        f["message"] for f in unknown["findings"] if f["code"] == "world-unknown"
    )


def test_plain_python_with_deepspeed_is_one_process(tmp_path):
    (tmp_path / "ds.json").write_text('{"train_micro_batch_size_per_gpu": "auto"}')
    _, out = inspect_job(f"python {HF} --deepspeed ds.json\n")
    assert out["world_size"] == 1 and out["global_batch_size"] == 8


def test_accelerate_takes_the_world_from_its_config_file_unless_its_flag_says(tmp_path):
    (tmp_path / "cfg.yaml").write_text(
        "compute_environment: LOCAL_MACHINE\ndistributed_type: MULTI_GPU\nnum_processes: 4\n"
    )
    _, out = inspect_job(f"accelerate launch --config_file cfg.yaml {HF}\n")
    assert out["world_size"] == 4 and out["global_batch_size"] == 32
    _, flagged = inspect_job(f"accelerate launch --config_file cfg.yaml --num_processes 2 {HF}\n")
    assert flagged["world_size"] == 2
    lost = [s for s in flagged["sources"] if s["field"] == "world_size" and not s["won"]]
    assert lost and "cfg.yaml" in lost[0]["where"] and "flags win" in lost[0]["why"]


def test_a_missing_launcher_config_is_a_warning_naming_where_it_looked():
    _, out = inspect_job(f"accelerate launch --config_file nope.yaml {HF}\n")
    missing = [f for f in out["findings"] if f["code"] == "job-file-not-found"]
    assert missing and missing[0]["severity"] == "warning"
    assert "nope.yaml is not found (looked for nope.yaml)" in missing[0]["message"]
    assert out["world_size"] is None


def test_an_accelerate_deepspeed_accumulation_the_trainer_does_not_share_is_an_error():
    """accelerate exports --gradient_accumulation_steps 8 to its DeepSpeed plugin; the Trainer
    refuses a DeepSpeed accumulation that is not its own 4 (trainer_config_finalize)."""
    _, out = inspect_job(
        f"accelerate launch --num_processes 2 --use_deepspeed --gradient_accumulation_steps 8 {HF}\n",
    )
    (wrong,) = [f for f in out["findings"] if f["code"] == "hf-deepspeed-mismatch"]
    assert (
        "ds gradient_accumulation_steps=8 vs hf gradient_accumulation_steps=4" in wrong["message"]
    )
    assert "job.sh:2" in wrong["message"] and wrong["severity"] == "error"


def test_the_confident_wrong_accelerate_deepspeed_job_fails_validate(tmp_path):
    """The job that validated ok with global 64: its accelerate config names a DeepSpeed file
    whose accumulation 4 the Trainer's 2 contradicts. validate exits 1 naming both places."""
    (tmp_path / "acc.yaml").write_text(
        "compute_environment: LOCAL_MACHINE\ndistributed_type: DEEPSPEED\ndeepspeed_config:\n"
        "  deepspeed_config_file: ds.json\n  zero3_init_flag: false\nnum_machines: 1\n"
        "num_processes: 8\n"
    )
    (tmp_path / "ds.json").write_text(
        '{\n  "train_micro_batch_size_per_gpu": "auto",\n  "gradient_accumulation_steps": 4,\n'
        '  "zero_optimization": {"stage": 2}\n}\n'
    )
    (tmp_path / "job.sh").write_text(
        "#!/bin/bash\naccelerate launch --config_file acc.yaml train.py --output_dir out \\\n"
        "  --per_device_train_batch_size 4 --gradient_accumulation_steps 2\n"
    )
    result = run("validate", "job.sh")
    assert result.exit_code == 1, result.output
    assert "ds gradient_accumulation_steps=4 vs hf gradient_accumulation_steps=2" in result.output
    assert "ds.json:3" in result.output and "job.sh:3" in result.output
    _, out = run_json("inspect", "job.sh")
    lost = [
        s for s in out["sources"] if s["field"] == "gradient_accumulation_steps" and not s["won"]
    ]
    assert lost and lost[0]["where"].startswith("ds.json:3") and lost[0]["value"] == 4


def test_the_trainers_own_deepspeed_wins_over_the_accelerate_configs(tmp_path):
    (tmp_path / "acc.yaml").write_text(
        "distributed_type: DEEPSPEED\ndeepspeed_config:\n  gradient_accumulation_steps: 8\n"
        "num_processes: 2\n"
    )
    (tmp_path / "own.json").write_text('{"gradient_accumulation_steps": "auto"}\n')
    _, out = inspect_job(
        f"accelerate launch --config_file acc.yaml {HF} --deepspeed own.json\n",
    )
    (unused,) = [f for f in out["findings"] if f["code"] == "hf-deepspeed-launcher-unused"]
    assert "own.json wins" in unused["message"] and unused["severity"] == "warning"
    assert out["gradient_accumulation_steps"] == 4 and out["global_batch_size"] == 16


def test_a_script_that_launches_nothing_is_one_line_exit_2(tmp_path):
    (tmp_path / "job.sh").write_text("#!/bin/bash\necho hello\nls -l\n")
    result = run("inspect", "job.sh")
    assert result.exit_code == 2
    assert result.output.count("\n") == 1 and "no launch of a training program" in result.output


def test_deepspeed_counts_the_slots_of_the_host_file_it_names(tmp_path):
    (tmp_path / "hosts").write_text("# the cluster\nworker-0 slots=8\nworker-1 slots=8\n")
    assert inspect_job(f"deepspeed --hostfile hosts {HF}\n")[1]["world_size"] == 16
    trimmed = f"deepspeed --hostfile hosts --num_nodes 1 --num_gpus 4 {HF}\n"
    assert inspect_job(trimmed)[1]["world_size"] == 4
    _, out = inspect_job(f"deepspeed --hostfile nowhere {HF}\n")
    assert out["world_size"] is None
    assert any(f["code"] == "job-file-not-found" for f in out["findings"])


def test_windows_line_endings_are_read_and_named(tmp_path):
    (tmp_path / "job.sh").write_bytes(
        b"torchrun --nproc_per_node 2 train.py \\\r\n  --per_device_train_batch_size 4 \\\r\n"
        b"  --gradient_accumulation_steps 2 --output_dir o\r\n"
    )
    _, out = run_json("inspect", "job.sh")
    assert out["global_batch_size"] == 16
    assert any("Windows line endings" in f["message"] for f in out["findings"])


def test_an_accelerate_config_reads_the_accumulation_of_its_deepspeed_file(tmp_path):
    """The accumulation of the DeepSpeed file an accelerate config names is the launch's (it
    was unknown); a file that is not there is a warning, not an error."""
    (tmp_path / "ds.json").write_text(
        '{\n  "gradient_accumulation_steps": 4,\n  "zero_optimization": {"stage": 2}\n}\n'
    )
    (tmp_path / "acc.yaml").write_text(
        "distributed_type: DEEPSPEED\ndeepspeed_config:\n  deepspeed_config_file: ds.json\n"
        "num_processes: 8\n"
    )
    _, out = run_json("inspect", "acc.yaml")
    assert out["gradient_accumulation_steps"] == 4 and out["world_size"] == 8
    (tmp_path / "acc.yaml").write_text(
        "distributed_type: DEEPSPEED\ndeepspeed_config:\n  deepspeed_config_file: gone.json\n"
        "num_processes: 8\n"
    )
    result = run("inspect", "acc.yaml", "--json")
    assert result.exit_code == 0
    (missing,) = [f for f in json.loads(result.stdout)["findings"] if "gone.json" in f["message"]]
    assert missing["severity"] == "warning"


@pytest.mark.parametrize(
    "accelerate, ds, flags",
    [
        # an accelerate config written by `accelerate config` with the accumulation inline, and
        # a launch whose flag says another: the Trainer stops (ds 4 vs hf 2)
        (
            "deepspeed_config:\n  gradient_accumulation_steps: 4\n  gradient_clipping: 0.5\n"
            "  zero_stage: 2\n",
            None,
            "--per_device_train_batch_size 4 --gradient_accumulation_steps 2",
        ),
        # the DeepSpeed file the accelerate config names writes the accumulation as a string
        (
            "deepspeed_config:\n  deepspeed_config_file: ds.json\n  zero3_init_flag: false\n",
            '{"train_batch_size": "auto", "gradient_accumulation_steps": "8", '
            '"zero_optimization": {"stage": 2}}',
            "--per_device_train_batch_size 4 --gradient_accumulation_steps 8",
        ),
    ],
)
def test_accelerate_deepspeed_jobs_the_trainer_stops_are_errors(tmp_path, accelerate, ds, flags):
    """Jobs in the shape of published reports of the Trainer's "Please correct the following
    DeepSpeed config values" error: each is an error here (they read ok before)."""
    (tmp_path / "acc.yml").write_text(
        f"compute_environment: LOCAL_MACHINE\n{accelerate}distributed_type: DEEPSPEED\n"
        "mixed_precision: fp16\nnum_machines: 1\nnum_processes: 7\n"
    )
    if ds is not None:
        (tmp_path / "ds.json").write_text(ds)
    (tmp_path / "run.sh").write_text(
        f"accelerate launch --config_file ./acc.yml src/train_sft.py --do_train {flags} "
        "--output_dir out\n"
    )
    result = run("validate", "run.sh")
    assert result.exit_code == 1, result.output
    assert "ds gradient_accumulation_steps=" in result.output
