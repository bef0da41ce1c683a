"""Registering a `CatalogShape` in AWS Glue (Hudi's AwsGlueCatalogSyncTool / AWSGlueCatalogSyncClient shape).

The same two tables as in a Hive metastore: Glue's TableInput carries the table type, the parameters
(`EXTERNAL=TRUE` first, then the shape's), the partition keys and a StorageDescriptor with the formats,
serde and columns; each partition is a copy of the table's StorageDescriptor with its own location. As
Hudi does, `s3a://` locations are stored as `s3://`. Credentials, region and endpoint come from the standard
AWS chain (environment, profiles), overridden by Hudi's `hoodie.aws.glue.region` / `hoodie.aws.glue.endpoint`.
"""
from __future__ import annotations

from typing import Any

from engine.catalog.hms import MetastoreError, refuse_another_tables
from engine.catalog.shape import OWNED_PREFIXES, CatalogShape, CatalogTable, Column, Partition

CREATE_BATCH = 100   # Glue's BatchCreatePartition limit
DELETE_BATCH = 25    # BatchDeletePartition's (Hudi's MAX_DELETE_PARTITIONS_PER_REQUEST)
# Glue errors worth another attempt: throttling and outages, and races with another syncer of the same table
_TRANSIENT = frozenset({"ThrottlingException", "InternalServiceException", "OperationTimeoutException",
                        "ConcurrentModificationException", "AlreadyExistsException", "EntityNotFoundException"})


def client(region: str | None = None, endpoint: str | None = None) -> Any:
    """A Glue client: `region` (hoodie.aws.glue.region, else AWS_REGION / AWS_DEFAULT_REGION), else the AWS
    chain's (profiles); MetastoreError when none is known."""
    import boto3
    from botocore.exceptions import BotoCoreError

    try:
        return boto3.client("glue", region_name=region or None, endpoint_url=endpoint or None)
    except BotoCoreError as exc:
        raise MetastoreError(f"glue: {str(exc).splitlines()[0]} (set hoodie.aws.glue.region or AWS_REGION)",
                             transient=False) from None


def sync_shape(glue: Any, shape: CatalogShape) -> None:
    """Create or update both tables and their partitions; MetastoreError names what failed."""
    from botocore.exceptions import BotoCoreError, ClientError, ConnectionError, ReadTimeoutError

    try:
        _ensure_database(glue, shape.ro.database)
        for table in shape.tables:
            _sync_table(glue, table)
            _sync_partitions(glue, table, shape.partitions)
    except ClientError as exc:
        again = exc.response.get("Error", {}).get("Code") in _TRANSIENT
        raise MetastoreError(f"glue: {str(exc).splitlines()[0]}", transient=again) from None
    except (ConnectionError, ReadTimeoutError) as exc:
        raise MetastoreError(f"glue: {str(exc).splitlines()[0]}") from None
    except BotoCoreError as exc:
        raise MetastoreError(f"glue: {str(exc).splitlines()[0]}", transient=False) from None


def _ensure_database(glue: Any, database: str) -> None:
    try:
        glue.get_database(Name=database)
    except glue.exceptions.EntityNotFoundException:
        try:
            glue.create_database(DatabaseInput={
                "Name": database, "Description": "Automatically created by org.apache.hudi.aws.sync.AWSGlueCatalogSyncClient"})
        except glue.exceptions.AlreadyExistsException:
            pass


def _sync_table(glue: Any, table: CatalogTable) -> None:
    try:
        remote = glue.get_table(DatabaseName=table.database, Name=table.name)["Table"]
    except glue.exceptions.EntityNotFoundException:
        glue.create_table(DatabaseName=table.database, TableInput=_table_input(table, table.parameters))
        return
    refuse_another_tables(table, (remote.get("StorageDescriptor") or {}).get("Location"), stored_as=_s3)
    kept = {k: v for k, v in (remote.get("Parameters") or {}).items() if not k.startswith(OWNED_PREFIXES)}
    wanted = _table_input(table, {**kept, **table.parameters})
    if _current(remote) != _comparable(wanted):
        # only on a change: every UpdateTable makes a new table version in Glue
        glue.update_table(DatabaseName=table.database, TableInput=wanted)


