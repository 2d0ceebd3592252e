"""``torchrun … -m core.cli.health_node``: the health check on every node of a cluster, one stored run.

Start it with torchrun on every node, one process per node (``--nproc-per-node 1``: the check itself uses
every GPU of its node through the lab's workers), with the ``health`` options and ``--db/--json/--name``.
Each node runs the check and sends its rows through torchrun's rendezvous store, sealed with the job's secret
(``GPULAB_JOB_SECRET`` or ``GPULAB_JOB_SECRET_FILE``, the same on every node: :mod:`core.distributed.job_secret`;
start it with ``python -m core.distributed.torchrun`` so the stores listen on the address given); rank 0 waits for every node
(a node silent for ``--stale-s`` is failed and named, its rows kept), flags the outliers against the fleet
median and the published figure, stores ONE run with a row per node and GPU, and prints it with its verdict.
Exit 0 once the check ran, whatever its verdict (torchrun takes any other exit for a crashed worker and keeps
the other nodes' launchers waiting on their exit barrier), 2 for bad input. Not a ``python -m core`` command.
"""

from __future__ import annotations

import argparse
import signal
import sys

from core.cli.health import add_health_options, health_config
from core.errors import ConfigError


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="torchrun … -m core.cli.health_node", description=(__doc__ or "").partition("\n")[0]
    )
    parser.add_argument("--db", help="run database of each node's box (rank 0 stores the cluster's run in its own)")
    parser.add_argument("--json", action="store_true", help="rank 0 prints the stored run as JSON")
    parser.add_argument("--name", default="", help="a label for the stored run")
    parser.add_argument(
        "--stale-s", type=float, default=60.0, help="a node silent this long is failed and named [default: 60]"
    )
    add_health_options(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    from core.distributed.rank_entry import die_with_parent

    die_with_parent(signal.SIGTERM)  # before torch is imported: a node still importing it dies with torchrun too
    args = _parser().parse_args(argv)
    try:
        from core.distributed.job_secret import secret_from_environ
        from core.distributed.rank import RankEnv

        env = RankEnv.from_environ()
        secret = secret_from_environ()
        cfg = health_config(args)
        if env.local_world != 1:
            raise ConfigError(
                f"--nproc-per-node {env.local_world}: run one process per node (--nproc-per-node 1); "
                "the check uses every GPU of its node itself"
            )
        if not 1 <= args.stale_s <= 3600:
            raise ConfigError(f"--stale-s must be 1…3600 seconds, got {args.stale_s:g}")
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from core.health.cluster import run_node

    return run_node(cfg, env, args, secret)


if __name__ == "__main__":
    from torch.distributed.elastic.multiprocessing.errors import record

    sys.exit(record(main)())
