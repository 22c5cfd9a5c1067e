"""The launch-script reader reads a script as it runs with no arguments (or the ones given) in
an environment that sets nothing but what its scheduler sets (or what the user sets): a name
the script never sets is *absent*, empty when run as read, unknown as a batch value."""

import subprocess

import pytest
from real_bash import HAS_BASH

from translator.shell import Default, parse
from translator.shell.values import run_text
from translator.words.errors import InputError

LOOP = """MBS=4; GBS=64
while [[ $# -gt 0 ]]; do
  case $1 in
    --mbs) MBS=$2; shift 2;;
    --gbs) GBS="$2"; shift; shift;;
    *) shift;;
  esac
done
torchrun --nproc_per_node 8 pretrain_gpt.py --micro-batch-size $MBS --global-batch-size $GBS
"""


def last(text: str, **kw) -> list:
    return parse(text, "t.sh", **kw).commands[-1]


def texts(text: str, **kw) -> list:
    return [w.text for w in last(text, **kw)]


def after(command: list, flag: str):
    return command[[w.text for w in command].index(flag) + 1]


def env_i_bash(script: str, args=()) -> list:
    """The words of the script's last command (an ``echo``) as bash, run with an empty
    environment and ``args``, splits them."""
    at = script.rindex("echo ")
    script = script[:at] + "printf '<%s>' " + script[at + len("echo ") :]
    out = subprocess.run(
        ["env", "-i", "bash", "-c", script, "t.sh", *args],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    return ["echo"] + out[1:-1].split("><") if out else ["echo"]


# -- absent values --------------------------------------------------------------------------
def test_a_default_is_taken_and_recorded_with_the_span_of_its_literal():
    text = "GPUS=${GPUS_PER_NODE:-8}\necho $GPUS\n"
    script = parse(text, "t.sh")
    word = script.commands[-1][1]
    assert word.text == "8" and text[word.span[0] : word.span[1]] == "8"
    assert script.defaults == [Default("GPUS_PER_NODE", 1, word.span)]


def test_defaults_of_every_form_are_recorded_once():
    text = 'A=${X-3}\nB="${Y:=5}"\nC=${1:-4}\nD=${Z:-$A}\nf() { E=${X-3}; }\nf\nf\n'
    script = parse(text, "t.sh")
    assert [(d.name, d.line) for d in script.defaults] == [
        ("X", 1),
        ("Y", 2),
        ("1", 3),
        ("Z", 4),
        ("X", 5),  # once, though f runs twice
    ]
    assert [d.span is None for d in script.defaults] == [False, False, False, True, False]
    assert [text[slice(*d.span)] for d in script.defaults if d.span] == ["3", "5", "4", "3"]
    assert [script.variables[n][0].text for n in "ABCD"] == ["3", "5", "4", "3"]


def test_a_default_inside_arithmetic_is_recorded():
    text = "GBS=$(( ${MBS:-2} * 64 ))\necho $GBS\n"
    script = parse(text, "t.sh")
    assert texts(text) == ["echo", "128"]
    (default,) = script.defaults
    assert default.name == "MBS" and text[slice(*default.span)] == "2"


def test_a_default_is_not_recorded_when_the_name_is_set():
    script = parse("X=1\nY=${X:-8}\nexport Z=${HOME:+x}\n", "t.sh")
    assert script.defaults == []


def test_an_assigning_default_sets_the_variable_with_its_span():
    text = ': "${GBS:=1536}"\ntorchrun p.py --global-batch-size $GBS\n'
    script = parse(text, "t.sh")
    word = after(script.commands[-1], "--global-batch-size")
    assert word.text == "1536" and text[slice(*word.span)] == "1536"
    assert [d.name for d in script.defaults] == ["GBS"]


def test_a_condition_on_a_name_never_set_is_decided():
    text = 'if [ -z "$MBS" ]; then MBS=4; fi\ntorchrun p.py --micro-batch-size $MBS\n'
    script = parse(text, "t.sh")
    word = after(script.commands[-1], "--micro-batch-size")
    assert word.text == "4" and text[slice(*word.span)] == "4"
    assert script.paths[-1] == ()


@pytest.mark.parametrize(
    "condition, holds",
    [
        ('[ -z "$X" ]', True),
        ('[ -n "$X" ]', False),
        ("[ -z $X ]", True),  # unquoted and empty: [ -z ], one word that is not empty
        ("[ $X ]", False),  # [ ]
        ("[ -n $X ]", True),  # [ -n ]: one word, not empty (bash's rule)
        ("[[ -n $1 ]]", False),
        ('[ "$X" == "" ]', True),
        ('[ "$1" = "" ]', True),
        ("[ $# -gt 0 ]", False),
        ("[ $# -eq 0 ]", True),
        ("[ $X = fp16 ]", False),  # [ = fp16 ]: an error in bash, status 2
        ('[[ "${X}x" == x ]]', True),
        ("[ $X != fp16 ]", False),  # [ != fp16 ]: an error too
        ('[ -z "$X" -a -z "$Y" ]', True),
        ('[ -n "$X" -o $# -eq 0 ]', True),
        ('[ ! -n "$X" ]', True),
        ("[ $X -gt 1 ]", False),
        # tree-sitter-bash reads these as $X = ("" || $Y) = y: parsed again in order
        ('[[ $X = "" || $Y = y ]]', True),
        ("[[ ( -n $X || -z $Y ) && $# -eq 0 ]]", True),
        ("[[ ! -z $X && $Y != y ]]", False),
    ],
)
def test_conditions_take_absent_values_as_empty(condition, holds):
    text = f"if {condition}; then R=yes; else R=no; fi\necho $R\n"
    assert texts(text) == ["echo", "yes" if holds else "no"]
    if HAS_BASH:
        assert env_i_bash(text) == ["echo", "yes" if holds else "no"]


def test_a_lone_absent_expansion_is_one_absent_word():
    command = last('torchrun p.py $EXTRA_ARGS "$@" --mbs $MBS\n')
    assert [w.text for w in command] == ["torchrun", "p.py", None, None, "--mbs", None]
    assert [w.absent for w in command] == [False, False, True, True, False, True]
    assert command[2].why_unknown == (
        "$EXTRA_ARGS (not set in the script: only the environment can set it)"
    )
    assert command[3].why_unknown == "$@ (the script's arguments; none given)"


def test_assignments_carry_absence():
    command = last('X=$Y\nZ="${X}"\nW="a$Y"\np --mbs $X --gbs $Z --w $W\n')
    assert [(w.text, w.absent) for w in command[1:]] == [
        ("--mbs", False),
        (None, True),
        ("--gbs", False),
        (None, True),
        ("--w", False),
        (None, False),  # "a" and an absent piece: not empty, and not known
    ]


def test_a_value_set_on_one_undecided_path_only_is_not_absent():
    word = last("if [ -f x ]; then MBS=2; fi\np --mbs $MBS\n")[-1]
    assert word.text is None and not word.absent and "depends on" in word.why_unknown


def test_arithmetic_on_an_absent_value_stays_unknown():
    command = last("G=$((MBS * 8))\nH=$((${N} + 1))\np $G $H\n")
    assert [w.text for w in command] == ["p", None, None]
    assert not command[1].absent
    assert "only the environment can set it" in command[1].why_unknown
    assert "only the environment can set it" in command[2].why_unknown


def test_alternative_and_positional_defaults():
    assert texts("p ${X:+--fp16} ${1:-4} $# x\n") == ["p", "4", "0", "x"]
    assert texts('p "${X:+w}" x\n') == ["p", "", "x"]


def test_what_bash_or_slurm_sets_is_not_absent():
    command = last("#SBATCH --nodes=2\np $HOSTNAME $RANDOM $SLURM_PROCID $SLURM_NNODES $0\n")
    assert [w.text for w in command] == ["p", None, None, None, "2", None]
    assert not any(w.absent for w in command)
    # without #SBATCH lines, the script is not a batch job: SLURM_PROCID is not set
    assert last("p $SLURM_PROCID\n")[1].absent


def test_after_source_names_never_set_are_plain_unknown():
    script = parse('echo $A\nsource ./env.sh\necho $B ${C:+x} "${D}"\n', "t.sh")
    assert script.commands[0][1].absent
    after_source = script.commands[-1]
    assert [w.text for w in after_source] == ["echo", None, None, None]
    assert not any(w.absent for w in after_source)
    assert "sources" in after_source[1].why_unknown
    # a condition on such a name is undecided again
    script = parse('source ./env.sh\nif [ -z "$MBS" ]; then MBS=4; fi\np $MBS\n', "t.sh")
    assert script.commands[-1][1].text is None


# -- arguments, shift and loops -------------------------------------------------------------
def test_the_argument_loop_with_no_arguments_keeps_the_defaults():
    script = parse(LOOP, "t.sh")
    command = script.commands[-1]
    mbs, gbs = after(command, "--micro-batch-size"), after(command, "--global-batch-size")
    assert (mbs.text, gbs.text) == ("4", "64")
    assert LOOP[slice(*mbs.span)] == "4" and LOOP[slice(*gbs.span)] == "64"
    assert len(script.commands) == 1 and script.paths == [()]


def test_the_argument_loop_with_arguments():
    command = last(LOOP, args=["--mbs", "2"])
    mbs, gbs = after(command, "--micro-batch-size"), after(command, "--global-batch-size")
    assert (mbs.text, mbs.span) == ("2", None)  # from an argument: no literal to edit
    assert gbs.text == "64" and LOOP[slice(*gbs.span)] == "64"
    command = last(LOOP, args=["--x", "--gbs", "128", "--mbs", "1"])
    assert after(command, "--micro-batch-size").text == "1"
    assert after(command, "--global-batch-size").text == "128"


@pytest.mark.skipif(not HAS_BASH, reason="needs bash")
@pytest.mark.parametrize("args", [[], ["--mbs", "2"], ["--gbs", "8", "-v", "--mbs", "3"]])
def test_the_argument_loop_as_bash_runs_it(args):
    script = LOOP.replace("torchrun --nproc_per_node 8 pretrain_gpt.py", "echo")
    assert texts(script, args=args) == env_i_bash(script, args)


def test_an_unknown_option_that_exits_ends_the_reading():
    text = LOOP.replace("*) shift;;", "*) echo unknown; exit 1;;")
    script = parse(text, "t.sh", args=["--bad"])
    assert [w.text for w in script.commands[-1]] == ["exit", "1"]
    assert not any(c[0].text == "torchrun" for c in script.commands)
    assert "exits here" in str(script.notes[-1])
    # with no arguments the loop does not run, and the launch is read
    assert parse(text, "t.sh").commands[-1][0].text == "torchrun"


def test_arguments_and_their_count():
    text = 'echo $# $1 "$2" ${3:-d} "$@"\n'
    assert texts(text, args=["a", "b c"]) == ["echo", "2", "a", "b c", "d", "a", "b c"]
    command = last(text)
    assert [w.text for w in command] == ["echo", "0", None, None, "d", None]
    assert command[2].why_unknown == "$1 (an argument of the script; none given)"
    word = last("echo $3\n", args=["a"])[1]
    assert word.absent and word.why_unknown == "$3 (an argument of the script; not given)"


def test_shift_in_a_function_and_set():
    text = 'f() { shift; echo "$@" $#; }\nf a b c\nset -- x y\nshift\necho $1 $#\n'
    script = parse(text, "t.sh")
    assert [w.text for w in script.commands[1]] == ["echo", "b", "c", "2"]
    assert [w.text for w in script.commands[-1]] == ["echo", "y", "1"]


def test_a_loop_decided_false_does_not_run_and_true_runs_for_real():
    assert texts('X=1\nwhile [ -n "$NOPE" ]; do X=2; done\necho $X\n') == ["echo", "1"]
    assert texts('X=1\nuntil [ -z "$NOPE" ]; do X=2; done\necho $X\n') == ["echo", "1"]
    text = "i=0\nwhile [ $i -lt 5 ]; do i=$((i + 1)); done\necho $i\n"
    assert texts(text) == ["echo", "5"]
    text = "i=0\nwhile true; do i=$((i + 1)); if [ $i -ge 3 ]; then break; fi; done\necho $i\n"
    assert texts(text) == ["echo", "3"]
    text = "i=0\nwhile (( i < 4 )); do (( i++ )); continue; i=99; done\necho $i\n"
    assert texts(text) == ["echo", "4"]


def test_a_loop_that_never_ends_is_cut_and_then_may_run_or_not():
    word = last("i=0\nwhile true; do i=$((i + 1)); done\necho $i\n")[1]
    assert word.text is None and "depends on" in word.why_unknown


def test_a_for_loop_over_nothing_does_not_run():
    assert texts('X=1\nfor a in "$@"; do X=2; done\nfor b in $NOPE; do X=3; done\necho $X\n') == [
        "echo",
        "1",
    ]
    assert texts("X=1\nfor a; do X=2; done\necho $X\n", args=[]) == ["echo", "1"]


def test_a_break_on_an_undecided_path_keeps_both_values():
    text = "X=1\nwhile true; do if [ -f f ]; then X=2; break; fi; X=3; break; done\necho $X\n"
    word = last(text)[1]
    assert word.text is None and word.maybe is not None
    assert {m for (m,) in word.maybe} == {"2", "3"}


def test_an_exit_on_an_undecided_path_drops_that_path():
    text = "MBS=2\nif [ -f x ]; then MBS=9; exit 1; fi\np --mbs $MBS\n"
    assert texts(text) == ["p", "--mbs", "2"]
    text = "MBS=2\n[ -f x ] || { MBS=9; exit 1; }\np --mbs $MBS\n"
    assert texts(text) == ["p", "--mbs", "2"]


def test_a_return_ends_the_function_only():
    text = "f() { X=1; return; X=2; }\nf\necho $X\n"
    assert texts(text) == ["echo", "1"]
    text = "f() { if [ -f x ]; then X=1; return; fi; X=2; }\nf\necho $X\n"
    word = last(text)[1]
    assert word.text is None and {m for (m,) in word.maybe} == {"1", "2"}


def test_an_exit_in_a_subshell_ends_the_subshell_only():
    assert texts("( exit 1 )\necho $(true) | exit\necho ok\n") == ["echo", "ok"]


def test_an_exit_in_a_decided_branch_ends_the_reading():
    script = parse('if [ -z "$1" ]; then echo usage; exit 1; fi\ntorchrun p.py\n', "t.sh")
    assert [c[0].text for c in script.commands] == ["echo", "exit"]
    script = parse(
        'if [ -z "$1" ]; then echo usage; exit 1; fi\ntorchrun p.py\n', "t.sh", args=["x"]
    )
    assert [c[0].text for c in script.commands] == ["torchrun"]


# -- the environment given ------------------------------------------------------------------
def test_the_environment_given_sets_names_without_a_span():
    text = 'if [ -z "$MBS" ]; then MBS=4; fi\np --mbs $MBS --gbs ${GBS:-8}\n'
    script = parse(text, "t.sh", environment={"MBS": "2", "GBS": "16"})
    command = script.commands[-1]
    assert [(w.text, w.span) for w in command[2::2]] == [("2", None), ("16", None)]
    assert script.defaults == []
    assert {k: w.text for k, w in script.environments[-1].items()} == {"MBS": "2", "GBS": "16"}


def test_a_name_that_is_not_one_is_refused():
    with pytest.raises(InputError, match="not a variable name"):
        parse("p\n", "t.sh", environment={"1X": "2"})


# -- each command's environment -------------------------------------------------------------
def test_each_command_sees_the_exported_variables_and_its_own_prefix():
    text = (
        "#SBATCH --nodes=2\n"
        "export CUDA_DEVICE_MAX_CONNECTIONS=1\n"
        "NNODES=4\n"
        "FORCE_TORCHRUN=1 NNODES=2 llamafactory-cli train x.yaml\n"
        "CUDA_VISIBLE_DEVICES=0,1 python train.py\n"
        "export NNODES\n"
        "unset CUDA_DEVICE_MAX_CONNECTIONS\n"
        "declare -x TP=2\n"
        "echo $FORCE_TORCHRUN $NNODES $CUDA_VISIBLE_DEVICES\n"
    )
    script = parse(text, "t.sh")
    assert len(script.environments) == len(script.commands) == 3
    first, second, third = script.environments
    assert {k: w.text for k, w in first.items()} == {
        "SLURM_NNODES": "2",
        "SLURM_JOB_NUM_NODES": "2",
        "CUDA_DEVICE_MAX_CONNECTIONS": "1",
        "FORCE_TORCHRUN": "1",
        "NNODES": "2",
    }
    word = first["NNODES"]
    assert word.line == 4 and text[slice(*word.span)] == "2"
    assert word.span[0] > text.index("FORCE_TORCHRUN")
    assert second["CUDA_VISIBLE_DEVICES"].text == "0,1" and "FORCE_TORCHRUN" not in second
    assert {k: w.text for k, w in third.items()} == {
        "SLURM_NNODES": "2",
        "SLURM_JOB_NUM_NODES": "2",
        "NNODES": "4",
        "TP": "2",
    }
    assert third["NNODES"].line == 3 and third["TP"].line == 8
    # the prefix assignments do not change the script's variables
    assert [w.text for w in script.commands[-1]] == ["echo", None, "4", None]
    assert script.commands[-1][1].absent and "FORCE_TORCHRUN" not in script.variables


def test_a_prefix_sees_the_assignments_before_it_as_bash_does():
    env = parse("A=1\nA=7 B=$A python x.py\n", "t.sh").environments[0]
    assert (env["A"].text, env["B"].text) == ("7", "7")


def test_a_string_run_by_bash_c_sees_the_launchers_environment():
    script = parse('export A=1\nX=2 srun bash -c "python train.py"\n', "t.sh")
    assert {k: w.text for k, w in script.environments[-1].items()} == {"A": "1", "X": "2"}
    assert [w.text for w in script.commands[-1]][-2:] == ["python", "train.py"]


def test_an_export_on_an_undecided_path_is_kept_unknown():
    env = parse("if [ -f x ]; then export A=1; fi\npython x.py\n", "t.sh").environments[0]
    assert env["A"].text is None


# -- placeholders ---------------------------------------------------------------------------
TEMPLATE = """#!/bin/bash
#SBATCH <SLURM OPTIONS>
DATA_PATH=<Specify path and file prefix>_text_document
CHECKPOINT_PATH=<Specify path>
export TOKENIZER_MODEL=<path to tokenizer>
torchrun --nproc_per_node 8 --master_port=<your_random_port> pretrain_gpt.py \\
    --data-path $DATA_PATH \\
    --vocab-file <PATH TO gpt-vocab.json> \\
    --micro-batch-size 4 \\
    --save $CHECKPOINT_PATH \\
    --global-batch-size 64
"""


def test_placeholders_are_unknown_and_the_rest_is_read_with_exact_spans():
    script = parse(TEMPLATE, "t.sh")
    (command,) = script.commands
    assert [w.text for w in command] == [
        "torchrun",
        "--nproc_per_node",
        "8",
        None,
        "pretrain_gpt.py",
        "--data-path",
        None,
        "--vocab-file",
        None,
        "--micro-batch-size",
        "4",
        "--save",
        None,
        "--global-batch-size",
        "64",
    ]
    data = after(command, "--data-path")
    assert not data.absent
    assert data.why_unknown == (
        "line 3: bash cannot parse this statement (DATA_PATH=<Specify path and file pref...)"
    )
    for flag, literal in (("--micro-batch-size", "4"), ("--global-batch-size", "64")):
        word = after(command, flag)
        assert (
            TEMPLATE[slice(*word.span)] == literal
            and word.line == TEMPLATE[: word.span[0]].count("\n") + 1
        )
    assert [n.line for n in script.notes] == [3, 4, 5, 6, 8]
    assert str(script.notes[1]) == (
        "line 4: bash cannot parse this statement (`CHECKPOINT_PATH=<Specify path>`); "
        "read as unknown"
    )
    assert script.environments[0]["TOKENIZER_MODEL"].text is None


def test_a_statement_bash_cannot_parse_is_read_as_unknown():
    text = "A=1\nX=1 )\nB=2\necho $A $X $B\n"
    script = parse(text, "t.sh")
    assert [w.text for w in script.commands[-1]] == ["echo", "1", None, "2"]
    assert script.commands[-1][2].why_unknown == "line 2: bash cannot parse this statement (X=1 ))"
    assert [str(n) for n in script.notes] == [
        "line 2: bash cannot parse this statement (`X=1 )`); read as unknown"
    ]


def test_a_bad_token_in_a_continued_command_keeps_the_command():
    text = "torchrun x.py \\\n  --a 1 \\\n  --b 2 ) \\\n  --micro-batch-size 3\necho hi\n"
    script = parse(text, "t.sh")
    command = script.commands[0]
    assert [w.text for w in command] == ["torchrun", "x.py", "--a", "1", "--b", "2"] + [
        "--micro-batch-size",
        "3",
    ]
    assert text[slice(*command[-1].span)] == "3"
    assert script.notes[0].line == 3


@pytest.mark.parametrize(
    "text",
    [
        'echo "<path>" <<EOF\n<path>\nEOF\n',
        "# usage: run.sh <data-path>\necho ok\n",
        "cat < in.txt > out.txt\n",
        "sort <in.txt >out.txt 2>&1\n",
        "diff <(ls) <(ls)\n",
    ],
)
def test_what_looks_like_a_placeholder_elsewhere_is_left_alone(text):
    assert parse(text, "t.sh").notes == []


@pytest.mark.parametrize(
    "text, message",
    [
        ("X=<a b>\necho 'abc\n", "unterminated single quote"),
        ('DATA=<path>\necho "abc\n\n', "unterminated double quote"),
        ("X=<path>\nif true; then\n  echo\n", "if without fi"),
        ("cat <<EOF\n<path>\n", "heredoc not closed by EOF"),
        ("A=(1 2\n", "unterminated array"),
    ],
)
def test_real_syntax_errors_still_raise(text, message):
    with pytest.raises(InputError, match=message):
        parse(text, "t.sh")


def test_run_text_reads_absent_words_as_empty():
    command = last('p "$X" x$Y $(ls)\n')
    assert [run_text(w) for w in command] == ["p", "", "x", None]


def test_an_sbatch_line_may_hold_several_options_and_a_placeholder():
    text = (
        "#SBATCH <SLURM OPTIONS> --nodes=128 --exclusive --ntasks-per-node=8\necho $SLURM_NNODES\n"
    )
    script = parse(text, "t.sh")
    word = script.commands[-1][1]
    assert word.text == "128" and text[slice(*word.span)] == "128"
    assert script.environments[-1]["SLURM_NTASKS_PER_NODE"].text == "8"


@pytest.mark.parametrize(
    "text, words, prefix",
    [
        ("X=1 Y=2\necho $X $Y\n", ["echo", "1", "2"], {}),
        ("X=1 Y=2\nZ=3 true\necho $X $Z\n", ["echo", "1", None], {"Z": "3"}),
        ("X=1 \\\n Y=2 true\necho $X $Y .\n", ["echo", None, None, "."], {"X": "1", "Y": "2"}),
    ],
)
def test_assignments_on_a_line_of_their_own_are_no_prefix(text, words, prefix):
    """tree-sitter-bash reads ``X=1 Y=2``, a newline, then a command as one command."""
    script = parse(text, "t.sh")
    assert [w.text for w in script.commands[-1]] == words
    assert {k: w.text for k, w in script.environments[0].items()} == prefix
    if HAS_BASH:
        assert env_i_bash(text)[1:] == [w for w in words[1:] if w]  # absent: no word


def test_arguments_in_arithmetic():
    text = "N=$#\nwhile (( $# )); do shift; done\necho $N $# $(( ${1} * 2 ))\n"
    assert texts(text, args=["3", "4"]) == ["echo", "2", "0", None]
    assert texts("echo $(( $1 * 2 )) $(( $# + 1 ))\n", args=["3"]) == ["echo", "6", "2"]
    word = last("echo $(( $1 * 2 ))\n")[1]
    assert word.text is None and not word.absent and "none given" in word.why_unknown


@pytest.mark.parametrize(
    "text, words",
    [
        (
            "X=a.b.c\necho ${X#*.} ${X##*.} ${X%.*} ${X%%.*} ${X#z} ${X%}\n",
            "b.c c a.b a a.b.c a.b.c",
        ),
        ('A=--gbs=7\necho "${A#*=}" ${A%=*}\n', "7 --gbs"),
        ('X=8\nwhile (( "$#" )); do X=9; shift; done\necho $X\n', "8"),
    ],
)
def test_trimming_and_quotes_in_arithmetic_as_bash(text, words):
    assert texts(text) == ["echo", *words.split()]
    if HAS_BASH:
        assert env_i_bash(text) == ["echo", *words.split()]


def test_a_trimmed_literal_keeps_its_span_and_an_absent_value_stays_absent():
    text = "A=--mbs=4\np ${A#*=} ${NOPE#x}\n"
    command = last(text)
    assert command[1].text == "4" and text[slice(*command[1].span)] == "4"
    assert command[2].absent


def test_the_argument_loop_with_key_value_options():
    text = LOOP.replace('--gbs) GBS="$2"; shift; shift;;', '--gbs=*) GBS="${1#*=}"; shift;;')
    command = last(text, args=["--gbs=256", "--mbs", "2"])
    assert after(command, "--global-batch-size").text == "256"
    assert after(command, "--micro-batch-size").text == "2"


@pytest.mark.parametrize(
    "condition, holds",
    [
        ('[[ "$*" == *"--help"* ]]', False),  # the pattern is three nodes in the tree
        ('[[ "$*" == *"--model"* ]]', True),
        ('[[ $* != *"--model"* ]]', False),
        ('[[ "$*" == "*" ]]', False),  # a quoted * is only itself
        ("[[ $* == *'mo'?el* ]]", True),
    ],
)
def test_a_pattern_with_quoted_parts_matches_as_bash_does(condition, holds):
    text = f"if {condition}; then R=yes; else R=no; fi\necho $R\n"
    args = ["--model", "m"]
    assert texts(text, args=args) == ["echo", "yes" if holds else "no"]
    if HAS_BASH:
        assert env_i_bash(text, args) == ["echo", "yes" if holds else "no"]


def test_a_name_after_punctuation_and_an_expansion_is_expanded():
    """tree-sitter-bash parses ``$A/$B/c`` as ``$A/$`` and a word ``B/c`` (its issue 315)."""
    text = "A=a\nB=b\nC=x/$A/$B/c\necho $C $A-$B.log $A.$B --mbs 4\n"
    assert texts(text) == ["echo", "x/a/b/c", "a-b.log", "a.b", "--mbs", "4"]
    if HAS_BASH:
        assert env_i_bash(text) == texts(text)
    word = last(text)[-1]
    assert text[slice(*word.span)] == "4"  # literals after the braced names keep their place
