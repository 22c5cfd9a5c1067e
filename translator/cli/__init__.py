"""The ``batchspec`` command line: one file per command; this group lists them."""

from __future__ import annotations

from contextlib import contextmanager

import click

from translator import __version__
from translator.cli.command import ExamplesLast, fail
from translator.cli.convert import convert
from translator.cli.estimate import estimate
from translator.cli.inspect import inspect
from translator.cli.plan import plan
from translator.cli.render import render
from translator.cli.schema import schema
from translator.cli.smoke import smoke
from translator.cli.tune import tune
from translator.cli.update import update
from translator.cli.validate import validate


def _wants_json(args) -> bool:
    """Whether ``--json`` is among the options (not after ``--``)."""
    args = list(args)
    return "--json" in (args[: args.index("--")] if "--" in args else args)


@contextmanager
def _usage_errors(as_json: bool):
    """A bad flag or argument is one ``batchspec: error:`` line (exit 2), not click's usage."""
    try:
        yield
    except click.exceptions.NoArgsIsHelpError:
        raise
    except click.UsageError as exc:
        names, ctx = [], exc.ctx
        while ctx is not None and ctx.parent is not None:
            names.append(ctx.info_name or "")
            ctx = ctx.parent
        command_path = " ".join(["batchspec", *reversed(names)])
        fail(f"{exc.format_message()} (see {command_path} --help)", exc.exit_code, as_json)


class _Group(ExamplesLast, click.Group):
    """The command group, with usage errors reported like every other error."""

    def make_context(self, info_name, args, parent=None, **extra):
        as_json = _wants_json(args)
        with _usage_errors(as_json):
            ctx = super().make_context(info_name, args, parent, **extra)
        ctx.meta["batchspec.json"] = as_json
        return ctx

    def invoke(self, ctx):
        with _usage_errors(ctx.meta.get("batchspec.json", False)):
            return super().invoke(ctx)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="batchspec")
def main() -> None:
    """One global batch (samples per optimizer step), exact in every framework.

    global = micro-batch × accumulation × data-parallel, where
    data-parallel = world / (tensor × pipeline × context).

    Examples:
      $ batchspec plan --global-batch 256 --micro-batch 2 --world-size 32
      $ batchspec validate ds_config.json axolotl.yml --world-size 16
    """


main.add_command(plan)
main.add_command(render)
main.add_command(schema)
main.add_command(inspect)
main.add_command(validate)
main.add_command(convert)
main.add_command(update)
main.add_command(smoke)
main.add_command(estimate)
main.add_command(tune)
