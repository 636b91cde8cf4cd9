"""Domains: each owns its table layout and uses the ``turnstile_ddb`` primitives."""
