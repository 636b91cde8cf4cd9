import requests


def test_openapi_lists_every_product_route(api_url):  # the documentation needs no token
    document = requests.get(f"{api_url}/openapi.json", timeout=10).json()
    assert set(document["paths"]) >= {
        "/products",
        "/products/{productId}",
        "/products/{productId}/purchases",
    }
    assert set(document["paths"]["/products/{productId}"]) == {"get", "patch"}


def test_unknown_route_is_404_in_contract_shape_with_or_without_a_token(api_url, alice):
    # As the deployed gateway: an unknown path is 404, not 401, even without a token
    for response in (
        requests.get(f"{api_url}/nowhere", timeout=10),
        alice.get(f"{api_url}/nowhere", timeout=10),
        requests.put(f"{api_url}/nowhere/products", json={}, timeout=10),
    ):
        assert response.status_code == 404
        assert response.json()["error"] == "NOT_FOUND"


def test_a_method_a_path_does_not_declare_is_405_with_allow(api_url, alice):
    # TRACE /products was 404; a known path with an undeclared method is 405, and Allow
    # names the methods it has (RFC 9110 15.5.6), with or without a token
    cases = [
        ("TRACE", "/products", "POST"),
        ("PUT", "/products", "POST"),
        ("DELETE", "/products/p1", "GET, PATCH"),
        ("GET", "/locks/r1", "DELETE, POST, PUT"),
        ("POST", "/openapi.json", "GET"),
    ]
    for method, path, allow in cases:
        for client in (requests, alice):
            response = client.request(method, f"{api_url}{path}", timeout=10)
            assert response.status_code == 405, (method, path, response.text)
            assert response.headers["Allow"] == allow
            assert response.json()["error"] == "METHOD_NOT_ALLOWED"


def test_swagger_ui_is_served_locally_with_the_document_inline(api_url):
    page = requests.get(f"{api_url}/swagger", timeout=30)
    assert page.status_code == 200 and page.headers["Content-Type"].startswith("text/html")
    assert "SwaggerUIBundle" in page.text and "/products/{productId}/purchases" in page.text
