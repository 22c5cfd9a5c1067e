"""Jobs read as run: no arguments and an empty environment unless given (``--`` and
``--env``), the defaults the batch rests on named, templates whose placeholders bash cannot
parse still read, and values only the environment supplies kept unknown."""

import json

from click.testing import CliRunner

from translator.cli import main

ARGUMENT_LOOP = """#!/bin/bash
MBS=4
GBS=64
NODES=${NODES:-1}
while [[ $# -gt 0 ]]; do
  case $1 in
    --mbs) MBS=$2; shift 2;;
    --gbs) GBS="$2"; shift; shift;;
    *) echo "unknown $1"; exit 1;;
  esac
done
torchrun --nproc_per_node 8 --nnodes $NODES pretrain_gpt.py \\
    --micro-batch-size $MBS --global-batch-size $GBS "$@"
"""

TEMPLATE = """#!/bin/bash
#SBATCH <SLURM OPTIONS>
GPUS_PER_NODE=8
CHECKPOINT_PATH=<Specify path>
DATA_PATH=<Specify path and file prefix>_text_document
torchrun --nproc_per_node $GPUS_PER_NODE pretrain_gpt.py \\
    --tensor-model-parallel-size 2 \\
    --micro-batch-size 2 --global-batch-size 64 \\
    --data-path $DATA_PATH --save $CHECKPOINT_PATH
"""


def inspect(tmp_path, monkeypatch, script: str, *args: str):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "job.sh").write_text(script)
    result = CliRunner().invoke(main, ["inspect", "job.sh", "--json", *args])
    assert result.exit_code in (0, 1), result.output
    return result.exit_code, json.loads(result.stdout)


def test_with_no_arguments_the_loop_does_not_run_and_the_defaults_stand(tmp_path, monkeypatch):
    code, out = inspect(tmp_path, monkeypatch, ARGUMENT_LOOP)
    assert code == 0
    assert (out["micro_batch_size"], out["global_batch_size"], out["world_size"]) == (4, 64, 8)
    rests = next(f for f in out["findings"] if f["code"] == "job-defaults")
    assert "--nnodes 1, the default of ${NODES} (line 4)" in rests["message"]
    assert "$@ (line 13) empty" in rests["message"]


def test_arguments_after_the_double_dash_run_through_the_loop(tmp_path, monkeypatch):
    _, out = inspect(tmp_path, monkeypatch, ARGUMENT_LOOP, "--", "--mbs", "2", "--gbs", "128")
    assert (out["micro_batch_size"], out["global_batch_size"]) == (2, 128)
    assert out["gradient_accumulation_steps"] == 8


def test_env_sets_a_variable_the_script_reads(tmp_path, monkeypatch):
    _, out = inspect(tmp_path, monkeypatch, ARGUMENT_LOOP, "--env", "NODES=2")
    assert out["world_size"] == 16 and out["gradient_accumulation_steps"] == 1


def test_an_argument_the_loop_refuses_stops_the_job_before_its_launch(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "job.sh").write_text(ARGUMENT_LOOP)
    result = CliRunner().invoke(main, ["inspect", "job.sh", "--", "--bogus"])
    assert result.exit_code == 2
    assert "stops before any launch" in result.output


def test_a_value_only_the_environment_supplies_stays_unknown(tmp_path, monkeypatch):
    script = "torchrun --nproc_per_node 8 pretrain_gpt.py --micro-batch-size $MBS --global-batch-size 64\n"
    _, out = inspect(tmp_path, monkeypatch, script)
    assert out["micro_batch_size"] is None and out["gradient_accumulation_steps"] is None
    unknown = next(f for f in out["findings"] if f["code"] == "unknown-value")
    assert "$MBS" in unknown["message"] and "only the environment can set it" in unknown["message"]
    fitting = next(f for f in out["findings"] if f["code"] == "batch-depends-on-unknown")
    assert "micro_batch_size 2 → global 64" in fitting["message"]
    _, given = inspect(tmp_path, monkeypatch, script, "--env", "MBS=4")
    assert given["gradient_accumulation_steps"] == 2


def test_a_template_with_placeholders_still_reads(tmp_path, monkeypatch):
    code, out = inspect(tmp_path, monkeypatch, TEMPLATE)
    assert code == 0
    assert (out["global_batch_size"], out["gradient_accumulation_steps"]) == (64, 8)
    unparsed = [f for f in out["findings"] if "bash cannot parse this statement" in f["message"]]
    assert [f["where"] for f in unparsed] == ["job.sh:4", "job.sh:5"]
    assert {f["severity"] for f in unparsed} == {"warning"}


def test_a_value_computed_when_the_job_runs_stays_unknown(tmp_path, monkeypatch):
    script = (
        "GPUS=$(nvidia-smi -L | wc -l)\n"
        "torchrun --nproc_per_node $GPUS pretrain_gpt.py --micro-batch-size 2 --global-batch-size 64\n"
    )
    _, out = inspect(tmp_path, monkeypatch, script)
    assert out["world_size"] is None and out["global_batch_size"] == 64
    assert any(f["code"] == "world-unknown" for f in out["findings"])
