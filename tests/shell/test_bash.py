import pytest
from real_bash import HAS_BASH, bash_words, consistent

from translator.shell import ArithError, Unknown, evaluate, parse
from translator.words.errors import InputError

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
    # read as run: ${X:+y} with X never set is nothing; $1, $NOPE are absent (still unknown)
    assert [w.text for w in cmd] == ["echo", None, None, None, None, None]
    assert cmd[1].why_unknown == "$1 (an argument of the script; none given)"
    assert cmd[4].why_unknown == "$NOPE (not set in the script: only the environment can set it)"
    assert [w.absent for w in cmd[1:]] == [True, False, True, True, False]


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


def test_appending_to_an_array_set_element_by_element_is_what_bash_makes():
    """``A[3]=x`` then ``A+=(y)`` (it used to crash: the array's items were a tuple, extended
    in place): element 3 and the append at index 4, as bash has them."""
    script = parse("A[3]=x\nA+=(y)\necho ${A[@]} ${#A[@]}\n", "t.sh")
    assert [w.text for w in script.commands[-1]] == ["echo", "x", "y", "2"]


@pytest.mark.parametrize(
    "text, words",
    [
        # A[2] is element 2 and the append goes on at index 3, as in bash: 1 x 2
        ('A[2]=1\nA+=(x)\necho "${A[@]}" ${#A[@]} ${!A[@]}', ["echo", "1", "x", "2", "2", "3"]),
        ('A[2]=1\nA+=(x)\nA+=(y z)\necho "${A[@]}"', ["echo", "1", "x", "y", "z"]),
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
    assert [(w.text, w.line) for w in script.variables["A"]] == [("1", 1), ("x", 2), ("y", 3)]


def test_an_element_at_an_index_not_known_leaves_the_array_unknown():
    script = parse("A=(a b)\nA[$X]=c\necho ${#A[@]} ${A[0]}\n", "t.sh")
    assert [w.text for w in script.commands[-1]] == ["echo", None, None]
    assert script.variables["A"][0].why_unknown == "A[$X] set at an index not known"


# Arrays against real bash: each word the reader knows is bash's; an unknown (None) one is
# where bash's answer depends on what runs, or on what the reader does not follow. ----------
ARRAYS_AS_BASH = [
    # sparse indices
    ('A=(a b)\nA[5]=c\necho ${#A[@]} "${A[@]}" ${A[5]} ${!A[@]}', "3 a b c c 0 1 5"),
    ("A[2]=1\necho ${A[2]} ${#A[@]} ${!A[@]}", "1 1 2"),
    ('A=(a [5]=b c)\nA+=(d)\necho ${!A[@]} "${A[@]}"', "0 5 6 7 a b c d"),
    ('A=(a b)\nA+=([7]=z)\necho ${#A[@]} "${A[@]}" ${!A[@]}', "3 a b z 0 1 7"),
    ('A=(a b)\nA+=([0]=z)\necho "${A[@]}"', "z b"),
    ('A=([1]=a [1]=b)\necho ${#A[@]} "${A[@]}"', "1 b"),
    ('X=5\nX[3]=v\necho ${#X[@]} ${!X[@]} "${X[@]}"', "2 0 3 5 v"),
    # negative indices count back from the last
    ("A=(a b c)\necho ${A[-1]} ${A[-3]}", "c a"),
    ('A=(a b c)\nA[-1]=z\necho "${A[@]}"', "a b z"),
    ("A=([5]=x)\necho ${A[-1]}", "x"),
    # unset of one element
    ("A=(a b c)\nunset 'A[1]'\necho ${#A[@]} \"${A[@]}\" ${!A[@]}", "2 a c 0 2"),
    ('A=(a b c)\nunset A[1]\necho ${#A[@]} "${A[@]}"', "2 a c"),
    ("A=(a b c)\nunset 'A[-1]'\necho ${!A[@]}", "0 1"),
    ("A=(a b)\nunset A\necho ${#A[@]} x", "0 x"),
    # X=v on an array sets element 0; X+=v appends to it
    ('A=(a b)\nA=y\necho "${A[@]}"', "y b"),
    ('A=(a b)\nA+=y\nA[1]+=x\nA[4]+=w\necho "${A[@]}" ${!A[@]}', "ay bx w 0 1 4"),
    ("A=(1 2)\nread A <<< q\necho ${#A[@]} ${A[1]}", "2 2"),
    # arithmetic indices, defaults on elements
    ('i=1\nA=(a b c)\nA[i+1]=z\necho ${A[i]} ${A[$i]} "${A[@]}"', "b b a b z"),
    (
        'A=([3]=a)\necho "<${A:-x}>" "<${A[@]:-x}>" "<${A[7]-y}>" ${#A[3]} ${#A[7]}',
        "<x> <a> <y> 1 0",
    ),
    ('A=(a b)\necho ${A[1]:=z} ${A[3]:=w} "${A[@]}"', "b w a b w"),
    ('A=(a "b c" d)\necho ${#A[@]} ${A[1]}', "3 b c"),
    # a subshell's change to an array its parent holds stays in it
    ('A=(1)\n( if [ -f x ]; then :; else A+=(); fi; A+=(2) )\necho "${A[@]}"', "1"),
    # arithmetic statements assign
    ("x=1\n(( x = 5 ))\n((x++))\nlet y=x+1 z=2\necho $x $y $z", "6 7 2"),
    # "${A[@]}" of no items is no word
    ('B=()\nA=("${B[@]}")\necho ${#A[@]}', "0"),
    ('f() { echo "$@" x; }\nf', "x"),
]


@pytest.mark.skipif(not HAS_BASH, reason="needs bash")
@pytest.mark.parametrize("text, words", ARRAYS_AS_BASH)
def test_arrays_read_as_bash_runs_them(text, words):
    assert words_of(text)[-1] == ["echo", *words.split()] == bash_words(text)


ARRAYS_NOT_KNOWN = [
    # an undecided if: the array has one or two items (A=y sets element 0 only)
    ('if [ -f x ]; then A=(p q); fi\nA=y\necho ${#A[@]} "${A[@]}" $A', [None, "y", None, "y"]),
    ('[ -f x ] && A=(1 2) || A=(1 3)\nA+=(z)\necho "${A[@]}" ${#A[@]}', [None, "z", None]),
    ("A=(1 2)\nif [ -f x ]; then A[5]=c; fi\necho ${#A[@]} ${A[1]} ${A[5]}", [None, "2", None]),
    # fields bash makes when the script runs
    ("A=($(ls))\necho ${#A[@]} ${A[0]}", [None, None]),
    ("A=(a $NOPE)\necho ${#A[@]} ${A[0]} ${A[1]}", [None, "a", None]),
    ("A=(a {1..3})\necho ${#A[@]}", [None]),
    ("A=(*.sh)\necho ${#A[@]}", [None]),
    ('A=("$(ls)" b)\necho ${#A[@]} ${A[1]}', ["2", "b"]),  # quoted: one field
    ('IFS=,\nX="a,b"\nA=($X)\necho ${#A[@]}', [None]),  # the reader splits at blanks only
    # indices not known, or before the first element
    ("A=(a b)\nA[$X]=c\necho ${#A[@]} ${A[0]}", [None, None]),
    ('A=(a b)\nunset "A[$X]"\necho ${#A[@]}', [None]),
    ("A=(a [$X]=b c)\necho ${#A[@]}", [None]),
    ('A=(a b c)\necho "<${A[-5]}>"', [None]),
    # what the reader does not follow
    ("declare -A M=([k]=1)\necho ${#M[@]} ${M[k]}", [None, None]),
    ("mapfile -t A < /dev/null\necho ${#A[@]}", [None]),
    ("A=(1 2)\nsource /dev/null\necho ${#A[@]}", [None]),
    ("A=(1 2)\n: $((A[1]=5))\necho ${A[1]}", [None]),
    ("A=(1 2)\n(( A[1] = 5 ))\necho ${A[1]} ${#A[@]}", [None, None]),
    # what arithmetic assigns from a value not known is not known
    ("G=1\n: $((G = $(nproc) * 2))\necho $G", [None]),
    ("G=1\n(( G = $(nproc) * 2 ))\necho $G", [None]),
    ('G=1\nlet "G = $(nproc) * 2"\necho $G', [None]),
]


@pytest.mark.skipif(not HAS_BASH, reason="needs bash")
@pytest.mark.parametrize("text, words", ARRAYS_NOT_KNOWN)
def test_arrays_unknown_where_bash_needs_the_run(text, words):
    read = words_of(text)[-1]
    assert read == ["echo", *words]
    assert consistent(read, bash_words(text))


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
