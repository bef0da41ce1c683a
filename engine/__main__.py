"""`python -m engine` is the `tidemark` command."""
import sys

from engine.cli import main

sys.exit(main())
