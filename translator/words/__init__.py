"""Floor 0, the words: the one error hierarchy and the exit codes it carries (``errors``), the
findings and their catalogue of codes (``findings``), what a framework's chatter may print
(``chatter``), reading and writing files safely (``files``), and parsing their YAML, JSON and
TOML with each key's line (``parsing``). Everything says things and fails the same way."""
