import math

import pytest
from run_batchspec import code_list, run

from translator.checks.advice import general_findings, scaled_beta2, scaled_learning_rate
from translator.spec import BatchSpec


def test_square_root_rule_for_adam_with_beta2():
    spec = BatchSpec(
        global_batch_size=512,
        micro_batch_size=4,
        world_size=8,
        learning_rate=3e-4,
        reference_global_batch_size=128,
        adam_beta2=0.95,
    )
    (f,) = general_findings(spec)
    assert f.code == "lr-scaling" and f.severity == "warning"
    assert "4× the reference batch 128" in f.message
    assert (
        "0.0003 → 0.0006 (square-root rule" in f.hint and "linear rule would give 0.0012" in f.hint
    )
    assert f"beta2 0.95 → {0.95**4:.6g}" in f.hint


def test_linear_rule_for_sgd():
    spec = BatchSpec(
        global_batch_size=64,
        micro_batch_size=4,
        world_size=8,
        learning_rate=0.1,
        reference_global_batch_size=256,
        optimizer="sgd",
    )
    (f,) = general_findings(spec)
    assert "0.1 → 0.025 (linear rule for SGD" in f.hint


def test_no_advice_when_the_batch_is_the_reference():
    spec = BatchSpec(
        global_batch_size=64, world_size=8, learning_rate=0.1, reference_global_batch_size=64
    )
    assert code_list(general_findings(spec)) == []


def test_scaling_helpers():
    assert scaled_learning_rate(1.0, 4, "adam") == 2.0
    assert scaled_learning_rate(1.0, 4, "sgd") == 4.0
    assert math.isclose(scaled_beta2(0.999, 0.5), 0.999**0.5)


@pytest.mark.parametrize(
    "seq, expected", [(1000, []), (1023, ["alignment"]), (2048, []), (None, [])]
)
def test_alignment_advice_only_for_unaligned_sequence_lengths(seq, expected):
    spec = BatchSpec(global_batch_size=64, world_size=8, sequence_length=seq)
    assert code_list(general_findings(spec)) == expected


def test_alignment_names_aligned_neighbours_and_no_invented_figures():
    spec = BatchSpec(global_batch_size=64, world_size=8, sequence_length=1023)
    (f,) = general_findings(spec)
    assert "960, 1016, 1024" in f.hint and "%" not in f.message + f.hint


def test_experts_must_divide_by_expert_parallel():
    spec = BatchSpec(global_batch_size=64, world_size=8, num_experts=6, expert_parallel_size=4)
    (f,) = general_findings(spec)
    # 3 and 6 divide the experts but not the world of 8: the expert grid would refuse them.
    assert f.code == "experts-not-divisible" and "expert-parallel size of 1, 2:" in f.hint


def test_expert_grid_must_fit_the_world():
    spec = BatchSpec(
        global_batch_size=60, world_size=12, tensor_parallel_size=2, expert_parallel_size=8
    )
    assert code_list(general_findings(spec)) == ["expert-grid"]


def test_a_learning_rate_factor_near_one_is_never_shown_as_one(tmp_path):
    """Global 1000 on 16 ranks of micro-batch 1: 1008 needs √1.008 ≈ 1.004 for Adam, which
    three figures printed as "× 1" (an unchanged rate) before."""
    from translator.checks.advice import factor

    config = tmp_path / "ds.json"
    config.write_text(
        '{"train_batch_size": 1000, "train_micro_batch_size_per_gpu": 1, '
        '"gradient_accumulation_steps": 125}'
    )
    result = run("update", config, "--world-size", "16", "--micro-batch", "1")
    assert result.exit_code == 1
    assert "global 1008 (accumulation 63) needs the learning rate × 1.004 for Adam" in (
        result.stderr
    )
    assert "× 1 " not in result.stderr
    assert (factor(1.0), factor(0.996), factor(1.00001)) == ("1", "0.996", "1.00001")
