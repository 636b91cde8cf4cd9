"""The turnstile service: domains on the ``turnstile_ddb`` library, and thin Lambda handlers."""
