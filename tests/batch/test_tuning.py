"""The search of tune on known landscapes (tokens/s and a memory edge against micro-batch): it
stays within its budget, keeps G exact, and finds the fast micro-batch. The real engine's probes
are tested in test_tune.py."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from translator.batch.tuning import Candidate, Probe, budget, divisors, search

#: Tokens/s against micro-batch, the shapes seen in practice: rising to a plateau, a plateau
#: that sags near the memory edge, and (pipelines) a peak at a small micro-batch.
LANDSCAPES = {
    "saturating": lambda b: b / (b + 4),
    "plateau-sag": lambda b: min(b, 8) - 0.01 * b,
    "peak-at-4": lambda b: 1 / (1 + abs(math.log2(b / 4))),
}


def prober(edge: float, speed, calls: list):
    def probe(c: Candidate) -> Probe:
        calls.append(c)
        b = c.micro_batch_size
        if b > edge:
            return Probe(c, out_of_memory=True)
        return Probe(c, [c.micro_batch_size * c.gradient_accumulation_steps], speed(b))

    return probe


@settings(max_examples=300, deadline=None)
@given(
    per_rank=st.sampled_from([1, 12, 16, 64, 96, 128, 360, 720]),
    edge=st.sampled_from([0.5, 1, 3, 16, 50, 10_000]),
    landscape=st.sampled_from(list(LANDSCAPES)),
    estimate=st.sampled_from(["none", "right", "optimistic", "pessimistic"]),
)
def test_never_over_budget_and_every_candidate_keeps_g(per_rank, edge, landscape, estimate):
    fits = {
        "none": lambda c: None,
        "right": lambda c: c.micro_batch_size <= edge,
        "optimistic": lambda c: c.micro_batch_size <= 4 * edge,
        "pessimistic": lambda c: c.micro_batch_size <= max(1, edge // 4),
    }[estimate]
    calls: list = []
    found = search(per_rank, [(False, None)], fits, prober(edge, LANDSCAPES[landscape], calls))
    assert len(calls) <= budget(len(divisors(per_rank)))
    assert len(set(calls)) == len(calls)  # no candidate probed twice
    assert all(c.micro_batch_size * c.gradient_accumulation_steps == per_rank for c in calls)
    if edge < 1:
        assert found.pick is None and "not even micro-batch 1" in found.reason
    else:
        assert found.pick is not None and not found.pick.out_of_memory
        assert found.pick.candidate.micro_batch_size <= edge


@pytest.mark.parametrize("landscape", ["saturating", "plateau-sag"])
@pytest.mark.parametrize("per_rank", [16, 64, 96, 128, 360, 720])
@pytest.mark.parametrize("edge", [3, 16, 50, 10_000])
def test_with_a_right_estimate_the_pick_is_within_3_percent_of_the_best(landscape, per_rank, edge):
    speed = LANDSCAPES[landscape]
    found = search(
        per_rank, [(False, None)], lambda c: c.micro_batch_size <= edge, prober(edge, speed, [])
    )
    best = max(speed(b) for b in divisors(per_rank) if b <= edge)
    assert speed(found.pick.candidate.micro_batch_size) >= 0.97 * best


def test_a_peak_far_below_the_edge_is_found_when_the_budget_allows():
    speed = LANDSCAPES["peak-at-4"]
    found = search(64, [(False, None)], lambda c: None, prober(10_000, speed, []))
    assert found.pick.candidate.micro_batch_size == 4


def test_a_later_variant_is_probed_only_when_micro_batch_1_does_not_fit_the_first():
    """Recompute (or a higher ZeRO stage) only enters when nothing fits without it."""
    calls: list = []

    def probe(c):
        calls.append(c)
        fits = c.micro_batch_size <= (8 if c.recompute else 0)
        return Probe(c, [16], 1.0 + c.micro_batch_size if fits else None, out_of_memory=not fits)

    found = search(16, [(False, None), (True, None)], lambda c: None, probe)
    assert found.pick.candidate.recompute and 4 <= found.pick.candidate.micro_batch_size <= 8
    assert [c.micro_batch_size for c in calls if not c.recompute] == [16, 1]

    calls.clear()
    found = search(
        16,
        [(False, None), (True, None)],
        lambda c: None,
        prober(16, LANDSCAPES["saturating"], calls),
    )
    assert not any(c.recompute for c in calls)


def test_budget_is_ceil_log2_d_plus_2():
    assert [budget(len(divisors(n))) for n in (1, 2, 16, 64, 128, 360)] == [2, 3, 5, 5, 5, 7]


def test_a_probe_at_the_memory_edge_stops_the_search_upward():
    """Micro-batch 8 runs, but its allocator had to free its cache and retry: larger ones are
    not probed, although they would fit by the estimate, and the reason names the edge."""
    calls: list = []

    def probe(c):
        calls.append(c)
        b = c.micro_batch_size
        return Probe(c, [64], float(b), at_memory_edge=b >= 8, out_of_memory=b > 16)

    found = search(64, [(False, None)], lambda c: c.micro_batch_size <= 8, probe)
    assert max(c.micro_batch_size for c in calls) == 8
    assert found.pick.candidate.micro_batch_size == 8
    assert "8 ran with allocator retries, at the memory edge" in found.reason

    calls.clear()  # the same landscape without retries climbs past 8
    search(64, [(False, None)], lambda c: c.micro_batch_size <= 8, prober(16, float, calls))
    assert max(c.micro_batch_size for c in calls) > 8


def test_only_the_micro_batches_given_are_searched_each_with_the_accumulation_of_per_rank():
    """A tune on fewer ranks than the job (issue 35: 5): only the micro-batches that keep the
    job's global batch on both worlds are candidates (``sizes``), each with the job's own
    accumulation (``per_rank`` is the job's samples per rank), the budget theirs."""
    calls: list = []
    found = search(
        8, [(False, None)], lambda c: None, prober(10_000, float, calls), sizes=[1, 2, 4]
    )
    assert {c.micro_batch_size for c in calls} <= {1, 2, 4}
    assert all(c.micro_batch_size * c.gradient_accumulation_steps == 8 for c in calls)
    assert len(calls) <= budget(3) and found.pick.candidate == Candidate(4, 2)
