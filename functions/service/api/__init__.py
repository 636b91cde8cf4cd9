"""HTTP: routes, validation, and the one place where errors become status codes."""
