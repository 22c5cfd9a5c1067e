"""Jobs read as run: no arguments and an empty environment unless given (``--`` and
``--env``), the defaults the batch rests on named, templates whose placeholders bash cannot
parse still read, and values only the environment supplies kept unknown."""

import pytest
from run_batchspec import inspect_job, run

pytestmark = pytest.mark.usefixtures("in_tmp_path")

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


def test_with_no_arguments_the_loop_does_not_run_and_the_defaults_stand():
    code, out = inspect_job(ARGUMENT_LOOP, shebang=False)
    assert code == 0
    assert (out["micro_batch_size"], out["global_batch_size"], out["world_size"]) == (4, 64, 8)
    rests = next(f for f in out["findings"] if f["code"] == "job-defaults")
    assert "--nnodes 1, the default of ${NODES} (line 4)" in rests["message"]
    assert "$@ (line 13) empty" in rests["message"]


def test_arguments_after_the_double_dash_run_through_the_loop():
    _, out = inspect_job(ARGUMENT_LOOP, "--", "--mbs", "2", "--gbs", "128", shebang=False)
    assert (out["micro_batch_size"], out["global_batch_size"]) == (2, 128)
    assert out["gradient_accumulation_steps"] == 8


def test_env_sets_a_variable_the_script_reads():
    _, out = inspect_job(ARGUMENT_LOOP, "--env", "NODES=2", shebang=False)
    assert out["world_size"] == 16 and out["gradient_accumulation_steps"] == 1


def test_an_argument_the_loop_refuses_stops_the_job_before_its_launch(tmp_path):
    (tmp_path / "job.sh").write_text(ARGUMENT_LOOP)
    result = run("inspect", "job.sh", "--", "--bogus")
    assert result.exit_code == 2
    assert "stops before any launch" in result.output


def test_a_value_only_the_environment_supplies_stays_unknown():
    script = "torchrun --nproc_per_node 8 pretrain_gpt.py --micro-batch-size $MBS --global-batch-size 64\n"
    _, out = inspect_job(script, shebang=False)
    assert out["micro_batch_size"] is None and out["gradient_accumulation_steps"] is None
    unknown = next(f for f in out["findings"] if f["code"] == "unknown-value")
    assert "$MBS" in unknown["message"] and "only the environment can set it" in unknown["message"]
    fitting = next(f for f in out["findings"] if f["code"] == "batch-depends-on-unknown")
    assert "micro_batch_size 2 → global 64" in fitting["message"]
    _, given = inspect_job(script, "--env", "MBS=4", shebang=False)
    assert given["gradient_accumulation_steps"] == 2


def test_a_template_with_placeholders_still_reads():
    code, out = inspect_job(TEMPLATE, shebang=False)
    assert code == 0
    assert (out["global_batch_size"], out["gradient_accumulation_steps"]) == (64, 8)
    unparsed = [f for f in out["findings"] if "bash cannot parse this statement" in f["message"]]
    assert [f["where"] for f in unparsed] == ["job.sh:4", "job.sh:5"]
    assert {f["severity"] for f in unparsed} == {"warning"}


def test_a_value_computed_when_the_job_runs_stays_unknown():
    script = (
        "GPUS=$(nvidia-smi -L | wc -l)\n"
        "torchrun --nproc_per_node $GPUS pretrain_gpt.py --micro-batch-size 2 --global-batch-size 64\n"
    )
    _, out = inspect_job(script, shebang=False)
    assert out["world_size"] is None and out["global_batch_size"] == 64
    assert any(f["code"] == "world-unknown" for f in out["findings"])
