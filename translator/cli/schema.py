"""``batchspec schema``: the JSON Schema of a spec file."""

from __future__ import annotations

from translator.cli.command import command
from translator.cli.output import emit_json


@command("schema", findings=False)
def schema(as_json: bool) -> None:
    """Print the JSON Schema of the batch spec (always JSON), for an editor or a CI check to
    validate spec files against before batchspec reads them.

    Examples:
      $ batchspec schema
    """
    from translator.spec import BatchSpec

    emit_json(BatchSpec.model_json_schema(mode="validation"))
