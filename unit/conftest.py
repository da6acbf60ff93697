"""The suite's own tests: offline always, pytester available."""

import os

os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ.setdefault("MPLBACKEND", "Agg")

pytest_plugins = ["pytester"]
