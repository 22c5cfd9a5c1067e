"""``batchspec render``: write one config file per framework from a spec."""

from __future__ import annotations

import click

from translator.cli.batch_options import into_options
from translator.cli.command import command
from translator.cli.output import print_into, write_rendered
from translator.edit.render_into import write_into
from translator.render import render_each


@command("render")
@click.argument("spec_file", metavar="SPEC")
@into_options
def render(
    as_json: bool,
    spec_file: str,
    targets: str,
    out_dir: str | None,
    into: str | None,
    force: bool,
    strict: bool,
) -> None:
    """Render SPEC (YAML/JSON, or - for stdin) for each framework in --to, into --out.

    Every file is read back and must give the same spec. All files are written or none, and
    no existing file is replaced without --force (a symlink is written through to its target
    when that lies in --out; one that leads out of it is refused). With --into the batch keys
    go into configs you already have instead, every other byte kept as update keeps it (and
    the files a config names, such as its DeepSpeed JSON, move with it); a file of another
    framework than --to is refused naming both.

    Examples:
      $ batchspec render spec.yaml --to deepspeed,megatron --out configs
      $ batchspec render spec.yaml --to axolotl --into axolotl.yml
    """
    from translator.batch.spec_file import load_spec, source_name
    from translator.checks.advice import general_findings
    from translator.plugin.registry import get_many
    from translator.words.errors import ConfigError, InputError
    from translator.words.findings import has_errors, located

    if (out_dir is None) == (into is None):
        raise InputError("give --out or --into, one of them")
    frameworks = get_many(targets)
    spec = load_spec(spec_file)
    # What plan says of this spec beside any framework's quirks (learning rate, experts...);
    # an error among it stops the render as a framework's error does.
    findings = located(general_findings(spec), source_name(spec_file))
    if has_errors(findings):
        raise ConfigError([f for f in findings if f.severity == "error"])
    if into is not None:
        done, refused = write_into(spec, list(frameworks), into, strict)
        print_into(as_json, spec, done, refused, findings)
        return
    assert out_dir is not None
    rendered, refused = render_each(spec, frameworks, source_name(spec_file), strict)
    write_rendered(as_json, spec.output(), rendered, out_dir, force, findings, refused)
