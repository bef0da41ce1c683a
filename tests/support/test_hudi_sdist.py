"""Fetching hudi 0.5.0's sdist for its test tables: the index from pip's configuration, the pinned sha256, the cache."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support import hudi_sdist


def _index(root: Path, archive: Path) -> str:
    """A PEP 503 index on disk serving `archive` as hudi's sdist (relative link, as simple pages may use)."""
    project = root / "simple" / "hudi"
    project.mkdir(parents=True)
    shutil.copy(archive, project / hudi_sdist.SDIST)
    (project / "index.html").write_text(f'<html><body><a href="{hudi_sdist.SDIST}#sha256=x">{hudi_sdist.SDIST}</a>'
                                        "</body></html>")
    return (root / "simple").as_uri() + "/"


@pytest.fixture
def real_archive() -> Path:
    hudi_sdist.data_dir()   # the session's cache holds it (make test fetches it first)
    return hudi_sdist.cache_dir() / hudi_sdist.SDIST


def test_the_index_comes_from_pips_configuration(monkeypatch) -> None:
    monkeypatch.setenv("PIP_INDEX_URL", "https://mirror.example/simple")
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "file:///srv/extra/simple/")
    indexes = hudi_sdist.configured_indexes()
    assert indexes[0] == "https://mirror.example/simple/" and "file:///srv/extra/simple/" in indexes


def test_fetched_from_a_simple_index_checked_and_extracted(tmp_path, monkeypatch, real_archive) -> None:
    monkeypatch.setenv("PIP_INDEX_URL", _index(tmp_path / "idx", real_archive))
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "")
    monkeypatch.setenv("TIDEMARK_CACHE_DIR", str(tmp_path / "cache"))
    data = hudi_sdist.data_dir()
    assert (data / "sample_table" / "mor" / "avro" / "v9_txns_simple_meta.zip").is_file()
    assert (tmp_path / "cache" / hudi_sdist.SDIST).is_file()


def test_a_download_with_another_sha256_is_refused(tmp_path, monkeypatch) -> None:
    fake = tmp_path / "fake.tar.gz"
    fake.write_bytes(b"not hudi")
    monkeypatch.setenv("PIP_INDEX_URL", _index(tmp_path / "idx", fake))
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "")
    monkeypatch.setenv("TIDEMARK_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(hudi_sdist.SdistUnavailable, match="is not the pinned"):
        hudi_sdist.data_dir()
    assert not (tmp_path / "cache" / hudi_sdist.SDIST).exists()   # nothing unchecked is kept


def test_a_cached_sdist_needs_no_index(tmp_path, monkeypatch, real_archive) -> None:
    cache = tmp_path / "cache"
    cache.mkdir()
    shutil.copy(real_archive, cache / hudi_sdist.SDIST)
    monkeypatch.setenv("TIDEMARK_CACHE_DIR", str(cache))
    monkeypatch.setenv("PIP_INDEX_URL", (tmp_path / "no-index").as_uri())   # nothing there: offline
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "")
    assert (hudi_sdist.data_dir() / "quickstart_trips_table").is_dir()


def test_no_index_serving_it_says_where_it_looked(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TIDEMARK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PIP_INDEX_URL", (tmp_path / "empty").as_uri())
    monkeypatch.setenv("PIP_EXTRA_INDEX_URL", "")
    with pytest.raises(hudi_sdist.SdistUnavailable, match="no configured index serves it"):
        hudi_sdist.data_dir()
