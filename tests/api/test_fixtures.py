"""Every fixture reads as its hand-computed expectation (fixtures/<backend>/<kind>/expected.yaml)."""

import json

import pytest
import yaml
from click.testing import CliRunner
from paths import ROOT

from translator.cli import main

FIXTURES = ROOT / "fixtures"
KEYS = (
    "global_batch_size",
    "micro_batch_size",
    "gradient_accumulation_steps",
    "data_parallel_size",
    "world_size",
    "tensor_parallel_size",
    "pipeline_parallel_size",
    "context_parallel_size",
)


def cases():
    for expected in sorted(FIXTURES.glob("*/*/expected.yaml")):
        for name, want in yaml.safe_load(expected.read_text()).items():
            yield pytest.param(
                expected.parent / name,
                want,
                id=f"{expected.parent.parent.name}/{expected.parent.name}/{name}",
            )


@pytest.mark.parametrize("path, want", list(cases()))
def test_fixture_reads_as_expected(path, want):
    result = CliRunner().invoke(main, ["inspect", str(path), *want.get("args", []), "--json"])
    assert result.exit_code == want["exit"], result.output
    out = json.loads(result.stdout)
    for key in KEYS:
        if key in want:
            assert out[key] == want[key], key
    if "parameters" in want:  # the model the job names, counted
        assert out["model"]["parameters"] == want["parameters"], out["model"]
    if "model_unknown" in want:  # why it is unknown
        assert out["model"]["parameters"] is None and want["model_unknown"] in out["model"]["why"]
    codes = {f["code"] for f in out["findings"]}
    assert set(want.get("codes", [])) <= codes, codes
    assert not set(want.get("absent", [])) & codes, codes
    if want["exit"] == 1:
        assert any(
            f["severity"] == "error" and f["where"] and f["where"].startswith(str(path.parent))
            for f in out["findings"]
        )


def test_every_fixture_has_an_expectation():
    listed = {
        p.parent / n
        for p in FIXTURES.glob("*/*/expected.yaml")
        for n in yaml.safe_load(p.read_text())
    }
    files = {p for p in FIXTURES.glob("*/*/*") if p.name != "expected.yaml"}
    assert files == listed
    assert {p.parent.name for p in listed} <= {"valid", "invalid", "jobs"}
