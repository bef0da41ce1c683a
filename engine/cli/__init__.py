"""The `tidemark` command line: `console` defines the commands (each one call of `engine.Table`),
`output` renders their results as text or JSON."""
from engine.cli.console import build_parser, main

__all__ = ["build_parser", "main"]
