"""Registering a `CatalogShape` in a Hive Metastore over its Thrift API (HiveSyncTool's HMS mode).

Spark's own Hive client cannot create tables whose input format class it cannot load (Hudi's jars are not
on Tidemark's classpath), so we speak the metastore's Thrift protocol directly, with the bindings that
`pymetastore` ships (generated from Hive's `hive_metastore.thrift`; the calls used here exist unchanged
since Hive 2.x, and fields a 2.3 server does not know are skipped by Thrift).

Each sync is idempotent: a missing database is created (HiveSyncTool's auto-create default), a missing table
created, an existing one altered to the shape (columns, formats, serde, the properties the shape owns; other
properties kept), and the partitions reconciled with storage — added, moved, dropped — as HiveSyncTool's
full-listing sync does.
"""
from __future__ import annotations

import getpass
import logging
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlparse

from engine.catalog.shape import OWNED_PREFIXES, CatalogShape, CatalogTable, Column, Partition
from engine.errors import ConfigError

# TSocket logs every refused connection at ERROR before raising it; the raised error is what we report.
logging.getLogger("thrift.transport.TSocket").setLevel(logging.CRITICAL)

CONNECT_TIMEOUT_MS = 10_000
CALL_TIMEOUT_MS = 60_000


class MetastoreError(Exception):
    """A metastore call failed (unreachable, refused, or the server raised). `transient`: asking again may work
    (the catalog could not be reached or timed out), else the catalog answered no and will again."""

    def __init__(self, message: str, transient: bool = True) -> None:
        super().__init__(message)
        self.transient = transient


def _error(exc: Exception) -> MetastoreError:
    """One line naming the failure; the server's own exceptions (MetaException, InvalidObjectException, ...) are
    answers, not outages."""
    from pymetastore.hive_metastore.ttypes import AlreadyExistsException, NoSuchObjectException
    from thrift.Thrift import TException
    from thrift.transport.TTransport import TTransportException

    # another syncer (another host) created or dropped the same thing meanwhile: the next attempt sees it
    raced = isinstance(exc, (AlreadyExistsException, NoSuchObjectException))
    answered = isinstance(exc, TException) and not isinstance(exc, TTransportException) and not raced
    return MetastoreError(_reason(exc), transient=not answered)


def parse_uris(uris: str) -> list[tuple[str, int]]:
    """`thrift://host:port[,thrift://host2:port2]` (hive.metastore.uris' form) -> [(host, port), ...]."""
    out: list[tuple[str, int]] = []
    for uri in (u.strip() for u in uris.split(",") if u.strip()):
        parsed = urlparse(uri)
        try:
            port = parsed.port
        except ValueError:
            raise ConfigError(f"malformed metastore URI {uri!r}: the port must be 1-65535") from None
        if parsed.scheme != "thrift" or not parsed.hostname or not port:
            raise ConfigError(f"malformed metastore URI {uri!r}: expected thrift://host:port")
        out.append((parsed.hostname, port))
    if not out:
        raise ConfigError("no metastore URI: pass --metastore thrift://host:port, set "
                          "hoodie.datasource.hive_sync.metastore.uris or TIDEMARK_HIVE_METASTORE_URIS")
    return out


@contextmanager
def connect(uris: str) -> Iterator[Any]:
    """A Thrift client of the first metastore in `uris` that answers (as Hive's client tries them in order)."""
    from pymetastore.hive_metastore import ThriftHiveMetastore
    from thrift.protocol import TBinaryProtocol
    from thrift.transport import TSocket, TTransport

    errors: list[str] = []
    for host, port in parse_uris(uris):
        sock = TSocket.TSocket(host, port)
        sock.setTimeout(CONNECT_TIMEOUT_MS)
        transport = TTransport.TBufferedTransport(sock)
        try:
            transport.open()
        except Exception as exc:  # noqa: BLE001 — try the next URI, report all
            errors.append(f"thrift://{host}:{port}: {_reason(exc)}")
            continue
        sock.setTimeout(CALL_TIMEOUT_MS)
        try:
            yield ThriftHiveMetastore.Client(TBinaryProtocol.TBinaryProtocol(transport))
        except MetastoreError:
            raise
        except Exception as exc:  # noqa: BLE001 — a Thrift exception is frozen: contextlib could not re-raise it
            raise _error(exc) from None
        finally:
            transport.close()
        return
    raise MetastoreError("metastore unreachable: " + "; ".join(errors))


