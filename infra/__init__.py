"""CDK constructs for turnstile, one per concern; ``stack`` only composes them."""
