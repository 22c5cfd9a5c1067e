"""The Axolotl smoke engine runs the real ``axolotl train`` on a rendered YAML and counts what
Axolotl's trainer fed per optimizer step."""

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("axolotl")

from test_named_model import TINY, folder_with  # noqa: E402

from translator.frameworks import FRAMEWORKS  # noqa: E402
from translator.rank.result import merge, read_all  # noqa: E402
from translator.render import render  # noqa: E402
from translator.spec import BatchSpec  # noqa: E402

pytestmark = pytest.mark.framework


def test_axolotl_runs_two_optimizer_steps_of_the_rendered_global_batch(tmp_path):
    """``smoke`` on the rendered YAML: two steps of 4 samples, counted as Axolotl's trainer
    stepped; ``--expect-global 8`` makes the same run fail, naming both numbers (one run: each
    costs about a minute here). The model is the tiny Llama's config.json, which Axolotl builds
    itself with ``reinit_weights`` (156,480 parameters, as its trainer's model counts them)."""
    spec = BatchSpec(global_batch_size=4, micro_batch_size=2, world_size=1, sequence_length=64)
    assert spec.gradient_accumulation_steps == 2
    (tmp_path / "axolotl.yaml").write_text(render(spec, FRAMEWORKS["axolotl"]).text)
    work = tmp_path / "w"
    done = subprocess.run(
        [sys.executable, "-m", "translator", "smoke", str(tmp_path / "axolotl.yaml")]
        + ["--framework", "axolotl", "--nproc-per-node", "1", "--steps", "2", "--device", "cpu"]
        + ["--expect-global", "8", "--workdir", str(work), "--json"]
        + ["--model-config", str(folder_with(tmp_path, "tiny-llama", TINY))],
        env=dict(os.environ, HF_HUB_OFFLINE="1", AXOLOTL_DO_NOT_TRACK="1"),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 1, done.stderr[-3000:]
    assert "axolotl consumed 4 samples per optimizer step, not the 8 expected" in done.stderr
    assert json.loads(done.stdout)["samples_per_optimizer_step"] == [4, 4]

    out = work / "results"
    results = read_all(out)
    assert [r.error for r in results] == [None]
    measured = merge(results)
    assert measured.optimizer_steps == 2
    assert measured.samples_per_optimizer_step == [4, 4]
    assert measured.device == "cpu" and measured.peak_memory_bytes > 0
    assert results[0].parameters == 156_480 and results[0].sequence_length == 64
    assert "reinit_weights: true" in (out / "axolotl" / "axolotl-smoke.yaml").read_text()
    assert all(t > 0 for t in results[0].step_times)

    # Axolotl's own account agrees: its trainer's global_step, and its running token count
    # (4 samples padded to 64 tokens per step).
    report = json.loads((out / "axolotl" / "axolotl-steps.json").read_text())
    assert report["global_step"] == 2
    assert [s["axolotl_tokens_total"] for s in report["steps"]] == [256, 512]
    assert "micro_batch_size: 2" in (out / "axolotl" / "axolotl-smoke.yaml").read_text()


def test_packed_rows_split_back_into_the_samples_axolotls_collator_packed(tmp_path):
    """Axolotl's own multipack collator packs five samples into two rows and pads them; the
    engine's count finds exactly those five (the padding, a run of positions with nothing
    predicted, is no sample)."""
    import torch
    from axolotl.utils.collators.batching import V2BatchSamplerDataCollatorForSeq2Seq
    from transformers import AutoTokenizer

    from translator.frameworks.axolotl.engine import fed_samples
    from translator.frameworks.axolotl.verdict import make_tiny_model

    tokenizer = AutoTokenizer.from_pretrained(make_tiny_model(tmp_path))
    lengths = [[9, 14, 5], [20, 7]]
    features, token = [], 10
    for bin_ in lengths:
        features.append([])
        for n in bin_:
            ids = list(range(token, token + n))
            token += n
            features[-1].append(
                {
                    "input_ids": ids,
                    "attention_mask": [1] * n,
                    "labels": [-100] * 2 + ids[2:],  # the prompt is not predicted
                    "position_ids": list(range(n)),
                }
            )
    collate = V2BatchSamplerDataCollatorForSeq2Seq(
        tokenizer, padding=True, pad_to_multiple_of=64, return_tensors="pt"
    )
    batch = collate(features)
    assert batch["input_ids"].shape == (2, 64)
    samples = fed_samples(dict(batch), packed=True)
    expected = [torch.tensor(f["input_ids"]) for bin_ in features for f in bin_]
    assert len(samples) == 5 and all(map(torch.equal, samples, expected))
    # Unpacked, each row is one sample, whatever it holds.
    assert len(fed_samples(dict(batch), packed=False)) == 2
