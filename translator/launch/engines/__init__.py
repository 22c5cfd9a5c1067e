"""One module per framework, each with ``run(ctx: RunContext) -> RankResult``: the framework's
real code path, fed the rendered config, counting samples per optimizer step as it steps."""

#: ``--framework`` name -> engine module in this package.
MODULES = {"deepspeed": "deepspeed", "megatron": "megatron", "axolotl": "axolotl",
           "torch": "torch_ddp"}
#: ``--framework`` name -> the backend whose rendered config the engine runs (torch: none).
CONFIG_BACKEND = {"deepspeed": "deepspeed", "megatron": "megatron", "axolotl": "axolotl",
                  "torch": None}
