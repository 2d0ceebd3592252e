"""The allocator lab's step language: parsing a step, validating a scenario symbolically (no torch)."""

import pytest

from core.errors import ConfigError
from core.memory.steps import parse_step, validate_steps


def test_parse_step_reads_op_and_arguments():
    step = parse_step("alloc a 256")
    assert (step.op, step.args, step.text) == ("alloc", ("a", 256), "alloc a 256")
    assert parse_step("empty_cache").args == ()


@pytest.mark.parametrize(
    "text, words",
    [
        ("", "empty step"),
        ("grow a 1", "unknown operation 'grow'"),
        ("alloc a", "expected `alloc <name> <MiB>`"),
        ("alloc 1a 5", "not a tensor name"),
        ("alloc a lots", "not a whole number"),
        ("alloc a 0", "between 1 and"),
        ("free", "expected `free <name>`"),
    ],
)
def test_parse_step_names_the_rule_it_breaks(text, words):
    with pytest.raises(ConfigError, match=words):
        parse_step(text)


@pytest.mark.parametrize(
    "steps, words",
    [
        (["free a"], "no tensor named 'a' \\(live tensors: none\\)"),
        (["alloc a 8", "free a", "to_cpu a"], "step 3 'to_cpu a': no tensor named 'a'"),
        (["alloc a 8", "backward a"], "has no autograd graph"),
        (["alloc a 2", "matmul c a"], "at least 4 MiB"),
        (["alloc_grad x 8", "scale y x", "backward y", "backward y"], "already used"),
        (["alloc_grad x 8", "scale y x", "scale_backward y"], "needs a leaf"),
        ([], "at least one step"),
        (["empty_cache"] * 65, "at most 64 steps"),
    ],
)
def test_validate_steps_stops_at_the_first_impossible_step(steps, words):
    with pytest.raises(ConfigError, match=words):
        validate_steps([parse_step(s) for s in steps])


def test_validate_steps_estimates_the_named_peak_by_hand():
    # a (10) + re-created a (10 while the old one lives) = 20; then b moves to the CPU and leaves 10.
    steps = ["alloc a 10", "alloc a 10", "alloc_cpu b 30", "free a", "to_device b"]
    assert validate_steps([parse_step(s) for s in steps]) == 30  # b (30) back on the device
    assert validate_steps([parse_step(s) for s in steps[:4]]) == 20
