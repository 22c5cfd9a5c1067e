"""nanotron: its YAML and launch scripts read, its quirks checked, rendered, updated and
converted; none of these tests needs nanotron itself (tests/frameworks/nanotron/test_nanotron_own.py runs its code)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from paths import ROOT
from run_batchspec import codes, inspected, run

from translator.frameworks import get
from translator.frameworks.nanotron import generation
from translator.render import render
from translator.spec import BatchSpec

FIXTURES = ROOT / "fixtures" / "nanotron"
nanotron = get("nanotron")


def write(tmp_path: Path, text: str, name: str = "config.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


BLOCKS = """\
parallelism:
  dp: {dp}
  tp: {tp}
  pp: {pp}
  pp_engine: {engine}
tokens:
  micro_batch_size: {micro}
  batch_accumulation_per_replica: {accumulation}
  sequence_length: 2048
"""


def blocks(**sizes) -> str:
    given = {"dp": 2, "tp": 1, "pp": 1, "engine": "1f1b", "micro": 2, "accumulation": 1}
    return BLOCKS.format(**(given | sizes))


# Reading ---------------------------------------------------------------------------------------


def test_the_batch_is_micro_times_accumulation_times_dp_and_the_world_the_product(tmp_path):
    out = inspected(write(tmp_path, blocks(dp=3, tp=2, pp=2, micro=5, accumulation=7)))
    assert (out["global_batch_size"], out["world_size"], out["data_parallel_size"]) == (
        105,
        12,
        3,
    )
    assert out["tokens_per_step"] == 105 * 2048


def test_a_yaml_with_the_batch_blocks_is_nanotrons_not_axolotls(tmp_path):
    assert inspected(write(tmp_path, blocks()))["framework"] == "nanotron"
    axolotl = write(tmp_path, "base_model: x\nmicro_batch_size: 2\n", "axolotl.yaml")
    assert inspected(axolotl)["framework"] == "axolotl"


def test_each_generation_is_named_and_a_mixed_file_is_said_to_be_mixed(tmp_path):
    old = inspected(FIXTURES / "valid" / "tiny_llama_04.yaml")
    new = inspected(FIXTURES / "valid" / "smollm_style.yaml")
    assert "nanotron 0.4 (the PyPI release)" in codes(old)["nanotron-generation"]["message"]
    assert "current generation (git main)" in codes(new)["nanotron-generation"]["message"]
    mixed = write(tmp_path, blocks() + "data: {seed: 1}\ndata_stages: []\n")
    assert "mixes keys of both" in codes(inspected(mixed))["nanotron-generation"]["message"]
    assert "nanotron-generation" not in codes(inspected(write(tmp_path, blocks(), "plain.yaml")))


def test_the_installed_generation_other_than_the_files_is_said(monkeypatch):
    monkeypatch.setattr(generation, "installed", lambda: "0.4")
    out = codes(inspected(FIXTURES / "valid" / "smollm_style.yaml"))
    assert (
        "pip install git+https://github.com/huggingface/nanotron"
        in (out["nanotron-other-generation"]["hint"])
    )
    monkeypatch.setattr(generation, "installed", lambda: "current")
    assert "nanotron-other-generation" not in codes(
        inspected(FIXTURES / "valid" / "smollm_style.yaml")
    )


@pytest.mark.parametrize(
    "installed, words",
    [
        ("0.4", "The number of process requires to run all replicas (8) must be equal"),
        ("current", "TP*CP*DP*PP=8 != WORLD_SIZE=16"),
    ],
)
def test_a_world_other_than_the_product_is_refused_in_the_installed_generations_words(
    tmp_path, monkeypatch, installed, words
):
    monkeypatch.setattr(generation, "installed", lambda: installed)
    path = write(tmp_path, blocks(dp=4, tp=2, micro=2, accumulation=8))
    result = run("inspect", path, "--world-size", 16, "--json")
    assert result.exit_code == 1
    found = codes(json.loads(result.stdout))["nanotron-world-product"]
    assert words in found["message"]
    # the hint's dp and micro × accumulation keep the global batch 64 on 16 processes
    assert "set dp: 8 for 16 processes" in found["hint"] and "= 8 to keep" in found["hint"]
    fixed = write(tmp_path, blocks(dp=8, tp=2, micro=2, accumulation=4), "fixed.yaml")
    out = inspected(fixed, "--world-size", 16)
    assert out["global_batch_size"] == 64 and "nanotron-world-product" not in codes(out)


def test_a_world_of_one_process_is_counted_in_words(tmp_path):
    one = write(tmp_path, blocks(dp=1, tp=1, micro=2, accumulation=8))
    found = codes(json.loads(run("inspect", one, "--world-size", 2, "--json").stdout))
    assert found["nanotron-world-product"]["hint"].startswith("launch exactly 1 process, or")
    two = write(tmp_path, blocks(dp=2, tp=1, micro=2, accumulation=8), "two.yaml")
    found = codes(json.loads(run("inspect", two, "--world-size", 1, "--json").stdout))
    assert "= 2, but 1 process is launched" in found["nanotron-world-product"]["message"]
    assert "set dp: 1 for 1 process and" in found["nanotron-world-product"]["hint"]
    pipeline = write(tmp_path, blocks(dp=2, tp=1, pp=4, micro=2, accumulation=8), "pp.yaml")
    found = codes(json.loads(run("inspect", pipeline, "--world-size", 1, "--json").stdout))
    assert (
        "; 1 process does not split into replicas of 4" in found["nanotron-world-product"]["hint"]
    )


def test_context_parallel_is_in_the_world_not_in_the_batch(tmp_path):
    text = blocks(dp=2, tp=2).replace("  pp_engine", "  context_parallel_size: 4\n  pp_engine")
    out = inspected(write(tmp_path, text), "--world-size", 16)
    assert (out["global_batch_size"], out["world_size"], out["context_parallel_size"]) == (4, 16, 4)


def test_expert_parallelism_warns_of_the_two_generations_worlds(tmp_path):
    text = blocks(dp=2, tp=2).replace("  pp_engine", "  expert_parallel_size: 2\n  pp_engine")
    found = codes(inspected(write(tmp_path, text)))["nanotron-expert-world"]
    assert "tp × pp × ep × dp = 8" in found["message"] and "(4)" in found["message"]


def test_1f1b_needs_accumulation_of_at_least_pp_minus_1_and_the_hint_solves_it(tmp_path):
    path = write(tmp_path, blocks(pp=4, micro=4, accumulation=2))
    result = run("inspect", path, "--json")
    assert result.exit_code == 1
    found = codes(json.loads(result.stdout))["nanotron-1f1b-microbatches"]
    assert "must be at least PP_SIZE-1=3" in found["message"]
    assert "batch_accumulation_per_replica" in found["message"]
    assert found["hint"].startswith(
        "keep the global batch with micro_batch_size 2 and batch_accumulation_per_replica 4"
    )
    fixed = inspected(write(tmp_path, blocks(pp=4, micro=2, accumulation=4), "fixed.yaml"))
    assert fixed["global_batch_size"] == 16 and "nanotron-1f1b-microbatches" not in codes(fixed)


def test_afab_the_default_engine_has_no_micro_batch_minimum(tmp_path):
    text = blocks(pp=4).replace("  pp_engine: 1f1b\n", "")
    assert "nanotron-1f1b-microbatches" not in codes(inspected(write(tmp_path, text)))
    no_split = codes(inspected(write(tmp_path, blocks(pp=8, micro=1, accumulation=2), "x.yaml")))
    assert no_split["nanotron-1f1b-microbatches"]["hint"].startswith("use pp_engine: afab")


def test_an_engine_nanotron_does_not_know_is_refused(tmp_path):
    out = inspected(write(tmp_path, blocks(engine="gpipe")))
    assert "not gpipe (nanotron's words)" in codes(out)["nanotron-pp-engine"]["message"]


def test_a_whole_config_needs_every_key_nanotron_has_no_default_for(tmp_path):
    whole = "general: {project: x}\n" + blocks().replace("  sequence_length: 2048\n", "")
    found = [f["message"] for f in inspected(write(tmp_path, whole))["findings"]]
    assert any('missing value for field "tokens.sequence_length"' in m for m in found)
    assert any('missing value for field "tokens.train_steps"' in m for m in found)
    # the batch blocks alone (rendered, to go in a whole config) need no train_steps
    assert "nanotron-missing-key" not in codes(inspected(write(tmp_path, blocks(), "b.yaml")))


def test_a_whole_config_without_tokens_fails_in_the_trainer(tmp_path):
    text = "general: {project: x}\nparallelism: {dp: 1, tp: 1, pp: 1}\n"
    found = codes(inspected(write(tmp_path, text), "--framework", "nanotron"))[
        "nanotron-missing-key"
    ]
    assert "no tokens block" in found["message"]


@pytest.mark.parametrize(
    "text, message",
    [
        ("- 1\n", "a nanotron config must be a YAML mapping, not list"),
        ("parallelism: 3\ntokens:\n  batch_accumulation_per_replica: 1\n", "parallelism must be"),
    ],
)
def test_a_file_that_is_no_config_is_one_line_naming_it(tmp_path, text, message):
    path = write(tmp_path, text)
    result = run("inspect", path, "--framework", "nanotron")
    assert result.exit_code == 2
    assert result.stderr.startswith(f"batchspec: error: {path}") and message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.output


# Jobs ------------------------------------------------------------------------------------------


def test_a_job_takes_the_world_from_torchrun_and_the_batch_from_the_yaml():
    out = inspected(FIXTURES / "jobs" / "train_torchrun.sh")
    where = {s["field"]: s["where"] for s in out["sources"]}
    assert where["micro_batch_size"].endswith("config_dp4_tp2.yaml:17 tokens.micro_batch_size")
    assert "--nproc_per_node" in where["world_size"]


def test_a_job_whose_world_is_unknown_says_how_many_processes_nanotron_needs(tmp_path):
    config = write(tmp_path, blocks(dp=4, tp=2))
    job = write(
        tmp_path,
        f"torchrun --nproc_per_node $(nvidia-smi -L | wc -l) run_train.py --config-file {config}\n",
        "job.sh",
    )
    found = codes(inspected(job))["nanotron-world-needed"]
    assert found["message"].endswith("needs exactly 8") and found["severity"] == "info"


def test_run_train_without_its_config_flag_is_refused(tmp_path):
    job = write(tmp_path, "torchrun --nproc_per_node 2 run_train.py\n", "job.sh")
    result = run("inspect", job, "--json")
    assert result.exit_code == 1
    assert "requires" in codes(json.loads(result.stdout))["nanotron-missing-key"]["message"]


def test_another_program_with_a_config_file_flag_is_not_nanotrons(tmp_path):
    other = write(tmp_path, "foo: 1\n", "other.yaml")
    job = write(tmp_path, f"torchrun --nproc_per_node 2 train.py --config-file {other}\n", "j.sh")
    result = run("inspect", job)
    assert result.exit_code == 2 and "nanotron" not in result.stderr.split("(")[0]


def test_update_of_a_job_edits_its_yaml_with_the_launch_line():
    """The parallel and batch sizes are the YAML's: a whole-job update edits them there, with
    the torchrun line (it was refused: "update that file")."""
    result = run("update", FIXTURES / "jobs" / "train_torchrun.sh", "--world-size", 16, "--json")
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert [(c["key"], c["new"]) for c in out["changes"]] == [("--nnodes", 2)]
    (config,) = out["other_files"]
    assert config["path"].endswith("config_dp4_tp2.yaml")
    assert {(c["key"], c["old"], c["new"]) for c in config["changes"]} == {
        ("parallelism.dp", 4, 8),
        ("tokens.batch_accumulation_per_replica", 4, 2),
    }


# Render, update, convert -----------------------------------------------------------------------


def test_a_rendered_file_reads_back_with_the_engine_1f1b_allows():
    spec = BatchSpec(
        global_batch_size=64,
        micro_batch_size=2,
        world_size=16,
        pipeline_parallel_size=4,
        sequence_length=1024,
    )
    text = render(spec, nanotron).text
    data = yaml.safe_load(text)
    assert data["parallelism"] == {"dp": 4, "tp": 1, "pp": 4, "pp_engine": "1f1b"}
    assert data["tokens"] == {
        "micro_batch_size": 2,
        "batch_accumulation_per_replica": 8,
        "sequence_length": 1024,
    }
    few = BatchSpec(
        global_batch_size=8, micro_batch_size=2, world_size=16, pipeline_parallel_size=4
    )
    rendered = render(few, nanotron)
    assert yaml.safe_load(rendered.text)["parallelism"]["pp_engine"] == "afab"
    assert "1F1B would need batch_accumulation_per_replica >= pp - 1 = 3" in rendered.text
    assert [f.code for f in rendered.findings] == ["nanotron-sequence-length-missing"]


def test_context_parallel_is_rendered_only_when_it_is_used():
    plain = BatchSpec(global_batch_size=8, micro_batch_size=1, world_size=8)
    assert "context_parallel_size" not in render(plain, nanotron).text
    cp = BatchSpec(global_batch_size=8, micro_batch_size=1, world_size=16, context_parallel_size=2)
    parallelism = yaml.safe_load(render(cp, nanotron).text)["parallelism"]
    assert parallelism["context_parallel_size"] == 2 and parallelism["dp"] == 8


def test_update_to_a_new_world_keeps_every_other_byte():
    path = FIXTURES / "valid" / "tiny_llama_04.yaml"
    before = path.read_text()
    result = run("update", path, "--world-size", 16, "-o", "-")
    assert result.exit_code == 0, result.output
    after = result.stdout
    assert after == before.replace("  dp: 2\n", "  dp: 4\n").replace(
        "batch_accumulation_per_replica: 2", "batch_accumulation_per_replica: 1"
    )
    assert inspect_text(after)["global_batch_size"] == 16


def inspect_text(text: str) -> dict:
    result = run("inspect", "-", "--framework", "nanotron", "--json", stdin=text)
    return json.loads(result.stdout)


def test_update_cannot_add_context_parallel_to_a_file_without_it():
    result = run("update", FIXTURES / "valid" / "batch_blocks.yaml", "--cp", 2, "--world-size", 16)
    assert result.exit_code == 1
    assert "parallelism.context_parallel_size is not in the file; add it by hand" in result.output


def test_convert_from_deepspeed_keeps_the_batch(tmp_path):
    ds = write(tmp_path, '{"train_batch_size": 64, "train_micro_batch_size_per_gpu": 2}', "ds.json")
    result = run("convert", ds, "--to", "nanotron", "--world-size", 8, "--out", "-")
    assert result.exit_code == 0, result.output
    data = yaml.safe_load(result.stdout)
    assert data["parallelism"]["dp"] == 8
    assert (
        data["tokens"]["micro_batch_size"] * data["tokens"]["batch_accumulation_per_replica"] == 8
    )


def test_a_batch_key_set_twice_with_two_values_is_an_error(tmp_path):
    text = blocks().replace(
        "  micro_batch_size: 2\n", "  micro_batch_size: 2\n  micro_batch_size: 4\n"
    )
    result = run("inspect", write(tmp_path, text), "--json")
    assert result.exit_code == 1
    found = codes(json.loads(result.stdout))["yaml-duplicate-batch-key"]
    assert "tokens.micro_batch_size is set twice" in found["message"]
    assert json.loads(result.stdout)["micro_batch_size"] == 4  # SafeLoader keeps the last


def test_a_misspelt_size_in_the_parallelism_block_is_named(tmp_path):
    text = blocks().replace("  tp: 1\n", "  tp: 1\n  ddp: 2\n")
    found = codes(inspected(write(tmp_path, text)))["batch-key-typo"]
    assert "'parallelism.ddp'" in found["message"] and "'parallelism.dp'" in found["message"]
    assert "nanotron's strict loading refuses" in found["message"]


def test_update_of_a_context_parallel_file_changes_dp_and_keeps_the_rest():
    path = FIXTURES / "valid" / "long_context_cp.yaml"
    before = path.read_text()
    result = run("update", path, "--world-size", 128, "-o", "-")
    assert result.exit_code == 0, result.output
    assert result.stdout == before.replace("  dp: 8\n", "  dp: 16\n").replace(
        "batch_accumulation_per_replica: 4", "batch_accumulation_per_replica: 2"
    )
