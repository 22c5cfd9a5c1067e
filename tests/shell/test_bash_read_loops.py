"""What the script computes itself is followed as bash runs it: ``read`` of a here-string
(``IFS=, read -r TP PP <<< "$config"``) and the rounds of a ``for`` loop over known words
(``for config in "${LAYOUTS[@]}"``), checked against real bash."""

import pytest
from real_bash import HAS_BASH, bash_words, consistent
from run_batchspec import inspected

from translator.shell import parse
from translator.shell.read_line import fields

needs_bash = pytest.mark.skipif(not HAS_BASH, reason="bash is not installed")

SCRIPTS = [
    'config="2,1"\nIFS=\',\' read -r TP PP <<< "$config"\necho "$TP" "$PP"\n',
    'IFS=, read -r A B <<< " x , y ,z "\necho "$A" "$B"\n',
    'read A B <<< "  a   b c  "\necho "$A" "$B"\n',
    'IFS=: read -r A B C <<< "1::3"\necho "$A" "$B" "$C"\n',
    'read -r A <<< "  lead trail  "\necho "[$A]"\n',
    'read -r A B C <<< "one"\necho "[$A]" "[$B]" "[$C]"\n',
    'IFS=", " read -r A B <<< "8, 16"\necho "$A" "$B"\n',
    'line="4 8"\nread -r G M <<< $line\necho $G $M\n',
    "for x in 1 2 3; do LAST=$x; done\necho $LAST $x\n",
    "S=0\nfor n in 4 8; do S=$((S + n)); done\necho $S\n",
    'L=("2,1" "1,2")\nfor c in "${L[@]}"; do IFS=, read -r T P <<< "$c"; done\necho $T $P\n',
    'for x in a b c; do if [ "$x" = b ]; then break; fi; Y=$x; done\necho $x $Y\n',
    'Y=\nfor x in a b c; do [ "$x" = b ] && continue; Y="$Y$x"; done\necho $Y\n',
]


@needs_bash
@pytest.mark.parametrize("script", SCRIPTS)
def test_read_and_for_agree_with_bash(script):
    words = [w.text for w in parse(script, "t.sh").commands[-1]]
    assert None not in words, words
    assert consistent(words, bash_words(script))


def test_a_read_of_standard_input_stays_unknown():
    script = parse("read -r MBS\necho $MBS\n", "t.sh")
    assert script.commands[-1][1].text is None


def test_a_read_with_an_option_not_followed_stays_unknown():
    script = parse('read -d , A <<< "1,2"\necho $A\n', "t.sh")
    assert script.commands[-1][1].text is None


def test_a_loop_over_words_not_known_may_run_or_not():
    script = parse("for x in $(ls); do MBS=$x; done\necho $MBS\n", "t.sh")
    assert script.commands[-1][1].text is None


def test_fields_split_as_bash_reads():
    assert fields(" x , y ,z ", ",", 2) == [" x ", " y ,z "]
    assert fields("  a   b c  ", " \t\n", 2) == ["a", "b c"]
    assert fields("1::3", ":", 3) == ["1", "", "3"]


def test_a_loop_over_layouts_is_read_as_its_first_round_and_says_so(tmp_path):
    job = tmp_path / "sweep.sh"
    job.write_text(
        "#!/bin/bash\n"
        'LAYOUTS=("2,1" "1,2")\n'
        'for layout in "${LAYOUTS[@]}"; do\n'
        '  IFS="," read -r TP PP <<< "$layout"\n'
        "  torchrun --nproc_per_node 8 pretrain_gpt.py --tensor-model-parallel-size $TP \\\n"
        "    --pipeline-model-parallel-size $PP --global-batch-size 32 --micro-batch-size 2\n"
        "done\n"
    )
    out = inspected(job)
    assert (out["tensor_parallel_size"], out["pipeline_parallel_size"]) == (2, 1)
    assert (out["data_parallel_size"], out["gradient_accumulation_steps"]) == (4, 4)
    several = [f for f in out["findings"] if f["code"] == "job-launches-several"]
    assert several and "2 times" in several[0]["message"]
    assert "read as the first round of its loop" in several[0]["message"]
