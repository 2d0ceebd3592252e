"""``torchrun … -m core.cli.rank``: the interconnect collectives of a job across several boxes, by hand.

Start it with torchrun on every box of a multi-box job, with the interconnect options (generated from
the experiment's config) and ``--db/--json/--no-save/--name``. Every rank runs the lab's rank program
(:func:`core.distributed.rank.run_rank`); rank 0 prints progress, stores ONE run for the whole job
(per-rank rows, hosts, world size) in its box's run database — every point as it finishes, so a crash
keeps what was measured — and prints it. Not a ``python -m core`` command (it has no ``register``):
torchrun starts it once per rank. torch is imported only when it runs, so the CLI's other commands
never pay for it.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys

from core.cli.experiments import add_config_options, config_values
from core.cli.output import print_run
from core.distributed.events import RankError
from core.errors import ConfigError
from core.experiment import config_from_dict, config_to_dict
from core.hardware.device import describe, versions
from core.jsonable import json_ready
from core.result import RunResult, now_iso
from core.units import count_text


class StoreSink:
    """torchrun by hand: rank 0 prints progress and keeps one stored run up to date; other ranks stay quiet."""

    def __init__(self, env, cfg, args) -> None:
        self.env, self.args = env, args
        self.store = None
        if env.rank == 0 and not args.no_save:
            from core.store import RunStore

            self.store = RunStore(args.db)
        self.run = RunResult(
            experiment="interconnect",
            config=config_to_dict(cfg),
            device={},
            versions=versions(),
            started_at=now_iso(),
            finished_at=None,
            status="running",
            name=args.name,
        )

    def _save(self) -> None:
        if self.store is not None:
            self.store.save(self.run, owner_pid=os.getpid() if self.run.status == "running" else None)

    def start(self, meta: dict, total: int) -> None:
        if self.env.rank:
            return
        from core.rows.interconnect import InterconnectMeta

        job = InterconnectMeta.from_meta(meta)
        device = describe(job.first_device)
        device["label"] = (
            f"torchrun job — {job.world_size} ranks on {count_text(job.nodes or 0, 'node')}, "
            f"rank 0: {device.get('label') or device.get('name')}"
        )
        self.run.device, self.run.meta = json_ready(device), json_ready(meta)
        self._save()

    def step(self, index: int, total: int, label: str) -> None:
        pass

    def rows(self, index: int, total: int, rows: list[dict]) -> None:
        from core.rows.interconnect import CollectivePoint

        if self.env.rank:
            return
        self.run.rows.extend(json_ready(rows))
        print(f"[{index + 1}/{total}] {CollectivePoint.from_row(rows[0]).text(full=True)}", file=sys.stderr, flush=True)
        self._save()

    def done(self, meta: dict) -> None:
        if self.env.rank:
            return
        self.run.meta = json_ready(meta)
        self._finish("ok", None)

    def error(self, event: RankError) -> None:
        from core.distributed.rank import failure_text

        text = failure_text(event)
        print(text, file=sys.stderr, flush=True)
        if self.env.rank == 0:
            self._finish("unsupported" if event.unsupported else "error", text)

    def _finish(self, status: str, error: str | None) -> None:
        self.run.status, self.run.error, self.run.finished_at = status, error, now_iso()
        self._save()
        print_run(self.run, self.args.json)


def _parser(config_type) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="torchrun … -m core.cli.rank", description=(__doc__ or "").partition("\n")[0])
    parser.add_argument("--db", help="run database of rank 0's box (default: $GPULAB_DB or the lab's data dir)")
    parser.add_argument("--json", action="store_true", help="rank 0 prints the stored run as JSON")
    parser.add_argument("--no-save", action="store_true", help="do not store the run")
    parser.add_argument("--name", default="", help="a label for the stored run")
    add_config_options(parser, config_type)
    return parser


def main(argv: list[str] | None = None) -> int:
    from core.distributed.rank_entry import die_with_parent

    die_with_parent(signal.SIGTERM)  # before torch is imported: a rank still importing it dies with torchrun too
    from core.distributed.config import InterconnectConfig
    from core.distributed.rank import RankEnv, run_rank, terminated

    args = _parser(InterconnectConfig).parse_args(argv)
    try:
        env = RankEnv.from_environ()
        cfg = config_from_dict(
            InterconnectConfig, {"parts": ("collectives",)} | config_values(args, InterconnectConfig)
        )
        if set(cfg.parts) != {"collectives"}:
            raise ConfigError(
                "parts: a torchrun job measures the collectives; host copies and the peer "
                "matrix are per box: python -m core interconnect --parts copy,peer on each box"
            )
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    sink = StoreSink(env, cfg, args)
    signal.signal(signal.SIGTERM, terminated)
    return run_rank(cfg, env, sink)


if __name__ == "__main__":
    from torch.distributed.elastic.multiprocessing.errors import record

    sys.exit(record(main)())
