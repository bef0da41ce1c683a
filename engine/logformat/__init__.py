"""HoodieLogFormat v1 log files: encode blocks, scan their headers fast, decode them fully.

Modules: blocks (vocabulary and result types), encode (framing and writers), deletes (delete-block content),
hfile (the HFile container) and hfile_block (HFile-block content), scan (header-only scan), content_check (content
prefixes, no decode), read (full decode).
"""

from engine.logformat.blocks import (
    EVENT_TIME_COLUMN,
    EVENT_TIMES_ATTR,
    MAX_EVENT_TIME_ATTR,
    MIN_EVENT_TIME_ATTR,
    BlockInfo,
    BlockType,
    CommandBlock,
    CorruptBlock,
    DataBlock,
    DeleteBlock,
    HeaderKey,
    LogFileContents,
    LogFileScan,
)
from engine.logformat.content_check import content_faults
from engine.logformat.encode import (
    append_blocks,
    encode_data_block,
    encode_data_block_pieces,
    encode_delete_block,
    encode_rollback_block,
)
from engine.logformat.read import read_log_file
from engine.logformat.scan import reads_needed, scan_log_bytes, scan_log_file, scan_log_files, scan_memo

__all__ = [
    "EVENT_TIME_COLUMN",
    "EVENT_TIMES_ATTR",
    "MAX_EVENT_TIME_ATTR",
    "MIN_EVENT_TIME_ATTR",
    "BlockInfo",
    "BlockType",
    "CommandBlock",
    "CorruptBlock",
    "DataBlock",
    "DeleteBlock",
    "HeaderKey",
    "LogFileContents",
    "LogFileScan",
    "append_blocks",
    "content_faults",
    "encode_data_block",
    "encode_data_block_pieces",
    "encode_delete_block",
    "encode_rollback_block",
    "read_log_file",
    "reads_needed",
    "scan_log_bytes",
    "scan_log_file",
    "scan_log_files",
    "scan_memo",
]
