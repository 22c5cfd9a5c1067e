import importlib.abc
import importlib.util
import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from translator.cli import main


def run(*args, stdin=None):
    return CliRunner().invoke(main, [str(a) for a in args], input=stdin)


def run_json(*args):
    result = run(*args, "--json")
    return result, json.loads(result.stdout)


# plan ------------------------------------------------------------------------------------------


def test_plan_done_when_example():
    result, out = run_json(
        "plan", "--global-batch", 128, "--micro-batch", 4, "--world-size", 16, "--tp", 2
    )
    assert result.exit_code == 0
    assert out["gradient_accumulation_steps"] == 4 and out["data_parallel_size"] == 8
    assert out["findings"] == []


def test_plan_that_does_not_divide_exits_1_naming_96_and_128():
    result = run("plan", "--global-batch", 100, "--micro-batch", 4, "--world-size", 8)
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        "batchspec: error: global 100 does not split into micro 4 × DP 8 = 32: nearest are 96 "
        "(accumulation 3) and 128 (accumulation 4) (fix: use global 96 or 128, or world size 5 "
        "or 25; no micro-batch gives global 100 with DP 8)"
    )
    assert result.stdout == ""


def test_plan_json_error_is_one_object_with_the_finding():
    result, out = run_json("plan", "--global-batch", 100, "--micro-batch", 4, "--world-size", 8)
    assert result.exit_code == 1
    assert out["findings"][0]["code"] == "global-not-divisible" and out["exit_code"] == 1


def test_plan_without_micro_lists_every_pair_largest_first():
    result, out = run_json("plan", "--global-batch", 64, "--world-size", 8)
    assert result.exit_code == 0 and out["micro_batch_size"] is None
    assert [(o["micro_batch_size"], o["gradient_accumulation_steps"]) for o in out["options"]] == [
        (8, 1),
        (4, 2),
        (2, 4),
        (1, 8),
    ]
    human = run("plan", "--global-batch", 64, "--world-size", 8)
    assert "8×1, 4×2, 2×4, 1×8" in human.stdout


def test_plan_reads_a_spec_file_and_flags_override_it(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "effective_batch_size: 256\nmicro_batch_size: 2\nnodes: 2\ngpus_per_node: 8\n"
        "sequence_length: 4096\n"
    )
    result, out = run_json("plan", spec)
    assert (out["world_size"], out["gradient_accumulation_steps"], out["tokens_per_step"]) == (
        16,
        8,
        256 * 4096,
    )
    result, out = run_json("plan", spec, "--world-size", 32)
    assert (out["world_size"], out["gradient_accumulation_steps"]) == (32, 4)


def test_plan_output_is_a_valid_spec(tmp_path):
    _, out = run_json("plan", "--global-batch", 64, "--micro-batch", 2, "--world-size", 8)
    (tmp_path / "plan.json").write_text(json.dumps(out))
    result, again = run_json("plan", tmp_path / "plan.json")
    assert result.exit_code == 0 and again == out


def test_plan_for_a_backend_adds_its_quirks_and_errors_exit_1():
    result, out = run_json(
        "plan",
        "--global-batch",
        64,
        "--micro-batch",
        2,
        "--world-size",
        8,
        "--pp",
        2,
        "--for",
        "axolotl,megatron",
    )
    assert result.exit_code == 1
    assert [f["code"] for f in out["findings"]] == [
        "axolotl-no-pipeline",
        "megatron-accumulation-implied",
    ]


def test_plan_warnings_exit_0():
    result, out = run_json(
        "plan",
        "--global-batch",
        256,
        "--micro-batch",
        2,
        "--world-size",
        8,
        "--lr",
        3e-4,
        "--lr-batch",
        128,
    )
    assert result.exit_code == 0 and out["findings"][0]["code"] == "lr-scaling"


def test_bad_flags_exit_2():
    assert run("plan", "--global-batch", 0, "--world-size", 8).exit_code == 2
    assert run("plan", "--global-batch", "many").exit_code == 2
    result = run("plan", "--global-batch", 64)
    assert result.exit_code == 2 and "not enough to solve" in result.stderr


# render ----------------------------------------------------------------------------------------


@pytest.fixture
def spec_file(tmp_path):
    path = tmp_path / "spec.yaml"
    path.write_text(
        "global_batch_size: 128\nmicro_batch_size: 4\nworld_size: 16\n"
        "tensor_parallel_size: 2\nsequence_length: 2048\n"
    )
    return path


def test_render_writes_one_file_per_backend(tmp_path, spec_file):
    out_dir = tmp_path / "out" / "nested"
    result, out = run_json(
        "render", spec_file, "--to", "deepspeed,axolotl,megatron", "--out", out_dir
    )
    assert result.exit_code == 0
    assert sorted(os.listdir(out_dir)) == ["axolotl.yaml", "deepspeed.json", "megatron.sh"]
    assert out["files"]["deepspeed"] == str(out_dir / "deepspeed.json")
    assert json.loads((out_dir / "deepspeed.json").read_text())["gradient_accumulation_steps"] == 4


