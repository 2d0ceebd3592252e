"""The TCP stores torch's elastic launcher serves listen on the address they are given, not on every interface.

torch's TCPStore server binds the wildcard address (``::``, every interface) whatever host it is created for (both
backends: ``UvTcpServer::makeWithPort`` in ``torch/csrc/distributed/c10d/TCPStoreLibUvBackend.cpp`` and
``TCPServer`` in ``TCPStoreBackend.cpp``), so ``torchrun --rdzv-endpoint 127.0.0.1:29599`` served two unauthenticated
stores to the network: the c10d rendezvous store on 29599 (``_create_tcp_store`` in
``torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py``) and the workers' store on a free port
(``DynamicRendezvousHandler._create_tcp_store_server`` in ``dynamic_rendezvous.py``, the one ``MASTER_PORT`` names).
TCPStore also takes a listening socket bound beforehand (``master_listen_fd``): :func:`bind_launcher_stores` makes
those two places create their server on a socket bound to their own host (the rendezvous endpoint's host, and this
node's address: ``--local-addr``). Nothing else changes: clients, keys and the launcher's protocol are torch's.
"""

from __future__ import annotations

import os
import socket

_PATCHED = "_gpulab_bound"


def listen_socket(host: str, port: int) -> socket.socket:
    """A TCP socket listening on ``host``'s address (the first one it resolves to) only.

    RuntimeError when it cannot be bound (the port is taken): what the c10d backend takes for "another agent on this
    box hosts the store" before it connects to it as a client."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise RuntimeError(f"cannot listen on {host}:{port}: {exc}") from exc
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(socket.SOMAXCONN)
    except OSError as exc:
        sock.close()
        raise RuntimeError(f"cannot listen on {host}:{port}: {exc}") from exc
    return sock


def bound_tcp_store(host_name: str, port: int, *args, is_master: bool = False, **kwargs):
    """``torch.distributed.TCPStore`` whose server (``is_master``) listens on ``host_name`` only."""
    import torch.distributed as dist

    store_class = dist.TCPStore  # pyright: ignore[reportPrivateImportUsage]
    if not is_master or kwargs.get("master_listen_fd") is not None:
        return store_class(host_name, port, *args, is_master=is_master, **kwargs)
    sock = listen_socket(host_name, port)
    bound_port = sock.getsockname()[1]
    fd = sock.detach()  # the store's server owns the descriptor from here
    try:
        return store_class(host_name, bound_port, *args, is_master=True, master_listen_fd=fd, **kwargs)
    except BaseException:
        os.close(fd)
        raise


def bind_launcher_stores() -> None:
    """From now on, in this process, the elastic launcher's stores listen on their own host only (idempotent)."""
    from torch.distributed.elastic.rendezvous import c10d_rendezvous_backend
    from torch.distributed.elastic.rendezvous.dynamic_rendezvous import DynamicRendezvousHandler

    if getattr(c10d_rendezvous_backend, _PATCHED, False):
        return

    def workers_store(self, master_addr, master_port):
        return bound_tcp_store(master_addr, master_port, is_master=True, multi_tenant=True)

    # torch imports the name from torch._C without re-exporting it; replaced here, where the backend looks it up
    c10d_rendezvous_backend.TCPStore = bound_tcp_store  # pyright: ignore[reportPrivateImportUsage]
    DynamicRendezvousHandler._create_tcp_store_server = workers_store
    setattr(c10d_rendezvous_backend, _PATCHED, True)
