"""What a rank writes into results/ never goes through a symlink planted there (issue 37): its
report and its parity record replace a link at their own name, and refuse one at the name of
the temporary file they write first."""

import pytest

from translator.rank import parity_rank
from translator.rank.result import RankResult
from translator.words.errors import InputError

REPORT = RankResult(0, 1, 0, True, [8], [0.1], sequence_length=32, finished=True)


@pytest.fixture
def victim(tmp_path):
    path = tmp_path / "home" / ".bashrc"
    path.parent.mkdir()
    path.write_text("export PATH=/usr/bin\n")
    return path


def test_a_report_replaces_a_link_at_its_name(tmp_path, victim):
    (tmp_path / "rank-0.json").symlink_to(victim)
    REPORT.write(tmp_path)
    assert not (tmp_path / "rank-0.json").is_symlink()
    assert RankResult.read(tmp_path / "rank-0.json") == REPORT
    assert victim.read_text() == "export PATH=/usr/bin\n"


def test_a_report_refuses_a_link_at_its_temporary_name(tmp_path, victim):
    (tmp_path / "rank-0.tmp").symlink_to(victim)
    with pytest.raises(InputError, match="rank-0.tmp: is a symlink"):
        REPORT.write(tmp_path)
    assert victim.read_text() == "export PATH=/usr/bin\n"
    assert not (tmp_path / "rank-0.json").exists()


def test_a_parity_record_refuses_a_link_at_its_temporary_name(tmp_path, victim):
    pytest.importorskip("torch")
    (tmp_path / "parity-rank-0.tmp").symlink_to(victim)
    with pytest.raises(InputError, match="parity-rank-0.tmp: is a symlink"):
        parity_rank.write(tmp_path, 0, 1.5, None, [])
    assert victim.read_text() == "export PATH=/usr/bin\n"


def test_a_parity_record_is_written_whole(tmp_path):
    torch = pytest.importorskip("torch")
    parity_rank.write(tmp_path, 0, 1.5, None, [])
    assert torch.load(tmp_path / "parity-rank-0.pt") == {"loss": 1.5}
    assert not (tmp_path / "parity-rank-0.tmp").exists()
