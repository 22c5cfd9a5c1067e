"""A work folder a cloned repository cannot aim (issue 37): a symlink planted where smoke or tune
writes (the work folder, a folder above it, results/, a file) is refused naming it, exit 2, with
nothing written, removed or run."""

import os

import pytest
from run_batchspec import run
from smoking import SPEC

pytestmark = pytest.mark.framework


@pytest.fixture
def repo(tmp_path, monkeypatch):
    """A cloned repository as the current folder (holding the spec), and a folder outside it
    that its links aim at, holding a file of the user's."""
    clone, outside = tmp_path / "clone", tmp_path / "home"
    clone.mkdir()
    outside.mkdir()
    (clone / "spec.yaml").write_text(SPEC)
    (outside / ".bashrc").write_text("export PATH=/usr/bin\n")
    monkeypatch.chdir(clone)
    return clone, outside


def smoke(*extra):
    return run("smoke", "spec.yaml", "--nproc", 1, "--steps", 1, "--model", "tiny", *extra)


def refused(result, link) -> None:
    """Exit 2, an error of one line naming ``link``, said last (after the run's plan)."""
    assert result.exit_code == 2, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("batchspec: error")]
    assert len(errors) == 1 and f"{link}: is a symlink" in errors[0], result.stderr
    assert result.stderr.rstrip().endswith(errors[0])


def test_a_file_of_the_work_folder_linked_out_is_not_written_through(repo):
    clone, outside = repo
    work = clone / ".batchspec-smoke" / "torch"
    work.mkdir(parents=True)
    (work / "spec.json").symlink_to(outside / ".bashrc")
    refused(smoke(), work / "spec.json")
    assert (outside / ".bashrc").read_text() == "export PATH=/usr/bin\n"
    assert sorted(p.name for p in work.iterdir()) == ["spec.json"]


def test_results_linked_out_is_neither_emptied_nor_written(repo):
    clone, outside = repo
    work = clone / ".batchspec-smoke" / "torch"
    work.mkdir(parents=True)
    (outside / "rank-0.json").write_text("the user's\n")
    (work / "results").symlink_to(outside)
    refused(smoke(), work / "results")
    assert sorted(p.name for p in outside.iterdir()) == [".bashrc", "rank-0.json"]
    assert (outside / "rank-0.json").read_text() == "the user's\n"
    assert sorted(p.name for p in work.iterdir()) == ["results"]


def test_a_link_anywhere_in_results_is_refused(repo):
    """What the ranks write (``rank-0.tmp``) and what the engines write under results/."""
    clone, outside = repo
    results = clone / ".batchspec-smoke" / "torch" / "results"
    (results / "scratch").mkdir(parents=True)
    (results / "scratch" / "log").symlink_to(outside / ".bashrc")
    refused(smoke(), results / "scratch" / "log")
    assert (outside / ".bashrc").read_text() == "export PATH=/usr/bin\n"


@pytest.mark.parametrize("linked", [".batchspec-smoke", ".batchspec-smoke/torch"])
def test_the_work_folder_or_the_folder_above_it_as_a_link(repo, linked):
    clone, outside = repo
    (clone / linked).parent.mkdir(parents=True, exist_ok=True)
    (clone / linked).symlink_to(outside, target_is_directory=True)
    refused(smoke(), linked)
    assert sorted(p.name for p in outside.iterdir()) == [".bashrc"]


def test_a_workdir_given_as_a_link_is_refused(repo):
    clone, outside = repo
    (clone / "w").symlink_to(outside, target_is_directory=True)
    refused(smoke("--workdir", clone / "w"), clone / "w")
    assert sorted(p.name for p in outside.iterdir()) == [".bashrc"]


def test_tunes_work_folder_as_a_link_is_refused_before_any_probe(repo):
    clone, outside = repo
    (clone / ".batchspec-tune").symlink_to(outside, target_is_directory=True)
    result = run("tune", "spec.yaml", "--nproc", 1, "--steps", 3, "--model", "tiny")
    refused(result, ".batchspec-tune")
    assert sorted(p.name for p in outside.iterdir()) == [".bashrc"]


def test_a_tune_probes_folder_as_a_link_is_refused(repo):
    clone, outside = repo
    work = clone / ".batchspec-tune" / "torch"
    work.mkdir(parents=True)
    for micro in (1, 2, 4, 8):  # whichever the search probes first
        os.symlink(outside, work / f"probe-m{micro}")
    result = run("tune", "spec.yaml", "--nproc", 1, "--steps", 3, "--model", "tiny")
    assert result.exit_code == 2 and "/probe-m" in result.stderr, result.output
    assert "is a symlink" in result.stderr
    assert sorted(p.name for p in outside.iterdir()) == [".bashrc"]


def test_a_fresh_work_folder_still_runs(repo):
    clone, _ = repo
    result = smoke()
    assert result.exit_code == 0, result.output
    assert (clone / ".batchspec-smoke" / "torch" / "results" / "rank-0.json").is_file()