def _comparable(table_input: dict[str, Any]) -> dict[str, Any]:
    sd = table_input["StorageDescriptor"]
    return {"TableType": table_input["TableType"], "Parameters": table_input["Parameters"],
            "PartitionKeys": [(c["Name"], c["Type"]) for c in table_input["PartitionKeys"]],
            "Columns": [(c["Name"], c["Type"]) for c in sd["Columns"]], "Location": sd["Location"],
            "InputFormat": sd["InputFormat"], "OutputFormat": sd["OutputFormat"],
            "Serde": (sd["SerdeInfo"].get("SerializationLibrary"), sd["SerdeInfo"].get("Parameters") or {})}


def _current(remote: dict[str, Any]) -> dict[str, Any]:
    return _comparable({"TableType": remote.get("TableType"), "Parameters": remote.get("Parameters") or {},
                        "PartitionKeys": remote.get("PartitionKeys") or [],
                        "StorageDescriptor": {**remote["StorageDescriptor"],
                                              "Columns": remote["StorageDescriptor"].get("Columns") or []}})


def _sync_partitions(glue: Any, table: CatalogTable, partitions: list[Partition]) -> None:
    if not table.partition_keys:
        return
    remote = {tuple(p["Values"]): p for p in _all_partitions(glue, table)}
    wanted = {tuple(p.values): p for p in partitions}
    new = [_partition_input(table, p) for key, p in wanted.items() if key not in remote]
    for i in range(0, len(new), CREATE_BATCH):
        out = glue.batch_create_partition(DatabaseName=table.database, TableName=table.name,
                                          PartitionInputList=new[i:i + CREATE_BATCH])
        _raise_errors(out, "create partition")
    for key, p in wanted.items():
        if key in remote and remote[key]["StorageDescriptor"].get("Location") != _s3(p.location):
            glue.update_partition(DatabaseName=table.database, TableName=table.name, PartitionValueList=list(key),
                                  PartitionInput=_partition_input(table, p))
    gone = [{"Values": list(key)} for key in remote.keys() - wanted.keys()]
    for i in range(0, len(gone), DELETE_BATCH):
        out = glue.batch_delete_partition(DatabaseName=table.database, TableName=table.name,
                                          PartitionsToDelete=gone[i:i + DELETE_BATCH])
        _raise_errors(out, "delete partition")


def _all_partitions(glue: Any, table: CatalogTable) -> list[dict[str, Any]]:
    pages = glue.get_paginator("get_partitions").paginate(DatabaseName=table.database, TableName=table.name)
    return [p for page in pages for p in page["Partitions"]]


def _raise_errors(response: dict[str, Any], what: str) -> None:
    errors = response.get("Errors") or []
    if errors:
        first = errors[0].get("ErrorDetail", {})
        raise MetastoreError(f"glue: {what} failed for {len(errors)} partition(s): {first.get('ErrorMessage', first)}")


def _columns(cols: list[Column]) -> list[dict[str, str]]:
    return [{"Name": c.name, "Type": c.type, "Comment": ""} for c in cols]


def _s3(location: str) -> str:
    # AWSGlueCatalogSyncClient.s3aToS3: Glue's readers (Athena) know s3://, not Hadoop's s3a://
    return "s3://" + location[len("s3a://"):] if location.startswith("s3a://") else location


def _storage(table: CatalogTable, location: str) -> dict[str, Any]:
    return {"Columns": _columns(table.columns), "Location": _s3(location), "InputFormat": table.input_format,
            "OutputFormat": table.output_format,
            "SerdeInfo": {"SerializationLibrary": table.serde, "Parameters": dict(table.serde_parameters)}}


def _table_input(table: CatalogTable, parameters: dict[str, str]) -> dict[str, Any]:
    return {"Name": table.name, "TableType": table.table_type, "Parameters": dict(parameters),
            "PartitionKeys": _columns(table.partition_keys), "StorageDescriptor": _storage(table, table.location)}


def _partition_input(table: CatalogTable, p: Partition) -> dict[str, Any]:
    return {"Values": list(p.values), "StorageDescriptor": _storage(table, p.location)}
