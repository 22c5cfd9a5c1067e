"""Hostile YAML and JSON, bad flags, control characters and closed pipes through the real CLI:
one line or a finding, never a traceback, never an internal error, never a value expanded."""

import json
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from paths import ROOT
from run_batchspec import run

from translator.cli.output import printable


def bomb(levels: int, leaf: str = '"x"') -> str:
    """A "billion laughs": each level holds nine aliases of the one before."""
    lines = [f"l0: &l0 [{', '.join([leaf] * 9)}]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


BOMB = bomb(9)
LONG_STRING_BOMB = f'a: &a "{"x" * 5000}"\nb: [' + ", ".join(["*a"] * 3000) + "]\n"

#: (name, content, exit code, what the one stderr line holds) for input that cannot be used.
UNUSABLE = [
    ("bomb.yml", BOMB + "micro_batch_size: *l8\n", "bomb.yml:5: aliases expand to more than"),
    ("bomb-value.yml", BOMB + "micro_batch_size: 2\n", "bomb-value.yml:5: aliases expand"),
    (
        "bomb-inline.yml",
        "micro_batch_size: 2\n"
        + BOMB.replace("l0:", "x0:", 1).replace("\nl", "\n  l").replace("x0:", "deepspeed:\n  l0:"),
        "bomb-inline.yml:",
    ),
    ("long-string-bomb.yml", LONG_STRING_BOMB, "long-string-bomb.yml:2: aliases expand"),
    (
        "merge-bomb.yml",
        bomb(6, "1").replace("[", "{k: [", 1).replace("]\n", "]}\n", 1) + "m: {<<: *l0, x: *l5}\n",
        "merge-bomb.yml:",
    ),
    ("recursive.yml", "micro_batch_size: &a [*a]\n", "recursive.yml:1: alias *a refers to itself"),
    (
        "recursive-map.yml",
        "deepspeed: &d {train_batch_size: 8, again: *d}\n",
        "recursive-map.yml:1: alias *d refers to itself",
    ),
    ("bad-int.yml", "micro_batch_size: !!int 'abc'\n", "bad-int.yml:1: not valid YAML"),
    ("bad-float.yml", "micro_batch_size: !!float 'abc'\n", "bad-float.yml:1: not valid YAML"),
    ("bad-bool.yml", "micro_batch_size: !!bool 'abc'\n", "bad-bool.yml:1: not valid YAML"),
    ("bad-date.yml", "micro_batch_size: 2024-13-45\n", "bad-date.yml:1: not valid YAML"),
    (
        "bad-timestamp.yml",
        "micro_batch_size: !!timestamp 'abc'\n",
        "bad-timestamp.yml:1: not valid YAML",
    ),
    ("empty-int.yml", "micro_batch_size: !!int ''\n", "empty-int.yml:1: not valid YAML"),
    ("bad-str.yml", "micro_batch_size: !!str [a]\n", "bad-str.yml:1: not valid YAML"),
    (
        "python.yml",
        "micro_batch_size: !!python/object:os.system x\n",
        "python.yml:1: not valid YAML",
    ),
    (
        "python-apply.yml",
        "micro_batch_size: !!python/object/apply:os.system ['true']\n",
        "python-apply.yml:1: not valid YAML",
    ),
    (
        "long-int.yml",
        "micro_batch_size: " + "9" * 5000 + "\n",
        "long-int.yml:1: not valid YAML: an integer of 5000 characters",
    ),
    (
        "long-hex.yml",
        "micro_batch_size: 0x" + "f" * 5000 + "\n",
        "long-hex.yml:1: not valid YAML: an integer of",
    ),
    (
        "sexagesimal.yml",
        "micro_batch_size: 1" + ":59" * 100_000 + "\n",
        "sexagesimal.yml:1: not valid YAML: an integer of",
    ),
    ("deep.yml", "micro_batch_size: " + "[" * 3000 + "]" * 3000 + "\n", "deep.yml"),
    (
        "deep-map.yml",
        "a:\n" + "".join("  " * i + "b:\n" for i in range(1, 3000)) + "  " * 3000 + "c: 1\n",
        "deep-map.yml",
    ),
    ("long-int.json", '{"train_batch_size": ' + "9" * 5000 + "}", "long-int.json:1: an integer of"),
    ("deep.json", "[" * 100_000 + "]" * 100_000, "deep.json"),
]


@pytest.mark.parametrize("name, content, message", UNUSABLE, ids=[u[0] for u in UNUSABLE])
@pytest.mark.parametrize("command", ["inspect", "validate"])
def test_unusable_input_is_one_line(tmp_path, name, content, message, command):
    path = tmp_path / name
    path.write_text(content)
    result = run(command, path, "--world-size", 8)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("batchspec: error: "), result.stderr
    assert str(path) in lines[0] and message in lines[0]
    assert len(lines[0]) < 300 + len(str(path)), "no value is expanded in a message"
    assert "Traceback" not in result.output and "internal error" not in result.output


#: (name, content, code, finding code, text the finding shows) for wrong values read as findings.
WRONG_VALUES = [
    ("date.yml", "micro_batch_size: 2024-01-01\n", "invalid-value", "datetime.date(2024, 1, 1)"),
    ("binary.yml", "micro_batch_size: !!binary aGVsbG8=\n", "invalid-value", "b'hello'"),
    ("set.yml", "micro_batch_size: !!set {a: null}\n", "invalid-value", "{'a'}"),
    ("inf.yml", "micro_batch_size: .inf\n", "invalid-value", "inf (float)"),
    ("nan.yml", "micro_batch_size: .nan\n", "invalid-value", "nan (float)"),
    ("overflow.yml", "micro_batch_size: 1.0e+400\n", "invalid-value", "inf (float)"),
    ("big.yml", "micro_batch_size: " + "9" * 900 + "\n", "invalid-value", "999..."),
    ("small-bomb.yml", bomb(3) + "micro_batch_size: *l2\n", "invalid-value", "…"),
    (
        "big.json",
        '{"train_batch_size": ' + "9" * 900 + ', "train_micro_batch_size_per_gpu": 1}',
        "invalid-value",
        "999...",
    ),
    (
        "inf.json",
        '{"train_batch_size": 1e400, "train_micro_batch_size_per_gpu": 1}',
        "invalid-value",
        "inf (float)",
    ),
    (
        "nan.json",
        '{"train_batch_size": NaN, "train_micro_batch_size_per_gpu": 1}',
        "invalid-value",
        "nan (float)",
    ),
    (
        "inline-date.yml",
        "micro_batch_size: 2\ndeepspeed:\n  train_batch_size: 2024-01-01\n",
        "invalid-value",
        '"2024-01-01"',
    ),
]
#: Paths no file system has: a warning (not found), shown escaped and short.
ODD_PATHS = [
    ("nul-path.yml", 'micro_batch_size: 2\ndeepspeed: "a\\0b"\n', "a\\x00b"),
    ("long-path.yml", "micro_batch_size: 2\ndeepspeed: " + "d" * 5000 + "\n", "…"),
]


@pytest.mark.parametrize("name, content, shown", ODD_PATHS, ids=[p[0] for p in ODD_PATHS])
def test_an_odd_deepspeed_path_is_not_found_shown_short(tmp_path, name, content, shown):
    path = tmp_path / name
    path.write_text(content)
    result = run("inspect", path, "--world-size", 8, "--json")
    assert result.exit_code == 0, result.output
    (found,) = [f for f in json.loads(result.stdout)["findings"] if f["code"] == "missing-file"]
    named = printable(found["message"].split(" is not found")[0])
    assert shown in named and len(named) < 200


@pytest.mark.parametrize(
    "name, content, code, shown", WRONG_VALUES, ids=[w[0] for w in WRONG_VALUES]
)
def test_wrong_values_are_findings(tmp_path, name, content, code, shown):
    path = tmp_path / name
    path.write_text(content)
    result = run("inspect", path, "--world-size", 8)
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output and "internal error" not in result.output
    line = next(line for line in result.stdout.splitlines() if line.startswith(f"error: {code}"))
    assert shown in line and len(line) < 400
    out = json.loads(run("inspect", path, "--world-size", 8, "--json").stdout)
    assert code in [f["code"] for f in out["findings"]]


def test_a_bomb_is_refused_in_bounded_time_and_memory(tmp_path):
    """A twelve-level bomb (9**12 leaves) in a subprocess capped at 1.5 GB of address space."""
    path = tmp_path / "bomb.yml"
    path.write_text(bomb(12) + "micro_batch_size: *l11\n")
    spec = tmp_path / "spec.yaml"
    spec.write_text(bomb(12) + "global_batch_size: *l11\n")

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (1536 << 20, 1536 << 20))

    for args in (["inspect", path], ["plan", spec]):
        done = subprocess.run(
            [sys.executable, "-m", "translator", *map(str, args)],
            capture_output=True,
            text=True,
            timeout=20,
            preexec_fn=cap,
            cwd=ROOT,
        )
        assert done.returncode == 2, done.stderr
        (line,) = done.stderr.strip().splitlines()
        assert line.startswith("batchspec: error: ") and "aliases expand" in line


