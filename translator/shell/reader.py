"""The walk over a parsed script: statements in the order bash runs them, each simple command
kept with its expanded words and the environment its process sees.

The script runs as read: with the arguments and environment :func:`parse` is given (none by
default) and what ``#SBATCH`` sets. Subshells, pipeline elements and a command's own ``X=1
cmd`` environment do not change the script's variables; ``unset`` does; functions run when
called, with their arguments as ``$1``...; ``local`` stays inside the function; ``shift`` and
``set --`` move the arguments; ``eval STRING`` and ``bash -c STRING`` (also behind ``srun``)
are parsed again and read; a script file run (``bash f.sh ARGS``, ``srun f.sh``, ``sbatch
f.sh ARGS``, one a heredoc wrote) or sourced is read when found
(:mod:`translator.shell.following`); a ``source FILE`` not found is not read and makes what
was set before it unknown. A ``while``/``until`` loop whose condition known values decide
runs for real (up to MAX_LOOPS times); ``break``, ``continue``, ``return`` and ``exit`` end what they end.
Paths the reader cannot decide between (an ``if`` on an unknown value, a loop body that may
run or not) are each followed in a fork of the variables.
"""

from __future__ import annotations

from translator.shell import arrays, assign
from translator.shell.commands import Commands
from translator.shell.expand import SBATCH, arith_piece
from translator.shell.following import MARK, Opener, forget_args, set_args
from translator.shell.notes import Note
from translator.shell.slurm import sbatch_variables
from translator.shell.syntax import ScriptText, refuse_long_numbers, repair
from translator.shell.values import (
    ARGS_GIVEN,
    NODE_GPUS,
    OPEN_ENV,
    OWN,
    UNSET,
    Env,
    Piece,
    Script,
    Var,
    scalar,
    to_word,
)
from translator.shell.walk import NAME, Catcher, Stop
from translator.words import collector
from translator.words.errors import InputError


class Reader(Commands):
    """Reads one script: where it starts (its scope, ``#SBATCH``, the arguments given) and the
    statements that set variables; the walk's other parts are its bases (:mod:`walk`,
    :mod:`control`, :mod:`exports`, :mod:`following`, :mod:`commands`)."""

    def __init__(
        self,
        where: str,
        budget: int,
        args: list[str] | None = None,
        environment: dict[str, str] | None = None,
        opener: Opener | None = None,
        not_known: tuple[str, ...] = (),
        gpus: str | None = None,
    ):
        super().__init__(where, budget, opener)
        self.args, self.environment_given = args, environment or {}
        self.not_known = not_known
        self.gpus = gpus
        """The GPUs the node has, when known (what its GPU queries answer)."""
        self.handlers = {
            "variable_assignment": self._assign,
            "variable_assignments": self._assignments,
            "declaration_command": self._declaration,
            "unset_command": self._unset,
            "command": self.command,
            "redirected_statement": self._redirected,
            "negated_command": self._redirected,
            "compound_statement": self._compound,
            "program": self.block,
            "do_group": self.block,
            "subshell": self._subshell,
            "pipeline": self._pipeline,
            "list": self.and_or,
            "if_statement": self.if_statement,
            "case_statement": self.case_statement,
            "while_statement": self.loop,
            "for_statement": self.loop,
            "c_style_for_statement": self.loop,
            "function_definition": self._function,
        }

    def read(self, text: str) -> Script:
        self.file_text = text
        if "\r\n" in text:
            text = _without_carriage_returns(text)
            self.script.notes.append(
                Note(
                    None,
                    "the file has Windows line endings (CRLF), on which bash stops ($'\\r': "
                    "command not found); read as if each line ended in a plain newline "
                    "(dos2unix fixes the file)",
                )
            )
        data, root, holes, notes, inserted = repair(text.encode(), text, self.where)
        src = ScriptText(data, text, 1, None, inserted)
        src.holes = holes
        self.script.notes.extend(notes)
        env = self.outermost(text)
        self.catchers.append(Catcher(frozenset({"exit"}), env, None))
        try:
            self.block(root, env, src)
        except Stop as stop:
            self.script.notes.append(
                Note(stop.line, "the script exits here when run as read; what follows is not read")
            )
        self.script.defaults = list(self.ex.defaults.values())
        for name, var in env.own.items():
            if isinstance(var, Var) and NAME.fullmatch(name) and not name.startswith(OWN):
                lines = var.lines or (0,) * len(var.items)
                self.script.variables[name] = [to_word(s, n) for s, n in zip(var.items, lines)]
        return self.script

    def outermost(self, text: str) -> Env:
        """The scope the script starts in: what ``#SBATCH`` sets, the environment and the
        arguments given (values that are no literal of the file: nothing edits them)."""
        env = Env()
        if sbatch_variables(text, env):
            env.set(SBATCH, MARK)
        for name, value in self.environment_given.items():
            if not NAME.fullmatch(name) or name.startswith(OWN):
                raise InputError(f"{self.where}: {name!r} is not a variable name bash accepts")
            env.set(name, Var(((Piece(value),),)))
        if self.gpus is not None:
            env.set(NODE_GPUS, scalar(self.gpus))
        for name in list(env.own):
            if not name.startswith(OWN):
                env.export(name)
        if "environment" in self.not_known:
            env.set(OPEN_ENV, MARK)
        if "arguments" in self.not_known:
            env.set(ARGS_GIVEN, MARK)
            forget_args(env, "the script's arguments (not known: it stops without them)")
        elif self.args is None:
            env.set("#", scalar("0"))
        else:
            env.set(ARGS_GIVEN, MARK)
            set_args(env, [(Piece(a),) for a in self.args])
        return env

    def _assign(self, node, env: Env, src: ScriptText) -> None:
        assign.assign(self.ex, node, env, src)

    def _assignments(self, node, env: Env, src: ScriptText) -> None:
        for child in node.named_children:
            assign.assign(self.ex, child, env, src)

    def _declaration(self, node, env: Env, src: ScriptText) -> None:
        assign.declaration(self.ex, node, env, src)

    def _unset(self, node, env: Env, src: ScriptText) -> None:
        if any(src.spells(c, b"-f") for c in node.children):  # unset -f: functions
            return
        for name in assign.unset_targets(self.ex, node, env, src):
            if "[" not in name:
                env.set(name, UNSET)
                if name in env.exported():
                    env.export(name, False)
                continue
            base = name.split("[", 1)[0]
            k, why = assign.index_of(name, env)
            arrays.unset_element(env, base, k, why)

    def _redirected(self, node, env: Env, src: ScriptText) -> None:
        """A statement with redirections (or ``!``); a heredoc written to a file is kept."""
        body = node.child_by_field_name("body") or (node.named_children or [None])[0]
        if body is not None and body.type not in ("heredoc_redirect", "file_redirect"):
            self.statement(body, env, src)
        beside = next(
            (c for c in node.named_children if c.type == "file_redirect" and _writes(c, src)),
            None,
        )
        for child in node.named_children:
            if child.type == "heredoc_redirect":
                doc = self.ex.heredoc(child, env, src, beside)
                if doc is not None:
                    self.script.heredocs.append(doc)
                    self.wrote(doc, env)
                elif body is not None and body.type == "command":
                    self.batch_input(body, child, env, src)

    def _compound(self, node, env: Env, src: ScriptText) -> None:
        """``{ ...; }``, or ``(( expr ))``: arithmetic, whose assignments change variables."""
        first, last = node.children[:1], node.children[-1:]
        if first and first[0].type == "((" and last[0].type == "))":
            arith_piece(src.data[first[0].end_byte : last[0].start_byte].decode(), env)
            return
        self.block(node, env, src)

    def _subshell(self, node, env: Env, src: ScriptText) -> None:
        self.apart(lambda: self.block(node, env.fork(), src))

    def _pipeline(self, node, env: Env, src: ScriptText) -> None:
        for child in node.named_children:
            self.apart(lambda: self.statement(child, env.fork(), src))  # noqa: B023

    def _function(self, node, env: Env, src: ScriptText) -> None:
        name = node.child_by_field_name("name")
        body = node.child_by_field_name("body")
        if name is not None and body is not None:
            self.functions[src.of(name)] = (body, src)


