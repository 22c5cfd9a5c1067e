"""The launch-script reader against hostile and tricky input: bash's own answers, unknown where
bash's answer depends on what runs, and bounded time and memory on inputs built to blow up."""

import json
import resource
import subprocess
import sys

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from translator.cli import main
from translator.shell import parse
from translator.words.errors import InputError


def micro(text: str, flag: str = "--micro-batch-size"):
    """The word after ``flag`` in the script's last command: (text, why unknown)."""
    command = parse(text, "t.sh").commands[-1]
    word = command[[w.text for w in command].index(flag) + 1]
    return word.text, word.why_unknown


def test_nested_parentheses_in_arithmetic_do_not_cut_the_command(tmp_path):
    script = tmp_path / "t.sh"
    script.write_text(
        "torchrun --nproc_per_node 8 p.py --micro-batch-size 2 "
        "--seq-length $((1024*(2+2))) --global-batch-size 128\n"
    )
    out = json.loads(CliRunner().invoke(main, ["inspect", str(script), "--json"]).stdout)
    assert out["global_batch_size"] == 128 and out["sequence_length"] == 4096
    assert out["gradient_accumulation_steps"] == 8


# What bash gives (each checked by hand with bash 5.2). ---------------------------------------
@pytest.mark.parametrize(
    "body, expected",
    [
        ("( MBS=1 )", "2"),  # a subshell's assignment stays inside
        ("MBS=1 | cat", "2"),  # so does a pipeline element's
        ("echo | MBS=1", "2"),
        ("MBS=1 true", "2"),  # a command's own environment
        ("f() { MBS=1; }", "2"),  # a function never called
        ("f() { local MBS=1; }\nf", "2"),  # local stays in the function
        ("f() { MBS=$1; }\nf 6", "6"),  # a called function, with its argument
        ("S=7B\nif [ $S = 7B ]; then MBS=1; else MBS=4; fi", "1"),  # decided by known values
        ("S=13B\nif [ $S = 7B ]; then MBS=1; elif [ $S = 13B ]; then MBS=4; fi", "4"),
        ("X=abc\ncase $X in a*) MBS=1;; *) MBS=3;; esac", "1"),
        ("X=zzz\ncase $X in a*) MBS=1;; esac", "2"),
        ('[ -z "$MBS" ] && MBS=4', "2"),  # MBS is set, so the && branch is skipped
        ("[[ $MBS -lt 4 ]] && MBS=8", "8"),
        ("if true; then MBS=3; fi", "3"),
        ("if [ -f /etc/x ]; then MBS=2; fi", "2"),  # every path gives 2: still certain
        ("for x in 1 4; do MBS=$x; done", "4"),  # a loop over known words runs each round
        ("for x in 1 4; do [ $x = 1 ] && break; MBS=$x; done", "2"),
    ],
)
def test_assignments_follow_bash_scoping(body, expected):
    assert micro(f"MBS=2\n{body}\np --micro-batch-size $MBS\n") == (expected, None)


@pytest.mark.parametrize(
    "body",
    [
        "if [ -f /etc/x ]; then MBS=1; fi",
        "case $HOSTNAME in a*) MBS=1;; esac",
        "while read line; do MBS=1; done",
        "for x in $(seq 2); do MBS=$x; done",
        "mkdir -p out && MBS=1",
        "grep -q x y || MBS=1",
        "f() { MBS=1; }\n[ -f x ] && f",
    ],
)
def test_an_assignment_under_an_undecided_condition_is_unknown(body):
    text, why = micro(f"MBS=2\n{body}\np --micro-batch-size $MBS\n")
    assert text is None and "depends on" in why


