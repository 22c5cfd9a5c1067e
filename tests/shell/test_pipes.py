"""A command substitution of text tools on text the script knows is what they print
(``$(echo "$IPS" | wc -l)``); any other command, or an unknown word, leaves it unknown."""

import pytest

from translator import shell


def value(script: str, name: str = "V") -> str | None:
    return shell.parse(script, "t.sh").variables[name][-1].text


HOSTS = 'IPS="10.0.0.1\n10.0.0.2\n10.0.0.3"\n'


@pytest.mark.parametrize(
    "substitution, printed",
    [
        ('$(echo "$IPS" | wc -l)', "3"),
        ('`echo "$IPS" | head -n1`', "10.0.0.1"),
        ('$(echo "$IPS" | head -2 | tail -n 1)', "10.0.0.2"),
        ('$(echo "$IPS" | tail -1 | cut -d. -f4)', "3"),
        ("$(echo a b c | awk '{print $2}')", "b"),
        ("$(echo -n 8)", "8"),
        ("$(echo $IPS | wc -l)", "1"),  # unquoted: one line of three words
    ],
)
def test_text_tools_on_known_text_print_what_they_print(substitution, printed):
    assert value(f"{HOSTS}V={substitution}\n") == printed


@pytest.mark.parametrize(
    "substitution",
    [
        "$(nvidia-smi -L | wc -l)",  # a command that asks the machine
        '$(echo "$UNSET_ELSEWHERE" | wc -l)',  # text the script does not know
        '$(echo "$IPS" | sort | head -1)',  # a filter not read
        '$(echo "$IPS" | head -c 4)',
        '$(echo "$IPS" | wc -c)',
    ],
)
def test_anything_else_stays_unknown(substitution):
    assert value(f"{HOSTS}V={substitution}\n") is None
