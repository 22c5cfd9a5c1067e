"""One DeepSpeed AutoTP job, one answer, whichever of its files is read: the LLaMA-Factory launch,
its YAML, the DeepSpeed JSON that YAML names, an HF Trainer launch and that JSON as the Trainer
fills it all say tensor parallel 2, data parallel 4 and 16 samples per optimizer step (micro 4 ×
accumulation 1 × 4) on 8 ranks, while train_batch_size is written as 32 (every rank).

The answer is the frameworks' own: transformers' Trainer, accelerate's data loader and
DeepSpeed's groups and config check, run on 8 ranks of a fake process group
(``tests/frameworks/hf/autotp_ranks.py``), and transformers' and DeepSpeed's batch arithmetic called directly.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from paths import ROOT, TESTS
from run_batchspec import inspected, run

from translator.frameworks import FRAMEWORKS
from translator.inspection import inspect_file
from translator.reading import Launch

LLAMAFACTORY = ROOT / "fixtures" / "llamafactory" / "jobs"
HF = ROOT / "fixtures" / "hf" / "jobs"
#: The one answer: TP, DP, samples per optimizer step, micro, accumulation, world.
ANSWER = {
    "tensor_parallel_size": 2,
    "data_parallel_size": 4,
    "global_batch_size": 16,
    "micro_batch_size": 4,
    "gradient_accumulation_steps": 1,
    "world_size": 8,
}


@pytest.mark.parametrize(
    "path, args",
    [
        (LLAMAFACTORY / "autotp_torchrun.sh", ()),
        (LLAMAFACTORY / "qwen3_sft_autotp.yaml", ("--world-size", "8")),
        (LLAMAFACTORY / "qwen3_sft_autotp.yaml", ("--nnodes", "1", "--nproc-per-node", "8")),
        (HF / "torchrun_autotp.sh", ()),
        (HF / "ds_autotp_filled.json", ("--world-size", "8")),
    ],
    ids=lambda v: v.name if isinstance(v, Path) else " ".join(v),
)
def test_every_file_of_the_job_gives_one_answer(path, args):
    out = inspected(path, *args, exits=(0,))
    assert {k: out[k] for k in ANSWER} == ANSWER


def test_the_json_alone_knows_the_layout_and_what_its_auto_batch_will_mean():
    """Its batch keys are "auto": the layout is known, the batch is the Trainer's to fill, and
    the fill is named as twice the samples per step."""
    out = inspected(LLAMAFACTORY / "ds_z2_autotp.json", "--world-size", "8", exits=(0,))
    assert (out["tensor_parallel_size"], out["data_parallel_size"]) == (2, 4)
    assert out["global_batch_size"] is None
    (tbs,) = [
        f
        for f in out["findings"]
        if f["code"] == "hf-auto" and "train_batch_size is" in f["message"]
    ]
    assert "train_batch_size / 2" in tbs["message"]


def test_a_trainingarguments_yaml_naming_the_json_counts_alike(tmp_path):
    (tmp_path / "ds.json").write_text((LLAMAFACTORY / "ds_z2_autotp.json").read_text())
    path = tmp_path / "args.yaml"
    path.write_text(
        "per_device_train_batch_size: 4\ngradient_accumulation_steps: 1\ndeepspeed: ds.json\n"
    )
    found = inspect_file(str(path), launch=Launch(world_size=8))
    assert {k: getattr(found.spec, k) for k in ANSWER} == ANSWER
    assert not [f for f in found.findings if f.severity == "error"]  # not "parallel elsewhere"
    (note,) = [f for f in found.findings if f.code == "hf-deepspeed-autotp"]
    assert "4 data-parallel ranks × 4 × 1 = 16 samples" in note.message
    assert "train_batch_size = 8 × 4 × 1 = 32" in note.message


def test_an_autotp_size_that_is_not_a_count_leaves_the_layout_unknown(tmp_path):
    config = json.loads((LLAMAFACTORY / "ds_z2_autotp.json").read_text())
    config["tensor_parallel"]["autotp_size"] = "2"
    (tmp_path / "ds.json").write_text(json.dumps(config))
    path = tmp_path / "args.yaml"
    path.write_text("per_device_train_batch_size: 4\ndeepspeed: ds.json\n")
    found = inspect_file(str(path), launch=Launch(world_size=8))
    assert found.spec is None and "data_parallel_size" not in found.values
    assert "invalid-value" in {f.code for f in found.findings}


def test_what_batchspec_renders_for_the_answer_reads_back_as_it(tmp_path):
    """The DeepSpeed JSON writes train_batch_size over every rank (32); the TrainingArguments
    carry AutoTP in an inline DeepSpeed config whose "auto" keys the Trainer fills."""
    from translator.render import render
    from translator.spec import BatchSpec

    given = ("global_batch_size", "micro_batch_size", "world_size", "tensor_parallel_size")
    spec = BatchSpec(**{k: ANSWER[k] for k in given}, deepspeed_autotp=True)
    ds = json.loads(render(spec, FRAMEWORKS["deepspeed"]).text)
    assert ds["train_batch_size"] == 32 and ds["tensor_parallel"] == {"autotp_size": 2}
    hf = render(spec, FRAMEWORKS["hf"])
    assert not [f for f in hf.findings if f.severity == "error"]
    path = tmp_path / "hf.yaml"
    path.write_text(hf.text)
    found = inspect_file(str(path), launch=Launch(world_size=8))
    assert {k: getattr(found.spec, k) for k in ANSWER} == ANSWER


# The frameworks' own code -------------------------------------------------------------------


@pytest.mark.framework
def test_deepspeed_checks_train_batch_size_against_every_rank():
    """``DeepSpeedConfig`` without an mpu (the Trainer passes none) counts all 8 ranks: the
    Trainer's 32 passes, the samples per step (16) would not."""
    pytest.importorskip("deepspeed")
    from translator.frameworks.deepspeed.verdict import resolve

    filled = json.loads((HF / "ds_autotp_filled.json").read_text())
    assert resolve(filled, 8)["train_batch_size"] == 32
    with pytest.raises(AssertionError, match=r"16 != 4 \* 1 \* 8"):
        resolve(filled | {"train_batch_size": 16}, 8)


