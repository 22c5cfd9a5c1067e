"""What the commands print: one-line errors for bad input, how much is printed (--quiet, --min-severity, --strict), nothing that contradicts the input, and the frameworks' own printing kept off our output."""

import importlib.abc
import importlib.util
import json
import subprocess
import sys

import pytest
from test_cli import run

# bad input: one line naming the file (and line), the right exit code, nothing written ----------

BAD_SPECS = [
    ("empty.yaml", b"", 2, "empty.yaml: empty file"),
    ("blank.yaml", b"  \n\n", 2, "blank.yaml: empty file"),
    ("binary.yaml", b"\x00\x01\x02global", 2, "binary.yaml: binary file"),
    ("latin1.yaml", b"global_batch_size: 64\n# caf\xe9\n", 2, "latin1.yaml:2: not UTF-8"),
    ("tab.yaml", b"global_batch_size: 64\n\tworld_size: 8\n", 2, "tab.yaml:2: not valid YAML"),
    (
        "indent.yaml",
        b"global_batch_size: 64\n  world_size: 8\n",
        2,
        "indent.yaml:2: not valid YAML",
    ),
    ("list.yaml", b"- 1\n- 2\n", 2, "list.yaml: expected a mapping"),
    ("scalar.yaml", b"64\n", 2, "list.yaml: expected a mapping".replace("list", "scalar")),
    (
        "python.yaml",
        b"global_batch_size: !!python/object:os.system echo\n",
        2,
        "python.yaml:1: not valid YAML",
    ),
    (
        "bomb.yaml",
        b"a: &a [1,1,1,1,1,1,1,1,1]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
        b"c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
        b"e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n"
        b"global_batch_size: *f\n",
        2,
        "bomb.yaml:5: aliases expand to more than 10000 nodes",
    ),
    (
        "string.yaml",
        b"global_batch_size: '64'\nworld_size: 8\n",
        2,
        "string.yaml:1: global_batch_size is the text '64', not a number: write 64",
    ),
    (
        "float.yaml",
        b"global_batch_size: 64.0\nworld_size: 8\n",
        2,
        "float.yaml:1: global_batch_size: Input should be a valid integer",
    ),
    (
        "bool.yaml",
        b"global_batch_size: 64\nworld_size: true\n",
        2,
        "bool.yaml:2: world_size: Input should be a valid integer",
    ),
    (
        "nan.yaml",
        b"global_batch_size: 64\nworld_size: 8\nlearning_rate: .nan\n",
        2,
        "nan.yaml:3: learning_rate:",
    ),
    (
        "negative.yaml",
        b"global_batch_size: -64\nworld_size: 8\n",
        2,
        "negative.yaml:1: global_batch_size: Input should be greater than or equal to 1",
    ),
    (
        "zero.yaml",
        b"global_batch_size: 64\nmicro_batch_size: 0\nworld_size: 8\n",
        2,
        "zero.yaml:2: micro_batch_size: Input should be greater than or equal to 1",
    ),
    (
        "huge.yaml",
        b"global_batch_size: 1" + b"0" * 60 + b"\nworld_size: 8\n",
        2,
        "huge.yaml:1: global_batch_size: Input should be less than or equal to",
    ),
    (
        "typo.yaml",
        b"global_batch_size: 64\nmicro_bach_size: 2\nworld_size: 8\n",
        2,
        "typo.yaml:2: unknown key 'micro_bach_size' (did you mean 'micro_batch_size'?)",
    ),
    (
        "both.yaml",
        b"global_batch_size: 64\neffective_batch_size: 64\nworld_size: 8\n",
        2,
        "both.yaml: give global_batch_size or its alias effective_batch_size, not both",
    ),
    ("bad.json", b'{"global_batch_size": 64,\n "world_size": }', 2, "bad.json:2: not valid JSON"),
    ("short.yaml", b"global_batch_size: 64\n", 2, "not enough to solve"),
    (
        "wrong.yaml",
        b"global_batch_size: 100\nmicro_batch_size: 4\nworld_size: 8\n",
        1,
        "nearest are 96 (accumulation 3) and 128 (accumulation 4)",
    ),
    (
        "world.yaml",
        b"global_batch_size: 64\nworld_size: 12\ntensor_parallel_size: 8\n",
        1,
        "world size 12 does not divide by tensor 8",
    ),
    (
        "longline.yaml",
        b"global_batch_size: 64\nworld_size: 8\nnote: '" + b"x" * 3_000_000 + b"'\n",
        2,
        "longline.yaml:3: unknown key 'note'",
    ),
    (
        "toobig.yaml",
        b"global_batch_size: 64\n# " + b"x" * 5_000_000 + b"\n",
        2,
        "toobig.yaml: larger than 4 MiB; not a batch config",
    ),
]


