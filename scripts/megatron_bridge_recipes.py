"""Megatron-Bridge's recipe values: the batch and parallel sizes each recipe function under
``src/megatron/bridge/recipes/`` sets, read from a checkout's source with :mod:`ast` (never
imported), written to ``translator/frameworks/megatron_bridge/recipe_values.py``.

    python scripts/megatron_bridge_recipes.py GIT_DIR [--rev REV] [--out PATH]

``GIT_DIR`` is a clone (or a bare git directory) of Megatron-Bridge; files are read at ``REV``
(``HEAD``) with ``git show``. The rules, for each recipe function (public, ``..._config``,
returning a ``ConfigContainer``):

- only the function's top-level statements count, in order, the last one winning; an
  assignment under an ``if``, a loop, ``with`` or ``try`` makes that key unknown;
- a value is an integer literal, or a name bound to one (a module constant assigned once, or a
  local the function assigned a literal above); anything else (a parameter, an expression)
  makes the key unknown;
- ``cfg = helper()`` starts from what that helper returns, by the same rules, when the helper
  is a function of Megatron-Bridge's source; else its keys are left out;
- ``helper(cfg)`` or ``helper(cfg.model)`` applies what that function assigns to its parameter
  (by the same rules); one outside Megatron-Bridge's source makes every key it could change
  unknown; ``cfg.model = ...`` replaces the block, so the block's keys are unknown;
- ``from ... import recipe as legacy_name`` in the recipes package makes the legacy name a
  recipe with the same values;
- a name Megatron-Bridge's benchmark recipes (``perf_recipes``) also export is left out: the
  recipe runner may run the benchmark's definition under it; so is a name two recipes with
  different values define.

Unknown keys are left out of the table: the reader keeps them unknown.
"""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "translator" / "frameworks" / "megatron_bridge" / "recipe_values.py"
SOURCE_ROOT = "src/"
PACKAGE = "megatron.bridge"
RECIPES = "megatron.bridge.recipes"
BENCHMARKS = "megatron.bridge.perf_recipes"
#: The attributes a recipe sets -> the key the reader's rules name (``rules.BRIDGE``); the
#: runner aligns the model's sequence with the dataset's, so the dataset's is the one counted.
KEYS = {
    ("model", "tensor_model_parallel_size"): "model.tensor_model_parallel_size",
    ("model", "pipeline_model_parallel_size"): "model.pipeline_model_parallel_size",
    ("model", "context_parallel_size"): "model.context_parallel_size",
    ("train", "global_batch_size"): "train.global_batch_size",
    ("train", "micro_batch_size"): "train.micro_batch_size",
    ("dataset", "seq_length"): "dataset.seq_length",
}
#: Built-in functions that read what they are given and change nothing.
READERS = frozenset({"callable", "getattr", "hasattr", "id", "isinstance", "len", "print", "repr"})
#: A key whose value is not known (left out of the table).
UNKNOWN = None
State = dict[str, int | None]


# Reading the checkout --------------------------------------------------------------------


@dataclass
class Checkout:
    """A Megatron-Bridge git directory at one revision."""

    git_dir: Path
    """The clone or bare git directory."""
    rev: str
    """The revision read (``HEAD``)."""

    def git(self, *args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(self.git_dir), *args], check=True, capture_output=True, text=True
        ).stdout

    def commit(self) -> str:
        return self.git("rev-parse", f"{self.rev}^{{commit}}").strip()

    def modules(self) -> dict[str, str]:
        """Dotted module name -> its path, for every Python file of the package's source."""
        root = SOURCE_ROOT + PACKAGE.replace(".", "/")
        paths = self.git("ls-tree", "-r", "--name-only", self.rev, "--", root).splitlines()
        return {module_name(p): p for p in paths if p.endswith(".py")}

    def text(self, path: str) -> str:
        return self.git("show", f"{self.rev}:{path}")


def module_name(path: str) -> str:
    """``src/megatron/bridge/recipes/llama/__init__.py`` -> ``megatron.bridge.recipes.llama``."""
    parts = path.removeprefix(SOURCE_ROOT).removesuffix(".py").split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@dataclass(frozen=True)