@pytest.mark.framework
def test_the_trainer_fills_every_process_and_counts_the_data_parallel_ones():
    """``HfTrainerDeepSpeedConfig`` fills train_batch_size with all 8 processes (32);
    ``Trainer.get_total_train_batch_size`` divides by the AutoTP size (16)."""
    pytest.importorskip("transformers")
    from transformers import HfArgumentParser, TrainingArguments

    from translator.frameworks.shared.hf_verdict import deepspeed_mismatch, total_train_batch_size

    config = json.loads((LLAMAFACTORY / "ds_z2_autotp.json").read_text())
    (args,) = HfArgumentParser(TrainingArguments).parse_dict(  # type: ignore[arg-type]
        {"per_device_train_batch_size": 4, "use_cpu": True, "report_to": "none"}
    )
    filled = deepspeed_mismatch(config, args, world=8)
    assert filled["train_batch_size"] == 32
    assert total_train_batch_size(args, filled, 8) == 16
    assert total_train_batch_size(args, None, 8) == 32  # without AutoTP: every process


@pytest.mark.framework
def test_transformers_loads_the_rendered_trainingarguments_as_autotp(tmp_path):
    pytest.importorskip("transformers")
    from transformers import HfArgumentParser, TrainingArguments

    from translator.frameworks.shared.hf_verdict import deepspeed_mismatch, total_train_batch_size
    from translator.render import render
    from translator.spec import BatchSpec

    given = ("global_batch_size", "micro_batch_size", "world_size", "tensor_parallel_size")
    spec = BatchSpec(**{k: ANSWER[k] for k in given}, deepspeed_autotp=True, zero_stage=2)
    path = tmp_path / "hf.yaml"
    path.write_text(render(spec, FRAMEWORKS["hf"]).text)
    parser = HfArgumentParser(TrainingArguments)  # type: ignore[arg-type]
    (args,) = parser.parse_yaml_file(str(path))
    filled = deepspeed_mismatch(args.deepspeed, args, world=8)
    assert filled["tensor_parallel"] == {"autotp_size": 2}
    assert filled["zero_optimization"] == {"stage": 2}
    assert filled["train_batch_size"] == 32
    assert total_train_batch_size(args, filled, 8) == spec.global_batch_size