def sync_shape(uris: str, shape: CatalogShape) -> None:
    """Create or update both tables of `shape` and their partitions; MetastoreError names what failed."""
    try:
        with connect(uris) as client:
            _ensure_database(client, shape.ro.database)
            for table in shape.tables:
                _sync_table(client, table)
                _sync_partitions(client, table, shape.partitions)
    except MetastoreError:
        raise
    except Exception as exc:  # noqa: BLE001 — Thrift and socket errors become one line naming the call
        raise _error(exc) from None


def read_table(uris: str, database: str, name: str) -> Any | None:
    """The metastore's Thrift `Table` (None when there is none): for tests and `tidemark sync --json`."""
    from pymetastore.hive_metastore.ttypes import NoSuchObjectException

    with connect(uris) as client:
        try:
            return client.get_table(database, name)
        except NoSuchObjectException:
            return None


def read_partitions(uris: str, database: str, name: str) -> list[Any]:
    with connect(uris) as client:
        return list(client.get_partitions(database, name, -1))


# ------------------------------------------------------------------------------------------ the calls

def _ensure_database(client: Any, database: str) -> None:
    from pymetastore.hive_metastore.ttypes import AlreadyExistsException, Database, NoSuchObjectException

    try:
        client.get_database(database)
    except NoSuchObjectException:
        try:
            client.create_database(
                Database(name=database, description="automatically created by hoodie", parameters={}))
        except AlreadyExistsException:
            pass   # another syncer created it meanwhile


def _sync_table(client: Any, table: CatalogTable) -> None:
    from pymetastore.hive_metastore.ttypes import EnvironmentContext, NoSuchObjectException

    try:
        remote = client.get_table(table.database, table.name)
    except NoSuchObjectException:
        client.create_table(_thrift_table(table))
        return
    refuse_another_tables(table, remote.sd.location)
    wanted = _thrift_table(table)
    columns_changed = _cols(remote.sd.cols) != _cols(wanted.sd.cols)
    parameters = _merged_parameters(remote.parameters or {}, table.parameters)
    serde = {**(remote.sd.serdeInfo.parameters or {}), **table.serde_parameters}
    if not columns_changed and _same_location(remote.sd.location, table.location) \
            and (remote.sd.inputFormat, remote.sd.outputFormat, remote.sd.serdeInfo.serializationLib, remote.tableType) \
            == (table.input_format, table.output_format, table.serde, table.table_type) \
            and serde == remote.sd.serdeInfo.parameters and _without_ddl_time(parameters) == _without_ddl_time(remote.parameters):
        return   # already the shape: no alter (an alter rewrites the table's row and, with CASCADE, its partitions')
    remote.sd.cols = wanted.sd.cols
    remote.sd.location = wanted.sd.location
    remote.sd.inputFormat, remote.sd.outputFormat = wanted.sd.inputFormat, wanted.sd.outputFormat
    remote.sd.serdeInfo.serializationLib = table.serde
    remote.sd.serdeInfo.parameters = serde
    remote.parameters = parameters
    remote.tableType = table.table_type
    # CASCADE when the columns change: partitions keep column lists of their own in HMS, and a new column
    # must reach them too (HMSDDLExecutor.updateTableDefinition does the same for partitioned tables).
    context = EnvironmentContext({"CASCADE": "true"} if table.partition_keys and columns_changed else {})
    client.alter_table_with_environment_context(table.database, table.name, remote, context)


def refuse_another_tables(table: CatalogTable, location: str | None,
                          stored_as: Callable[[str], str] = lambda location: location) -> None:
    """A catalog table of this name over another location belongs to another Hudi table (two tables of one name
    synced to one database): taking it over would point its queries at this table's files. Refused, naming both.
    `stored_as`: the form the catalog keeps a location in (Glue: s3:// for s3a://)."""
    if location and not _same_location(location, stored_as(table.location)):
        raise MetastoreError(
            f"{table.database}.{table.name} is registered for {location}, not for this table ({table.location}); "
            "set hoodie.datasource.hive_sync.table (or .database) to a name of its own, or drop that catalog table "
            "if it is stale", transient=False)


