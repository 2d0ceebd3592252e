"""Record a real gloo job's flight-recorder dumps on CPU, built to stop (or stall) in a known way, on demand.

    python tests/data/flight_recorder/record_job.py OUT --ranks 3 --collectives 2000 --scenario skip_last

The launcher imports torch once and forks one process per rank (a fresh interpreter per rank would import torch
32 times); every rank joins a gloo job on 127.0.0.1 with the recorder on (``TORCH_FR_BUFFER_SIZE``, default the
2,000 entries ``record --flight-recorder`` sets), runs ``--collectives`` − 1 all_reduces of 4×8 floats on the
default group, and then does what the scenario says. The ranks that wait post their collective and dump at once
(the collective cannot end without the rank that is elsewhere); the rank that is elsewhere dumps once every
waiting rank has; nobody leaves before every dump is written (a rank that leaves ends the others' collectives
with an error, which gloo counts as completed). Each rank writes ``OUT/rank_<rank>`` (``_dump_fr_trace()``, the
pickle).

Scenarios (the collective they stop at is the default group's #K, K = ``--collectives``, unless said):

- ``skip_last``: the last rank never enters #K; the others wait in it;
- ``before_first``: rank 1 never enters a collective at all: the others wait in #1 (``--collectives`` is
  ignored);
- ``subgroups_default_first`` / ``subgroups_sub_first``: 8 ranks, groups A = 0–3 and B = 4–7 (each also runs
  K − 1 all_reduces). Rank 7 stops; ranks 4–6 wait in B's #K for it; ranks 0–3 wait in the default group's #K
  (for ranks 4–7). ``default_first``: ranks 0–3 enter theirs before ranks 4–6 enter B's; ``sub_first``: after;
- ``slow``: the last rank enters #K ``--late`` seconds (default 2) after the others dumped while waiting in it,
  then it completes on every rank and the last rank dumps once its recorder counts it completed: a slow rank,
  not a hang.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import socket
import sys
import time
from pathlib import Path

SCENARIOS = (
    "skip_last",
    "before_first",
    "subgroups_default_first",
    "subgroups_sub_first",
    "slow",
)
DEADLINE_S = 600.0  # a rank waiting for another's state gives up past this (a broken job, not a slow box)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for(paths: list[Path]) -> None:
    """Wait until every path exists (written by another rank), polling; a job that never gets there fails."""
    deadline = time.monotonic() + DEADLINE_S
    while not all(p.exists() for p in paths):
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {DEADLINE_S:.0f} s for {[str(p) for p in paths if not p.exists()]}")
        time.sleep(0.02)


class Job:
    def __init__(self, args: argparse.Namespace, rank: int, port: int) -> None:
        self.args, self.rank, self.port = args, rank, port
        self.out = Path(args.out)
        self.sync = Path(args.sync)

    def mark(self, name: str) -> None:
        (self.sync / name).touch()

    def marked(self, *names: str) -> None:
        _wait_for([self.sync / n for n in names])

    def dump(self, completed: int = 0) -> None:
        """Write this rank's dump; with ``completed``, once its recorder counts that many collectives of the
        default group completed (gloo marks one completed a moment after the call returns)."""
        import torch

        c10d = torch._C._distributed_c10d
        deadline = time.monotonic() + DEADLINE_S
        while (
            completed
            and int(json.loads(c10d._dump_fr_trace_json())["pg_status"]["0"]["last_completed_collective"]) < completed
        ):
            if time.monotonic() > deadline:
                raise TimeoutError(f"collective #{completed} never counted completed")
            time.sleep(0.01)
        target = self.out / f"rank_{self.rank}"
        part = target.with_name(target.name + ".part")
        part.write_bytes(c10d._dump_fr_trace())
        os.replace(part, target)  # whole or absent: a rank waiting for it never reads half
        self.mark(f"dumped{self.rank}")

    def wait_dumps(self, ranks) -> None:
        self.marked(*(f"dumped{r}" for r in ranks))

    def leave(self) -> None:
        """Leave once every rank has dumped (a rank that leaves ends the collectives the others wait in)."""
        self.wait_dumps(range(self.args.ranks))
        os._exit(0)

    def run(self) -> None:
        import torch
        import torch.distributed as dist

        a, rank, world = self.args, self.rank, self.args.ranks
        dist.init_process_group(
            "gloo",
            init_method=f"tcp://127.0.0.1:{self.port}",
            rank=rank,
            world_size=world,
            timeout=datetime.timedelta(seconds=a.timeout),
        )
        x = torch.ones(4, 8)
        scenario = a.scenario
        if scenario == "before_first":
            if rank == 1:  # never enters a collective
                self.wait_dumps(r for r in range(world) if r != 1)
                self.dump()
                self.leave()
            dist.all_reduce(x, async_op=True)
            self.dump()
            self.leave()
        if scenario.startswith("subgroups"):
            self._subgroups(dist, x)
        for _ in range(a.collectives - 1):
            dist.all_reduce(x)
        last = world - 1
        if scenario == "skip_last" and rank == last:
            self.wait_dumps(range(last))
            self.dump()
            self.leave()
        if scenario == "slow" and rank == last:
            self.wait_dumps(range(last))
            time.sleep(a.late)  # the scenario: this rank is late, by this much
            dist.all_reduce(x)
            self.dump(completed=a.collectives)
            self.leave()
        work = dist.all_reduce(x, async_op=True)
        self.dump()
        if scenario == "slow":
            work.wait()  # it ends once the late rank arrives
        self.leave()

    def _subgroups(self, dist, x) -> None:
        a, rank = self.args, self.rank
        group_a = dist.new_group(list(range(4)), group_desc="A")
        group_b = dist.new_group(list(range(4, 8)), group_desc="B")
        mine = group_a if rank < 4 else group_b
        for _ in range(a.collectives - 1):
            dist.all_reduce(x)
            dist.all_reduce(x, group=mine)
        if rank == 7:  # stops: never enters B's #K nor the default group's
            self.wait_dumps(range(7))
            self.dump()
            self.leave()
        default_first = a.scenario == "subgroups_default_first"
        if rank < 4:
            if not default_first:
                self.marked("b_entered4", "b_entered5", "b_entered6")
            dist.all_reduce(x, async_op=True)  # waits for ranks 4–7
            self.mark(f"default_entered{rank}")
        else:
            if default_first:
                self.marked(*(f"default_entered{r}" for r in range(4)))
            dist.all_reduce(x, group=group_b, async_op=True)  # waits for rank 7
            self.mark(f"b_entered{rank}")
        self.marked(*(f"default_entered{r}" for r in range(4)), "b_entered4", "b_entered5", "b_entered6")
        self.dump()
        self.leave()


def record(args: argparse.Namespace) -> None:
    """Fork one process per rank after importing torch once; fail if any rank fails."""
    os.environ["TORCH_FR_BUFFER_SIZE"] = str(args.buffer)
    import torch  # noqa: F401  # imported once, before the fork: every rank inherits it

    Path(args.out).mkdir(parents=True, exist_ok=True)
    Path(args.sync).mkdir(parents=True, exist_ok=True)
    port = _free_port()
    pids = {}
    for rank in range(args.ranks):
        pid = os.fork()
        if pid == 0:
            try:
                Job(args, rank, port).run()
            except BaseException as exc:  # the child must never return into the launcher's loop
                print(f"rank {rank}: {type(exc).__name__}: {exc}", file=sys.stderr)
                os._exit(1)
            os._exit(0)
        pids[pid] = rank
    failed = []
    for pid, rank in pids.items():
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            failed.append(rank)
    if failed:
        raise SystemExit(f"ranks {failed} failed")


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out", help="the folder the dumps land in")
    p.add_argument("--ranks", type=int, default=3)
    p.add_argument("--collectives", type=int, default=4, help="K: the collective the job stops at")
    p.add_argument("--scenario", choices=SCENARIOS, default="skip_last")
    p.add_argument("--buffer", type=int, default=2000, help="TORCH_FR_BUFFER_SIZE")
    p.add_argument("--late", type=float, default=2.0, help="slow: seconds the last rank enters #K late")
    p.add_argument("--timeout", type=float, default=600.0, help="the collectives' timeout, seconds")
    p.add_argument("--sync", help="a folder for the ranks' markers [default: OUT.sync beside OUT]")
    args = p.parse_args(argv)
    if args.scenario.startswith("subgroups") and args.ranks != 8:
        p.error("the subgroups scenarios have 8 ranks")
    args.sync = args.sync or f"{Path(args.out).resolve()}.sync"
    return args


if __name__ == "__main__":
    record(parse(sys.argv[1:]))