def test_render_never_overwrites_without_force(tmp_path, spec_file):
    (tmp_path / "megatron.sh").write_text("mine\n")
    result = run("render", spec_file, "--to", "deepspeed,megatron", "--out", tmp_path)
    assert result.exit_code == 2 and "megatron.sh: exists; use --force" in result.stderr
    assert (tmp_path / "megatron.sh").read_text() == "mine\n"
    assert not (tmp_path / "deepspeed.json").exists(), "nothing is written when one file is refused"
    assert run("render", spec_file, "--to", "megatron", "--out", tmp_path, "--force").exit_code == 0
    assert "--global-batch-size 128" in (tmp_path / "megatron.sh").read_text()
    assert sorted(os.listdir(tmp_path)) == ["megatron.sh", "spec.yaml"], "no temporary files left"


def test_render_with_a_backend_error_writes_the_others_and_strict_writes_nothing(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "global_batch_size: 64\nmicro_batch_size: 2\nworld_size: 8\npipeline_parallel_size: 2\n"
    )
    args = ["render", spec, "--to", "megatron,axolotl", "--out", tmp_path / "out"]
    strict = run(*args, "--strict")
    assert strict.exit_code == 1 and "Axolotl has no pipeline parallelism" in strict.stderr
    assert not (tmp_path / "out").exists()
    result = run(*args)
    assert result.exit_code == 0
    assert "not written: axolotl: Axolotl has no pipeline parallelism" in result.stdout
    assert os.listdir(tmp_path / "out") == ["megatron.sh"]


def test_render_reads_stdin(tmp_path):
    result = run(
        "render",
        "-",
        "--to",
        "deepspeed",
        "--out",
        tmp_path,
        stdin='{"global_batch_size": 32, "micro_batch_size": 4, "world_size": 8}',
    )
    assert result.exit_code == 0 and (tmp_path / "deepspeed.json").exists()


def test_render_unknown_backend(tmp_path, spec_file):
    result = run("render", spec_file, "--to", "fsdp", "--out", tmp_path)
    assert result.exit_code == 2 and "unknown framework fsdp" in result.stderr


def test_render_into_a_file_path_is_an_input_error(tmp_path, spec_file):
    result = run("render", spec_file, "--to", "deepspeed", "--out", spec_file / "sub")
    assert result.exit_code == 2 and "cannot write" in result.stderr


# schema ----------------------------------------------------------------------------------------


def test_schema_is_json_with_every_field():
    result, out = run_json("schema")
    assert result.exit_code == 0 and "global_batch_size" in out["properties"]


# smoke and tune: an engine whose package is missing is refused before anything starts ----------

MISSING = (
    "batchspec: error: the deepspeed engine needs deepspeed, which is not installed here: "
    "pip install 'batchspec[deepspeed]' (nothing was started)"
)


class _NoTorch(importlib.abc.MetaPathFinder):
    """Fails at any look-up of torch: nothing may touch it before the refusal."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "torch":
            raise AssertionError(f"{name} was looked up before the engine was refused")
        return None


@pytest.fixture
def deepspeed_missing(monkeypatch):
    """The deepspeed engine's package is not installed here; looking torch up, or starting a
    process, would fail the command. Yields the processes started (none)."""
    from translator.plugin import contract

    monkeypatch.setattr(contract, "_installed", lambda package: package != "deepspeed")
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.setattr(sys, "meta_path", [_NoTorch(), *sys.meta_path])
    started = []

    def popen(*args, **kwargs):
        started.append(args)
        raise AssertionError("a process was started")

    monkeypatch.setattr(subprocess, "Popen", popen)
    return started


@pytest.mark.parametrize("command", ["smoke", "tune"])
@pytest.mark.parametrize(
    "file, args",
    [
        ("spec.yaml", ["--framework", "deepspeed"]),
        ("ds.json", []),  # the engine is the config's own framework
        ("ds.json", ["--slurm", "--partition", "gpu"]),
    ],
)
def test_an_engine_whose_package_is_missing_is_refused_before_anything_starts(
    tmp_path, deepspeed_missing, command, file, args
):
    (tmp_path / "spec.yaml").write_text("global_batch_size: 8\nsequence_length: 32\n")
    (tmp_path / "ds.json").write_text(
        '{"train_batch_size": 8, "train_micro_batch_size_per_gpu": 2, '
        '"gradient_accumulation_steps": 2}'
    )
    workdir = tmp_path / "w"
    result = run(command, tmp_path / file, "--nproc", 2, "--workdir", workdir, *args)
    assert result.exit_code == 2, result.output
    assert result.stderr.strip() == MISSING
    assert deepspeed_missing == [] and not workdir.exists()


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
from translator.chatter import framework_output

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