def _cols(cols: list[Any] | None) -> list[tuple[str, str]]:
    return [(c.name.lower(), c.type.lower()) for c in cols or []]   # the metastore lower-cases names


def _without_ddl_time(params: dict[str, str] | None) -> dict[str, str]:
    # transient_lastDdlTime is the metastore's own bookkeeping
    return {k: v for k, v in (params or {}).items() if k != "transient_lastDdlTime"}


def _merged_parameters(remote: dict[str, str], ours: dict[str, str]) -> dict[str, str]:
    """Remote properties, less those we own that the shape no longer has (a rolled-back RO guarantee), plus ours."""
    kept = {k: v for k, v in remote.items() if not k.startswith(OWNED_PREFIXES)}
    return {**kept, **ours}


def _sync_partitions(client: Any, table: CatalogTable, partitions: list[Partition]) -> None:
    if not table.partition_keys:
        return
    remote = {tuple(p.values): p for p in client.get_partitions(table.database, table.name, -1)}
    wanted = {tuple(p.values): p for p in partitions}
    new = [_thrift_partition(table, p) for key, p in wanted.items() if key not in remote]
    if new:
        client.add_partitions(new)
    moved = []
    for key, p in wanted.items():
        if key in remote and not _same_location(remote[key].sd.location, p.location):
            remote[key].sd.location = p.location
            moved.append(remote[key])
    if moved:
        client.alter_partitions(table.database, table.name, moved)
    for key in remote.keys() - wanted.keys():
        client.drop_partition(table.database, table.name, list(key), False)


def _same_location(a: str, b: str) -> bool:
    return _canonical(a) == _canonical(b)


def _canonical(location: str) -> str:
    """One spelling of a location: HMS stores `file:///x` as `file:/x`; s3a:// and s3:// name one object; a local
    folder reached through a link is the folder itself."""
    text = location.replace(":///", ":/").rstrip("/")
    if text.startswith("s3a://"):
        text = "s3://" + text[len("s3a://"):]
    if text.startswith("file:"):
        text = "file:" + os.path.realpath(text[len("file:"):])
    return text


def _columns(cols: list[Column]) -> list[Any]:
    from pymetastore.hive_metastore.ttypes import FieldSchema

    return [FieldSchema(name=c.name, type=c.type, comment="") for c in cols]


def _storage(table: CatalogTable, location: str) -> Any:
    from pymetastore.hive_metastore.ttypes import SerDeInfo, StorageDescriptor

    return StorageDescriptor(cols=_columns(table.columns), location=location, inputFormat=table.input_format,
                             outputFormat=table.output_format, compressed=False, numBuckets=-1,
                             serdeInfo=SerDeInfo(name=None, serializationLib=table.serde,
                                                 parameters=dict(table.serde_parameters)),
                             bucketCols=[], sortCols=[], parameters={})


def _thrift_table(table: CatalogTable) -> Any:
    from pymetastore.hive_metastore.ttypes import Table

    now = int(time.time())
    return Table(tableName=table.name, dbName=table.database, owner=_owner(), createTime=now, lastAccessTime=0,
                 retention=0, sd=_storage(table, table.location), partitionKeys=_columns(table.partition_keys),
                 parameters=dict(table.parameters), tableType=table.table_type)


def _thrift_partition(table: CatalogTable, p: Partition) -> Any:
    from pymetastore.hive_metastore.ttypes import Partition as TPartition

    return TPartition(values=list(p.values), dbName=table.database, tableName=table.name, createTime=0,
                      lastAccessTime=0, sd=_storage(table, p.location), parameters={})


def _owner() -> str:
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 — no login name in a container: the owner is informational
        return "tidemark"


def _reason(exc: BaseException) -> str:
    """One line: a Thrift exception's message field, else the exception's text, else its type."""
    message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {str(message).splitlines()[0]}"
