"""Simple commands: their words, the functions they call (in a frame of their own), the
builtins that change what the reader follows (``shift``, ``set --``, ``cd``, ``let``, ``read``)
and the ones that stop what runs; each command is kept with the environment its process sees
and the folder it runs in."""

from __future__ import annotations

import posixpath

from translator.shell import arrays, assign
from translator.shell.expand import arith_piece, forget_targets
from translator.shell.exports import own_line
from translator.shell.fields import joined
from translator.shell.following import (
    FOLDER,
    Following,
    folder_of,
    forget_args,
    placed,
    set_args,
    shell_string,
    wrapped_string,
)
from translator.shell.notes import Note
from translator.shell.read_line import read_herestring
from translator.shell.syntax import ScriptText
from translator.shell.values import (
    MAX_CALL_DEPTH,
    Env,
    Piece,
    Var,
    Word,
    clip,
    pieces_of,
    to_word,
    unknown,
)
from translator.shell.walk import STOPS, Catcher, Stop

#: Children of a command that are not its words.
NOT_WORDS = {
    "variable_assignment",
    "file_redirect",
    "heredoc_redirect",
    "herestring_redirect",
    "comment",
}
#: Commands that set the variables they name to what only the running script knows.
READERS = {"read", "mapfile", "readarray", "printf", "getopts"}


class Commands(Following):
    """Simple commands and function calls."""

    def command(self, node, env: Env, src: ScriptText) -> None:
        name_node = node.child_by_field_name("name")
        if name_node is None:  # only assignments (X=1 Y=2)
            for child in node.named_children:
                if child.type == "variable_assignment":
                    assign.assign(self.ex, child, env, src)
            return
        for child in own_line(node, name_node, src):  # X=1 Y=2, then a command below
            assign.assign(self.ex, child, env, src)
        words = self.command_words(node, env, src)
        if not words:
            return
        name = words[0].text
        if name in self.functions:
            self.call(name, words, env)
            return
        if name == "eval":
            self.reparse(words[1:], env, fork=False)
            return
        if name in ("source", "."):
            self.sourced(words, env)
            return
        if name in READERS and not (name == "read" and self._herestring(node, words, env, src)):
            assign.unknown_outputs(words, env)
        if name == "let":
            _let(words, env)
        environment = self.environment(node, env, src)
        self.script.commands.append(self.prefix + words)
        self.script.environments.append(environment)
        self.script.folders.append(folder_of(env))
        self.script.paths.append(self.path)
        self.builtin(name, words, env)
        shell = shell_string(words)
        wrapped = wrapped_string(words)
        if wrapped is not None:
            self.run_wrapped(words, wrapped, env, environment)
        elif shell is not None:
            self.run_string(words, shell[0], shell[1], env, environment)
        else:
            self.run_file(words, env, environment)

    def batch_input(self, command, redirect, env: Env, src: ScriptText) -> None:
        """``sbatch [OPTIONS] <<EOF``: the here-document is the batch script, read as
        ``--wrap`` reads its string, its ``#SBATCH`` lines before sbatch's options."""
        words = self.command_words(command, env, src)
        if not words or (words[0].text or "").rsplit("/", 1)[-1] != "sbatch":
            return
        pieces = self.ex.heredoc_text(redirect, env, src)
        if not pieces:
            return
        batch = "".join(p.text or "" for p in pieces)
        script = to_word(pieces, src.line(redirect.start_byte))
        self.run_wrapped(words, script, env, self.environment(command, env, src), batch)

    def _herestring(self, node, words: list[Word], env: Env, src: ScriptText) -> bool:
        """``read ... <<< WORD``: the line is the script's own, read as bash reads it (the
        word expanded but not split); whether it was followed."""
        given = next((c for c in node.named_children if c.type == "herestring_redirect"), None)
        word = given.named_children[-1] if given is not None and given.named_children else None
        if word is None:
            return False
        text = joined(self.ex.expand(word, env, src, quoted=True))
        ifs = self.environment(node, env, src).get("IFS")
        if ifs is None and isinstance(var := env.get("IFS"), Var):
            ifs = to_word(var.scalar, words[0].line)
        if ifs is not None and ifs.text is None:
            return False
        return read_herestring(words, text, ifs.text if ifs else None, env, words[0].line)

    def builtin(self, name: str | None, words: list[Word], env: Env) -> None:
        """``shift``, ``set --``, and the commands that stop what runs."""
        if name == "shift":
            _shift(words, env)
        elif name == "cd":
            _cd(words, env, self.where)
        elif name == "cp":
            _cp(words, env, self.script.copies)
        elif name == "set":
            _set(words, env)
        elif name in STOPS and self.catcher(name) is not None:
            raise Stop(name, words[0].line)

    def command_words(self, node, env: Env, src: ScriptText) -> list[Word]:
        """The words of a command, its own ``X=1`` environment and redirections left out."""
        words: list[Word] = []
        for child in node.named_children:
            if child.type in NOT_WORDS:
                continue
            if child.type == "command_name":
                child = child.named_children[0] if child.named_children else child
            words.extend(self.ex.words(child, env, src))
        return words

    def call(self, name: str, words: list[Word], env: Env) -> None:
        """Run a function the script defined, in a frame of its own: what it assigns reaches
        the caller, its ``local`` names and ``$1``... do not."""
        body, body_src = self.functions[name]
        if self.calls >= MAX_CALL_DEPTH:
            self.script.notes.append(Note(words[0].line, f"{name} calls itself too deep to follow"))
            return
        frame = _frame(env, words)
        catcher = Catcher(frozenset({"return"}), env, [])
        self.catchers.append(catcher)
        self.calls += 1
        stop = None
        try:
            self.statement(body, frame, body_src)
        except Stop as s:
            stop = s
        finally:
            self.calls -= 1
            self.catchers.pop()
        self.caught(env, frame, stop, catcher, f"a return in {name}", ("return",))