# Lone surrogates -------------------------------------------------------------------------------

#: (name, content, refused line, extra flags) of configs whose escapes give a lone surrogate.
SURROGATE_CONFIGS = [
    ("ds-key.json", '{"train_batch_size": 32,\n "\\ud800": 1}\n', 2, []),
    (
        "ds-value.json",
        '{"train_batch_size": 32,\n "train_micro_batch_size_per_gpu": 4,\n'
        ' "optimizer": {"type": "Adam\\udfff"}}\n',
        3,
        [],
    ),
    (
        "hf-key.json",
        '{"per_device_train_batch_size": 4,\n "\\udc00x": "out"}\n',
        2,
        ["--framework", "hf"],
    ),
    (
        "hf-value.json",
        '{"per_device_train_batch_size": 4,\n "output_dir": "\\ud800"}\n',
        2,
        ["--framework", "hf"],
    ),
    ("hf.yaml", 'per_device_train_batch_size: 4\nrun_name: "\\ud800"\n', 2, []),
    ("axolotl-key.yml", 'micro_batch_size: 2\n"\\ud800": 1\n', 2, []),
    ("axolotl-value.yml", 'micro_batch_size: 2\nbase_model: "a\\U0000dfffb"\n', 2, []),
    ("axolotl-pair.yml", 'micro_batch_size: 2\nbase_model: "\\ud83d\\ude00"\n', 2, []),
    ("axolotl-binary.yml", 'micro_batch_size: 2\nx: !!binary "\\ud800"\n', 2, []),
    (
        "accelerate.yaml",
        'compute_environment: LOCAL_MACHINE\nnum_processes: 8\nmain_process_ip: "\\ud800"\n',
        3,
        [],
    ),
]

