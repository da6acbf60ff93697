"""Test doubles and test models: the loopback API server, the tiny VLM."""
