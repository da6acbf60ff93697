"""`python -m support.evaluations.pgt.plots RESULTS_ROOT`: the PGT figures (see __init__)."""

import sys

from support.evaluations.pgt.plots import main

sys.exit(main())
