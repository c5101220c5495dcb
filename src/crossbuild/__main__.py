"""`python -m crossbuild` runs the command line (the evaluation runner starts each cell this way)."""

from crossbuild.cli import main

main()