@pytest.mark.framework
def test_the_trainer_gives_each_tensor_parallel_group_one_batch():
    """The real Trainer, accelerate and DeepSpeed on 8 ranks of a fake process group: the ranks
    DeepSpeed puts in one tensor-parallel group draw the same micro-batches, the 4 groups draw
    disjoint ones, so a step takes 4 × 4 × 1 = 16 distinct samples, which is batchspec's global
    batch for the same files, while train_batch_size is 32 and DeepSpeed counts 8 ranks."""
    pytest.importorskip("deepspeed")
    pytest.importorskip("accelerate")
    ds = LLAMAFACTORY / "ds_z2_autotp.json"
    run = subprocess.run(
        [
            sys.executable,
            str(TESTS / "frameworks" / "hf" / "autotp_ranks.py"),
            "8",
            str(ds),
            "4",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    ranks = [json.loads(line) for line in run.stdout.splitlines()]
    assert [r["rank"] for r in ranks] == list(range(8))
    by_group: dict[tuple, list] = {}
    for r in ranks:
        by_group.setdefault(tuple(r["tensor_parallel_group"]), []).append(r["batches"])
    assert all(len(g) == 2 and g[0] == g[1] for g in by_group.values())  # TP ranks share
    first_steps = [g[0][0] for g in by_group.values()]  # micro-batch 1 of each group
    samples = [s for batch in first_steps for s in batch]
    assert len(samples) == len(set(samples))  # the groups' batches are disjoint
    ours = inspected(LLAMAFACTORY / "qwen3_sft_autotp.yaml", "--world-size", "8", exits=(0,))
    assert len(samples) == ours["global_batch_size"] == 16  # accumulation 1: one micro-batch
    assert {r["data_parallel_size"] for r in ranks} == {ours["data_parallel_size"]}
    assert {r["trainer_total_train_batch_size"] for r in ranks} == {16}
    assert {r["filled_train_batch_size"] for r in ranks} == {32}
    assert {(r["deepspeed_world_size"], r["deepspeed_train_batch_size"]) for r in ranks} == {
        (8, 32)
    }


def test_the_fixtures_say_the_same():
    """The expectations written beside the fixtures agree with the one answer."""
    for folder, names in (
        (LLAMAFACTORY, ("autotp_torchrun.sh", "qwen3_sft_autotp.yaml")),
        (HF, ("torchrun_autotp.sh", "ds_autotp_filled.json")),
    ):
        expected = yaml.safe_load((folder / "expected.yaml").read_text())
        for name in names:
            assert {k: expected[name][k] for k in ANSWER} == ANSWER, name


@pytest.mark.framework
def test_validate_with_the_framework_says_the_trainers_total():
    pytest.importorskip("transformers")
    result = run("validate", HF / "torchrun_autotp.sh", "--with-framework", "--json")
    assert result.exit_code == 0, result.output
    (verdict,) = [
        f
        for f in json.loads(result.stdout)["files"][0]["findings"]
        if f["code"].startswith("framework-")
    ]
    assert verdict["code"] == "framework-accepts"
    assert "total train batch size at world 8: 16" in verdict["message"]
