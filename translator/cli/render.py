"""``batchspec render``: write one config file per framework from a spec."""

from __future__ import annotations

import click

from translator.cli.common import command, output_options, render_each, write_rendered


@command("render")
@click.argument("spec_file", metavar="SPEC")
@output_options
def render(
    as_json: bool, spec_file: str, targets: str, out_dir: str, force: bool, strict: bool
) -> None:
    """Render SPEC (YAML/JSON, or - for stdin) for each framework in --to, into --out.

    Every file is read back and must give the same spec. All files are written or none, and
    no existing file is replaced without --force (a symlink is written through to its target
    when that lies in --out; one that leads out of it is refused).

    Examples:
      $ batchspec render spec.yaml --to deepspeed,megatron --out configs
      $ batchspec render spec.yaml --to deepspeed --out -
    """
    from translator.advice import general_findings
    from translator.errors import ConfigError
    from translator.findings import has_errors, located
    from translator.plugin.registry import get_many
    from translator.spec_file import load_spec, source_name

    frameworks = get_many(targets)
    spec = load_spec(spec_file)
    # What plan says of this spec beside any framework's quirks (learning rate, experts...);
    # an error among it stops the render as a framework's error does.
    findings = located(general_findings(spec), source_name(spec_file))
    if has_errors(findings):
        raise ConfigError([f for f in findings if f.severity == "error"])
    rendered, refused = render_each(spec, frameworks, source_name(spec_file), strict)
    write_rendered(as_json, spec.output(), rendered, out_dir, force, findings, refused)
