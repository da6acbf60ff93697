"""Root conftest: registers the suite's plugins and nothing else."""

pytest_plugins = [
    "fixtures.options",
    "fixtures.models",
    "fixtures.datasets",
    "fixtures.outcomes",
    "reports.plugin",
    "reports.html",
]
