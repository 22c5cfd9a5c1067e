import pytest
from hypothesis import given
from hypothesis import strategies as st

from translator.batch import solve
from translator.words.errors import ConfigError, InputError

counts = st.integers(1, 10_000)


def test_three_of_four_give_the_fourth():
    assert solve.complete(128, 4, None, 8) == (128, 4, 4, 8)
    assert solve.complete(128, None, 4, 8) == (128, 4, 4, 8)
    assert solve.complete(None, 4, 4, 8) == (128, 4, 4, 8)
    assert solve.complete(128, 4, 4, None) == (128, 4, 4, 8)


def test_all_four_are_checked():
    assert solve.complete(128, 4, 4, 8) == (128, 4, 4, 8)
    with pytest.raises(ConfigError, match=r"global 128 ≠ micro 4 × accumulation 3 × DP 8 = 96"):
        solve.complete(128, 4, 3, 8)


def test_global_that_does_not_split_names_both_neighbours():
    with pytest.raises(ConfigError) as err:
        solve.complete(100, 4, None, 8)
    assert str(err.value).startswith(
        "global 100 does not split into micro 4 × DP 8 = 32: "
        "nearest are 96 (accumulation 3) and 128 (accumulation 4)"
    )
    assert err.value.findings[0].code == "global-not-divisible"


def test_neighbour_below_is_left_out_when_there_is_none():
    with pytest.raises(ConfigError) as err:
        solve.complete(20, 4, None, 8)
    assert "nearest are 32 (accumulation 1) (fix: use global 32," in str(err.value)


@pytest.mark.parametrize(
    "value, unit, near",
    [(100, 32, [96, 128]), (20, 32, [32]), (1023, 64, [960, 1024]), (7, 1 << 40, [1 << 40])],
)
def test_nearest_multiples_below_then_above_and_never_zero(value, unit, near):
    assert solve.nearest_multiples(value, unit) == near


@given(counts, st.integers(2, 500))
def test_nearest_multiples_are_the_closest_on_each_side(value, unit):
    if value % unit == 0:
        return
    near = solve.nearest_multiples(value, unit)
    assert all(v % unit == 0 and v > 0 for v in near) and near[-1] - unit < value < near[-1]
    assert len(near) == (2 if value > unit else 1) and (len(near) == 1 or near[0] > value - unit)


def test_micro_solved_from_accumulation_names_micro_options():
    with pytest.raises(
        ConfigError,
        match=r"accumulation 3 × DP 8 = 24: nearest are 96 \(micro 4\) and 120 \(micro 5\)",
    ):
        solve.complete(100, None, 3, 8)


def test_data_parallel_solved_from_the_other_three():
    with pytest.raises(ConfigError, match=r"nearest are 96 \(DP 8\) and 108 \(DP 9\)"):
        solve.complete(100, 4, 3, None)


def test_too_little_to_solve_is_an_input_error():
    for args in [(128, None, None, None), (None, 4, None, 8), (128, 4, None, None)]:
        with pytest.raises(InputError, match="not enough to solve"):
            solve.complete(*args)


def test_world_must_divide_by_model_parallel_and_names_near_worlds():
    assert solve.data_parallel_size(16, 2, 2, 1) == 4
    with pytest.raises(
        ConfigError,
        match=r"world size 12 does not divide by tensor 8 × pipeline 1 "
        r"× context 1 = 8.*use a world size of 8 or 16",
    ):
        solve.data_parallel_size(12, 8)
    with pytest.raises(ConfigError, match=r"use a world size of 8,"):
        solve.data_parallel_size(6, 8)


def test_decompositions_largest_micro_first():
    assert solve.decompositions(64, 8) == [(8, 1), (4, 2), (2, 4), (1, 8)]
    assert solve.decompositions(12, 1) == [(12, 1), (6, 2), (4, 3), (3, 4), (2, 6), (1, 12)]
    with pytest.raises(ConfigError, match="nearest are 64 .* and 72"):
        solve.decompositions(70, 8)


@given(counts, counts, counts)
def test_completion_satisfies_the_invariant_or_names_valid_neighbours(g, m, dp):
    try:
        g2, m2, a2, dp2 = solve.complete(g, m, None, dp)
    except ConfigError as err:
        assert g % (m * dp)
        lower, upper = g // (m * dp) * m * dp, (g // (m * dp) + 1) * m * dp
        assert f"{upper} (accumulation {upper // (m * dp)})" in str(err)
        if lower:
            assert f"{lower} (accumulation {lower // (m * dp)})" in str(err)
    else:
        assert g2 == m2 * a2 * dp2 and (g2, m2, dp2) == (g, m, dp)


@given(st.integers(1, 5000), st.integers(1, 64))
def test_decompositions_are_exactly_the_divisors(g, dp):
    if g % dp:
        with pytest.raises(ConfigError):
            solve.decompositions(g, dp)
        return
    pairs = solve.decompositions(g, dp)
    assert all(m * a * dp == g for m, a in pairs)
    assert [m for m, _ in pairs] == sorted(
        {m for m in range(1, g // dp + 1) if (g // dp) % m == 0}, reverse=True
    )


@given(st.integers(1, 5000), st.integers(1, 6000))
def test_nearest_divisors_are_the_closest_on_each_side(value, target):
    divisors = [d for d in range(1, value + 1) if value % d == 0]
    below = [d for d in divisors if d < target]
    above = [d for d in divisors if d > target]
    assert solve.nearest_divisors(value, target) == below[-1:] + above[:1]


def test_nearest_divisors_name_only_accepted_ones():
    assert solve.nearest_divisors(100, 8) == [5, 10]
    assert solve.nearest_divisors(100, 8, lambda d: d % 2 == 0) == [4, 10]
    assert solve.nearest_divisors(7, 7) == [1]


def test_a_hint_names_world_sizes_when_the_data_parallel_size_came_from_one():
    with pytest.raises(ConfigError) as err:
        solve.complete(100, 4, None, 8, model_parallel=2)
    assert err.value.findings[0].hint == (
        "use global 96 or 128, or world size 10 or 50; no micro-batch gives global 100 with DP 8"
    )
    with pytest.raises(ConfigError) as err:
        solve.complete(100, 4, None, 8)
    assert "or data-parallel size 5 or 25;" in err.value.findings[0].hint


def test_a_world_hint_keeps_to_worlds_the_batch_splits_on():
    # 60 splits over micro 2 on DP 1, 2, 3, 5, 6, 10, 15, 30: tensor 2 (DP 7) and 1 (DP 14)
    # divide the world but not the batch, so 7 is the only tensor size named.
    with pytest.raises(ConfigError) as err:
        solve.data_parallel_size(14, 4, batch=(60, 2))
    assert err.value.findings[0].hint == "use a world size of 12 or 20, or tensor-parallel size 7"