def _writes(redirect, src: ScriptText) -> bool:
    """Whether a redirection writes standard output to a file (``>``, ``>|``; not ``2>``)."""
    first = redirect.children[0] if redirect.children else None
    return first is not None and src.of(first) in (">", ">|")


def _without_carriage_returns(text: str) -> str:
    """``text`` with each CRLF line end read as LF, every offset kept: a continuation's
    ``\\`` CR LF becomes space ``\\`` LF, any other CR a space."""
    return text.replace("\\\r\n", " \\\n").replace("\r\n", " \n")


def parse(
    text: str,
    where: str,
    args: list[str] | None = None,
    environment: dict[str, str] | None = None,
    opener: Opener | None = None,
    not_known: tuple[str, ...] = (),
    gpus: str | None = None,
) -> Script:
    """The commands and variables of ``text`` as it runs with the arguments ``args`` (``None``:
    none given) in an environment that sets only ``environment`` (NAME -> value, what the
    user sets) and what the script's ``#SBATCH`` lines set. ``opener`` opens the script files
    it runs or sources (none are read without one); ``not_known`` holds ``"arguments"`` and
    ``"environment"`` to read it with those not known rather than empty; ``gpus``: the GPUs
    the node has, when known. An :class:`InputError` naming the
    line when the script is not valid bash (an unterminated quote, array or heredoc);
    statements bash cannot parse (a template's ``<Specify path>``) are read as unknown, with
    a note."""
    refuse_long_numbers(text, where)
    for i, arg in enumerate(args or [], 1):
        refuse_long_numbers(arg, f"{where}: its argument ${i}", line=False)
    for name, value in (environment or {}).items():
        refuse_long_numbers(value, f"{where}: --env {name}", line=False)
    try:
        reader = Reader(where, 20 * len(text) + 10_000, args, environment, opener, not_known, gpus)
        with collector.paused():  # what a read makes lives until it ends
            return reader.read(text)
    except RecursionError:
        raise InputError(f"{where}: blocks nested too deeply to follow") from None
