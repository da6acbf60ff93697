"""`python -m support.comparisons.stats RUN_A RUN_B`: support.comparisons.cli."""

from support.comparisons.cli import main

raise SystemExit(main())
