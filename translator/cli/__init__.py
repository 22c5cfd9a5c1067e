"""The ``batchspec`` command line: one file per command; this group lists them."""

from __future__ import annotations

import click

from translator import __version__
from translator.cli.convert import convert
from translator.cli.inspect import inspect
from translator.cli.plan import plan
from translator.cli.render import render
from translator.cli.schema import schema
from translator.cli.smoke import smoke
from translator.cli.update import update
from translator.cli.validate import validate


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="batchspec")
def main() -> None:
    """One global batch (samples per optimizer step), exact in every framework.

    global = micro-batch × accumulation × data-parallel, where
    data-parallel = world / (tensor × pipeline × context).
    """


main.add_command(plan)
main.add_command(render)
main.add_command(schema)
main.add_command(inspect)
main.add_command(validate)
main.add_command(convert)
main.add_command(update)
main.add_command(smoke)
