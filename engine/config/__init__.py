"""Table settings: hoodie.properties, schema, event-time values, creating a table on storage."""
