"""The HF Trainer's handling of a DeepSpeed JSON, shared by every framework built on it
(Axolotl, the HF Trainer/TRL, LLaMA-Factory): the JSON a config names is read beside it, and
``HfTrainerDeepSpeedConfig``'s fill of the ``"auto"`` batch values and its mismatch check are
applied (``train_batch_size`` counts every process, not the data-parallel ones).

Its ``tensor_parallel.autotp_size`` N makes the job tensor-parallel (:func:`autotp`): accelerate
prepares the Trainer's data loader over ``world / N`` data-parallel ranks (its DeepSpeed branch
of ``prepare_data_loader`` divides ``num_processes`` and ``process_index`` by the ``tp`` mesh
``_prepare_deepspeed`` builds), so the N ranks of a tensor-parallel group share each micro-batch,
the grouping DeepSpeed's ``_init_tp_mesh_device`` gives them and checks on the first forward.
The Trainer still fills ``train_batch_size`` with every process, which DeepSpeed checks against
every rank (no mpu exists when it reads the config): that number is N × the samples per step."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path

from translator.frameworks.deepspeed import config_json as deepspeed
from translator.frameworks.shared.sources import list_source
from translator.model.model_split import SplitRules
from translator.reading import Call, Launch, Reading, Source, invalid_value
from translator.words import parsing
from translator.words.errors import InputError
from translator.words.files import read_text
from translator.words.findings import Finding, finding

#: A DeepSpeed config named that is a YAML, not JSON: the program stops on it.
UNREADABLE = "deepspeed-config-unreadable"
#: What the frameworks do with it, said after why it does not read.
STOPS = " (the Trainer and Axolotl json.load it: the run stops there)"


def read_partner(reading: Reading, target, bases: list[Path] | None = None) -> None:
    """The DeepSpeed JSON ``target`` names (a path relative to the config, or to the first of
    ``bases`` that has it; or an inline mapping), read into ``reading.partners``; a missing
    file is a finding. A null ``target`` (``deepspeed:`` with no value) names no JSON: it is the
    default of Axolotl's ``deepspeed: str | dict | None`` and of TrainingArguments'
    ``deepspeed: dict | str | None``, and neither runs DeepSpeed then."""
    where = reading.where("deepspeed")
    if target is None:
        return
    if isinstance(target, dict):
        # default=str: a date or a set in the block becomes a string the reader then refuses
        text = json.dumps(target, indent=2, default=str)
        reading.partners.append(deepspeed.read(text, f"{where} (inline deepspeed)"))
        return
    if not isinstance(target, str):
        reading.findings.append(
            invalid_value(
                "deepspeed", reading.values["deepspeed"], reading.path, "a path to a DeepSpeed JSON"
            )
        )
        return
    here = Path(reading.path).parent if reading.path != "-" else Path.cwd()
    found = False
    for base in bases or [here]:
        path = base / target
        try:
            found = path.is_file()
        except (OSError, ValueError):  # a name too long, a NUL byte: no such file either way
            found = False
        if found:
            break
    looked = ", ".join(dict.fromkeys(str(b) for b in (bases or [here])))
    if not found:
        reading.findings.append(
            finding(
                "missing-file",
                f"deepspeed: {parsing.brief(target, quote='')} is not found (looked in {looked}): "
                "the DeepSpeed side was not checked",
                hint="run batchspec from the folder the training is launched in: the framework "
                "opens the path from there",
                where=where,
            )
        )
        return
    text = read_text(path)
    try:
        reading.partners.append(deepspeed.read(text, str(path)))
    except InputError as exc:
        if not _yaml_mapping(text, str(path)):
            raise  # not text, or nothing a config could be: the input cannot be used
        reading.findings.append(finding(UNREADABLE, f"{exc}{STOPS}", where=where))


def _yaml_mapping(text: str, where: str) -> bool:
    """Whether ``text`` reads as a YAML mapping (an accelerate config where a DeepSpeed JSON
    belongs: a job that is wrong, not a file that cannot be used)."""
    try:
        return isinstance(parsing.load_yaml(text, where).data, dict)
    except InputError:
        return False


def read_named(reading: Reading, call: Call) -> None:
    """The DeepSpeed JSON of the job's final ``deepspeed`` value, opened where the job runs
    (the Trainer, Axolotl and LLaMA-Factory open the path from their working folder); an
    inline mapping is read as it stands."""
    v = reading.values.get("deepspeed")
    if v is None or v.value is None:
        return
    if not isinstance(v.value, str):
        read_partner(reading, v.value)
        return
    read_located(reading, call, v.value, f"{v.file or call.path}:{v.line}")


def read_located(reading: Reading, call: Call, name: str, where: str) -> None:
    """The DeepSpeed JSON a job names (``name``, looked for where the job runs), read into
    ``reading.partners``; one not found or not readable is a warning at ``where``."""
    from translator.plugin.job_files import read_job_file

    opened = read_job_file(
        reading,
        name,
        call.locate(name),
        deepspeed.read,
        kind="the DeepSpeed config",
        reads_as="a DeepSpeed JSON",
        where=where,
        unreadable=UNREADABLE,
    )
    if not isinstance(opened, str):
        reading.partners.append(opened[1])


#: TrainingArguments key -> the DeepSpeed key the Trainer checks against it.
CHECKED = {
    "per_device_train_batch_size": deepspeed.MBS,
    "gradient_accumulation_steps": deepspeed.GAS,
}
#: Spec field of each checked TrainingArguments key.
FIELDS = {
    "per_device_train_batch_size": "micro_batch_size",
    "gradient_accumulation_steps": "gradient_accumulation_steps",
}


def of_launch(reading: Reading, launch: Launch) -> tuple[list[Reading], list[Finding]]:
    """The DeepSpeed configs the Trainer checks: its own (``--deepspeed``, its arguments
    file's ``deepspeed``), else the one its launcher hands it (:attr:`Launch.handed`).
    TrainingArguments' own builds the DeepSpeed plugin before accelerate's is made, so it wins
    silently: a warning names it. An accumulation the launch exports with no config of its
    own (``accelerate launch --use_deepspeed --gradient_accumulation_steps N``) is the
    plugin's, checked the same way."""
    own, given, imposed = (
        list(reading.partners),
        launch.handed,
        launch.gradient_accumulation_steps,
    )
    if own and (given is not None or imposed is not None):
        loser = given.path if given is not None else f"gradient_accumulation_steps {imposed}"
        return own, [
            finding(
                "hf-deepspeed-launcher-unused",
                f"the Trainer's own DeepSpeed config {own[0].path} wins: TrainingArguments' "
                f"deepspeed builds the DeepSpeed plugin, so the one {launch.source} hands over "
                f"({loser}) is not used",
                hint=f"keep one DeepSpeed config: drop the DeepSpeed settings of {launch.source}",
                where=reading.where("deepspeed"),
            )
        ]
    if given is not None:
        return [given], []
    accumulation = reading.count("gradient_accumulation_steps")
    if imposed is None or accumulation in (None, imposed):
        return own, []
    return own, [
        finding(
            "hf-deepspeed-mismatch",
            "Please correct the following DeepSpeed config values that mismatch TrainingArguments "
            f"values: ds {deepspeed.GAS}={imposed} vs hf gradient_accumulation_steps="
            f"{accumulation} (the HF Trainer's words; ds at {launch.source}, hf at "
            f"{reading.where('gradient_accumulation_steps')})",
            hint="give the launch and the program one accumulation",
            where=launch.source,
        )
    ]


@dataclass
class Fixed:
    """Batch values the job leaves to the program that its DeepSpeed config fixes."""

    counts: dict[str, int] = field(default_factory=dict)
    """TrainingArguments key -> the count the DeepSpeed config sets."""
    findings: list[Finding] = field(default_factory=list)
    """A warning for each: the program's own default must equal it."""


def fixed_by(reading: Reading, partners: list[Reading], unknown: list[str]) -> Fixed:
    """The ``unknown`` TrainingArguments keys that a DeepSpeed config among ``partners`` sets
    to a count: the Trainer refuses any other value, so the job runs with that one or not at
    all (listed in the reading's sources)."""
    out = Fixed()
    for key in unknown:
        ds_key = CHECKED.get(key)
        ds = next((p for p in partners if ds_key and p.count(ds_key) is not None), None)
        if ds is None or ds_key is None:
            continue
        count = ds.count(ds_key)
        assert count is not None
        out.counts[key] = count
        why = reading.values[key].why_unknown
        out.findings.append(
            finding(
                "hf-deepspeed-fixes",
                f"{key} is {why}; the DeepSpeed config sets {ds_key} {count} "
                f"({ds.where(ds_key)}), and the HF Trainer refuses any other value, so the job "
                f"runs with {count} or stops (its own default must be {count})",
                hint=f"pass --{key} {count} to say so",
                where=ds.where(ds_key),
            )
        )
        list_source(reading, Source(FIELDS[key], count, f"{ds.where(ds_key)} {ds_key}"))
    return out


def autotp(partners: list[Reading]) -> tuple[dict, list[Finding]]:
    """The spec values DeepSpeed AutoTP gives a Trainer job from the DeepSpeed JSON it names
    (``tensor_parallel.autotp_size`` > 1: that tensor-parallel size), and the error for a size
    that is not a count (the Trainer compares it with 1 and fails)."""
    for ds in partners:
        v = ds.values.get(deepspeed.AUTOTP)
        if ds.framework != deepspeed.NAME or v is None:
            continue
        if v.count is None:
            return {"tensor_parallel_size": None}, [
                invalid_value(deepspeed.AUTOTP, v, ds.path, "a positive integer")
            ]
        if v.count > 1:
            return {"tensor_parallel_size": v.count, "deepspeed_autotp": True}, []
    return {}, []


def _autotp_note(ds: Reading, values: dict, world: int | None) -> Finding:
    """What a step takes under AutoTP, beside the ``train_batch_size`` the Trainer writes."""
    tp = values["tensor_parallel_size"]
    micro, gas = values.get("micro_batch_size"), values.get("gradient_accumulation_steps")
    shown = f"{micro or 'micro'} × {gas or 'accumulation'}"
    known = world is not None and not world % tp

    def product(ranks: int | None, named: str, unit: str = "") -> str:
        if ranks is None or not known:
            return f"{named}{unit} × {shown}"
        total = f" = {ranks * micro * gas}" if micro and gas else ""
        return f"{ranks}{unit} × {shown}{total}"

    step = product(None if world is None else world // tp, f"world / {tp}", " data-parallel ranks")
    written = product(world, "world")
    return finding(
        "hf-deepspeed-autotp",
        f"{deepspeed.AUTOTP} {tp}: accelerate gives the {tp} ranks of each tensor-parallel group "
        f"the same micro-batches (prepare_data_loader shards over world / {tp} ranks), so a "
        f"step takes {step} samples; the Trainer writes {deepspeed.TBS} = {written} (every "
        f"process), which DeepSpeed checks against every rank and counts as samples per step ({tp} × the "
        "samples in its throughput and global_samples)",
        hint="this needs accelerate 1.6 or later: before 1.6 it sharded over every process, and "
        "DeepSpeed then stops at the first forward (Data inconsistency within the TP group)",
        where=ds.where(deepspeed.AUTOTP),
    )


def pair(
    reading: Reading,
    ds: Reading,
    values: dict,
    world: int | None,
    code: str,
) -> list[Finding]:
    """The HF Trainer's check of the DeepSpeed JSON against the values it fills it from
    (``HfTrainerDeepSpeedConfig.trainer_config_process``: ``train_batch_size`` is world ×
    micro × accumulation, every process counted); ``code`` names the finding for the caller."""
    micro, gas = values.get("micro_batch_size"), values.get("gradient_accumulation_steps")
    autotp_here = values.get("deepspeed_autotp") and deepspeed.AUTOTP in ds.values
    out = [_autotp_note(ds, values, world)] if autotp_here else []
    hf = {
        deepspeed.MBS: ("per_device_train_batch_size", micro),
        deepspeed.GAS: ("gradient_accumulation_steps", gas),
        deepspeed.TBS: (
            "train_batch_size (calculated)",
            None if world is None or micro is None or gas is None else world * micro * gas,
        ),
    }
    autos = {
        key: expected
        for key, (_, expected) in hf.items()
        if key in ds.values and ds.values[key].value == "auto"
    }
    if autos:
        filled = ", ".join(
            f"{k} = {'world × ' + str(micro) + ' × ' + str(gas) if v is None else v}"
            for k, v in autos.items()
        )
        out.append(
            finding(
                "hf-auto",
                f'the "auto" batch values in {ds.path} are filled by the HF Trainer from '
                f"{reading.path}: {filled}",
                where=ds.path,
            )
        )
    wrong, places = [], []
    for key, (hf_name, expected) in hf.items():
        v = ds.values.get(key)
        if (
            v is not None
            and isinstance(v.value, str)
            and v.value.isdigit()
            and expected is not None
        ):  # "8": the Trainer compares with != and refuses it
            wrong.append(f'ds {key}="{v.value}" (a JSON string) vs hf {hf_name}={expected}')
            places.append(_differs(reading, ds, key, hf_name))
            continue
        # null: the Trainer passes it over (it fills "auto" and compares only a value that is
        # not None), and DeepSpeed takes it as not set
        if v is not None and v.value not in ("auto", None) and not v.is_count:
            out.append(invalid_value(key, v, ds.path, 'a positive integer or "auto"'))
        if v is None or v.value == "auto" or expected is None or not v.is_count:
            continue
        if v.value != expected:
            wrong.append(f"ds {key}={v.value} vs hf {hf_name}={expected}")
            places.append(_differs(reading, ds, key, hf_name))
    if not wrong:
        return out
    elsewhere = sorted({v.file for v in ds.values.values() if v.file and v.file != ds.path})
    hint = (
        f"make the DeepSpeed settings of {', '.join(elsewhere)} agree with TrainingArguments, "
        "or drop them (the Trainer then fills its own)"
        if elsewhere
        else f'set the batch keys in {ds.path} to "auto" so the Trainer fills them'
    )
    return out + [
        finding(
            code,
            "Please correct the following DeepSpeed config values that mismatch TrainingArguments "
            f"values: {'; '.join(wrong)} (the HF Trainer's words; {'; '.join(places)})",
            hint=hint,
            where=ds.path,
        )
    ]


def _differs(reading: Reading, ds: Reading, key: str, hf_name: str) -> str:
    """Where a DeepSpeed value the Trainer refuses and its TrainingArguments value stand; the
    refused one listed among the reading's sources as one that lost."""
    hf_at = reading.where(hf_name) if hf_name in FIELDS else reading.path
    if hf_name in FIELDS:
        why = "the HF Trainer refuses it: it differs from TrainingArguments'"
        value = ds.values[key].value
        list_source(reading, Source(FIELDS[hf_name], value, f"{ds.where(key)} {key}", False, why))
    return f"ds {key} at {ds.where(key)}, hf {hf_name} at {hf_at}"


def partner_files(reading: Reading) -> dict[str, str]:
    """The DeepSpeed JSON the Trainer runs with (its own, else the one its launcher hands it:
    :func:`of_launch`), for a smoke run's work folder: its engine points the config at
    ``deepspeed.json`` there."""
    partners, _ = of_launch(reading, reading.launch or Launch())
    found = [p.text for p in partners if p.framework == deepspeed.NAME]
    return {deepspeed.FILENAME: found[0]} if found else {}


#: DeepSpeed AutoTP's split (``module_inject/tp_shard.py``, ``get_shard_size``): with the
#: model's key/value head count known, each rank takes ``kv // N`` heads and the first
#: ``kv % N`` one more, the query heads following their groups; nothing refuses an uneven
#: split. It has no pipeline of its own.
AUTOTP_SPLIT = SplitRules("DeepSpeed AutoTP", heads="uneven", kv_heads="uneven", pipeline="given")


def split_rules(reading: Reading, values: dict) -> SplitRules | None:
    """AutoTP's split for a tensor-parallel job that runs DeepSpeed (its JSON's
    ``autotp_size``, or a tensor-parallel size beside a DeepSpeed JSON); None otherwise (FSDP2
    tensor parallelism has rules of its own)."""
    partners = [p for p in reading.partners if p.framework == deepspeed.NAME]
    if not (values.get("deepspeed_autotp") or partners):
        return None
    # the JSON's autotp_size, else the config's own tensor_parallel_size (Axolotl's)
    keys = [*((p, deepspeed.AUTOTP) for p in partners), (reading, "tensor_parallel_size")]
    at = next((r.where(key) for r, key in keys if key in r.values), None)
    return replace(AUTOTP_SPLIT, tensor_at=at)