@pytest.mark.parametrize("name, content, code, message", BAD_SPECS, ids=[b[0] for b in BAD_SPECS])
@pytest.mark.parametrize("command", ["plan", "render"])
def test_bad_spec_files(tmp_path, name, content, code, message, command):
    path = tmp_path / name
    path.write_bytes(content)
    args = [command, path] + (
        ["--to", "deepspeed,megatron", "--out", tmp_path / "out"] if command == "render" else []
    )
    result = run(*args)
    assert result.exit_code == code, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("batchspec: error: ")
    assert message in lines[0]
    if "not enough" not in message and code == 2:
        assert str(path) in lines[0]
    assert "Traceback" not in result.output and result.stdout == ""
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "path, message",
    [
        ("missing.yaml", "missing.yaml: cannot read: No such file or directory"),
        (".", ": is a directory, not a file"),
        ("file.yaml/spec.yaml", "spec.yaml: cannot read: Not a directory"),
    ],
)
def test_unreadable_paths(tmp_path, path, message):
    (tmp_path / "file.yaml").write_text("global_batch_size: 64\n")
    result = run("plan", tmp_path / path)
    assert result.exit_code == 2 and message in result.stderr


def test_debug_shows_the_traceback():
    result = run("plan", "--global-batch", 100, "--micro-batch", 4, "--world-size", 8, "--debug")
    assert result.exit_code == 1 and type(result.exception).__name__ == "ConfigError"


def test_python_m_translator_and_the_console_script_agree():
    args = ["plan", "--global-batch", "128", "--micro-batch", "4", "--world-size", "16", "--json"]
    out = subprocess.run(
        [sys.executable, "-m", "translator", *args], capture_output=True, text=True, check=True
    )
    assert json.loads(out.stdout)["gradient_accumulation_steps"] == 2


# how much is printed: --quiet, --min-severity, --strict, an info once ----------------------------

SOUND_DS = '{"train_batch_size": 64, "train_micro_batch_size_per_gpu": 2}\n'  # world unknown
AUTO_DS = '{"train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto"}\n'
TYPO = "base_model: x\nmicro_batch_size: 2\ngradient_acumulation_steps: 4\n"
HF_ARGS = "per_device_train_batch_size: 4\ngradient_accumulation_steps: 2\noutput_dir: out\n"
ACCELERATE = "distributed_type: MULTI_GPU\nnum_machines: 1\nnum_processes: 4\n"


