"""Floor 2, the model: the model a job names, resolved without torch (``named_model``, and
``coded_models`` for the models a framework builds in code), its heads and layers against a
split (``model_split``), and its parameter count and memory (``memory``)."""
