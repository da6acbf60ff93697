"""Root conftest: registers the suite's plugins (fixtures.suite) and nothing else."""

pytest_plugins = ["fixtures.suite"]