#: The config commands, each with ``{file}`` and ``{out}`` to fill in after splitting.
CONFIG_COMMANDS = {
    "inspect": "inspect {file} --world-size 8",
    "inspect --json": "inspect {file} --world-size 8 --json",
    "validate": "validate {file} --world-size 8",
    "convert": "convert {file} --to deepspeed,megatron --out {out} --world-size 8",
    "update -o": "update {file} --world-size 16 --from-world-size 8 -o {out}",
    "update --in-place": "update {file} --world-size 16 --in-place",
}


def refused_with_one_line(result, path: Path, line: int) -> None:
    """Exit 2 with one error line naming ``path:line`` and the surrogate by its escape."""
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and "internal error" not in result.output
    (error,) = result.stderr.strip().splitlines()
    assert error.startswith(f"batchspec: error: {path}:{line}: a string escapes \\u"), error
    assert "surrogate" in error


@pytest.mark.parametrize(
    "name, content, line, flags", SURROGATE_CONFIGS, ids=[c[0] for c in SURROGATE_CONFIGS]
)
@pytest.mark.parametrize("command", list(CONFIG_COMMANDS))
def test_a_lone_surrogate_in_a_config_is_exit_2_and_writes_nothing(
    tmp_path, name, content, line, flags, command
):
    path = tmp_path / name
    path.write_text(content)
    out = tmp_path / "out"
    args = [a.format(file=path, out=out) for a in CONFIG_COMMANDS[command].split()]
    result = run(*args, *flags)
    refused_with_one_line(result, path, line)
    if "--json" in args:
        assert json.loads(result.stdout)["exit_code"] == 2
    assert sorted(tmp_path.iterdir()) == [path] and path.read_text() == content