class Function:
    """A module-level function of the package."""

    module: str
    """Its dotted module."""
    node: ast.FunctionDef
    """Its definition."""

    @property
    def key(self) -> tuple[str, str]:
        return self.module, self.node.name


@dataclass
class Source:
    """The package's modules, parsed when first asked for."""

    checkout: Checkout
    """Where the files are read."""
    paths: dict[str, str] = field(default_factory=dict)
    """Dotted module -> path."""
    parsed: dict[str, ast.Module] = field(default_factory=dict)
    """Modules parsed so far."""

    def module(self, name: str) -> ast.Module | None:
        if name not in self.paths:
            return None
        if name not in self.parsed:
            self.parsed[name] = ast.parse(self.checkout.text(self.paths[name]), self.paths[name])
        return self.parsed[name]

    def is_package(self, name: str) -> bool:
        return self.paths.get(name, "").endswith("/__init__.py")

    def resolve(self, module: str, name: str, seen: frozenset = frozenset()) -> Function | None:
        """The function ``name`` is in ``module``: defined there or imported (``from X import
        a as name``, ``from X import *``) from a module of the package."""
        tree = self.module(module)
        if tree is None or (module, name) in seen:
            return None
        seen = seen | {(module, name)}
        found = None
        for node in tree.body:  # the last binding wins, as at import time
            if isinstance(node, ast.FunctionDef) and node.name == name:
                found = Function(module, node)
            elif isinstance(node, ast.ImportFrom):
                origin = self.imported(module, node)
                for alias in node.names:
                    if alias.name == "*" and origin is not None:
                        found = self.resolve(origin, name, seen) or found
                    elif (alias.asname or alias.name) == name and origin is not None:
                        found = self.resolve(origin, alias.name, seen)
        return found

    def imported(self, module: str, node: ast.ImportFrom) -> str | None:
        """The dotted module a ``from ... import`` names, relative ones resolved."""
        if node.level == 0:
            return node.module
        base = module.split(".")
        keep = len(base) - node.level + (1 if self.is_package(module) else 0)
        return ".".join(base[:keep] + ([node.module] if node.module else []))

    def constants(self, module: str) -> dict[str, int]:
        """The module's integer constants: names it binds once, at its top level, to a literal."""
        tree = self.module(module)
        counts: dict[str, int] = {}
        values: dict[str, int | None] = {}
        for node in ast.walk(tree) if tree is not None else ():
            for target in bound_names(node):
                counts[target] = counts.get(target, 0) + 1
        for node in tree.body if tree is not None else ():
            target, value = simple_assignment(node)
            if target is not None:
                values[target] = literal(value)
        return {k: v for k, v in values.items() if v is not None and counts.get(k) == 1}


def bound_names(node: ast.AST) -> Iterator[str]:
    """Names a statement or expression binds (assignment and loop targets, ``global``)."""
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
        yield node.id
    elif isinstance(node, ast.Global):
        yield from node.names


def simple_assignment(node: ast.stmt) -> tuple[str | None, ast.expr | None]:
    """``name = value`` or ``name: T = value``: the name and the value."""
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        target = node.targets[0]
        if isinstance(target, ast.Name):
            return target.id, node.value
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return node.target.id, node.value
    return None, None


def arguments(node: ast.FunctionDef) -> list[ast.arg]:
    """A function's parameters, every kind."""
    a = node.args
    return [*a.posonlyargs, *a.args, *a.kwonlyargs, *filter(None, (a.vararg, a.kwarg))]


def calls(statement: ast.stmt) -> list[ast.Call]:
    """The calls a simple statement makes, in the order they run (inner ones first)."""
    return sorted(
        (n for n in ast.walk(statement) if isinstance(n, ast.Call)),
        key=lambda n: (n.end_lineno or 0, n.end_col_offset or 0),
    )


def literal(value: ast.expr | None) -> int | None:
    """An integer literal's value (``True`` is no count)."""
    if isinstance(value, ast.Constant) and type(value.value) is int:
        return value.value
    return None


def is_recipe(node: ast.stmt) -> bool:
    """A recipe function: public, named ``..._config``, returning a ``ConfigContainer``."""
    return (
        isinstance(node, ast.FunctionDef)
        and not node.name.startswith("_")
        and node.name.endswith("_config")
        and node.returns is not None
        and "ConfigContainer" in ast.unparse(node.returns)
    )


