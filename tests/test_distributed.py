"""Rank helpers without a process group, and recognition of failed collectives."""
import pytest
import torch

from crnn.engine import distributed as D


def test_helpers_work_without_a_process_group():
    assert D.get_rank() == 0 and D.get_world_size() == 1 and D.is_main_process()
    t = torch.tensor([2.0])
    assert D.all_reduce_sum(t) is t and t.item() == 2.0
    assert D.any_rank(True) and not D.any_rank(False)
    D.barrier()
    with D.main_process_first():
        pass


@pytest.mark.parametrize("message", [
    "Application timeout caused pair closure",  # gloo, after another collective timed out
    "Timed out waiting 5000ms for send operation to complete",
    "Connection reset by peer",
])
def test_failed_collectives_are_recognised(message):
    assert D.is_comm_failure(RuntimeError(message))


def test_other_errors_are_not_comm_failures():
    assert not D.is_comm_failure(RuntimeError("CUDA out of memory"))
    assert not D.is_comm_failure(ValueError("timed out waiting"))