def _frame(env: Env, words: list[Word]) -> Env:
    """A function's frame: ``$@`` (so ``$1``...) and ``$#`` from the call's words."""
    frame = env.fork(function=True)
    frame.locals.update({"@", "#"})
    set_args(frame, [pieces_of(w) for w in words[1:]])
    return frame


def _let(words: list[Word], env: Env) -> None:
    """``let x=1 y++``: each word is arithmetic."""
    for w in words[1:]:
        if w.text is not None:
            arith_piece(w.text, env)
        else:  # what it assigns is not known
            text = "".join(" 0 " if p.text is None else p.text for p in w.parts)
            forget_targets(text, env, f"let {clip(text)}: {w.why_unknown}")


def _shift(words: list[Word], env: Env) -> None:
    """``shift [n]``: the arguments move down ``n`` places (none when fewer are left, as in
    bash)."""
    n = 1
    if len(words) > 1:
        text = words[1].text
        if text is None or not text.isdigit():
            forget_args(
                env, f"the arguments after shift {clip(text or '?')} (line {words[0].line})"
            )
            return
        n = int(text)
    args = env.get("@")
    if args is None:  # none given
        return
    if not isinstance(args, Var) or not arrays.exact(args):
        forget_args(
            env, f"the arguments after a shift of arguments not known (line {words[0].line})"
        )
        return
    if n <= len(args.items):
        set_args(env, list(args.items[n:]))


def _set(words: list[Word], env: Env) -> None:
    """``set -- ARGS``: the arguments become ``ARGS``."""
    texts = [w.text for w in words]
    if "--" not in texts:
        return
    rest = words[texts.index("--") + 1 :]
    if all(w.text is not None for w in rest):
        set_args(env, [pieces_of(w) for w in rest])
    else:
        forget_args(env, f"the arguments set on line {words[0].line} (not all known)")


def _cd(words: list[Word], env: Env, script: str) -> None:
    """``cd DIR``: where the commands after it run (``cd`` alone, ``cd -`` or a folder that
    is not known: somewhere the reader cannot say); ``$(pwd)/x`` (``$SLURM_SUBMIT_DIR``) is
    ``x`` from where the job runs, ``$(dirname "$0")`` the folder of ``script``."""
    target = words[1].text if len(words) > 1 else None
    if target is None and len(words) > 1:
        target = placed(words[1], script)
    here = folder_of(env)
    if target is None or target in ("-", "~") or target.startswith("~") or here is None:
        why = f"cd {clip(target or words[1].why_unknown or '') if len(words) > 1 else ''}"
        env.set(FOLDER, Var((unknown(f"{why.strip()} on line {words[0].line}"),)))
        return
    moved = target if target.startswith("/") else posixpath.join(here, target)
    env.set(FOLDER, Var(((Piece(posixpath.normpath(moved) if moved else ""),),)))


def _cp(words: list[Word], env: Env, copies: dict[str, str]) -> None:
    """``cp [-OPTIONS] SOURCE TARGET`` of one file: the target is the source from now on (a
    target ending in ``/`` is the folder the copy goes into); other forms are not followed."""
    here = folder_of(env)
    names = [w.text for w in words[1:] if not (w.text or "").startswith("-")]
    if here is None or len(names) != 2 or None in names:
        return
    source, target = names[0] or "", names[1] or ""
    if target.endswith("/"):
        target += posixpath.basename(source)
    copies[_from_start(here, target)] = _from_start(here, source)


def _from_start(here: str, path: str) -> str:
    """``path`` relative to where the script started, from the folder ``here`` (an absolute
    path stays)."""
    return posixpath.normpath(path if path.startswith("/") else posixpath.join(here, path))
