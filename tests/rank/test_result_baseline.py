"""What a CPU rank held before it built the model (its baseline) travels with its peak: the
peak is the whole process's resident memory, the estimate the model's alone (issue 35: 11)."""

from translator.rank.result import RankResult, merge


def report(rank: int, peak: int, baseline: int) -> RankResult:
    return RankResult(
        rank, 2, rank, True, [4], [0.1], peak_memory_bytes=peak, baseline_memory_bytes=baseline
    )


def test_the_measurement_keeps_the_baseline_of_the_rank_with_the_peak():
    merged = merge([report(0, 400, 250), report(1, 420, 230)], 2)
    assert (merged.peak_memory_bytes, merged.baseline_memory_bytes) == (420, 230)


def test_a_report_reads_back_its_baseline(tmp_path):
    report(0, 400, 250).write(tmp_path)
    assert RankResult.read(tmp_path / "rank-0.json").baseline_memory_bytes == 250
