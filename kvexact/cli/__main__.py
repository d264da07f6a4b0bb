"""``python -m kvexact.cli``: the ``kvexact`` command without the console script."""

from kvexact.cli import main

main()