# What a function sets --------------------------------------------------------------------


@dataclass
class Extractor:
    """What functions set, each computed once."""

    source: Source
    """The package."""
    returned_states: dict[tuple[str, str], State] = field(default_factory=dict)
    """(module, function) -> the state of the config it returns."""
    applied_states: dict[tuple[str, str, str, str | None], State] = field(default_factory=dict)
    """(module, function, parameter, block) -> what it sets on the config (or its block) passed
    as the parameter."""

    def returned(self, fn: Function) -> State:
        """What the config ``fn`` returns holds: the returned name's state, or the returned
        call's; nothing known where it returns no name at its top level."""
        if fn.key not in self.returned_states:
            self.returned_states[fn.key] = {}  # a recursive call knows nothing
            self.returned_states[fn.key] = self._returned(fn)
        return self.returned_states[fn.key]

    def _returned(self, fn: Function) -> State:
        ret = next((s for s in fn.node.body if isinstance(s, (ast.Return, ast.Raise))), None)
        if not isinstance(ret, ast.Return) or ret.value is None:
            return {}
        if isinstance(ret.value, ast.Call):
            called = self.callee(fn, ret.value)
            return dict(self.returned(called)) if called is not None else {}
        if isinstance(ret.value, ast.Name):
            return Walk(self, fn, ret.value.id).run()
        return {}

    def applied(self, fn: Function, parameter: str, block: str | None) -> State:
        """What ``fn`` sets on the config (or on its ``block``, ``cfg.model``) passed as
        ``parameter``, as keys of the whole config."""
        key = (*fn.key, parameter, block)
        if key not in self.applied_states:
            self.applied_states[key] = {}
            self.applied_states[key] = Walk(self, fn, parameter, block, applied=True).run()
        return self.applied_states[key]

    def callee(self, fn: Function, call: ast.Call) -> Function | None:
        """The package's function a call in ``fn`` names (``helper(...)``), if any."""
        if isinstance(call.func, ast.Name):
            return self.source.resolve(fn.module, call.func.id)
        return None


