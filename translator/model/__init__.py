"""Floor 2, the model: the model a job names, resolved without torch (``named_model``; a model a
framework builds in its own code is its package's, through the ``named_model`` hook), its heads
and layers against a split (``model_split``), and its parameter count and memory (``memory``)."""
