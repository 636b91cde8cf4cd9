"""Request bodies, one module per function (``service.api.models`` explains why)."""
