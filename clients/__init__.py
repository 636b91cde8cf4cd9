"""What is built from the API's OpenAPI document (``local.docs.document()``), never edited by hand:
the generated clients (``make clients``: :mod:`clients.generate`), the walkthrough that calls every
route through the Python one (:mod:`clients.walkthrough`), and the check that the document keeps
what a released version promised (``make api-diff``: :mod:`clients.api_diff`)."""
