"""Why a rank failed, by the exception's type first and its words second: the device ran out of
memory (the micro-batch edge ``tune`` looks for), the host did (a machine too small for the
model, which no smaller micro-batch fixes on a GPU), a peer's failure tore the group down
(collateral), or something else (shown as it is).

On a CPU rank the host's memory *is* the device's, so there a host out-of-memory is the edge.
"""

from __future__ import annotations

#: The device's allocator ran out: torch's typed error, cuBLAS's and NCCL's words.
DEVICE = "oom"
#: The host ran out (Python's ``MemoryError``, C++'s ``std::bad_alloc``, the kernel's killer).
HOST = "host-oom"
#: The rank failed because another one did (its peer vanished mid-collective).
COLLATERAL = "collateral"

#: Exception type names that are the device allocator's (``torch.OutOfMemoryError``,
#: ``torch.cuda.OutOfMemoryError``; the same class under two names).
DEVICE_TYPES = ("OutOfMemoryError",)
#: Words of a device allocator's failure in another exception's text.
DEVICE_WORDS = (
    "cuda out of memory",
    "cublas_status_alloc_failed",
    "hip out of memory",
    "xpu out of memory",
)
#: What an allocator (the C++ and C ones, the OS) says when it cannot allocate.
ALLOCATOR_WORDS = ("std::bad_alloc", "can't allocate memory", "cannot allocate memory")
#: Words of the host's allocator failing.
HOST_WORDS = (*ALLOCATOR_WORDS, "defaultcpuallocator: not enough memory")
#: What allocators (torch's CPU and CUDA ones, Python, the OS) say when memory runs out, in a
#: log whose ranks left no report.
OUT_OF_MEMORY_WORDS = ("out of memory", "memoryerror", "outofmemoryerror", *ALLOCATOR_WORDS)
#: Words of a collective whose peer went away (gloo's and NCCL's, torch.distributed's).
PEER_WORDS = (
    "connection closed by peer",
    "connection reset by peer",
    "broken pipe",
    "nccl communicator was aborted",
    "process group watchdog",
    "socket timeout",
    "distbackenderror",
)
#: How a launch reports a rank killed by SIGKILL (the kernel's OOM killer): torchrun, a shell.
KILLED_WORDS = ("exitcode: -9", "sigkill", "signal 9", "exit code 137")


def classify(exc: BaseException, device: str) -> str | None:
    """:data:`DEVICE`, :data:`HOST`, :data:`COLLATERAL` or None (another error) for an
    exception a rank raised on ``device`` (``cpu`` or ``cuda:N``)."""
    name, text = type(exc).__name__, f"{type(exc).__name__}: {exc}".lower()
    host = isinstance(exc, MemoryError) or any(w in text for w in HOST_WORDS)
    # NCCL's own buffers: "NCCL error ... out of memory"
    nccl = "nccl" in text and "out of memory" in text
    if name in DEVICE_TYPES or nccl or any(w in text for w in DEVICE_WORDS):
        return DEVICE
    if host:
        return DEVICE if device == "cpu" else HOST
    if "out of memory" in text:
        return DEVICE
    if any(w in text for w in PEER_WORDS):
        return COLLATERAL
    return None


def mentions_out_of_memory(text: str) -> bool:
    """True when an error text (or a log) says memory ran out."""
    lowered = text.lower()
    return any(words in lowered for words in OUT_OF_MEMORY_WORDS)


def error_text(kind: str | None, said: str) -> str:
    """A rank's ``error`` for its report: the class alone for an out-of-memory, the exception
    (``said``) marked as collateral or as it is otherwise."""
    if kind in (DEVICE, HOST):
        return kind
    return f"{COLLATERAL}: {said}" if kind == COLLATERAL else said


def killed_by_host(log_tail: list[str]) -> bool:
    """Whether ranks that left no report were killed by SIGKILL, as the kernel's OOM killer
    does: torchrun says ``exitcode: -9`` or names the signal."""
    said = " ".join(log_tail).lower()
    return any(w in said for w in KILLED_WORDS)
