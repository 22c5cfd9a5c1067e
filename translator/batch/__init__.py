"""Floor 2, the batch: a spec file's values (``spec_file``), the exact solver that never floors
(``solve``), the counting rule's arithmetic (``counting``), the world sizes that keep a batch
(``elastic``), tuning's search (``tuning``) and N nodes × G processes in each launcher's terms
(``node_lines``). The spec itself is :mod:`translator.spec` (a public import path)."""
