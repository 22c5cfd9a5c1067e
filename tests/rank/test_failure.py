"""A failed rank is classified by its exception's type first, then its words, on recorded
error texts of each class (torch, cuBLAS, NCCL, gloo, the C++ and Python allocators)."""

import pytest

from translator.rank import failure


class OutOfMemoryError(RuntimeError):
    """Named as torch's (``torch.OutOfMemoryError``, ``torch.cuda.OutOfMemoryError``)."""


class DistBackendError(RuntimeError):
    """Named as torch.distributed's."""


@pytest.mark.parametrize(
    "exc, device, kind",
    [
        (OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"), "cuda:0", "oom"),
        (
            RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate`"),
            "cuda:0",
            "oom",
        ),
        (
            DistBackendError(
                "NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled cuda error, "
                "NCCL version 2.21.5 ... Cuda failure 'out of memory'"
            ),
            "cuda:1",
            "oom",
        ),
        (MemoryError(), "cuda:0", "host-oom"),
        (RuntimeError("std::bad_alloc"), "cuda:0", "host-oom"),
        (
            RuntimeError(
                "[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: "
                "not enough memory: you tried to allocate 8589934592 bytes."
            ),
            "cuda:0",
            "host-oom",
        ),
        # on a CPU rank the host's memory is the device's: the micro-batch edge
        (MemoryError(), "cpu", "oom"),
        (RuntimeError("DefaultCPUAllocator: can't allocate memory"), "cpu", "oom"),
        (
            RuntimeError(
                "[../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection "
                "closed by peer [127.0.0.1]:29500"
            ),
            "cpu",
            "collateral",
        ),
        (DistBackendError("NCCL communicator was aborted on rank 1."), "cuda:1", "collateral"),
        (ValueError("micro_batch_size must be positive"), "cuda:0", None),
        (KeyError("model.layers.0"), "cpu", None),
    ],
)
def test_each_class_of_failure_is_told_apart(exc, device, kind):
    assert failure.classify(exc, device) == kind


def test_the_report_says_the_class_or_the_error():
    assert failure.error_text("oom", "OutOfMemoryError: CUDA") == "oom"
    assert (
        failure.error_text("collateral", "RuntimeError: peer") == "collateral: RuntimeError: peer"
    )
    assert failure.error_text(None, "ValueError: x") == "ValueError: x"


@pytest.mark.parametrize(
    "tail, killed",
    [
        (
            ["torch.distributed.elastic.multiprocessing.api: failed (exitcode: -9) local_rank: 0"],
            True,
        ),
        (["Signal 9 (SIGKILL) received by PID 4242"], True),
        (["Traceback (most recent call last):", "ValueError: bad"], False),
    ],
)
def test_a_launch_killed_for_host_memory_is_told_by_its_log(tail, killed):
    assert failure.killed_by_host(tail) is killed
