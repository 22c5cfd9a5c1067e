"""Read a launch script the way bash would run it, without running anything.

The script is parsed with tree-sitter's bash grammar (every construct parses, with exact
positions) and then walked by a small evaluator that has no side effects:

- variables, arrays, ``${X:-d}``, ``${X:=d}``, ``${X:+w}``, ``${#X}``, ``$((...))`` (bash's
  64-bit arithmetic), quotes, word splitting of unquoted expansions (word by word: a known
  word is read even when its neighbour is not);
- ``if``/``elif``/``case`` whose condition is decided by known values are followed, and so is
  a ``while``/``until`` loop (round by round, up to a bound); an assignment under a condition
  that is not decided (or in a loop body that may run or not, after ``cond &&``) makes the
  variable unknown unless every path gives it the same value; ``break``, ``continue``,
  ``return`` and ``exit`` end what they end;
- subshells, pipeline elements and a command's own ``X=1 cmd`` environment do not change the
  script's variables; ``unset`` does; functions run when called, with their arguments as
  ``$1``...; ``local`` stays inside the function; ``shift`` and ``set --`` move the
  arguments;
- ``eval STRING`` and ``bash -c STRING`` (also behind ``srun``) are parsed again and read, and
  so is a script file the job runs or sources when it is found (``bash launch.sh ARGS``,
  ``srun train.sh``, ``sbatch job.sh ARGS``, a file a heredoc wrote), with its arguments;
- ``#SBATCH`` lines set what Slurm would set (``SLURM_NNODES``, ``SLURM_GPUS_ON_NODE``...),
  and so do the options of ``srun``/``sbatch`` for what they start;
- each command keeps the environment its process sees (exported variables and its prefix).

**Read as run.** The script is read as it runs with no arguments (or the ones given to
:func:`parse`), in an environment that sets nothing but what its scheduler sets (the
``#SBATCH`` variables) and what the user sets (``--env NAME=VALUE``). A name the script never
sets, or an argument not given, is *absent*: empty when the script runs as-is, so
``[ -z "$MBS" ]`` holds, ``${GPUS:-8}`` is 8 (a :class:`~translator.shell.values.Default`
the batch rests on, on :attr:`Script.defaults`) and ``$#`` is 0; but a batch value that only
the environment or an argument would supply stays unknown (an absent word has no text).
After a ``source FILE`` not found such names are plain unknown (the file may set them); so are what bash
itself sets (``$HOSTNAME``, ``$RANDOM``) and, in a batch job, Slurm's other ``SLURM_*``.
Anything else that would need running (``$(command)``, ``$0``) is *unknown*: kept with the
reason, never guessed. A template's statements bash cannot parse (``DATA_PATH=<Specify
path>``) are read as unknown, with a note; an unterminated quote, ``if`` or heredoc is an
error. Values grow to a fixed size at most, then become unknown, so reading time and memory
stay linear in the script.

The modules: :mod:`~translator.shell.values` (pieces, words, variables, limits),
:mod:`~translator.shell.syntax` (tree-sitter, offsets, syntax errors),
:mod:`~translator.shell.reader` (where the walk starts, assignments), its parts
:mod:`~translator.shell.walk` (dispatch, stops), :mod:`~translator.shell.control` (``if``,
``case``, loops), :mod:`~translator.shell.exports` (a command's environment),
:mod:`~translator.shell.following` (``eval``, ``bash -c``, ``source``) and
:mod:`~translator.shell.commands` (simple commands, functions), :mod:`~translator.shell.flow` (which arms of
an ``if``/``case`` run), :mod:`~translator.shell.merge` (values after undecided paths),
:mod:`~translator.shell.conditions` (``[ ... ]``), :mod:`~translator.shell.assign`
(assignments), :mod:`~translator.shell.arrays` (sparse arrays, and what of them is not
known), :mod:`~translator.shell.expand` (expansion), :mod:`~translator.shell.fields`
(word splitting), :mod:`~translator.shell.arith` (``$((...))``),
:mod:`~translator.shell.slurm` (``#SBATCH``) and :mod:`~translator.shell.launchers` (how
torchrun, deepspeed, srun, mpirun and jsrun size the world).
"""

from translator.shell.arith import ArithError, Unknown, evaluate
from translator.shell.launchers import LAUNCHERS, LauncherDefinition, Sizes, sizes, split
from translator.shell.reader import parse
from translator.shell.values import UNKNOWN_MARK, Default, Heredoc, Piece, Script, Word

__all__ = [
    "LAUNCHERS",
    "UNKNOWN_MARK",
    "ArithError",
    "Default",
    "Heredoc",
    "LauncherDefinition",
    "Piece",
    "Script",
    "Sizes",
    "Unknown",
    "Word",
    "evaluate",
    "parse",
    "sizes",
    "split",
]