@pytest.mark.parametrize(
    "body, expected",
    [
        ("unset MBS\np --micro-batch-size ${MBS:-2}", "2"),
        ("E=\np --micro-batch-size ${E:-2}", "2"),
        ("E=\np --micro-batch-size x${E-2}", "x"),
        ("p --micro-batch-size $((64 - 32 % -48))", "32"),
        ("p --micro-batch-size $(( (0-20)/3*-16 ))", "96"),
        ("p --micro-batch-size $((-7 / 2))", "-3"),
        ("p --micro-batch-size $((-7 % 2))", "-1"),
        ("G=1\nX=$((++G))\np --micro-batch-size $G", "2"),
        ("G=1\nX=$((G++))\np --micro-batch-size $X", "1"),
        ("p --micro-batch-size $((2**10))", "1024"),
        ("p --micro-batch-size $((9223372036854775807 + 1))", "-9223372036854775808"),
        ("p --micro-batch-size $((0x10 + 010 + 2#101))", "29"),
        ("A=3\nB=A*2\np --micro-batch-size $((B+1))", "7"),
    ],
)
def test_expansion_and_arithmetic_as_bash(body, expected):
    assert micro(body + "\n") == (expected, None)


@pytest.mark.parametrize("expr", ["1_6", "08", "1/0", "2**-1"])
def test_an_arithmetic_error_in_bash_stays_an_error(expr):
    text, why = micro(f"p --micro-batch-size $(({expr}))\n")
    assert text is None and "error in bash" in why


def test_one_unknown_word_does_not_poison_its_neighbours():
    text = (
        'GPT_ARGS="--micro-batch-size 4 --global-batch-size 256 --tensorboard-dir '
        '$LOGS/$(date +%s) --seed $RANDOM --save $1"\ntorchrun x.py $GPT_ARGS\n'
    )
    assert micro(text) == ("4", None)
    assert micro(text, "--global-batch-size") == ("256", None)
    assert micro(text, "--seed")[0] is None


def test_strings_run_by_eval_and_bash_c_are_read_with_their_spans():
    text = (
        'opts="--micro-batch-size 4 --save $1"\nrun_cmd="torchrun p.py ${opts}"\neval ${run_cmd}\n'
    )
    command = parse(text, "t.sh").commands[-1]
    word = command[[w.text for w in command].index("--micro-batch-size") + 1]
    assert word.text == "4" and text[word.span[0] : word.span[1]] == "4"
    assert micro(
        'C="p.py --micro-batch-size 8 --rank \\$SLURM_PROCID"\nsrun bash -c "torchrun $C"\n'
    ) == ("8", None)


def test_sbatch_lines_set_what_slurm_sets(tmp_path):
    script = tmp_path / "job.sh"
    script.write_text(
        "#!/bin/bash\n#SBATCH --nodes=4\n#SBATCH --gpus-per-node=4\n"
        "torchrun --nproc_per_node $SLURM_GPUS_PER_NODE --nnodes $SLURM_NNODES "
        "pretrain_gpt.py --tensor-model-parallel-size $SLURM_GPUS_PER_NODE "
        "--micro-batch-size 1 --global-batch-size 256\n"
    )
    out = json.loads(CliRunner().invoke(main, ["inspect", str(script), "--json"]).stdout)
    assert (
        out["tensor_parallel_size"],
        out["data_parallel_size"],
        out["gradient_accumulation_steps"],
    ) == (4, 4, 64)


@pytest.mark.parametrize("option", ["--gpus=16", "--gpus=h100:16", "-G 16"])
def test_sbatch_gpus_sets_slurm_gpus(tmp_path, option):
    script = tmp_path / "job.sh"
    script.write_text(
        f"#!/bin/bash\n#SBATCH --nodes=2\n#SBATCH {option}\n"
        "torchrun --nproc_per_node $((SLURM_GPUS / SLURM_NNODES)) --nnodes $SLURM_NNODES "
        "pretrain_gpt.py --micro-batch-size 1 --global-batch-size 256\n"
    )
    out = json.loads(CliRunner().invoke(main, ["inspect", str(script), "--json"]).stdout)
    assert (out["world_size"], out["gradient_accumulation_steps"]) == (16, 16)