#: (name, content, refused line) of spec files whose escapes give a lone surrogate.
SURROGATE_SPECS = [
    ("key.json", '{"global_batch_size": 32,\n "world_size": 8,\n "\\ud800": 1}\n', 3),
    ("value.json", '{"global_batch_size": "\\udbff",\n "world_size": 8}\n', 1),
    ("key.yaml", 'global_batch_size: 32\nworld_size: 8\n"\\ud800": 1\n', 3),
    ("value.yaml", 'global_batch_size: 32\nworld_size: "8\\ud800"\n', 2),
]


@pytest.mark.parametrize(
    "name, content, line", SURROGATE_SPECS, ids=[s[0] for s in SURROGATE_SPECS]
)
@pytest.mark.parametrize("command", ["plan", "plan --json", "render"])
def test_a_lone_surrogate_in_a_spec_file_is_exit_2_and_writes_nothing(
    tmp_path, name, content, line, command
):
    path = tmp_path / name
    path.write_text(content)
    extra = {"plan": "", "plan --json": "--json", "render": "--to deepspeed,axolotl --out {out}"}
    result = run(command.split()[0], path, *extra[command].format(out=tmp_path / "out").split())
    refused_with_one_line(result, path, line)
    assert sorted(tmp_path.iterdir()) == [path]


def test_a_lone_surrogate_in_the_deepspeed_json_a_yaml_names_is_exit_2_naming_it(tmp_path):
    (tmp_path / "ds.json").write_text('{"train_batch_size": "auto",\n "\\ud800": 1}\n')
    path = tmp_path / "ax.yml"
    path.write_text("micro_batch_size: 2\ndeepspeed: ds.json\n")
    refused_with_one_line(run("inspect", path, "--world-size", 8), tmp_path / "ds.json", 2)


