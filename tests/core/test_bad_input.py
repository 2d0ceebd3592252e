"""Bad input on every CLI flag of every registered experiment → exit code 2 and a message naming the
option, before anything runs; and, property-based, ``make_config`` on any JSON-ish dict either
returns a config or raises ConfigError — never another exception.

The experiments and their fields are discovered (``core.registry``), so a new experiment is covered
the day it is added.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core import cli, registry
from core.errors import ConfigError

HUGE = 10**18
UNBOUNDED_INTS = {"seed"}  # any whole number is a valid seed
EXPERIMENTS = sorted(registry.experiments())


def _fields(name: str):
    exp = registry.get(name)
    hints = typing.get_type_hints(exp.config_type)
    return [(f, hints[f.name]) for f in dataclasses.fields(exp.config_type)]


def _flag(f) -> str:
    return "--" + f.metadata.get("cli", f.name.replace("_", "-"))


def _item(tp):
    args = typing.get_args(tp)
    return args[0] if typing.get_origin(tp) is tuple and args else None


def bad_values(name: str) -> list[tuple[str, str, str]]:
    """(field, flag, value) triples every experiment must refuse."""
    cases = []
    for f, tp in _fields(name):
        flag = _flag(f)
        item = _item(tp)
        if tp in (int, float):
            cases.append((f.name, flag, "twelve"))
        if tp is int and f.name not in UNBOUNDED_INTS:
            cases += [(f.name, flag, "-1"), (f.name, flag, str(HUGE))]
        if item is int:
            cases += [(f.name, flag, "256,abc"), (f.name, flag, "-256"), (f.name, flag, str(HUGE))]
        if item is float:
            cases.append((f.name, flag, "0.5,abc"))
        if typing.get_origin(tp) is Literal:
            cases.append((f.name, flag, "no-such-choice"))
        if (tp is str or item is str) and any(w in f.name for w in ("dtype", "model", "preset")):
            cases.append((f.name, flag, "fp7" if "dtype" in f.name else "gpt-17"))
    return cases


def _mentions(message: str, field_name: str) -> bool:
    text = message.lower().replace("-", "_").replace(" ", "_")
    return field_name.lower() in text or field_name.rstrip("s").lower() in text


@pytest.fixture
def nothing_runs(monkeypatch):
    """Bad input must be refused before a job is queued: queueing one fails the test."""

    def refuse(self, job):
        raise AssertionError(f"a job was queued for bad input: {job.config}")

    monkeypatch.setattr("core.jobs.DeviceQueue.put", refuse)


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_bad_flag_values_exit_2_naming_the_option(experiment, nothing_runs, capsys):
    cases = bad_values(experiment)
    failures = []
    for field_name, flag, value in cases:
        code = cli.main([experiment, flag, value, "--device", "cpu", "--no-save"])
        err = capsys.readouterr().err
        if code != 2 or not err.startswith("error: ") or not _mentions(err, field_name) or "Traceback" in err:
            failures.append(f"{flag} {value}: exit {code}, {err.strip()[:200]!r}")
    assert not failures, f"{experiment}: " + "; ".join(failures)


@pytest.mark.parametrize("device", ["gpu", "cuda:x", "tpu:0", "", "cpu; rm -rf /"])
def test_unknown_device_strings_exit_2(device, nothing_runs, capsys):
    assert cli.main(["probe", "--device", device, "--no-save"]) == 2
    assert "is not one of: auto, cpu, cuda, cuda:N" in capsys.readouterr().err


def test_a_gpu_that_does_not_exist_is_a_clear_error(capsys):
    code = cli.main(["probe", "--steps", "1", "--device", "cuda:99", "--no-save"])
    out = capsys.readouterr().out
    assert code == 2  # bad input, even though only the worker can tell
    assert "invalid request: device cuda:99" in out and ("does not exist" in out or "CUDA is unavailable" in out)


def test_unknown_experiment_and_option_are_usage_errors(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["no-such-experiment"])
    assert exc.value.code == 2 and "invalid choice" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        cli.main(["probe", "--no-such-option", "1"])
    assert exc.value.code == 2 and "unrecognized arguments" in capsys.readouterr().err


def test_unknown_config_keys_are_refused():
    for name in EXPERIMENTS:
        with pytest.raises(ConfigError, match="unknown option"):
            registry.get(name).make_config({"no_such_option": 1})


json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12)
    | st.sampled_from(["", "0", "-1", "1e400", "nan", "inf", "1,2,3", "fp16", "tiny", "cuda", " 7 "])
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


def _configs(name: str):
    keys = [f.name for f, _ in _fields(name)]
    return st.dictionaries(st.sampled_from(keys) | st.text(max_size=6), json_values, max_size=len(keys) + 1)


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_make_config_returns_a_config_or_raises_config_error(experiment):
    exp = registry.get(experiment)

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(values=_configs(experiment))
    def check(values):
        try:
            config = exp.make_config(values)
        except ConfigError as exc:
            assert str(exc), "a ConfigError must say what is wrong"
            return
        assert isinstance(config, exp.config_type)

    check()
