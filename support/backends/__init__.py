"""The model side's providers and engines: the Backend protocol and `register_provider`
(base.py), the model registry (registry.py), the API models' rules and prices (api_models.py), one
module per provider or engine, and what they share (batch_protocol.py, preflight.py, retry.py,
http_guard.py, thinking.py, tokens.py, families.py, chat_template.py, ...)."""
