"""``python -m core.distributed.torchrun …``: torchrun, with every store it serves listening on the address given.

The same options as ``torchrun`` (it runs torch's own launcher, :mod:`torch.distributed.run`), with a c10d
rendezvous. Plain torchrun serves its rendezvous store and the workers' store on every interface; here they listen
on the rendezvous endpoint's address and on this node's address (:mod:`core.distributed.bound_store`). This node's
address is ``--local-addr`` where given, else the endpoint itself when it is a loopback address (every node is on
this box), else the address of the interface this box reaches the endpoint through, which is also what the other
nodes are told to connect to. A name that resolves to a loopback address here but is not one (``box1`` →
127.0.1.1 in ``/etc/hosts``) is refused: the store would listen where no other node can reach it.
"""

from __future__ import annotations

import ipaddress
import socket
import sys
import uuid

from core.errors import ConfigError

DEFAULT_PORT = 29400  # torch's c10d rendezvous default


def is_loopback(host: str) -> bool:
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def node_address(host: str, port: int) -> str:
    """The address this node's stores listen on and the other nodes are given, for a rendezvous at ``host``."""
    if is_loopback(host):
        return host
    try:
        resolved = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise ConfigError(f"--rdzv-endpoint {host}: cannot resolve it here ({exc})") from exc
    looping = [str(a[4][0]) for a in resolved if is_loopback(str(a[4][0]))]
    if looping:
        raise ConfigError(
            f"--rdzv-endpoint {host} resolves to {looping[0]} on this box, where no other node can reach the store: "
            f"give the address the other nodes reach it at (its IP on the private network)"
        )
    family, _, _, _, address = resolved[0]
    with socket.socket(family, socket.SOCK_DGRAM) as probe:  # a UDP "connect" sends nothing: it picks the route
        probe.connect(address)
        return probe.getsockname()[0]


def prepared(argv: list[str] | None):
    """torchrun's parsed arguments, checked, with this node's address filled in."""
    from torch.distributed import run as torch_run
    from torch.distributed.elastic.rendezvous.utils import parse_rendezvous_endpoint

    args = torch_run.parse_args(argv)
    if args.standalone:
        args.rdzv_backend, args.rdzv_endpoint, args.standalone = "c10d", "127.0.0.1:0", False
        args.rdzv_id = str(uuid.uuid4())
    if args.rdzv_backend != "c10d" or not args.rdzv_endpoint:
        raise ConfigError(
            f"--rdzv-backend {args.rdzv_backend}: this launcher binds the c10d rendezvous only "
            "(--rdzv-backend c10d --rdzv-endpoint HOST:PORT)"
        )
    host, port = parse_rendezvous_endpoint(args.rdzv_endpoint, default_port=DEFAULT_PORT)
    args.local_addr = args.local_addr or node_address(host, port)
    return args


def main(argv: list[str] | None = None) -> int:
    from torch.distributed import run as torch_run
    from torch.distributed.elastic.multiprocessing.errors import record

    from core.distributed.bound_store import bind_launcher_stores

    try:
        args = prepared(argv)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    bind_launcher_stores()
    record(torch_run.run)(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
