"""`python -m superbloom ...` is the `superbloom` command."""
import sys

from .cli import main

sys.exit(main())
