"""``python -m upkeep``: the ``upkeep`` command, for where the console script is not on
the PATH (a virtual environment not activated, ``spark-submit`` nodes)."""

from .cli import main

raise SystemExit(main())
