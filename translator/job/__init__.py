"""Floor 4, the job: a launch script read as it runs, launcher → program → flags → files
(``script``), job definitions of the schedulers (``definitions``: Kubernetes, SkyPilot,
dstack), which framework a file is (``detection``) and the files of frameworks batchspec does
not read (``foreign``). :mod:`translator.inspection` (a public import path) reads any file
through them."""
