"""batchspec: one global batch, expressed exactly to DeepSpeed, Axolotl and Megatron-LM."""

__version__ = "0.1.0"
