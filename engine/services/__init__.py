"""Table services: clean, recovery of failed writes, integrity of log blocks."""
