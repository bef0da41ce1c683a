"""The active timeline: instants and their state transitions, commit metadata, Avro plans."""
