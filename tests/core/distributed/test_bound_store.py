"""The stores the lab's launchers serve listen on the address given: a loopback rendezvous stays on loopback."""

import socket
from datetime import timedelta

import psutil
import pytest

from core.distributed.bound_store import bound_tcp_store, listen_socket
from core.distributed.torchrun import node_address, prepared
from core.errors import ConfigError


def _listening(port: int) -> list[str]:
    return [c.laddr.ip for c in psutil.Process().net_connections(kind="tcp") if c.status == "LISTEN" and c.laddr.port == port]  # fmt: skip


def test_a_store_server_listens_on_its_host_only_and_serves_its_clients():
    import torch.distributed as dist

    server = bound_tcp_store("127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=30))
    assert _listening(server.port) == ["127.0.0.1"]
    client = dist.TCPStore("127.0.0.1", server.port, is_master=False, timeout=timedelta(seconds=30))  # pyright: ignore[reportPrivateImportUsage]
    client.set("k", "v")
    assert server.get("k") == b"v"


def test_a_taken_port_is_a_runtime_error_the_rendezvous_takes_for_another_host():
    taken = listen_socket("127.0.0.1", 0)
    with taken, pytest.raises(RuntimeError, match="cannot listen on 127.0.0.1"):
        listen_socket("127.0.0.1", taken.getsockname()[1])


def test_a_loopback_rendezvous_keeps_every_node_on_loopback():
    assert node_address("127.0.0.1", 29599) == "127.0.0.1"
    args = prepared(["--nnodes", "2", "--rdzv-backend", "c10d", "--rdzv-endpoint", "127.0.0.1:29599", "-m", "x"])
    assert args.local_addr == "127.0.0.1"


def test_a_name_that_resolves_to_loopback_here_is_refused(monkeypatch):
    def resolve(host, port, *args, **kwargs):
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.1.1", port))]

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    with pytest.raises(ConfigError, match="box1 resolves to 127.0.1.1 on this box"):
        node_address("box1", 29500)


def test_only_the_c10d_rendezvous_is_launched():
    with pytest.raises(ConfigError, match="--rdzv-backend static"):
        prepared(["--nnodes", "1", "-m", "x"])
