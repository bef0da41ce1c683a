"""File slices: the file-system view of a table (partitions, file groups, slices) as the timeline sees them."""
