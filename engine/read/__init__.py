"""The read path: file-system view, merge of base and logs, slice reading, queries, the Spark source."""
