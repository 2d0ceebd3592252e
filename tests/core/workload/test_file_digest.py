"""The digest an import keeps of its file is SHA-256 of the file as it lies, whichever implementation computed it
(CPython's own for a small file, OpenSSL's past OWN_SHA256_BYTES): checked against hashlib's."""

from __future__ import annotations

import hashlib

import pytest

from core.workload import files

DATA = [b"", b"abc", bytes(range(256)) * 9000]  # empty, the FIPS 180-2 example, 2.3 MB over several reads


@pytest.mark.parametrize("limit", [1 << 40, 0], ids=["cpython", "openssl"])
@pytest.mark.parametrize("data", DATA, ids=["empty", "abc", "2.3MB"])
def test_the_digest_is_sha256_of_the_file(tmp_path, monkeypatch, limit, data):
    monkeypatch.setattr(files, "OWN_SHA256_BYTES", limit)
    path = tmp_path / "f.json.gz"
    path.write_bytes(data)
    assert files.sha256(path) == hashlib.sha256(data).hexdigest()


def test_the_abc_digest_is_the_published_one(tmp_path):
    path = tmp_path / "abc"
    path.write_bytes(b"abc")
    assert files.sha256(path) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"  # FIPS 180-2
