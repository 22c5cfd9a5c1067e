"""The core names no framework: a framework is its folder under ``translator/frameworks`` plus
its registration, so the modules that use frameworks hold no framework's name and no
framework's finding code in their code (docstrings and comments may give examples)."""

import ast
import re
from pathlib import Path

from paths import ROOT

from translator.frameworks import get, names

TRANSLATOR = ROOT / "translator"
#: Every module but the frameworks' own packages.
CORE = sorted(
    p for p in TRANSLATOR.rglob("*.py") if "frameworks" not in p.relative_to(TRANSLATOR).parts
)
#: Words that are a framework's name and, where they stand, mean something else: file -> words.
OTHER_MEANING = {
    "shell/launchers.py": {"hf"},  # the Hugging Face command line, among installers
}


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string nodes that are docstrings (module, class, function, attribute)."""
    out = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        for stmt in body:
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
                out.add(id(stmt.value))
    return out


def mentions(path: Path, words: set[str]) -> list[str]:
    """Each place in the code of ``path`` (not its docstrings) that names one of ``words``."""
    tree = ast.parse(path.read_text())
    skip = _docstrings(tree)
    pattern = re.compile(r"(?<![\w-])(" + "|".join(map(re.escape, sorted(words))) + r")(?![\w-])")
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            text = node.value
        elif isinstance(node, ast.Name):
            text = node.id
        elif isinstance(node, ast.Attribute):
            text = node.attr
        elif isinstance(node, ast.ImportFrom):
            text = (node.module or "").replace(".", " ")
        elif isinstance(node, ast.alias):
            text = node.name.replace(".", " ")
        else:
            continue
        hit = pattern.search(text)
        if hit:
            found.append(f"{path.relative_to(TRANSLATOR)}:{getattr(node, 'lineno', '?')}: {hit[0]}")
    return found


def test_the_core_names_no_framework_and_no_framework_code():
    frameworks = set(names())
    codes = {code for name in frameworks for code in get(name).codes}
    found = [
        hit
        for path in CORE
        for hit in mentions(path, frameworks | codes)
        if hit.rpartition(": ")[2] not in OTHER_MEANING.get(hit.partition(":")[0], set())
    ]
    assert len(CORE) > 100 and not found, "\n".join(found)


def test_the_check_would_see_a_framework_name(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        '"""deepspeed in a docstring is fine."""\nX = {"hf-auto"}\nif engine == "deepspeed":\n    pass\n'
    )
    assert [h.split(": ")[1] for h in mentions_at(bad, {"deepspeed", "hf-auto"})] == [
        "hf-auto",
        "deepspeed",
    ]


def mentions_at(path: Path, words: set[str]) -> list[str]:
    global TRANSLATOR
    saved, TRANSLATOR = TRANSLATOR, path.parent
    try:
        return mentions(path, words)
    finally:
        TRANSLATOR = saved


def test_the_shell_names_no_launcher_a_framework_brings():
    """The shell defines the generic launchers (torchrun, srun, mpirun); those of a framework
    (DeepSpeed's runner, ``accelerate launch``) come with its package, and the shell's code
    compares no launcher's name with theirs."""
    brought = {launcher.name for name in names() for launcher in get(name).launchers}
    assert {"deepspeed", "accelerate"} <= brought
    shell = sorted((TRANSLATOR / "shell").glob("*.py"))
    found = [hit for path in shell for hit in mentions(path, brought)]
    assert not found, "\n".join(found)
