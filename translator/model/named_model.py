"""The model a job names, resolved at read time, offline, without torch.

A job names its model in one of two ways: by the architecture it carries (Megatron's flags, a
``model_config`` block of Hugging Face keys, or what a framework reads itself through its
``named_model`` hook: a nanotron ``model_config``, a torchtitan flavor, a torchtune builder, a
litgpt ``model_name``), or by a Hugging Face name or folder (``--model_name_or_path``, Axolotl's ``base_model``/``base_model_config``,
LLaMA-Factory's ``model_name_or_path``). A name is looked up where it already is: a local
folder's ``config.json``, then the local Hugging Face cache; ``--model-config`` gives it
otherwise. Nothing is downloaded and no remote code runs: a ``config.json`` with ``auto_map``
(a model whose code lives in its repository) is refused, unless its ``model_type`` is one
batchspec counts: transformers builds its own class for those whatever ``auto_map`` says
(Phi-3's published config.json names both). The parameter count is the analytic
one of :mod:`translator.model.memory`; a model that does not resolve is unknown, never a guess.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from translator.model.memory import MixtureOfExperts, Model, hf_config_data, hf_shape
from translator.model.model_split import ModelParts
from translator.reading import Reading
from translator.words import parsing
from translator.words.errors import InputError
from translator.words.files import read_text

#: Keys that name a Hugging Face model, in the order a framework prefers them.
NAME_KEYS = ("base_model_config", "base_model", "model_name_or_path")
#: Other keys of a config that name or carry its model (a framework's own, read by its
#: ``named_model``).
OWN_KEYS = ("model_config", "_component_", "model_name", "checkpoint_dir")


@dataclass(frozen=True)
class NamedModel:
    """The model a job names, and what batchspec makes of it."""

    named: str
    """What the job says (``meta-llama/Llama-3.1-8B``, ``Megatron flags``) and where."""
    source: str | None
    """Where its shape was found (a ``config.json``'s path, the flags); None when not found."""
    architecture: str | None
    """``LlamaForCausalLM``, ``GPT (Megatron flags)``...; None when not found."""
    model: Model | None
    """Its shape, for the analytic count; None when not found."""
    why: str | None = None
    """Why it did not resolve, and what to give."""
    partial: ModelParts | None = None
    """Its layers and heads where the job fixes them but not the whole shape (Megatron's flags
    without a vocabulary size)."""
    names: bool = True
    """False: the job names no model of its own and leaves it to what runs it (an override file
    applied over a recipe it does not name); shown with why, and run as a job that names none."""

    @property
    def parts(self) -> ModelParts | None:
        """What tensor and pipeline parallelism split of it, as far as the job fixes that."""
        if self.model is None:
            return self.partial
        m = self.model
        return ModelParts(m.layers, m.heads, m.kv_heads, self.named)

    @property
    def parameters(self) -> int | None:
        return None if self.model is None else self.model.parameters

    def output(self) -> dict:
        return {
            "named": self.named,
            "source": self.source,
            "architecture": self.architecture,
            "parameters": self.parameters,
            "why": self.why,
        }


#: A framework's own reading of the model a config's mapping names (torchtune's builders,
#: litgpt's ``model_name``), which its ``named_model`` passes to :func:`resolve`.
Own = Callable[[dict, str, Path], "NamedModel | None"]


def resolve(
    reading: Reading, model_config: str | None = None, own: Own | None = None
) -> NamedModel | None:
    """The model ``reading`` names (its own text, the files it names, the program's flags),
    shaped by ``model_config`` when given; None when it names none. ``own``: the framework's
    reader of a config mapping (:data:`Own`), asked first."""
    if model_config is not None:
        model, architecture = config_json(Path(model_config))
        return NamedModel(f"--model-config {model_config}", model_config, architecture, model)
    if reading.model_settings is not None:
        where, data = reading.model_settings
        found = None if own is None else own(data, where, Path(where).parent)
        if found is not None:
            return found
    for config in [reading, *reading.partners]:
        found = _from_mapping(config, own if config is reading else None)
        if found is not None:
            return found
    return _from_flags(reading)


def config_json(path: Path) -> tuple[Model, str]:
    """The shape and architecture in a ``config.json`` (or a folder holding one); an input
    error naming the file for one that is missing, broken, or needs remote code."""
    try:
        if path.is_dir():
            path = path / "config.json"
        found = path.is_file()
    except OSError as exc:  # no file can have that path (a name too long)
        shown = parsing.brief(str(path), quote="")
        raise InputError(f"{shown}: not a config.json ({exc.strerror or exc})") from None
    if not found:
        raise InputError(f"{path}: no such config.json (give a config.json or its folder)")
    data = hf_config_data(str(path))
    architectures = data.get("architectures")
    architecture = architectures[0] if isinstance(architectures, list) and architectures else None
    model = hf_shape(data, str(path), path.name)
    return model, str(architecture or data.get("model_type", "unknown"))


def hub_cache() -> Path:
    """The local Hugging Face hub cache, as huggingface_hub finds it."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    home = os.environ.get("HF_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "huggingface"
    )
    return Path(home) / "hub"


def find_config(name: str, near: Path) -> tuple[Path | None, str]:
    """A name's ``config.json``: a local folder (as given, or beside the file that names it),
    then the Hub cache's snapshot of ``refs/main`` (else the newest); ``(None, where looked)``."""
    looked: list[str] = []
    for folder in dict.fromkeys((Path(name).expanduser(), near / name)):
        looked.append(str(folder))
        if _is_file(folder / "config.json"):
            return folder / "config.json", ""
    repo = hub_cache() / f"models--{name.replace('/', '--')}"
    looked.append(str(repo))
    snapshots = repo / "snapshots"
    main = _snapshot(repo / "refs" / "main")
    if main is not None and _is_file(snapshots / main / "config.json"):
        return snapshots / main / "config.json", ""
    try:
        found = sorted(snapshots.glob("*/config.json"), key=lambda p: p.stat().st_mtime)
    except OSError:  # no folder can have the name (too long)
        found = []
    if found:
        return found[-1], ""
    return None, ", ".join(looked)


def _is_file(path: Path) -> bool:
    """Whether ``path`` is a file (not when no file can have that path: a name too long)."""
    try:
        return path.is_file()
    except OSError:
        return False


def _snapshot(ref: Path) -> str | None:
    """The snapshot a cache's ref file names (read as every input is: at most 4 MiB), when it
    names one: a folder's name, not a path."""
    if not _is_file(ref):
        return None
    try:
        name = read_text(ref).strip()
    except InputError:
        return None
    return name if re.fullmatch(r"[\w.-]+", name) and name not in (".", "..") else None


def _from_mapping(reading: Reading, own: Own | None) -> NamedModel | None:
    """A model a YAML or JSON config names or carries."""
    if Path(reading.path).suffix.lower() not in (".yaml", ".yml", ".json"):
        return None
    if not any(key in reading.text for key in (*NAME_KEYS, *OWN_KEYS)):
        return None  # names no model: not parsed again (most DeepSpeed JSONs)
    try:
        data = parsing.load_yaml(reading.text, reading.path).data
    except InputError:
        return None
    if not isinstance(data, dict):
        return None
    found = None if own is None else own(data, reading.path, Path(reading.path).parent)
    if found is not None:
        return found
    carried = section(data.get("model"), "model_config") or section(data, "model_config")
    if carried is not None:
        return carried_model(carried, reading.path)
    for key in NAME_KEYS:
        value = data.get(key)
        if isinstance(value, str) and value:
            return _by_name(value, f"{reading.path}: {key}", Path(reading.path).parent)
    return None


def section(value: object, key: str) -> dict | None:
    """``value[key]`` when ``value`` is a mapping and that is one too; else None."""
    found = value.get(key) if isinstance(value, dict) else None
    return found if isinstance(found, dict) else None


def carried_model(config: dict, where: str, architecture: str | None = None) -> NamedModel:
    """A model a config carries as Hugging Face keys (a ``model_config`` block), at ``where``;
    ``architecture``: what it is called, when the keys do not say."""
    named = f"{where}: model_config"
    architecture = architecture or str(config.get("architectures", ["model_config"])[0])
    try:
        model = hf_shape(config, where, where)
    except MixtureOfExperts as exc:
        return NamedModel(named, None, None, None, str(exc), _dense_parts(exc, named))
    except InputError as exc:
        return NamedModel(named, None, None, None, f"{exc}; give --model-config")
    return NamedModel(named, where, architecture, model)


def _by_name(name: str, named: str, near: Path) -> NamedModel:
    path, looked = find_config(name, near)
    if path is None:
        return NamedModel(
            f"{named} {name}",
            None,
            None,
            None,
            f"not found here (looked in {looked}); nothing is downloaded: give --model-config "
            "with its config.json",
        )
    try:
        model, architecture = config_json(path)
    except MixtureOfExperts as exc:
        parts = _dense_parts(exc, f"{named} {name}")
        return NamedModel(f"{named} {name}", str(path), None, None, str(exc), parts)
    except InputError as exc:
        return NamedModel(f"{named} {name}", str(path), None, None, str(exc))
    return NamedModel(f"{named} {name}", str(path), architecture, model)


def _dense_parts(exc: MixtureOfExperts, named: str) -> ModelParts:
    """What tensor and pipeline parallelism split of a mixture of experts: its attention's
    heads and its layers, as a dense model's."""
    m = exc.dense
    return ModelParts(m.layers, m.heads, m.kv_heads, named)


def given_flags(reading: Reading) -> dict[str, str | None]:
    """The program's ``--flag`` words and the word after each (its value, or the next flag's
    name: a switch), ``--flag=value`` split."""
    words = reading.arguments
    given: dict[str, str | None] = {}
    for index, word in enumerate(words):
        text = word.text or ""
        if text.startswith("--"):
            flag, eq, after = text.partition("=")
            following = words[index + 1].text if index + 1 < len(words) else None
            given[flag] = after if eq else following
    return given


def _from_flags(reading: Reading) -> NamedModel | None:
    """A model the program's flags name (``--model_name_or_path``)."""
    given = given_flags(reading)
    for flag in ("--model_name_or_path", "--model-name-or-path", "--base_model"):
        if given.get(flag):
            return _by_name(str(given[flag]), f"{reading.path}: {flag}", Path(reading.path).parent)
    return None
