"""Catalogs for the sync tests: a real Hive metastore from pyspark's jars and moto's Glue, both on free ports.

Session-scoped (one per test process) and stopped at the end of the session.
"""
from __future__ import annotations

import os

import pytest

from tasks.metastore import EmbeddedMetastore, free_port


@pytest.fixture(scope="session")
def hive_metastore(tmp_path_factory):
    """thrift://127.0.0.1:<port> of a Hive 2.3 metastore on Derby, started for this session."""
    metastore = EmbeddedMetastore(tmp_path_factory.mktemp("metastore"))
    try:
        yield metastore.start()
    finally:
        metastore.stop()


@pytest.fixture(scope="session")
def glue_endpoint():
    """http://127.0.0.1:<port> of moto's server (Glue among its services), with dummy credentials."""
    from moto.server import ThreadedMotoServer

    keys = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1"}
    saved = {k: os.environ.get(k) for k in keys}
    os.environ.update(keys)
    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
