import pytest

from translator.errors import InputError
from translator.shell import ArithError, Unknown, evaluate, parse

SCRIPT = """#!/bin/bash
export CUDA_DEVICE_MAX_CONNECTIONS=1
GPUS_PER_NODE=${GPUS_PER_NODE:-8}
NUM_NODES=2
CHECKPOINT_PATH=$1
MBS=2
GBS=$((MBS * 64))
DISTRIBUTED_ARGS=(
    --nproc_per_node $GPUS_PER_NODE   # per node
    --nnodes $NUM_NODES
)
TRAINING_ARGS=(
    --micro-batch-size ${MBS}
    --global-batch-size $GBS
    --seq-length "4096"
    --load $CHECKPOINT_PATH
)
GPT_ARGS="--num-layers 32 --hidden-size 4096"
cat <<EOT > /tmp/never
--micro-batch-size 999
EOT
torchrun ${DISTRIBUTED_ARGS[@]} pretrain_gpt.py \\
    "${TRAINING_ARGS[@]}" $GPT_ARGS --lr=3e-4
"""


def words_of(text):
    return [[w.text for w in c] for c in parse(text, "t.sh").commands]


def test_a_launch_script_expands_like_bash():
    script = parse(SCRIPT, "t.sh")
    run = [w.text for w in script.commands[-1]]
    assert run == [
        "torchrun",
        "--nproc_per_node",
        "8",
        "--nnodes",
        "2",
        "pretrain_gpt.py",
        "--micro-batch-size",
        "2",
        "--global-batch-size",
        "128",
        "--seq-length",
        "4096",
        "--load",
        None,
        "--num-layers",
        "32",
        "--hidden-size",
        "4096",
        "--lr=3e-4",
    ]


def test_words_remember_where_their_literal_is():
    script = parse(SCRIPT, "t.sh")
    run = script.commands[-1]
    micro = run[run.index(next(w for w in run if w.text == "--micro-batch-size")) + 1]
    assert SCRIPT[micro.span[0] : micro.span[1]] == "2" and SCRIPT[: micro.span[0]].endswith("MBS=")
    nproc = run[2]
    assert SCRIPT[nproc.span[0] : nproc.span[1]] == "8" and nproc.line == 9
    glob = run[9]
    assert glob.text == "128" and glob.span is None, "computed values have no literal to edit"


def test_unknowns_are_not_guessed():
    (cmd,) = parse("echo $1 $(hostname) ${UNSET} $NOPE ${X:+y} $((Y*2))", "x").commands
    assert [w.text for w in cmd] == ["echo", None, None, None, None, None, None]
    assert cmd[1].why_unknown == "$1 (set when the script runs)"
    assert cmd[4].why_unknown == "$NOPE (not set in the script)"


def test_defaults_and_assigning_defaults():
    assert words_of("echo ${A:-3} ${A-4}") == [["echo", "3", "4"]]
    assert words_of("echo ${B:=5} $B") == [["echo", "5", "5"]]
    assert words_of("A=1\necho ${A:-3}") == [["echo", "1"]]


def test_quotes_continuations_and_operators():
    text = "python train.py \\\n  --a 'x y' \\\n  --b \"$((2+3))\" ; echo ok && echo 'it''s'"
    assert words_of(text) == [
        ["python", "train.py", "--a", "x y", "--b", "5"],
        ["echo", "ok"],
        ["echo", "its"],
    ]


def test_array_append_and_declare():
    text = "declare -a A=(1 2)\nA+=(3)\nexport B=7\necho ${A[@]} $B"
    assert words_of(text) == [["echo", "1", "2", "3", "7"]]


def test_appending_to_an_array_set_element_by_element_keeps_it_unknown():
    """``A[3]=x`` makes the array unknown; ``A+=(y)`` then extends a copy (it used to crash:
    the unknown array's items were a tuple, extended in place)."""
    script = parse("A[3]=x\nA+=(y)\necho ${A[@]}\n", "t.sh")
    echo = script.commands[-1]
    assert echo[0].text == "echo" and echo[1].text is None
    assert echo[1].why_unknown == "A[...] set element by element"


@pytest.mark.parametrize(
    "text, words",
    [
        # bash: 1 x 2 (the element A[2] is not followed, so it is unknown, never guessed)
        ('A[2]=1\nA+=(x)\necho "${A[@]}" ${#A[@]}', ["echo", None, "x", "2"]),
        ('A[2]=1\nA+=(x)\nA+=(y z)\necho "${A[@]}"', ["echo", None, "x", "y", "z"]),
        ('X=a\nX+=(b)\necho "${X[@]}" ${#X[@]}', ["echo", "a", "b", "2"]),  # bash: a b 2
        ('X=(a b)\nf() { X+=(c); }\nf\necho "${X[@]}"', ["echo", "a", "b", "c"]),
        # paths that disagree leave an unknown first, which the append keeps
        ('[ -f x ] && A=(1 2) || A=(1 3)\nA+=(z)\necho "${A[@]}"', ["echo", None, "z"]),
    ],
)
def test_array_append_after_an_element_or_a_scalar(text, words):
    assert words_of(text) == [words]


def test_array_append_after_an_element_keeps_each_items_line():
    script = parse("A[2]=1\nA+=(x)\nA+=(y)\n", "t.sh")
    assert [(w.text, w.line) for w in script.variables["A"]] == [(None, 0), ("x", 2), ("y", 3)]
    assert script.variables["A"][0].why_unknown == "A[...] set element by element"


@pytest.mark.parametrize(
    "expr, value", [("2*3+1", 7), ("7/2", 3), ("-(4-6)", 2), ("10 % 4", 2), ("2**3", 8)]
)
def test_arithmetic(expr, value):
    assert evaluate(expr) == value


@pytest.mark.parametrize("expr", ["__import__('os')", "1 if 1 else 2", "2.5*2", "x"])
def test_arithmetic_refuses_anything_but_integers(expr):
    with pytest.raises((ArithError, Unknown)):
        evaluate(expr)


@pytest.mark.parametrize(
    "text, message",
    [
        ("A=(1 2\n3\n", "t.sh:1: unterminated array A=("),
        ("echo 'abc\n", "t.sh:1: unterminated single quote"),
        ('echo "abc\n\n', "t.sh:1: unterminated double quote"),
        ("X=$((1+2\n", "t.sh:1: unterminated $(( arithmetic"),
        ("cat <<EOF\nabc\n", "heredoc not closed by EOF"),
        ("echo ${A\n", "t.sh:1: unterminated ${"),
    ],
)
def test_unterminated_constructs_name_the_line(text, message):
    with pytest.raises(
        InputError, match=message.replace("$", r"\$").replace("(", r"\(").replace("{", r"\{")
    ):
        parse(text, "t.sh")


def test_nothing_is_executed(tmp_path):
    marker = tmp_path / "ran"
    parse(f"touch {marker}\nX=$(touch {marker})\necho `touch {marker}`\n", "x")
    assert not marker.exists()