@pytest.fixture
def configs(tmp_path, monkeypatch):
    """A sound DeepSpeed JSON (a warning: no world size), a misspelt Axolotl key (an error)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ds.json").write_text(SOUND_DS)
    (tmp_path / "sft.yml").write_text(TYPO)
    return ["ds.json", "sft.yml"]


def test_validate_prints_everything_by_default(configs):
    result = run("validate", *configs)
    assert result.exit_code == 1
    assert "ds.json (deepspeed): ok" in result.stdout
    assert "warning: world-unknown [ds.json]" in result.stdout
    assert "error: batch-key-typo [sft.yml:3]" in result.stdout


def test_quiet_prints_the_errors_only(configs):
    result = run("validate", *configs, "--quiet")
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [
        "sft.yml (axolotl): 1 error(s)",
        "error: batch-key-typo [sft.yml:3]: 'gradient_acumulation_steps' is not a key the "
        "framework reads, so it is silently ignored; it looks like a misspelt "
        "'gradient_accumulation_steps'",
        "  fix: rename 'gradient_acumulation_steps' to 'gradient_accumulation_steps'",
    ]
    assert run("validate", "ds.json", "-q").stdout == ""  # a file that is ok: not a word


def test_min_severity_leaves_out_what_is_below_it(configs, tmp_path):
    (tmp_path / "zero3.json").write_text(AUTO_DS)
    everything = run("validate", "zero3.json", "--world-size", 8).stdout
    assert "info: hf-auto" in everything
    warnings = run("validate", "zero3.json", "ds.json", "--min-severity", "warning")
    assert "info:" not in warnings.stdout and "warning: world-unknown [ds.json]" in warnings.stdout
    assert "ds.json (deepspeed): ok" in warnings.stdout  # only --quiet drops the file lines
    errors = run("inspect", *configs, "--min-severity", "error")
    assert "warning:" not in errors.stdout and "error: batch-key-typo" in errors.stdout
    assert "global batch size" in errors.stdout  # inspect's tables stay


def test_min_severity_and_quiet_apply_to_every_command_that_prints_findings():
    args = ["plan", "--global-batch", 256, "--micro-batch", 2, "--world-size", 8]
    args += ["--lr", 3e-4, "--lr-batch", 128]
    assert "warning: lr-scaling" in run(*args).stdout
    quiet = run(*args, "--quiet")
    assert quiet.exit_code == 0 and "lr-scaling" not in quiet.stdout
    assert "global batch size" in quiet.stdout
    as_json = json.loads(run(*args, "--quiet", "--json").stdout)  # JSON keeps every finding
    assert [f["code"] for f in as_json["findings"]] == ["lr-scaling"]


def test_quiet_and_min_severity_together_are_refused(configs):
    result = run("validate", *configs, "--quiet", "--min-severity", "info")
    assert result.exit_code == 2
    assert result.stderr == "batchspec: error: give --quiet or --min-severity, not both\n"


def test_strict_makes_every_warning_an_error(configs):
    assert run("validate", "ds.json").exit_code == 0
    strict = run("validate", "ds.json", "--strict")
    assert strict.exit_code == 1
    assert "ds.json (deepspeed): 1 error(s)" in strict.stdout
    assert "error: world-unknown [ds.json]" in strict.stdout
    out = json.loads(run("validate", "ds.json", "--strict", "--json").stdout)
    assert [(f["code"], f["severity"]) for f in out["files"][0]["findings"]] == [
        ("world-unknown", "error")
    ]
    assert run("validate", "ds.json", "--strict", "--world-size", 8).exit_code == 0


def test_an_info_said_of_several_files_is_printed_once(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    names = ["a.json", "b.json", "c.json"]
    for name in names:
        (tmp_path / name).write_text(AUTO_DS)
    result = run("validate", *names, "--world-size", 8)
    assert result.exit_code == 0
    lines = [line for line in result.stdout.splitlines() if line.startswith("info: hf-auto")]
    assert len(lines) == 2  # one per "auto" key, each once for the three files
    assert all(line.startswith("info: hf-auto (3 files): ") for line in lines)
    assert [line for line in result.stdout.splitlines() if line.endswith(": ok")] == [
        f"{name} (deepspeed): ok" for name in names
    ]
    out = json.loads(run("validate", *names, "--world-size", 8, "--json").stdout)
    assert all(len(f["findings"]) == 2 for f in out["files"])  # JSON: each file its own


# no info that contradicts the input ------------------------------------------------------------


def test_the_dataparallel_note_only_when_nothing_gives_the_world(tmp_path):
    args = tmp_path / "args.yaml"
    args.write_text(HF_ARGS)
    alone = json.loads(run("inspect", args, "--json").stdout)
    assert "hf-dataparallel" in {f["code"] for f in alone["findings"]}
    given = json.loads(run("inspect", args, "--world-size", 8, "--json").stdout)
    assert "hf-dataparallel" not in {f["code"] for f in given["findings"]}
    (tmp_path / "acc.yaml").write_text(ACCELERATE)
    together = json.loads(run("inspect", tmp_path / "acc.yaml", args, "--json").stdout)
    hf = next(f for f in together["files"] if f["framework"] == "hf")
    assert hf["world_size"] == 4 and "hf-dataparallel" not in {f["code"] for f in hf["findings"]}


def test_an_accelerate_config_read_with_its_training_file_names_it(tmp_path):
    (tmp_path / "acc.yaml").write_text(ACCELERATE)
    (tmp_path / "args.yaml").write_text(HF_ARGS)
    alone = json.loads(run("inspect", tmp_path / "acc.yaml", "--json").stdout)
    assert [(f["code"], f["hint"]) for f in alone["findings"]] == [
        ("accelerate-batch-elsewhere", "inspect the two files together")
    ]  # and no world-unknown: the file says num_processes 4
    assert alone["world_size"] == 4
    together = json.loads(
        run("inspect", tmp_path / "acc.yaml", tmp_path / "args.yaml", "--json").stdout
    )
    acc = next(f for f in together["files"] if f["framework"] == "accelerate")
    (elsewhere,) = acc["findings"]
    assert elsewhere["hint"] is None
    assert elsewhere["message"].endswith(f"the per-device batch is in {tmp_path / 'args.yaml'}")


# the frameworks' own printing stays off our output ---------------------------------------------

CHATTER = r"""
import logging, os, sys, warnings
from translator.words.chatter import framework_output

