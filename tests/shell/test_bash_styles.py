"""The reader on constructs met in published launch scripts. Where every word is known, the
words are checked against what real bash makes of the same script (``printf '<%s>'``)."""

import pytest
from real_bash import HAS_BASH, bash_words

from translator.shell import UNKNOWN_MARK, parse
from translator.shell.expand import HERE


def last_words(text: str) -> list:
    return [w.text for w in parse(text, "t.sh").commands[-1]]


KNOWN = [
    'X=1\nY=2\necho "$X $Y"\n',
    'A=(a b)\nB=(c d)\necho "run ${A[@]} ${B[@]}"\n',
    'o="--x 1"\necho "torchrun x.py\n ${o}"\n',
    'o=1\necho "a \\\n  $o" b\n',
    'P=4\nM=2\nCMD="--pp $P $M"\necho $CMD\n',
    'G=" \\\n    --gbs 8 \\\n    "\nC=" \\\n    x.py \\\n    $G \\\n    "\necho $C\n',
    'L="run --n 2"\nC="x.py --m 1"\nS="$L --rank 0 $C"\necho $S\n',
]


@pytest.mark.skipif(not HAS_BASH, reason="needs bash")
@pytest.mark.parametrize("text", KNOWN)
def test_expansions_inside_strings_split_as_bash_splits_them(text):
    """tree-sitter puts the blanks (and line continuations) before a ``$`` inside a string into
    the expansion's node; they are text, and both variables are read."""
    assert last_words(text) == bash_words(text)


def test_an_unknown_piece_keeps_its_known_neighbours_in_eval_and_bash_c():
    script = parse(
        'C="x.py --save $(pwd)/ckpt --mbs 4"\neval "$C"\nsrun -N 2 bash -c "python $C"\n', "t.sh"
    )
    evaluated, srun_inner = script.commands[0], script.commands[-1]
    assert [w.text for w in evaluated] == ["x.py", "--save", None, "--mbs", "4"]
    assert evaluated[2].why_unknown == HERE  # still unknown: a path only the run knows
    # the string bash -c runs keeps the launcher words before it
    assert [w.text for w in srun_inner][:4] == ["srun", "-N", "2", "python"]
    assert [w.text for w in srun_inner][-2:] == ["--mbs", "4"]


def test_a_last_line_ending_in_a_backslash_parses():
    assert last_words("torchrun x.py \\\n  --mbs 2 \\\n") == ["torchrun", "x.py", "--mbs", "2"]


def test_source_makes_what_was_set_before_it_unknown():
    script = parse(
        "#SBATCH --nodes=4\nTP=2\nsource ./env.sh\nPP=4\necho $TP $PP $SLURM_NNODES\n", "t.sh"
    )
    words = script.commands[-1]
    assert [w.text for w in words] == ["echo", None, "4", "4"]
    assert words[1].why_unknown == "$TP may be changed by source ./env.sh on line 3"
    assert script.notes == ["line 3: source ./env.sh is not read"]


def test_a_value_one_path_extends_keeps_what_every_path_shares():
    script = parse(
        'opts="--mbs 2 --gbs 16"\n'
        'if [[ $(nproc) -gt 1 ]]; then opts="${opts} --no-pp"; fi\n'
        'if [ -n "$(hostname)" ]; then opts="nsys profile $opts --profile"; fi\n'
        "echo $opts\n",
        "t.sh",
    )
    words = script.commands[-1]
    assert [w.text for w in words] == ["echo", None, "--mbs", "2", "--gbs", "16", None, None]
    assert words[1].maybe == (("nsys profile ",), ("",))
    assert words[6].maybe == ((" --no-pp",), ("",))


def test_an_array_one_path_extends_keeps_its_shared_items():
    script = parse(
        "A=(--tp 2 --pp 4)\nif [ $(nproc) -gt 1 ]; then A+=(--vp $Y); fi\necho ${A[@]}\n", "t.sh"
    )
    words = script.commands[-1]
    assert [w.text for w in words] == ["echo", "--tp", "2", "--pp", "4", None]
    assert words[-1].maybe == (("--vp", UNKNOWN_MARK), ())


def test_paths_that_disagree_are_not_merged_into_a_guess():
    words = last_words('if [ "$(hostname)" = a ]; then X="--tp 2"; else X="--pp 4"; fi\necho $X\n')
    assert words == ["echo", None]


def test_commands_remember_the_undecided_branch_they_run_under():
    script = parse("if [[ $BATCH -eq 0 ]]; then torchrun x.py; else srun x.py; fi\nls\n", "t.sh")
    ((first, k1),) = script.paths[0]
    ((second, k2),) = script.paths[1]
    assert first == second and first[1] == "the if on line 1" and k1 != k2
    assert script.paths[2] == ()
