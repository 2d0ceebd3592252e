"""Where the lab keeps its data, by environment variable."""

from pathlib import Path

from core import paths


def clear(monkeypatch):
    for name in ("GPULAB_DATA_DIR", "XDG_DATA_HOME", "GPULAB_DB", "GPULAB_EXAMPLES_DIR", "GPULAB_LOCK_DIR"):
        monkeypatch.delenv(name, raising=False)


def test_data_dir_and_database_follow_the_environment(monkeypatch, tmp_path):
    clear(monkeypatch)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert paths.data_dir() == tmp_path / ".local" / "share" / "gpulab"
    assert paths.db_path() == tmp_path / ".local" / "share" / "gpulab" / "runs.sqlite"
    monkeypatch.setenv("XDG_DATA_HOME", "/xdg")
    assert paths.data_dir() == Path("/xdg/gpulab")
    monkeypatch.setenv("GPULAB_DATA_DIR", "~/lab")
    assert paths.data_dir() == tmp_path / "lab" and paths.db_path() == tmp_path / "lab" / "runs.sqlite"
    monkeypatch.setenv("GPULAB_DB", "/elsewhere/x.sqlite")
    assert paths.db_path() == Path("/elsewhere/x.sqlite")


def test_lock_dir_is_created(monkeypatch, tmp_path):
    clear(monkeypatch)
    monkeypatch.setenv("GPULAB_LOCK_DIR", str(tmp_path / "locks"))
    assert paths.lock_dir() == tmp_path / "locks" and (tmp_path / "locks").is_dir()


def test_example_files_are_the_json_files_sorted(monkeypatch, tmp_path):
    clear(monkeypatch)
    assert paths.examples_dir() == Path(__file__).resolve().parents[2] / "examples"
    for name in ("b.json", "a.json", "notes.txt"):
        (tmp_path / name).write_text("{}")
    monkeypatch.setenv("GPULAB_EXAMPLES_DIR", str(tmp_path))
    assert paths.example_files() == [tmp_path / "a.json", tmp_path / "b.json"]
    monkeypatch.setenv("GPULAB_EXAMPLES_DIR", str(tmp_path / "missing"))
    assert paths.example_files() == []
