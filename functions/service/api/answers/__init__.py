"""Each API function's answers, one module per function, for its OpenAPI document."""
