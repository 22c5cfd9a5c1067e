"""A Trainer program's own source, read for its batch as Python runs it: the one
``TrainingArguments(...)`` (or a TRL config: ``SFTConfig(...)``...) it builds, each batch
keyword traced to a literal, an ``argparse`` flag's default (``args.per_device_train_batch_size``
with ``add_argument("--per_device_train_batch_size", default=1)``), an environment variable
(``int(os.getenv("TRAIN_BATCH_SIZE", "1"))``) or a name assigned one of them; a keyword not
given is the dataclass's default. A program that subclasses ``TrainingArguments`` for
``HfArgumentParser`` takes its flags with the subclass's defaults. Anything else (a value
computed, several calls, ``**kwargs``) is unknown: never a guess."""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass

#: What TrainingArguments (and every TRL config, its subclass) default the batch to.
DEFAULTS = {"per_device_train_batch_size": 8, "gradient_accumulation_steps": 1}
#: The TRL configs that subclass TrainingArguments with its batch defaults.
TRL_CONFIGS = {
    "SFTConfig",
    "DPOConfig",
    "GRPOConfig",
    "KTOConfig",
    "ORPOConfig",
    "CPOConfig",
    "RewardConfig",
    "RLOOConfig",
    "GKDConfig",
    "PRMConfig",
    "BCOConfig",
}
#: The packages whose arguments classes have the defaults above.
MODULES = ("transformers", "trl")
#: How deep a name is followed to what it was assigned.
MAX_HOPS = 4


@dataclass(frozen=True)
class Setting:
    """How the program sets one batch field."""

    value: int | None
    """The value when nothing overrides it; ``None``: not known."""
    line: int
    """Line of the program that sets it."""
    flag: str | None = None
    """The command-line flag that overrides it (argparse's option, dashes as written)."""
    variable: str | None = None
    """The environment variable that overrides it."""
    why: str | None = None
    """Why it is not known, when it is not."""


@dataclass(frozen=True)
class Program:
    """What a Trainer program's source says of its batch."""

    path: str
    """The program's file."""
    settings: dict[str, Setting]
    """Each batch field as it sets it."""
    device_map: int | None
    """Line where it places its model with ``device_map`` (spread over the GPUs it sees, the
    Trainer runs no DataParallel), when it does."""


def read(text: str, path: str) -> Program | None:
    """The program's batch settings; ``None`` when it builds no TrainingArguments it can be
    read from (none, several, or its source does not parse)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    stock = _stock(tree)
    calls = [c for c in ast.walk(tree) if isinstance(c, ast.Call) and _is_arguments(c.func)]
    found: dict[str, Setting] | None
    if len(calls) == 1:
        found = _of_call(tree, calls[0], stock)
    elif calls:
        return None
    else:
        found = _of_subclass(tree, stock) or _of_parser(tree, stock)
    return None if found is None else Program(path, found, _device_map(tree))


def _stock(tree: ast.Module) -> set[str]:
    """The names that are transformers' or TRL's own arguments classes here (``from
    transformers import TrainingArguments``; ``transformers.TrainingArguments`` is one by
    its attribute): their batch defaults are known."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in MODULES:
            for alias in node.names:
                if _arguments_class(alias.name):
                    out.add(alias.asname or alias.name)
    return out


def _is_stock(func: ast.expr, stock: set[str]) -> bool:
    if isinstance(func, ast.Name):
        return func.id in stock
    base = getattr(func, "value", None)
    return isinstance(base, ast.Name) and base.id in MODULES and _is_arguments(func)


def _own_defaults(tree: ast.Module, name: str, stock: set[str]) -> dict[str, Setting] | None:
    """The batch defaults of ``name`` when it is TrainingArguments itself or a subclass this
    file defines on it; ``None`` when they are not known here."""
    if name in stock:
        return {k: Setting(v, 0) for k, v in DEFAULTS.items()}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == name:
            return _of_subclass(tree, stock, node)
    return None


def _device_map(tree: ast.Module) -> int | None:
    """The first ``device_map=...`` (not ``None``), or ``{"device_map": ...}``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "device_map":
            if not (isinstance(node.value, ast.Constant) and node.value.value is None):
                return node.value.lineno
        if isinstance(node, ast.Dict) and any(
            isinstance(k, ast.Constant) and k.value == "device_map" for k in node.keys
        ):
            return node.lineno
    return None


def _is_arguments(func: ast.expr) -> bool:
    """Whether a called or named class (``TrainingArguments``, ``trl.SFTConfig``) is one."""
    return _arguments_class(func.id if isinstance(func, ast.Name) else getattr(func, "attr", ""))


def _arguments_class(name: str) -> bool:
    return name.endswith("TrainingArguments") or name in TRL_CONFIGS


def _of_call(tree: ast.Module, call: ast.Call, stock: set[str]) -> dict[str, Setting]:
    given = {k.arg: k.value for k in call.keywords if k.arg is not None}
    spread = any(k.arg is None for k in call.keywords)  # **kwargs: any key may be in it
    flags = _argparse_defaults(tree)
    name = call.func.id if isinstance(call.func, ast.Name) else None
    stocked = _is_stock(call.func, stock)
    own = None if stocked or name is None else _own_defaults(tree, name, stock)
    out = {}
    for key, default in DEFAULTS.items():
        if key in given:
            out[key] = _trace(tree, given[key], flags, 0)
        elif spread:
            out[key] = Setting(None, call.lineno, why="the call's **kwargs may set it")
        elif stocked:
            out[key] = Setting(default, call.lineno)
        elif own is not None:
            out[key] = Setting(own[key].value, own[key].line, why=own[key].why)
        else:
            why = f"{ast.unparse(call.func)}'s own default, which is not read here"
            out[key] = Setting(None, call.lineno, why=why)
    return out


def _of_parser(tree: ast.Module, stock: set[str]) -> dict[str, Setting] | None:
    """``HfArgumentParser((..., TrainingArguments))`` (or TRL's ``TrlParser``) of the stock
    class: its flags, with TrainingArguments' defaults."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or ast.unparse(node.func).rsplit(".", 1)[-1] not in (
            "HfArgumentParser",
            "TrlParser",
        ):
            continue
        classes = [
            e for a in node.args for e in (a.elts if isinstance(a, ast.Tuple | ast.List) else [a])
        ]
        if any(_is_stock(c, stock) for c in classes):
            return {k: Setting(v, node.lineno, flag=f"--{k}") for k, v in DEFAULTS.items()}
    return None


