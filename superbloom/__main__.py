"""`python -m superbloom ...` is the `superbloom` command."""
from .cli import run

run()
