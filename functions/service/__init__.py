"""The turnstile service: domains on the ``turnstile`` library, and thin Lambda handlers."""