def test_a_surrogate_pair_in_json_is_its_character(tmp_path):
    """JSON joins an escaped pair into one character (and an escaped backslash is no escape)."""
    path = tmp_path / "ds.json"
    path.write_text(
        '{"train_batch_size": 32, "train_micro_batch_size_per_gpu": 4,\n'
        ' "optimizer": {"type": "\\ud83d\\ude00", "name": "\\\\ud800"}}\n'
    )
    result = run("inspect", path, "--world-size", 8, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["global_batch_size"] == 32


# Duplicate keys and nulls --------------------------------------------------------------------

DUPLICATES = [
    ("micro_batch_size: 2\nmicro_batch_size: 4\n", 1, "yaml-duplicate-batch-key", "lines 1 and 2"),
    ("micro_batch_size: 2\nmicro_batch_size: 2\n", 0, "yaml-duplicate-key", "lines 1 and 2"),
    (
        "micro_batch_size: 2\nbase_model: a\nbase_model: b\n",
        0,
        "yaml-duplicate-key",
        "lines 2 and 3",
    ),
    (
        "micro_batch_size: 2\ndeepspeed:\n  train_batch_size: 16\n  train_batch_size: 32\n",
        1,
        "yaml-duplicate-batch-key",
        "deepspeed.train_batch_size is set twice (lines 3 and 4)",
    ),
]


@pytest.mark.parametrize("content, code, finding, text", DUPLICATES)
def test_duplicate_keys_in_axolotl_yaml_are_findings(tmp_path, content, code, finding, text):
    path = tmp_path / "ax.yml"
    path.write_text(content)
    result = run("inspect", path, "--world-size", 8, "--json")
    assert result.exit_code == code
    (dup,) = [f for f in json.loads(result.stdout)["findings"] if f["code"] == finding]
    assert text in dup["message"] and "yaml.safe_load" in dup["message"]
    assert dup["where"] == f"{path}:{text.split('and ')[1][0]}"


def test_duplicate_keys_in_deepspeed_json_name_both_lines(tmp_path):
    path = tmp_path / "ds.json"
    path.write_text(
        '{"train_batch_size": 16,\n "zero_optimization": {"stage": 1,\n "stage": 2},\n'
        ' "train_batch_size": 16}\n'
    )
    out = json.loads(run("inspect", path, "--world-size", 8, "--json").stdout)
    messages = sorted(f["message"] for f in out["findings"] if f["code"] == "duplicate-key")
    assert messages == [
        '"train_batch_size" is set twice (lines 1 and 4); DeepSpeed refuses duplicate keys',
        '"zero_optimization.stage" is set twice (lines 2 and 3); DeepSpeed refuses duplicate keys',
    ]


@pytest.mark.parametrize(
    "name, content, message",
    [
        (
            "spec.yaml",
            "global_batch_size: 64\nworld_size: 8\nglobal_batch_size: 128\n",
            'spec.yaml:3: "global_batch_size" is given twice (lines 1 and 3); keep one',
        ),
        (
            "spec.json",
            '{"global_batch_size": 64,\n"world_size": 8,\n"world_size": 16}',
            'spec.json:3: "world_size" is given twice (lines 2 and 3); keep one',
        ),
        (
            "date.yaml",
            "global_batch_size: 2024-01-01\nworld_size: 8\n",
            "date.yaml:1: global_batch_size",
        ),
        (
            "recursive.yaml",
            "global_batch_size: &a [*a]\n",
            "recursive.yaml:1: alias *a refers to itself",
        ),
        (
            "long.yaml",
            "global_batch_size: " + "1" * 2000 + "\n",
            "long.yaml:1: not valid YAML: an integer of 2000",
        ),
        ("inf.yaml", "global_batch_size: .inf\nworld_size: 8\n", "inf.yaml:1: global_batch_size"),
        (
            "control.yaml",
            'world_size: 8\n"bad\\nkey\\e]0;x\\a": 1\n',
            "unknown key 'bad\\nkey\\x1b]0;x\\x07'",
        ),
    ],
)
def test_bad_spec_files_are_exit_2(tmp_path, name, content, message):
    path = tmp_path / name
    path.write_text(content)
    result = run("plan", path)
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("batchspec: error: ") and message in line, line


@pytest.mark.parametrize(
    "content, code, finding, text",
    [
        (
            "micro_batch_size: null\ngradient_accumulation_steps: 2\n",
            1,
            "axolotl-null-batch",
            "micro_batch_size is null",
        ),
        (
            "micro_batch_size: 2\ngradient_accumulation_steps: ~\n",
            1,
            "axolotl-null-batch",
            "gradient_accumulation_steps is null",
        ),
        (
            "micro_batch_size: 2\ngradient_accumulation_steps: null\nbatch_size: 16\n",
            0,
            "axolotl-accumulation-from-batch-size",
            "16 // 2 = 8",
        ),
    ],
)
def test_null_batch_values_are_never_read_as_one(tmp_path, content, code, finding, text):
    path = tmp_path / "ax.yml"
    path.write_text(content)
    result = run("inspect", path, "--world-size", 8, "--json")
    assert result.exit_code == code, result.output
    out = json.loads(result.stdout)
    assert any(f["code"] == finding and text in f["message"] for f in out["findings"])
    if code:
        assert out["global_batch_size"] is None
    else:
        assert (out["gradient_accumulation_steps"], out["global_batch_size"]) == (8, 128)


# Terminal output ---------------------------------------------------------------------------


def test_control_characters_are_escaped_in_human_output(tmp_path):
    path = tmp_path / "ax.yml"
    path.write_text('micro_batch_size: "2\\nerror: forged\\e]0;title\\a\\u2028"\n')
    result = run("inspect", path, "--world-size", 8)
    assert "\x1b" not in result.output and "\x07" not in result.output
    assert "\u2028" not in result.output
    assert not any(line.startswith("error: forged") for line in result.output.splitlines())
    assert '"2\\nerror: forged\\x1b]0;title\\x07\\u2028"' in result.stdout
    data = json.loads(run("inspect", path, "--world-size", 8, "--json").stdout)
    assert "2\nerror: forged\x1b]0;title\x07" in data["findings"][0]["message"]


def test_control_characters_are_escaped_in_error_lines(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text("world_size: 8\n")
    result = run("plan", path, "--framework\x1b[31m", "x")
    (line,) = result.stderr.strip().splitlines()
    assert "\x1b" not in result.stderr and "\\x1b[31m" in line


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["inspect", "--bogus", "f.json"],
            "No such option '--bogus'. (see batchspec inspect --help)",
        ),
        (["inspect"], "Missing argument 'FILE...'. (see batchspec inspect --help)"),
        (["inspect", "f.json", "--framework", "nope"], "'nope' is not one of"),
        (["plan", "--global-batch", "abc"], "Invalid value for '--global-batch'"),
        (["plan", "--global-batch", "0"], "0 is not in the range x>=1"),
        (["render", "s.yaml"], "Missing option '--to'"),
        (["nosuch"], "No such command 'nosuch'. (see batchspec --help)"),
        (["--bogus"], "No such option '--bogus'. (see batchspec --help)"),
    ],
)
def test_usage_errors_are_one_line(args, message):
    result = run(*args)
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("batchspec: error: ") and message in line, line
    assert result.stdout == ""


