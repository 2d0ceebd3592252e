"""A job's secret, and the records its processes seal with it before they go through a store others can reach.

Whoever reaches torch's TCPStore can read and write every key: it has no authentication. So what a node sends
through it is sealed: an HMAC-SHA256 over (job id, key, payload) with a secret the store never sees, handed to the
job's processes at launch in :data:`SECRET_ENV` (hex; a process's environment is readable by its user and root
only) or in the file :data:`SECRET_FILE_ENV` names (readable by its owner only, which must be this user). The key
names the record and the node that wrote it (``rows/1``), so a record cannot be moved to another node or job.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import stat

from core.errors import ConfigError

SECRET_ENV = "GPULAB_JOB_SECRET"
SECRET_FILE_ENV = "GPULAB_JOB_SECRET_FILE"
SECRET_BYTES = 32
MIN_SECRET_BYTES = 16


class Unverified(Exception):
    """A record whose seal is missing or wrong: not written by a process that holds the job's secret."""

    def __init__(self, key: str, why: str) -> None:
        super().__init__(f"{key}: {why}")
        self.key = key


def new_secret() -> bytes:
    return secrets.token_bytes(SECRET_BYTES)


def _secret_file(path: str) -> str:
    try:
        with open(path, encoding="ascii") as fh:
            info = os.fstat(fh.fileno())
            if info.st_uid != os.getuid() or info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
                raise ConfigError(f"{SECRET_FILE_ENV}={path}: the file must be yours and readable by you only (0600)")
            return fh.read(4096)
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{SECRET_FILE_ENV}={path}: cannot read it ({type(exc).__name__})") from exc


def secret_from_environ(environ=os.environ) -> bytes:
    """The job's secret handed to this process; ConfigError (naming how to make one) where there is none."""
    if environ.get(SECRET_ENV):
        text, source = environ[SECRET_ENV], SECRET_ENV
    elif environ.get(SECRET_FILE_ENV):
        text, source = _secret_file(environ[SECRET_FILE_ENV]), SECRET_FILE_ENV
    else:
        raise ConfigError(
            f"no job secret: set {SECRET_ENV} to the same random hex on every node "
            f"(python -c 'import secrets; print(secrets.token_hex(32))') or {SECRET_FILE_ENV} to a 0600 file holding it"
        )
    try:
        secret = bytes.fromhex(text.strip())
    except ValueError:
        raise ConfigError(f"{source}: not hexadecimal") from None
    if len(secret) < MIN_SECRET_BYTES:
        raise ConfigError(f"{source}: {len(secret)} bytes; a job secret has at least {MIN_SECRET_BYTES}")
    return secret


class Sealer:
    """Seals and opens the records of one job (``job``: its rendezvous id)."""

    def __init__(self, secret: bytes, job: str) -> None:
        self._secret, self.job = secret, job

    def _mac(self, key: str, payload: str) -> str:
        message = json.dumps([self.job, key, payload]).encode()
        return hmac.new(self._secret, message, hashlib.sha256).hexdigest()

    def seal(self, key: str, value) -> str:
        payload = json.dumps(value, allow_nan=False)
        return json.dumps({"payload": payload, "mac": self._mac(key, payload)})

    def open(self, key: str, sealed: bytes | str):
        """The value stored under ``key``; :class:`Unverified` when its seal is not this job's."""
        try:
            record = json.loads(sealed)
            payload, mac = record["payload"], record["mac"]
        except (ValueError, TypeError, KeyError) as exc:
            raise Unverified(key, "not a sealed record") from exc
        genuine = isinstance(payload, str) and isinstance(mac, str)
        if not (genuine and hmac.compare_digest(mac.encode(), self._mac(key, payload).encode())):
            raise Unverified(key, "its seal does not match the job's secret")
        return json.loads(payload)
