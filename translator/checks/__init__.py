"""Floor 4, what batchspec says about a batch: general advice and hints (``advice``), the
layout against the model and the nodes (``split_advice``), the frameworks' own validators
(``verdict``), the table of world sizes (``elastic_report``), a file's layout with flags
(``layouts``) and the memory estimate (``estimation``)."""
