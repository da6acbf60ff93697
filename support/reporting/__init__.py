"""What every writer of a table or a page shares: figures, pictures and interval columns
(kit.py), report.md (markdown.py), the run's tables and their formatting (tables.py) and how much
of a text a page shows (shown_text.py). The evaluations' summaries, the pytest reporter
(reports/) and the after-the-run tool (support/compare/) all read it; it imports none of them."""