def test_usage_errors_with_json_print_the_error_object():
    result = run("plan", "--global-batch", "abc", "--json")
    assert result.exit_code == 2
    out = json.loads(result.stdout)
    assert out["exit_code"] == 2 and "--global-batch" in out["error"] and out["findings"] == []


def test_help_and_version_still_work():
    assert run("--help").exit_code == 0 and "inspect" in run("--help").stdout
    assert run("inspect", "--help").exit_code == 0
    assert run("--version").exit_code == 0


# Broken pipes --------------------------------------------------------------------------------


def test_a_closed_pipe_before_output_is_quiet():
    proc = subprocess.Popen(
        [sys.executable, "-m", "translator", "schema"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) in (0, 1, 141)
    assert "Traceback" not in err and "internal error" not in err and "Exception" not in err


def test_a_pipe_closed_after_a_few_bytes_is_quiet(tmp_path):
    files = []
    for i in range(300):
        files.append(tmp_path / f"ds{i}.json")
        files[-1].write_text('{"train_batch_size": 64, "train_micro_batch_size_per_gpu": 2}')
    for human in (False, True):
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "translator",
                "inspect",
                *map(str, files),
                "--world-size",
                "8",
                *([] if human else ["--json"]),
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert proc.stdout.read(10)
        proc.stdout.close()
        err = proc.stderr.read().decode()
        assert proc.wait(timeout=60) in (0, 1, 141)
        assert "Traceback" not in err and "internal error" not in err and "Exception" not in err