held = logging.StreamHandler(sys.stderr)  # made before: it holds the real stderr
logging.getLogger("held").addHandler(held)
print("ours before", flush=True)
with framework_output(shown=SHOWN):
    print("chatter: print")
    print("chatter: stderr", file=sys.stderr)
    os.write(1, b"chatter: fd 1\n")
    os.write(2, b"chatter: fd 2\n")
    logging.getLogger("held").warning("chatter: a handler made before")
    late = logging.StreamHandler(sys.stderr)  # made now: holds what stderr is now
    logging.getLogger("late").addHandler(late)
    logging.getLogger("late").warning("chatter: a handler made now")
    warnings.warn("chatter: a warning")
logging.getLogger("late").warning("chatter: later, through the handler made then")
print("ours after")
"""


def chatter(shown: bool) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", CHATTER.replace("SHOWN", str(shown))],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_what_a_framework_prints_is_kept_off_our_output():
    quiet = chatter(False)
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stdout == "ours before\nours after\n" and quiet.stderr == ""


def test_with_debug_what_a_framework_prints_goes_to_stderr():
    shown = chatter(True)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == "ours before\nours after\n"  # stdout belongs to --json alone
    for line in ("print", "stderr", "fd 1", "fd 2", "a handler made before", "a handler made now"):
        assert f"chatter: {line}" in shown.stderr


@pytest.mark.framework
@pytest.mark.skipif(
    importlib.util.find_spec("axolotl") is None, reason="needs axolotl (the axolotl extra)"
)
def test_axolotls_import_chatter_is_silent_unless_debug(tmp_path):
    """Axolotl's validator imports torchao, deepspeed and transformers, which print warnings and
    a progress bar (``Writing model shards``) while batchspec asks it."""
    config = tmp_path / "sft.yml"
    config.write_text("base_model: x\nmicro_batch_size: 2\ngradient_accumulation_steps: 4\n")

    def validate(*extra):
        return subprocess.run(
            [sys.executable, "-m", "translator", "validate", str(config), "--world-size", "2"]
            + ["--with-framework", *extra],
            capture_output=True,
            text=True,
            timeout=600,
        )

    quiet = validate()
    assert quiet.returncode == 0, quiet.stderr
    assert "info: framework-accepts" in quiet.stdout and "batch_size 16" in quiet.stdout
    assert quiet.stderr == ""
    debug = validate("--debug", "--json")
    assert debug.returncode == 0
    assert json.loads(debug.stdout)["files"][0]["findings"][-1]["code"] == "framework-accepts"
    assert debug.stderr.strip()  # the chatter was there to silence


def test_an_error_in_a_shared_deepspeed_json_is_printed_whole_once(tmp_path, monkeypatch):
    """Two Axolotl configs name one DeepSpeed JSON with a duplicate key: its error is said in
    full once (under the JSON), and under each config that reads it as one line."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "ds.json").write_text(
        '{\n  "train_micro_batch_size_per_gpu": 2,\n  "gradient_accumulation_steps": 4,\n'
        '  "gradient_accumulation_steps": 2\n}\n'
    )
    for name in ("sft.yml", "dpo.yml"):
        (tmp_path / name).write_text(
            "base_model: m\nmicro_batch_size: 2\ngradient_accumulation_steps: 2\n"
            "deepspeed: ds.json\n"
        )
    args = ["validate", "--skip-other-files", "--quiet", "--world-size", "8"]
    result = run(*args, "ds.json", "sft.yml", "dpo.yml")
    assert result.exit_code == 1
    assert result.stdout.count("is set twice") == 1
    assert result.stdout.count("error: duplicate-key") == 3
    assert result.stdout.count(": as above\n") == 2
