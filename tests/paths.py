"""Where the tests find the repository and their own files, whichever folder a test is in."""

from pathlib import Path

#: The tests' own folder.
TESTS = Path(__file__).resolve().parent
#: The repository.
ROOT = TESTS.parent
