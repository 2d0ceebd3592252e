"""The experiment interface every lab experiment implements.

An experiment is a frozen config dataclass plus a generator ``run(config, ctx)`` that yields
:class:`Progress` events and *returns* an :class:`Output`. The frame (worker, store, CLI, pages)
only ever sees these types, so adding an experiment means adding a module that defines
``EXPERIMENTS = [Experiment(...)]`` — nothing else changes.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from core.errors import ConfigError, DoesNotFit, Unsupported
from core.jsonable import json_ready

# What torch.manual_seed and torch.Generator.manual_seed accept; past it they fail with "Overflow".
SEED_MIN, SEED_MAX = -(2**63), 2**64 - 1


def check_seed(seed: int) -> None:
    """Refuse a seed torch cannot take, naming the option (:func:`config_from_dict` calls it for every
    config with a ``seed``, so no experiment has to remember)."""
    if not SEED_MIN <= seed <= SEED_MAX:
        raise ConfigError(f"seed must be a whole number from {SEED_MIN} to {SEED_MAX}, got {seed}")


def check_choices(name: str, values: tuple[str, ...], allowed: tuple[str, ...]) -> None:
    """Refuse an empty choice or one outside ``allowed``, naming the option (configs call it from
    ``__post_init__``)."""
    if not values:
        raise ConfigError(f"{name}: choose at least one of {', '.join(allowed)}")
    bad = [v for v in values if v not in allowed]
    if bad:
        raise ConfigError(f"{name}: {', '.join(bad)} not one of {', '.join(allowed)}")


@dataclass(frozen=True)
class Progress:
    """One progress event. ``rows`` are finished data rows, kept even if the run is cancelled."""

    done: int
    total: int
    message: str = ""
    rows: tuple[dict, ...] = ()


@dataclass
class Output:
    """What an experiment returns: its rows (one record per measured point) and extra data."""

    rows: list[dict]
    meta: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Context:
    """What the worker tells an experiment about where it runs."""

    device: str  # resolved torch device string: "cpu" or "cuda:N"
    device_name: str

    @property
    def is_cuda(self) -> bool:
        return self.device.startswith("cuda")

    def unsupported(self, reason: str) -> Unsupported:
        """The one wording for "this device cannot do it", used by every experiment."""
        return Unsupported(f"unsupported on {self.device_name}: {reason}")

    def check_fits(self, need_bytes: int, what: str) -> None:
        """Refuse (:class:`DoesNotFit`) before allocating when ``what`` needs more than the device can give.

        ``need_bytes`` is an estimate (the memory planner, or the arithmetic of the tensors a run
        makes); the limit is the device's free memory (GPU) or available RAM within the job's cap (CPU).
        """
        from core.hardware.memory import budget
        from core.units import bytes_text

        limit = budget(self.device)
        if need_bytes > limit.bytes:
            raise DoesNotFit(
                f"{what} needs an estimated {bytes_text(need_bytes)} on {self.device_name}, but "
                f"{limit.source}: refused before allocating anything",
                need_bytes,
                limit.bytes,
                limit.source,
            )


RunFn = Callable[[Any, Context], Generator[Progress, None, Output]]


ALL = "all"  # the device of a run on every GPU of the box at once (core.fanout)
SLOW_FRACTION = 0.05  # GPUs of one node differ by a few percent; more than this below the node's median is flagged


@dataclass(frozen=True)
class DeviceMetric:
    """How the GPUs of one box compare when an experiment runs on all of them at once (``device="all"``).

    Rows with the same ``keys`` are the same point on different GPUs; ``column`` (higher is better) is
    compared with the node median of that point (:mod:`core.fanout`).
    """

    column: str  # e.g. core.rows.matmul.TFLOPS
    keys: tuple[str, ...]  # e.g. ("dtype", "m", "n", "k")
    label: str  # axis label with its unit


@dataclass(frozen=True)
class Experiment:
    name: str  # CLI sub-command and store key, e.g. "matmul"
    title: str
    config_type: type
    run: RunFn
    description: str = ""
    # Allocator experiments need a process whose allocator has never been used.
    fresh_process: bool = False
    # Environment for a fresh worker (e.g. PYTORCH_CUDA_ALLOC_CONF); non-empty forces a fresh process.
    worker_env: Callable[[Any], dict[str, str]] | None = None
    # Offered in ``python -m core --help``. False for what users reach another way (the imports behind
    # ``snapshot``/``trace``) or never run themselves (the worker probe): still accepted when named, and
    # still run by the worker and the pages, but not listed beside the commands a user runs.
    command: bool = True
    # Set where one run on every GPU of the box at once makes sense (device "all", see core.fanout).
    device_metric: DeviceMetric | None = None
    # An import of the user's file is stored only when it succeeds: a refused file is not a run.
    store_failures: bool = True
    # Torch-free arithmetic (the planner): the job path runs it in a thread of the submitting process
    # instead of a worker, stored like any run. It must import no torch and touch no device.
    in_process: bool = False
    # Reads files, runs no tensor (the imports of snapshots and traces): its worker describes the box from
    # /proc and package metadata and never imports torch. An in-process experiment is torch-free too.
    torch_free: bool = False
    # An import of outside files names the files it reads (from its validated config): it touches no device, so
    # it runs on the imports' own queue, never behind a device's jobs nor holding one, takes no device lock,
    # and runs in a worker of its own under a CPU-time limit from their sizes (core/import_budget.py).
    reads: Callable[[Any], Sequence[str]] | None = None
    # What the CLI says before any table: the run's answer in plain words, from its rows and meta.
    answer: Callable[[list[dict], dict], list[str]] | None = None
    # The kinds of rows the CLI's text lists, a table each in this order; the others (raw samples) are counted
    # and left to --json. Empty: every row, as it comes.
    text_kinds: tuple[str, ...] = ()

    @property
    def uses_torch(self) -> bool:
        return not (self.torch_free or self.in_process)

    @property
    def queue(self) -> str | None:
        """The queue its jobs wait on when it is not the device's: ``in-process`` or ``imports``."""
        return "in-process" if self.in_process else "imports" if self.reads else None

    def make_config(self, values: Mapping[str, Any]) -> Any:
        """The config validated (the job manager calls it once per submission)."""
        return config_from_dict(self.config_type, values)

    def rebuild_config(self, values: Mapping[str, Any]) -> Any:
        """The config :meth:`make_config` validated, rebuilt from its JSON form where it runs (the worker)."""
        return config_from_validated(self.config_type, values)

    def stored_config(self, values: dict) -> dict:
        """What a run keeps of its validated config: every field but those marked ``stored=False`` in their
        metadata (where an import's file lay when it was read: an upload's copy is deleted once imported, so
        the run names the file by its name and digest, in its meta)."""
        dropped = {f.name for f in dataclasses.fields(self.config_type) if f.metadata.get("stored") is False}
        return {k: v for k, v in values.items() if k not in dropped}

    def env_for(self, config: Any) -> dict[str, str]:
        return dict(self.worker_env(config)) if self.worker_env else {}