def test_an_unknown_parallel_size_is_never_reported_as_one(tmp_path):
    """The case that was silently wrong: TP from a variable Slurm sets, without #SBATCH."""
    script = tmp_path / "job.sh"
    script.write_text(
        "torchrun --nproc_per_node 4 --nnodes 4 pretrain_gpt.py "
        "--tensor-model-parallel-size $SLURM_GPUS_PER_NODE "
        "--micro-batch-size 1 --global-batch-size 256\n"
    )
    result = CliRunner().invoke(main, ["inspect", str(script), "--json"])
    out = json.loads(result.stdout)
    assert out["tensor_parallel_size"] is None and out["data_parallel_size"] is None
    assert out["gradient_accumulation_steps"] is None and out["world_size"] == 16
    options = next(f for f in out["findings"] if f["code"] == "batch-depends-on-unknown")
    assert (
        "tensor_parallel_size 4 → global 256 (micro 1 × accumulation 64 × DP 4)"
        in options["message"]
    )


def test_update_refuses_a_value_that_feeds_another_flag(tmp_path):
    script = tmp_path / "t.sh"
    text = (
        "N=4\ntorchrun --nproc_per_node 8 p.py --micro-batch-size $N --seq-length $N "
        "--global-batch-size 64\n"
    )
    script.write_text(text)
    result = CliRunner().invoke(main, ["update", str(script), "--micro-batch", "2", "--in-place"])
    assert result.exit_code == 1 and "also used by --seq-length (line 2)" in result.stderr
    assert script.read_text() == text


# Inputs built to blow up: a subprocess with a memory cap and a generous time limit. ----------
BOMBS = {
    "150k defaults": "A=${X:-1}\n" * 150_000,
    "unclosed heredoc": "cat <<EOF\n" + "A=1\n" * 200_000,
    "300k appends": "A+=(x)\n" * 300_000,
    "150k elements": "".join(f"A[{i}]=x\nunset 'A[{i // 2}]'\n" for i in range(75_000)),
    "100k keyed appends": "".join(f"A+=([{i % 20_000}]=x y)\n" for i in range(100_000)),
    "array doubling": "A=(x)\n" + "A=(${A[@]} ${A[@]})\n" * 40 + "p --micro-batch-size ${A[@]}\n",
    "string doubling": "X=ab\n" + "X=$X$X\n" * 60 + "p --micro-batch-size $X\n",
    "3000-deep default": "p --micro-batch-size " + "${X:-" * 3000 + "1" + "}" * 3000 + "\n",
    "100k unary minus": "p --micro-batch-size $((" + "- " * 100_000 + "1))\n",
    "thousand-digit integer": "p --micro-batch-size $((" + "9" * 5000 + "))\n",
    "2000 nested ifs": "if true; then\n" * 2000 + "X=1\n" + "fi\n" * 2000,
    "function bomb": "f() { f; f; }\nf\n",
    "eval bomb": "A='eval $A $A'\neval $A\n",
    "4 MiB line": "p --micro-batch-size " + "a" * (4 * 1024 * 1024 - 40) + "\n",
    "self source": "source $0\n. ./t.sh\n",
}


def _capped():
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


@pytest.mark.parametrize("name", list(BOMBS))
def test_inputs_built_to_blow_up_end_quickly_with_bounded_memory(tmp_path, name):
    script = tmp_path / "t.sh"
    script.write_text(BOMBS[name])
    done = subprocess.run(
        [sys.executable, "-m", "translator", "inspect", str(script), "--json", "--world-size", "8"],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_capped,
    )
    assert done.returncode in (0, 1, 2), done.stderr[-500:]
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr
    if done.returncode == 2:
        assert len(done.stderr.strip().splitlines()) == 1
    else:
        out = json.loads(done.stdout)
        assert out["micro_batch_size"] is None or isinstance(out["micro_batch_size"], int)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.text(
        alphabet=st.one_of(
            st.characters(blacklist_categories=("Cs",)),
            st.sampled_from(list("{}[]()\"'$`:=\\\n #-;&|<>012ab@*!")),
        ),
        max_size=200,
    )
)
def test_random_scripts_never_crash_the_reader(text):
    """tree-sitter-bash itself segfaulted on some code points (``b{`` + U+100000)."""
    try:
        parse(text, "t.sh")
    except InputError as exc:
        assert "\n" not in str(exc).strip()


def test_the_code_point_that_crashed_tree_sitter_reads():
    assert parse("p --x b{\U00100000\n", "t.sh").commands[0][2].text == "b{\U00100000"
