"""The shape of the code: the largest classes and functions (lines, cyclomatic complexity), the
import cycles among translator's modules (once for the imports run at import time, once
counting the imports inside functions too), and the floors: every module's floor in
:data:`FLOORS` and each import that runs from a lower floor up to a higher one, counting every
import (inside functions and under ``TYPE_CHECKING`` too: a type the reader must look up above
is an upward dependency all the same). tests/project/test_architecture.py holds the code to both.

    python scripts/code_shape.py [ROOT]     # ROOT: a checkout (default: this one)
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

BRANCHES = (
    ast.If,
    ast.For,
    ast.While,
    ast.AsyncFor,
    ast.With,
    ast.ExceptHandler,
    ast.IfExp,
    ast.comprehension,
    ast.Assert,
    ast.match_case,
)


def complexity(node: ast.AST) -> int:
    """McCabe's count plus one per extra operand of ``and``/``or`` (as radon counts)."""
    count = 1
    for child in ast.walk(node):
        if child is not node and isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if isinstance(child, BRANCHES):
            count += 1
        elif isinstance(child, ast.BoolOp):
            count += len(child.values) - 1
    return count


#: The floors, bottom first: each names folders of translator/ and the few modules kept at its
#: root for their public import paths (``__init__`` is the package itself). A module's floor is
#: its folder's; a module may import only from its own floor and those below.
#: docs/architecture.md says why each is where it is.
FLOORS: tuple[tuple[str, ...], ...] = (
    # the words: errors, findings, chatter, files and their parsing
    ("words",),
    # launch scripts read with tree-sitter-bash, without running them
    ("shell",),
    # the values: the batch and its solver, the model and its memory, a file's reading
    ("batch", "model", "spec", "reading"),
    # what a framework implements and may use: contract, registry, inspection, findings
    ("plugin",),
    # the operations on files and jobs: reading a job, editing, what is said of a batch
    ("job", "edit", "checks", "inspection", "render", "guard"),
    # what runs inside a launched process
    ("rank",),
    # one package per framework
    ("frameworks",),
    # what starts processes
    ("launch",),
    # the command line on top
    ("cli", "__main__", "__init__"),
)


def floor_of(module: str) -> int | None:
    """The index in :data:`FLOORS` of ``module``'s floor: that of its folder (or, at the
    package's root, its own name)."""
    parts = module.split(".")
    first = parts[1] if len(parts) > 1 else "__init__"
    return next((i for i, names in enumerate(FLOORS) if first in names), None)


def unplaced(root: Path) -> list[str]:
    """The folders and root modules of translator/ that no floor names."""
    named = {n for names in FLOORS for n in names}
    here = {p.stem if p.is_file() else p.name for p in (root / "translator").iterdir()}
    here = {n for n in here if n != "__pycache__" and not n.startswith(".")}
    return sorted(here - named)


def every_import(root: Path) -> dict[str, set[tuple[str, int]]]:
    """module -> (translator module it imports, line), for every import statement anywhere."""
    modules = {module_of(root, p): p for p in (root / "translator").rglob("*.py")}

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    found: dict[str, set[tuple[str, int]]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found[name] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                module = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    module = ".".join(parts + ([module] if module else []))
                targets = [f"{module}.{a.name}" for a in node.names]
            for target in targets:
                resolved = known(target)
                if resolved and resolved != name:
                    found[name].add((resolved, node.lineno))
    return found


def upward(root: Path) -> list[tuple[str, int, str]]:
    """(module, line, what it imports) for each import from a lower floor up to a higher one."""
    out = []
    for name, targets in sorted(every_import(root).items()):
        here = floor_of(name)
        for target, line in sorted(targets):
            there = floor_of(target)
            if here is not None and there is not None and there > here:
                out.append((name, line, target))
    return out


def units(root: Path):
    for path in sorted((root / "translator").rglob("*.py")):
        tree = ast.parse(path.read_text())
        name = str(path.relative_to(root))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                lines = node.end_lineno - node.lineno + 1
                kind = "class" if isinstance(node, ast.ClassDef) else "def"
                yield kind, f"{name}:{node.lineno} {node.name}", lines, complexity(node)


def module_of(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def top_imports(tree: ast.Module, here: str, package: bool, everywhere: bool) -> set[str]:
    """The modules ``here`` imports when it is imported (or, ``everywhere``, in any function
    too); never those under ``TYPE_CHECKING``."""
    out: set[str] = set()
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.If) and not _type_checking(node):
            todo += node.body + node.orelse
        elif isinstance(node, ast.Try):
            todo += node.body + node.orelse + node.finalbody
        elif everywhere and isinstance(
            node,
            (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.With, ast.For, ast.While),
        ):
            todo += node.body
        elif isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = here.split(".")[: len(here.split(".")) - node.level + (1 if package else 0)]
                base = ".".join(parts + ([base] if base else []))
            # ``from pkg import mod`` depends on pkg.mod (pkg itself runs first anyway, as the
            # parent of any of its modules); ``from mod import name`` on mod
            out |= {f"{base}.{a.name}" for a in node.names} | {f"{base}:names"}
    return out


def cycles(root: Path, everywhere: bool) -> list[list[str]]:
    modules = {}
    for path in sorted((root / "translator").rglob("*.py")):
        name = module_of(root, path)
        modules[name] = (ast.parse(path.read_text()), path.name == "__init__.py")
    graph = {}
    for name, (tree, package) in modules.items():
        found = top_imports(tree, name, package, everywhere)
        named = {m for m in found if m in modules}
        named |= {
            m[: -len(":names")]
            for m in found
            if m.endswith(":names")
            and not any(n.startswith(m[: -len(":names")] + ".") for n in named)
        }
        graph[name] = {m for m in named if m in modules and m != name}
    return strongly_connected(graph)


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    sys.setrecursionlimit(10000)
    for v in graph:
        if v not in index:
            visit(v)
    return found


def main() -> None:
    root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent)
    everything = list(units(root))
    for kind, label in (("class", "largest classes"), ("def", "largest functions")):
        print(f"{label} (lines):")
        for _, name, lines, _ in sorted(
            (u for u in everything if u[0] == kind), key=lambda u: -u[2]
        )[:5]:
            print(f"  {lines:5d}  {name}")
    print("most complex functions:")
    for _, name, _, cc in sorted((u for u in everything if u[0] == "def"), key=lambda u: -u[3])[:5]:
        print(f"  {cc:5d}  {name}")
    files = sorted((root / "translator").rglob("*.py"))
    big = max(files, key=lambda p: len(p.read_text().splitlines()))
    print(
        f"modules: {len(files)}; largest: {big.relative_to(root)} "
        f"({len(big.read_text().splitlines())} lines)"
    )
    for everywhere, what in ((False, "at import time"), (True, "counting imports in functions")):
        found = cycles(root, everywhere)
        print(f"import cycles {what}: {len(found)}")
        for group in found:
            print(f"  {len(group)} modules: {', '.join(group)}")
    modules = sorted(every_import(root))
    print("floors, bottom first (modules on each):")
    for index, prefixes in enumerate(FLOORS):
        count = sum(floor_of(m) == index for m in modules)
        print(
            f"  {index}  {count:3d}  {', '.join(p.removeprefix('translator.') for p in prefixes)}"
        )
    homeless = [m for m in modules if floor_of(m) is None]
    if homeless:
        print(f"modules on no floor: {', '.join(homeless)}")
    up = upward(root)
    print(f"imports from a lower floor up to a higher one: {len(up)}")
    for name, line, target in up:
        print(f"  {name}:{line} -> {target}")


if __name__ == "__main__":
    main()