def _of_subclass(
    tree: ast.Module, stock: set[str], only: ast.ClassDef | None = None
) -> dict[str, Setting] | None:
    """``class Args(TrainingArguments)`` (the stock class) with batch fields: the flags
    ``HfArgumentParser`` makes of it, their defaults the subclass's (``only``: that class)."""
    for node in [only] if only is not None else ast.walk(tree):
        if not isinstance(node, ast.ClassDef) or not any(_is_stock(b, stock) for b in node.bases):
            continue
        out = {}
        for key, default in DEFAULTS.items():
            out[key] = Setting(default, node.lineno, flag=f"--{key}")
        for stmt in node.body:
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                key = stmt.target.id
                if key in DEFAULTS:
                    value = _field_default(stmt.value)
                    why = None if value is not None else "its default is not a literal"
                    out[key] = Setting(value, stmt.lineno, flag=f"--{key}", why=why)
        return out
    return None


def _field_default(node: ast.expr | None) -> int | None:
    """``= 1`` or ``= field(default=1, ...)``."""
    if (
        isinstance(node, ast.Call)
        and getattr(node.func, "id", getattr(node.func, "attr", "")) == "field"
    ):
        node = next((k.value for k in node.keywords if k.arg == "default"), None)
    return _int(node)


def _int(node: ast.expr | None) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.isdigit():
        return int(node.value)
    return None


def _argparse_defaults(tree: ast.Module) -> dict[str, tuple[str, int | None, int]]:
    """argparse's destinations -> (the option as written, its default, its line)."""
    out: dict[str, tuple[str, int | None, int]] = {}
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument"):
            continue
        options = [
            a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)
        ]
        longs = [o for o in options if o.startswith("--")]
        if not longs:
            continue
        dest = next(
            (
                k.value.value
                for k in node.keywords
                if k.arg == "dest"
                and isinstance(k.value, ast.Constant)
                and isinstance(k.value.value, str)
            ),
            longs[0][2:].replace("-", "_"),
        )
        default = next((k.value for k in node.keywords if k.arg == "default"), None)
        out[dest] = (longs[0], _int(default) if default is not None else None, node.lineno)
    return out


def _trace(
    tree: ast.Module,
    node: ast.expr,
    flags: Mapping[str, tuple[str, int | None, int]],
    hops: int,
) -> Setting:
    line = node.lineno
    value = _int(node)
    if value is not None:
        return Setting(value, line)
    if isinstance(node, ast.Attribute) and node.attr in flags:
        option, default, at = flags[node.attr]
        why = None if default is not None else f"{option} has no literal default"
        return Setting(default, at, flag=option, why=why)
    variable = _environment(node)
    if variable is not None:
        name, default = variable
        why = None if default is not None else f"${name} has no default"
        return Setting(default, line, variable=name, why=why)
    if isinstance(node, ast.Name) and hops < MAX_HOPS:
        assigned = [
            a.value
            for a in ast.walk(tree)
            if isinstance(a, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == node.id for t in a.targets)
        ]
        if len(assigned) == 1:
            return _trace(tree, assigned[0], flags, hops + 1)
    return Setting(
        None, line, why=f"line {line}: {ast.unparse(node)[:60]} is computed when it runs"
    )


def _environment(node: ast.expr) -> tuple[str, int | None] | None:
    """``int(os.getenv("X", "1"))``, ``os.environ.get("X", 1)``, ``os.environ["X"]``:
    ``(X, its default)``."""
    if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "int" and node.args:
        node = node.args[0]
    if isinstance(node, ast.Subscript) and ast.unparse(node.value) in ("os.environ", "environ"):
        key = node.slice
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            return key.value, None
    if isinstance(node, ast.Call) and ast.unparse(node.func) in (
        "os.getenv",
        "getenv",
        "os.environ.get",
        "environ.get",
    ):
        args = node.args
        if args and isinstance(args[0], ast.Constant) and isinstance(args[0].value, str):
            return args[0].value, _int(args[1]) if len(args) > 1 else None
    return None
