"""tune --parity: the pick is checked against the split of the user's own file."""

import types
from pathlib import Path

import pytest
from run_batchspec import run

from translator.batch.tuning import Candidate
from translator.launch import probes, tune_parity
from translator.launch.command import SmokePlan
from translator.launch.progress import Progress
from translator.launch.tune import GivenOption, job_command
from translator.rank import parity_rank
from translator.spec import BatchSpec
from translator.words.files import write_files

SPEC = "global_batch_size: 8\nmicro_batch_size: 4\nsequence_length: 32\n"


def test_on_by_default_when_the_file_gives_a_split_and_the_engine_checks_parity():
    split = BatchSpec(global_batch_size=8, micro_batch_size=4, world_size=1)
    bare = BatchSpec(global_batch_size=8, world_size=1)
    assert tune_parity.wanted(None, split, "torch", "f") is True
    assert tune_parity.wanted(None, bare, "torch", "f") is False
    assert tune_parity.wanted(False, split, "torch", "f") is False
    piped = BatchSpec(
        global_batch_size=8, micro_batch_size=1, world_size=2, pipeline_parallel_size=2
    )
    assert tune_parity.wanted(None, piped, "deepspeed", "f") is False


@pytest.mark.parametrize(
    "text, extra, message",
    [
        ("global_batch_size: 8\n", [], "gives no micro-batch, so it has no split to check"),
        (
            SPEC + "world_size: 2\npipeline_parallel_size: 2\n",
            ["--framework", "deepspeed", "--nproc-per-node", 2],
            "parity runs data parallelism only",
        ),
    ],
)
def test_parity_asked_where_it_cannot_run_stops_before_any_probe(tmp_path, text, extra, message):
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    result = run("tune", path, "--parity", *extra, "--model", "tiny", "--workdir", tmp_path / "w")
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output
    assert not (tmp_path / "w").exists()


def test_the_slurm_job_is_told_no_parity_when_it_was_turned_off():
    off = GivenOption("parity", "--parity", False, is_flag=True, off_flag="--no-parity")
    on = GivenOption("parity", "--parity", True, is_flag=True, off_flag="--no-parity")
    asked = job_command(types.SimpleNamespace(command_line=(off,)))  # type: ignore[arg-type]
    assert "--no-parity" in asked and "--parity" not in asked
    asked = job_command(types.SimpleNamespace(command_line=(on,)))  # type: ignore[arg-type]
    assert "--parity" in asked and "--no-parity" not in asked


def _setup(tmp_path: Path, pick: Candidate, text=SPEC, name="spec.yaml", framework="torch"):
    """A tune of ``text`` (SPEC's batch) on one rank whose probe of ``pick`` ran (its candidate
    file is there)."""
    path = tmp_path / name
    path.write_text(text)
    spec = BatchSpec(global_batch_size=8, micro_batch_size=4, world_size=1, sequence_length=32)
    plan = SmokePlan(framework, 1, 1, 2, "tiny", 32, tmp_path / "tune", "", device="cpu")
    setup = probes.Setup(spec, plan)
    folder = probes.probe_folder(setup, pick)
    folder.mkdir(parents=True)
    write_files(
        [(folder / "candidate.json", probes.candidate_spec(spec, pick).model_dump_json())],
        force=True,
    )
    return str(path), setup


def test_the_pick_is_checked_against_the_files_split(tmp_path):
    file, setup = _setup(tmp_path, Candidate(2, 4))
    out, error = tune_parity.check(file, setup, Candidate(2, 4), Progress(quiet=True))
    assert error is None, out["errors"]
    assert out["checked"] and out["parity"]
    assert (out["a"]["micro_batch_size"], out["b"]["micro_batch_size"]) == (4, 2)


def test_a_pick_that_trains_another_step_is_an_error(tmp_path, monkeypatch):
    monkeypatch.setenv(parity_rank.PER_MICRO_MEAN_ENV, "1")  # the engine normalises wrongly
    file, setup = _setup(tmp_path, Candidate(1, 8))
    out, error = tune_parity.check(file, setup, Candidate(1, 8), Progress(quiet=True))
    assert error is not None and out["parity"] is False
    assert error.startswith(
        "the pick (micro-batch 1 × accumulation 8) does not train the same step as "
    )
    assert "the update of" in error


def test_the_files_own_split_needs_no_check(tmp_path):
    file, setup = _setup(tmp_path, Candidate(4, 2))
    out, error = tune_parity.check(file, setup, Candidate(4, 2), Progress(quiet=True))
    assert (out, error) == ({"checked": False, "why": "the pick is the file's own split"}, None)


BRIDGE = """train:
  global_batch_size: 8
  micro_batch_size: 4
model:
  tensor_model_parallel_size: 1
  pipeline_model_parallel_size: 1
  context_parallel_size: 1
  calculate_per_token_loss: true
dataset:
  seq_length: 32
"""


@pytest.mark.framework
def test_the_pick_keeps_the_files_other_settings(tmp_path):
    """B is the user's Megatron-Bridge file at the pick's micro-batch, its per-token loss kept
    (the candidate spec the probe ran, rendered, would train without it and fail)."""
    file, setup = _setup(tmp_path, Candidate(2, 4), BRIDGE, "bridge.yaml", "megatron-bridge")
    out, error = tune_parity.check(file, setup, Candidate(2, 4), Progress(quiet=True))
    assert error is None, out["errors"]
    assert (out["b"]["micro_batch_size"], out["b"]["gradient_accumulation_steps"]) == (2, 4)
    (derived,) = (tmp_path / "tune" / "parity" / "b-input").iterdir()
    assert "calculate_per_token_loss: true" in derived.read_text()
