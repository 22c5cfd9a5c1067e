"""Pieces several frameworks use: the HF Trainer's counting, the DeepSpeed JSON others name,
YAML key insertion. A framework package imports these, never another framework's package."""