def file_import(
    name: str, title: str, config_type: type, run: RunFn, doc: str | None, reads: Callable[[Any], Sequence[str]], **more
) -> Experiment:
    """An import of outside files (a trace, a snapshot, a job's dumps, a runs file): stored only when it reads,
    torch-free, run on the imports' queue under a CPU limit from the files it ``reads``, and reached through its
    own command (``trace``, ``snapshot``, ``hang``, ``runs import``) rather than listed as one."""
    return Experiment(
        name=name,
        title=title,
        config_type=config_type,
        run=run,
        description=(doc or "").partition("\n")[0],
        store_failures=False,
        torch_free=True,
        reads=reads,
        command=False,
        **more,
    )


def drive(gen: Generator[Progress, None, Output]) -> tuple[Output, list[Progress]]:
    """Run an experiment's generator to its end in this process (tests, benchmarks, debugging):
    its Output and every Progress it yielded. Dashboard and CLI runs go through the worker instead."""
    events: list[Progress] = []
    while True:
        try:
            events.append(next(gen))
        except StopIteration as stop:
            return stop.value, events


def _field_types(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _coerce(name: str, tp: Any, value: Any) -> Any:
    """Convert JSON-ish values (lists, ints) to the annotated field type; refuse the rest."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _coerce(name, inner[0], value)
    if origin is Literal:
        if value not in args:
            raise ConfigError(f"{name}: {value!r} is not one of {', '.join(map(str, args))}")
        return value
    if origin is tuple:
        if isinstance(value, str):
            value = [v for v in value.split(",") if v.strip()]
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{name}: expected a list, got {value!r}")
        item = args[0] if args else Any
        return tuple(_coerce(name, item, v) for v in value)
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{name}: expected true or false, got {value!r}")
    if tp is int:
        if isinstance(value, bool):
            raise ConfigError(f"{name}: expected a whole number, got {value!r}")
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            try:
                return int(value.strip())
            except ValueError:
                pass
        raise ConfigError(f"{name}: expected a whole number, got {value!r}")
    if tp is float:
        if isinstance(value, bool):
            raise ConfigError(f"{name}: expected a number, got {value!r}")
        try:
            return float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{name}: expected a number, got {value!r}") from None
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{name}: expected text, got {value!r}")
        return value
    return value


def _typed_values(cls: type, values: Mapping[str, Any]) -> dict[str, Any]:
    """JSON values as the config's field types (lists become tuples); unknown keys are refused."""
    if not isinstance(values, Mapping):
        raise ConfigError(f"config must be an object, got {type(values).__name__}")
    hints = _field_types(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = set(values) - names
    if unknown:
        raise ConfigError(f"unknown option(s) for {cls.__name__}: {', '.join(sorted(unknown))}")
    return {k: _coerce(k, hints[k], v) for k, v in values.items()}


def config_from_dict(cls: type, values: Mapping[str, Any]) -> Any:
    """Build (and so validate) a config dataclass from JSON values; unknown keys are refused."""
    kwargs = _typed_values(cls, values)
    if "seed" in kwargs:
        check_seed(kwargs["seed"])
    try:
        return cls(**kwargs)
    except TypeError as exc:  # a missing required field
        raise ConfigError(str(exc)) from None


def config_from_validated(cls: type, values: Mapping[str, Any]) -> Any:
    """A config rebuilt from the dict :func:`config_from_dict` validated (``JobManager.submit``), where the run
    happens: each value takes its field's type again and a field the dict lacks its default, but the config's
    own checks (``__post_init__``, which may look for files) do not run a second time. Every config is a frozen
    dataclass whose checks only refuse or fill its own fields, so the validated dict holds all they decided."""
    kwargs = _typed_values(cls, values)
    config = object.__new__(cls)
    for f in dataclasses.fields(cls):
        if f.name in kwargs:
            value = kwargs[f.name]
        elif f.default is not dataclasses.MISSING:
            value = f.default
        elif f.default_factory is not dataclasses.MISSING:
            value = f.default_factory()
        else:
            raise ConfigError(f"{cls.__name__}: {f.name} is missing")
        object.__setattr__(config, f.name, value)
    return config


def config_to_dict(config: Any) -> dict:
    """JSON-ready dict of a config (tuples become lists)."""
    return json_ready(dataclasses.asdict(config))
