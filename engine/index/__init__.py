"""Record keys, partition paths and the bucket index that routes records to file groups."""