@dataclass
class Walk:
    """One pass over a function's top-level statements, following one config variable."""

    extractor: Extractor
    """Where called functions are read."""
    fn: Function
    """The function walked."""
    var: str
    """The config's name in it (the returned name, or the parameter it was passed as)."""
    block: str | None = None
    """The config's block the variable holds (``model``), or ``None`` for the whole config."""
    applied: bool = False
    """Whether the config was passed in (its state starts empty: only what is set here)."""
    state: State = field(default_factory=dict)
    """Key -> value so far (``UNKNOWN`` where it is not known)."""
    names: dict[str, int | None] = field(default_factory=dict)
    """Local names bound so far -> their literal value, or ``None``."""
    unsure: bool = False
    """Whether the statements walked now may not run (under an ``if``, after an early return)."""

    def run(self) -> State:
        constants = self.extractor.source.constants(self.fn.module)
        params = {a.arg for a in arguments(self.fn.node)}
        self.names = {k: v for k, v in constants.items() if k not in params}
        self.names |= dict.fromkeys(params)
        for statement in self.fn.node.body:
            if isinstance(statement, (ast.Return, ast.Raise)):
                break
            if isinstance(statement, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Expr)):
                for call in calls(statement):
                    self.call(call)
                self.statement(statement)
            else:
                self.compound(statement)
        return self.state

    def compound(self, statement: ast.stmt) -> None:
        """A statement holding others (``if``, a loop, ``with``, ``try``): each assignment and
        call in it may or may not run."""
        was = self.unsure
        self.unsure = True
        for inner in ast.walk(statement):
            if isinstance(inner, ast.Call):
                self.call(inner)
            elif isinstance(inner, ast.stmt):
                self.statement(inner)
        self.unsure = was
        defined = isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        if not defined and any(isinstance(n, (ast.Return, ast.Raise)) for n in ast.walk(statement)):
            self.unsure = True  # what follows runs only where it did not return

    def statement(self, statement: ast.stmt) -> None:
        """What one statement binds: the config's keys, its blocks, local names."""
        if isinstance(statement, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            value = None if isinstance(statement, ast.AugAssign) else statement.value
            for target in targets:
                self.assign(target, value)
            self.aliased(value)
        else:
            for node in ast.walk(statement):
                for name in bound_names(node):
                    self.names[name] = None  # loop targets, ``with ... as``, ``except ... as``

    def assign(self, target: ast.expr, value: ast.expr | None) -> None:
        path = self.path(target)
        if isinstance(target, ast.Name):
            self.bind(target.id, value)
        elif path is not None:
            self.set_path(path, value)
        else:  # unpacked or subscripted: no literal reaches a key
            for inner in ast.walk(target):
                inner_path = self.path(inner) if isinstance(inner, ast.expr) else None
                if inner_path is not None:
                    self.set_path(inner_path, None)
                for name in bound_names(inner):
                    self.names[name] = None

    def aliased(self, value: ast.expr | None) -> None:
        """The config or a block of it bound to another name, which this walk does not follow:
        its keys are unknown."""
        path = None if value is None else self.path(value)
        if path is not None and len(path) <= 1:
            self.forget(path)

    def bind(self, name: str, value: ast.expr | None) -> None:
        """``name = value``: a local literal, or the config variable itself rebound."""
        if name != self.var:
            self.names[name] = None if self.unsure else self.value(value)
        elif self.applied:
            self.var = ""  # the parameter rebound: what follows sets another object
        elif self.unsure:
            self.forget(())
        elif isinstance(value, ast.Call) and (called := self.extractor.callee(self.fn, value)):
            self.state = dict(self.extractor.returned(called))
        else:
            self.state = {}  # something else: its keys are left out

    def set_path(self, path: tuple[str, ...], value: ast.expr | None) -> None:
        """An assignment to ``cfg.<path>``: a key, or a block replaced (its keys unknown)."""
        key = KEYS.get(path) if len(path) == 2 else None
        if key is not None:
            self.state[key] = UNKNOWN if self.unsure else self.value(value)
        else:
            self.forget(path)

    def forget(self, path: tuple[str, ...]) -> None:
        """Every key under ``cfg.<path>`` (all for ``()``) becomes unknown."""
        for attributes, key in KEYS.items():
            if attributes[: len(path)] == path:
                self.state[key] = UNKNOWN

    def call(self, call: ast.Call) -> None:
        """A call given the config or one of its blocks: what the function sets on it."""
        name = call.func.id if isinstance(call.func, ast.Name) else None
        if name in READERS:
            return
        if name == "setattr" and len(call.args) == 3:
            path, attribute = self.path(call.args[0]), call.args[1]
            if path is not None and isinstance(attribute, ast.Constant):
                self.set_path((*path, str(attribute.value)), call.args[2])
                return
        for parameter, path in self.passed(call):
            called = self.extractor.callee(self.fn, call)
            if called is None or parameter is None:
                self.forget(path)
                continue
            block = path[0] if path else None
            effects = self.extractor.applied(called, parameter, block)
            for key, value in effects.items():
                self.state[key] = UNKNOWN if self.unsure else value

    def passed(self, call: ast.Call) -> Iterator[tuple[str | None, tuple[str, ...]]]:
        """(the callee's parameter, the config's path) for each argument that is the config
        or a block of it; the parameter is ``None`` where it cannot be told."""
        called = self.extractor.callee(self.fn, call)
        a = called.node.args if called is not None else None
        params = [] if a is None else [p.arg for p in (*a.posonlyargs, *a.args)]
        for i, arg in enumerate(call.args):
            path = self.path(arg)
            if path is not None and len(path) <= 1:
                yield (params[i] if i < len(params) else None), path
        for keyword in call.keywords:
            path = self.path(keyword.value)
            if path is not None and len(path) <= 1:
                yield keyword.arg, path

    def path(self, node: ast.expr) -> tuple[str, ...] | None:
        """``cfg.model.x`` -> ``("model", "x")``, as attributes of the whole config; ``None``
        for anything not reached through the config variable."""
        attributes: list[str] = []
        while isinstance(node, ast.Attribute):
            attributes.insert(0, node.attr)
            node = node.value
        if not isinstance(node, ast.Name) or node.id != self.var:
            return None
        return ((self.block,) if self.block else ()) + tuple(attributes)

    def value(self, value: ast.expr | None) -> int | None:
        if isinstance(value, ast.Name):
            return self.names.get(value.id)
        return literal(value)


# The table --------------------------------------------------------------------------------


def recipes(source: Source) -> Iterator[tuple[str, Function]]:
    """(name, function) for each recipe function of the recipes package and each legacy name
    a module of it imports one as."""
    for module in sorted(source.paths):
        if not (module == RECIPES or module.startswith(RECIPES + ".")):
            continue
        tree = source.module(module)
        for node in tree.body if tree is not None else ():
            if isinstance(node, ast.FunctionDef) and is_recipe(node):
                yield node.name, Function(module, node)
            elif isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if alias.asname and alias.asname != alias.name:
                        fn = source.resolve(module, alias.asname)
                        if fn is not None and is_recipe(fn.node):
                            yield alias.asname, fn


def benchmark_names(source: Source) -> set[str]:
    """Recipe names the benchmark package exports (its ``__init__`` files' names and strings
    ending ``_config``), which the recipe runner looks up before the library's."""
    names = set()
    for module in source.paths:
        if module.startswith(BENCHMARKS) and source.is_package(module):
            for node in ast.walk(source.module(module) or ast.Module([], [])):
                if isinstance(node, ast.alias):
                    names.add(node.asname or node.name)
                elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                    names.add(node.value)
    return {n for n in names if n.endswith("_config")}


def table(source: Source) -> tuple[dict[str, dict[str, int]], list[str]]:
    """Recipe name -> key -> value, and what was left out and why."""
    extractor = Extractor(source)
    found: dict[str, list[dict[str, int]]] = {}
    for name, fn in recipes(source):
        state = extractor.returned(fn)
        values = {k: v for k, v in sorted(state.items()) if v is not None}
        if values not in found.setdefault(name, []):
            found[name].append(values)
    benchmarks = benchmark_names(source)
    out, dropped = {}, []
    for name in sorted(found):
        if name in benchmarks:
            dropped.append(f"{name}: the benchmark recipes export it too")
        elif len(found[name]) > 1:
            dropped.append(f"{name}: defined with different values")
        elif found[name][0]:
            out[name] = found[name][0]
    return out, dropped


def module_text(values: dict[str, dict[str, int]], commit: str) -> str:
    """The generated module, formatted as ``ruff format`` leaves it."""
    lines = [
        f"# Generated by scripts/megatron_bridge_recipes.py from NVIDIA-NeMo/Megatron-Bridge at {commit}:",
        f"#     python scripts/megatron_bridge_recipes.py MEGATRON_BRIDGE_GIT_DIR --rev {commit}",
        "# Do not edit: run it again on another commit.",
        '"""The batch and parallel sizes Megatron-Bridge\'s recipe functions set at their top level,',
        "as literals (recipe name, legacy names too -> key -> value); a key a recipe does not set",
        'that way is left out."""',
        "",
        f'SOURCE = "NVIDIA-NeMo/Megatron-Bridge@{commit}"',
        "",
        "RECIPES: dict[str, dict[str, int]] = {",
    ]
    for name, keys in values.items():
        lines.append(f'    "{name}": {{')
        lines += [f'        "{key}": {value},' for key, value in keys.items()]
        lines.append("    },")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("git_dir", type=Path, help="a Megatron-Bridge clone or git directory")
    parser.add_argument("--rev", default="HEAD", help="the revision to read (HEAD)")
    parser.add_argument("--out", type=Path, default=OUT, help="the module to write")
    args = parser.parse_args(argv)
    checkout = Checkout(args.git_dir, args.rev)
    source = Source(checkout, checkout.modules())
    values, dropped = table(source)
    args.out.write_text(module_text(values, checkout.commit()))
    keys = sum(len(v) for v in values.values())
    print(f"wrote {args.out}: {len(values)} recipes, {keys} values", file=sys.stderr)
    for line in dropped:
        print(f"left out {line}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
