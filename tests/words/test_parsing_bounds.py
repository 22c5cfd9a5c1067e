"""How deep and how often a text is parsed (issue 37: 2 and 8). Nesting is bounded with one line
naming the file: a DeepSpeed key 500 lists deep was a RecursionError in the copy each reader
gets, and YAML's compact nested sequences (``- - - x``) crashed the process in libyaml's
composer. A job definition's YAML is composed once per text, and refused as any YAML is (an
alias bomb), where it was composed three times by PyYAML's own composer, with no alias budget."""

import gc
import subprocess
import sys

import pytest
from paths import ROOT
from run_batchspec import run

from translator.words import parsing
from translator.words.errors import InputError


def test_json_nested_past_the_bound_is_one_line_naming_the_file(tmp_path):
    config = tmp_path / "ds_config.json"
    config.write_text('{"train_micro_batch_size_per_gpu": 2, "x": ' + "[" * 500 + "]" * 500 + "}")
    result = run("inspect", config)
    assert result.exit_code == 2, result.output
    assert result.output.strip() == f"batchspec: error: {config}: nested too deeply"


def test_json_as_deep_as_the_bound_is_read_and_one_deeper_is_not():
    deep = '{"x": ' + "[" * (parsing.MAX_DEPTH - 1) + "]" * (parsing.MAX_DEPTH - 1) + "}"
    assert "x" in parsing.load_json(deep, "deep.json").data
    with pytest.raises(InputError, match="nested too deeply"):
        parsing.load_json("[" + deep + "]", "deeper.json")


@pytest.mark.parametrize("indicator", ["- ", "? "])
def test_compact_nested_collections_are_refused_not_a_crash(indicator):
    """Run apart: before the bound, libyaml's composer overflowed the C stack (SIGSEGV)."""
    code = (
        "from translator.words import parsing\n"
        "from translator.words.errors import InputError\n"
        f"text = {indicator!r} * 100_000 + 'x\\n'\n"
        "for read in (parsing.load_yaml, parsing.compose_yaml):\n"
        "    try:\n"
        "        read(text, 'job.yaml')\n"
        "    except InputError as exc:\n"
        "        print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["job.yaml: nested too deeply"] * 2


def test_a_text_is_composed_once_and_each_document_kept(monkeypatch):
    made = []
    loader = parsing._loader
    monkeypatch.setattr(parsing, "_loader", lambda text: made.append(text) or loader(text))
    parsing.clear_cache()
    text = "kind: A\n---\nkind: B\n"
    first = parsing.compose_yaml(text, "x.yaml")
    again = parsing.compose_yaml(text, "x.yaml")
    assert [d.value[0][1].value for d in first] == ["A", "B"] and again is first
    assert len(made) == 1


def test_composing_refuses_an_alias_bomb():
    levels = [f"l0: &l0 [{', '.join(['x'] * 9)}]"]
    levels += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, 9)]
    with pytest.raises(InputError, match="aliases expand to more than"):
        parsing.compose_yaml("\n".join(levels) + "\n", "bomb.yaml")


def test_the_collector_paused_while_composing_runs_again_after_a_refusal():
    assert gc.isenabled()
    with pytest.raises(InputError, match="not valid YAML"):
        parsing.compose_yaml("a: [b\n", "broken.yaml")
    assert gc.isenabled()
    gc.disable()
    try:
        parsing.compose_yaml("a: b\n", "fine.yaml")
        assert not gc.isenabled()  # left as it was found
    finally:
        gc.enable()
