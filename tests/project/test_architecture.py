"""The architecture: floors that import only downward, and no import cycles.

The floors are :data:`FLOORS` of ``scripts/code_shape.py`` (which prints them): every module
has one, and no import, anywhere in a module (inside functions and under ``TYPE_CHECKING``
too), reaches a higher floor. The cycle checks below read imports as they run:

Read from the source with ``ast``: an import counts when it runs at import time (module level,
also under ``if``/``try``/``with`` and in class bodies; not inside a function, nor under ``if
TYPE_CHECKING``). A submodule's own packages are initialised before it and are no edge, unless
it takes a name (not a submodule) from one. The ranks' floor (their context, the harness, the
counter, the engines) also imports nothing of the launcher above it, and no command imports
another command's module, not even in a function."""

import ast
import runpy

from paths import ROOT

shape = runpy.run_path(str(ROOT / "scripts" / "code_shape.py"), run_name="code_shape")
MODULES = {
    ".".join(p.parts[:-1] if p.name == "__init__.py" else p.with_suffix("").parts): ROOT / p
    for p in (q.relative_to(ROOT) for q in (ROOT / "translator").rglob("*.py"))
}
#: The launcher: what starts ranks and reads their reports.
LAUNCHER = {m for m in MODULES if m.startswith("translator.launch")}
#: The modules of translator/cli/ that are no command.
SHARED = {"command", "output", "batch_options", "run_options"}
#: What runs inside a rank under the worker.
RANK_FLOOR = [
    "translator.batch.counting",
    "translator.guard",
    "translator.rank.context",
    "translator.rank.harness",
    "translator.rank.torch_engine",
    *(m for m in MODULES if m.startswith("translator.frameworks.") and m.endswith(".engine")),
]


def _prefixes(dotted: str) -> list[str]:
    parts = dotted.split(".")
    return [".".join(parts[:k]) for k in range(1, len(parts) + 1)]


def imports(name: str, functions: bool = False) -> set[str]:
    """The modules of translator that importing ``name`` imports (``functions``: also the
    imports inside its functions)."""
    path = MODULES[name]
    own = set(_prefixes(name)[:-1])
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(statements):
        for s in statements:
            if isinstance(s, ast.Import):
                for alias in s.names:
                    found.update(m for m in _prefixes(alias.name) if m not in own)
            elif isinstance(s, ast.ImportFrom):
                base = package.split(".")[: len(package.split(".")) - s.level + 1]
                module = ".".join(base + [s.module or ""]).strip(".") if s.level else s.module
                found.update(m for m in _prefixes(module) if m not in own)
                for alias in s.names:
                    if f"{module}.{alias.name}" in MODULES:
                        found.add(f"{module}.{alias.name}")
                    elif module in own:  # a name of a package that is still being initialised
                        found.add(module)
            elif isinstance(s, ast.If):
                checking = getattr(s.test, "id", getattr(s.test, "attr", None)) == "TYPE_CHECKING"
                visit(s.orelse if checking else s.body + s.orelse)
            elif isinstance(s, ast.Try):
                visit(s.body + s.orelse + s.finalbody + [x for h in s.handlers for x in h.body])
            elif isinstance(s, ast.With | ast.ClassDef | ast.For | ast.While):
                visit(s.body)
            elif functions and isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef):
                visit(s.body)

    visit(ast.parse(path.read_text()).body)
    return {m for m in found if m in MODULES and m != name}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = stack[stack.index(v) :]
            del stack[stack.index(v) :]
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            strong(v)
    return found


def test_no_module_imports_itself_back_at_import_time():
    assert cycles({name: imports(name) for name in MODULES}) == []


def test_not_even_function_level_imports_go_round():
    assert cycles({name: imports(name, functions=True) for name in MODULES}) == []


def test_the_ranks_floor_imports_nothing_of_the_launcher():
    found = {m: imports(m, functions=True) & LAUNCHER for m in RANK_FLOOR}
    assert not any(found.values()), found


def test_no_command_imports_another_commands_module():
    """What commands share is in cli/command.py, cli/output.py, cli/batch_options.py and cli/run_options.py, defined once."""
    commands = {
        m for m in MODULES if m.startswith("translator.cli.") and m.rpartition(".")[2] not in SHARED
    }
    found = {m: imports(m, functions=True) & commands for m in commands}
    assert not any(found.values()), found


def test_the_check_sees_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_every_module_stands_on_a_floor():
    assert [m for m in MODULES if shape["floor_of"](m) is None] == []


def test_the_floors_are_the_folders():
    """Every folder of translator/ and every module at its root is on a floor, and the root
    keeps only the public import paths (the spec, a reading, an inspection, rendering, the
    guard) beside the package and its ``__main__``: at most 8 modules."""
    assert shape["unplaced"](ROOT) == []
    assert len(list((ROOT / "translator").glob("*.py"))) <= 8


def test_the_check_sees_a_folder_on_no_floor(tmp_path):
    (tmp_path / "translator" / "stray").mkdir(parents=True)
    (tmp_path / "translator" / "loose.py").write_text("")
    assert shape["unplaced"](tmp_path) == ["loose", "stray"]


def test_no_import_reaches_a_higher_floor():
    assert shape["upward"](ROOT) == []


def test_the_check_sees_an_upward_import(tmp_path):
    """A core module that imports the command line, even for a type, is caught with its line."""
    for name, text in {
        "__init__.py": "",
        "words/errors.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
        "    from translator.cli import x\n",
        "cli/__init__.py": "x = 1\n",
    }.items():
        (tmp_path / "translator" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "translator" / name).write_text(text)
    assert shape["upward"](tmp_path) == [("translator.words.errors", 3, "translator.cli")]


def test_the_tests_mirror_the_source_and_stay_readable():
    """Each framework package has its tests in ``tests/frameworks/<name>/``, the shell reader,
    the launchers, the ranks and the command line theirs in ``tests/shell``, ``launch``,
    ``rank`` and ``cli``; no test file is over 600 lines."""
    tests = ROOT / "tests"
    packages = {
        p.name
        for p in (ROOT / "translator" / "frameworks").iterdir()
        if p.is_dir() and not p.name.startswith("__") and p.name != "shared"
    }
    assert packages <= {p.name for p in (tests / "frameworks").iterdir() if p.is_dir()}
    for floor in ("shell", "launch", "rank", "cli"):
        assert list((tests / floor).glob("test_*.py")), floor
    long = {
        str(p.relative_to(tests)): n
        for p in tests.rglob("*.py")
        if (n := p.read_text().count("\n")) > 600
    }
    assert not long
