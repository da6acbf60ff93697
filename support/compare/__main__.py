"""`python -m support.compare`: the same as `vlmbench-compare`."""

from support.compare.runs import main

raise SystemExit(main())
