"""A job's records are sealed with its secret: one sealed by another secret, for another key or job, or not
sealed at all is refused; the secret comes from the environment or a file only its owner can read."""

import json

import pytest

from core.distributed.job_secret import SECRET_ENV, SECRET_FILE_ENV, Sealer, Unverified, new_secret, secret_from_environ
from core.errors import ConfigError


def test_a_sealed_record_opens_with_the_jobs_secret_only():
    secret = new_secret()
    sealed = Sealer(secret, "job-1").seal("rows/1", [{"measured": 1.5}])
    assert Sealer(secret, "job-1").open("rows/1", sealed) == [{"measured": 1.5}]
    for sealer, key in ((Sealer(new_secret(), "job-1"), "rows/1"), (Sealer(secret, "job-2"), "rows/1"),
                        (Sealer(secret, "job-1"), "rows/2")):  # fmt: skip
        with pytest.raises(Unverified) as refused:
            sealer.open(key, sealed)
        assert refused.value.key == key


@pytest.mark.parametrize(
    "forged",
    [
        json.dumps([{"measured": 999.0}]),  # a plain value, as the store held before seals
        json.dumps({"payload": json.dumps([{"measured": 999.0}]), "mac": "0" * 64}),
        json.dumps({"payload": json.dumps([{"measured": 999.0}]), "mac": "é"}),
        json.dumps({"payload": [], "mac": None}),
        b"\xff\xfe",
    ],
)
def test_a_record_without_a_valid_seal_is_unverified(forged):
    with pytest.raises(Unverified, match="rows/1"):
        Sealer(new_secret(), "job").open("rows/1", forged)


def test_the_secret_comes_from_the_environment_or_an_owner_only_file(tmp_path):
    secret = new_secret()
    assert secret_from_environ({SECRET_ENV: secret.hex()}) == secret
    path = tmp_path / "secret"
    path.write_text(secret.hex() + "\n")
    path.chmod(0o644)
    with pytest.raises(ConfigError, match="readable by you only"):
        secret_from_environ({SECRET_FILE_ENV: str(path)})
    path.chmod(0o600)
    assert secret_from_environ({SECRET_FILE_ENV: str(path)}) == secret
    with pytest.raises(ConfigError, match=f"no job secret: set {SECRET_ENV}"):
        secret_from_environ({})
    with pytest.raises(ConfigError, match="at least 16"):
        secret_from_environ({SECRET_ENV: "abcd"})
    with pytest.raises(ConfigError, match="not hexadecimal"):
        secret_from_environ({SECRET_ENV: "secret"})


def test_a_secret_file_longer_than_a_secret_is_refused_in_words_not_cut(tmp_path):
    """It was read to its 4,096th character and the rest dropped without a word."""
    path = tmp_path / "secret"
    path.write_text(new_secret().hex() + "\n" + "0" * 5000)
    path.chmod(0o600)
    with pytest.raises(ConfigError, match=r"longer than 4,096 characters; a job secret is one line of hex"):
        secret_from_environ({SECRET_FILE_ENV: str(path)})
    path.write_text(new_secret().hex().ljust(4096, "\n"))  # exactly at the limit: still read
    assert len(secret_from_environ({SECRET_FILE_ENV: str(path)})) == 32
