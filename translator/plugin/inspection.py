"""What batchspec makes of one file: its reading, the values it fixes, the spec they resolve to
and the findings. Built by :mod:`translator.inspection`; a framework's own validator
(``Framework.verdict``) is handed one."""

from __future__ import annotations

from dataclasses import dataclass

from translator.model.named_model import NamedModel
from translator.reading import Reading
from translator.spec import OUTPUT_KEYS, BatchSpec
from translator.words.errors import ConfigError, InputError
from translator.words.findings import Finding


@dataclass
class Inspection:
    """What batchspec makes of one file."""

    reading: Reading
    """What the reader took from the file."""
    values: dict
    """Spec fields the file determines (with the launch), even when no full spec results."""
    spec: BatchSpec | None
    """The resolved spec, when the file and the launch determine one."""
    findings: list[Finding]
    """Everything found, errors first."""
    model: NamedModel | None = None
    """The model the file or job names, resolved offline (None when it names none)."""

    def require_spec(self) -> BatchSpec:
        """The resolved spec, or the error that says why there is none."""
        errors = [f for f in self.findings if f.severity == "error"]
        if errors:
            raise ConfigError(errors)
        if self.spec is None or not self.spec.is_decided:
            # The warnings say what is unknown; without any, the notes that explain it do
            # (a DeepSpeed JSON whose batch values are left to the launch to fill).
            reasons = [f for f in self.findings if f.severity == "warning"] or [
                f for f in self.findings if f.hint
            ]
            why = "; ".join(dict.fromkeys(f.message for f in reasons))
            fixes = "; ".join(dict.fromkeys(f.hint for f in reasons if f.hint))
            raise InputError(
                f"{self.reading.path}: its batch is not fully known"
                + (f" ({why})" if why else "")
                + f"; {fixes or f'see batchspec inspect {self.reading.path}'}"
            )
        return self.spec

    def output(self) -> dict:
        """The resolved-spec keys (``None`` when unknown), plus file and framework."""
        if self.spec is not None:
            data = self.spec.output()
        else:
            data = {key: self.values.get(key) for key in OUTPUT_KEYS}
        return (
            {"file": self.reading.path, "framework": self.reading.framework}
            | data
            | {
                "model": None if self.model is None else self.model.output(),
                "sources": [s.as_dict() for s in self.reading.sources],
                "findings": [f.as_dict() for f in self.findings],
            }
            | (
                {}
                if self.reading.definition is None
                else {"job_definition": self.reading.definition.as_dict()}
            )
        )
