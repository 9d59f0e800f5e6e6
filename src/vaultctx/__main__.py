"""`python -m vaultctx`: the command line, for environments without the console script."""

from .cli import main

main()
