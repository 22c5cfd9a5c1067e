"""Read a launch script the way bash would run it, without running anything.

The script is parsed with tree-sitter's bash grammar (every construct parses, with exact
positions) and then walked by a small evaluator that has no side effects:

- variables, arrays, ``${X:-d}``, ``${X:=d}``, ``${X:+w}``, ``${#X}``, ``$((...))`` (bash's
  64-bit arithmetic), quotes, word splitting of unquoted expansions (word by word: a known
  word is read even when its neighbour is not);
- ``if``/``elif``/``case`` whose condition is decided by known values are followed; an
  assignment under a condition that is not decided (or in a loop body, after ``cond &&``)
  makes the variable unknown unless every path gives it the same value;
- subshells, pipeline elements and a command's own ``X=1 cmd`` environment do not change the
  script's variables; ``unset`` does; functions run when called, with their arguments as
  ``$1``...; ``local`` stays inside the function;
- ``eval STRING`` and ``bash -c STRING`` (also behind ``srun``) are parsed again and read;
- ``#SBATCH`` lines set what Slurm would set (``SLURM_NNODES``, ``SLURM_GPUS_PER_NODE``...).

Anything that would need running (``$1``, ``$(command)``, a variable the script never sets)
is *unknown*: kept with the reason, never guessed. Values grow to a fixed size at most, then
become unknown, so reading time and memory stay linear in the script.

The modules: :mod:`~translator.shell.values` (pieces, words, variables, limits),
:mod:`~translator.shell.syntax` (tree-sitter, offsets, syntax errors),
:mod:`~translator.shell.reader` (statements), :mod:`~translator.shell.flow` (which arms of
an ``if``/``case`` run), :mod:`~translator.shell.merge` (values after undecided paths),
:mod:`~translator.shell.conditions` (``[ ... ]``), :mod:`~translator.shell.assign`
(assignments), :mod:`~translator.shell.arrays` (sparse arrays, and what of them is not
known), :mod:`~translator.shell.expand` (expansion), :mod:`~translator.shell.fields`
(word splitting), :mod:`~translator.shell.arith` (``$((...))``),
:mod:`~translator.shell.slurm` (``#SBATCH``) and :mod:`~translator.shell.launchers` (how
torchrun, deepspeed, srun, mpirun and jsrun size the world).
"""

from translator.shell.arith import ArithError, Unknown, evaluate
from translator.shell.launchers import LAUNCHERS, Launcher, Sizes, sizes, split
from translator.shell.reader import parse
from translator.shell.values import UNKNOWN_MARK, Heredoc, Piece, Script, Word

__all__ = [
    "LAUNCHERS",
    "UNKNOWN_MARK",
    "ArithError",
    "Heredoc",
    "Launcher",
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
