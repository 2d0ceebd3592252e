"""A job's secret, and the records its processes seal with it before they go through a store others can reach.

Whoever reaches torch's TCPStore can read and write every key: it has no authentication. So what a node sends
through it is sealed: an HMAC-SHA256 over (job id, run nonce, key, payload) with a secret the store never sees,
handed to the job's processes at launch in :data:`SECRET_ENV` (hex; a process's environment is readable by its
user and root only) or in the file :data:`SECRET_FILE_ENV` names (readable by its owner only, which must be this
user). The key names the record and the node that wrote it (``rows/1``), so a record cannot be moved to another node
or job; the nonce, drawn by rank 0 for each run of the job (:func:`new_nonce`), binds it to that run, so a record
captured from an earlier run with the same job id and secret is refused as stale (:class:`Stale`), never replayed.
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
SECRET_FILE_CHARS = 4096  # a secret is one line of hex: a file longer than this is not one
NONCE_BYTES = 16


class Unverified(Exception):
    """A record whose seal is missing or wrong: not written by a process that holds the job's secret."""

    def __init__(self, key: str, why: str) -> None:
        super().__init__(f"{key}: {why}")
        self.key = key


class Stale(Unverified):
    """A record sealed for another run of the job (its nonce is not this run's): one captured earlier, replayed."""


def new_secret() -> bytes:
    return secrets.token_bytes(SECRET_BYTES)


def new_nonce() -> str:
    """A run's nonce, drawn by rank 0 when the run starts."""
    return secrets.token_hex(NONCE_BYTES)


def _secret_file(path: str) -> str:
    try:
        with open(path, encoding="ascii") as fh:
            info = os.fstat(fh.fileno())
            if info.st_uid != os.getuid() or info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
                raise ConfigError(f"{SECRET_FILE_ENV}={path}: the file must be yours and readable by you only (0600)")
            text = fh.read(SECRET_FILE_CHARS + 1)
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{SECRET_FILE_ENV}={path}: cannot read it ({type(exc).__name__})") from exc
    if len(text) > SECRET_FILE_CHARS:
        raise ConfigError(
            f"{SECRET_FILE_ENV}={path}: longer than {SECRET_FILE_CHARS:,} characters; a job secret is one line of hex "
            "(python -c 'import secrets; print(secrets.token_hex(32))')"
        )
    return text


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
    """Seals and opens the records of one run of a job (``job``: its rendezvous id; ``run``: rank 0's nonce for
    this run, empty for the record that hands the nonce out)."""

    def __init__(self, secret: bytes, job: str, run: str = "") -> None:
        self._secret, self.job, self.run = secret, job, run

    def _mac(self, key: str, payload: str, run: str | None = None) -> str:
        message = json.dumps([self.job, self.run if run is None else run, key, payload]).encode()
        return hmac.new(self._secret, message, hashlib.sha256).hexdigest()

    def seal(self, key: str, value) -> str:
        payload = json.dumps(value, allow_nan=False)
        return json.dumps({"payload": payload, "run": self.run, "mac": self._mac(key, payload)})

    def open(self, key: str, sealed: bytes | str):
        """The value stored under ``key``; :class:`Stale` when the job's secret sealed it for another run (the nonce
        it names is not this run's), :class:`Unverified` when its seal is not the job's."""
        try:
            record = json.loads(sealed)
            payload, run, mac = record["payload"], record.get("run", ""), record["mac"]
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise Unverified(key, "not a sealed record") from exc
        if not (isinstance(payload, str) and isinstance(run, str) and isinstance(mac, str)):
            raise Unverified(key, "not a sealed record")
        if not hmac.compare_digest(mac.encode(), self._mac(key, payload, run).encode()):
            raise Unverified(key, "its seal does not match the job's secret")
        if run != self.run:
            raise Stale(key, "sealed for another run of this job: a record captured earlier and replayed")
        return json.loads(payload)
