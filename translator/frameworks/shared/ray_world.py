"""The world of a job that trains under Ray (Axolotl's ``use_ray``, LLaMA-Factory's
``USE_RAY``): Ray starts ``ray_num_workers`` training workers itself, whatever launched the
script."""

from __future__ import annotations

from translator.reading import Call, Note, Reading, Source


def ray_world(reading: Reading, call: Call, framework: str) -> None:
    """``reading``'s world as ``ray_num_workers`` gives it (``framework``'s default: 1)."""
    reading.launcher = "ray"
    v = reading.values.get("ray_num_workers")
    if v is None:
        reading.world_size = 1
        reading.sources.append(Source("world_size", 1, f"ray_num_workers: {framework}'s default"))
    elif v.count is not None:
        reading.world_size = v.count
        shown = f"{v.file or call.path}:{v.line}"
        reading.sources.append(Source("world_size", v.count, f"{shown} ray_num_workers"))
    else:
        reading.world_unknown = Note(
            v.line, f"Ray's ray_num_workers is {v.why_unknown or repr(v.value)}"
        )
