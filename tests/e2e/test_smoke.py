import requests


def test_openapi_lists_every_product_route(api_url):
    document = requests.get(f"{api_url}/openapi.json", timeout=10).json()
    assert set(document["paths"]) >= {
        "/products",
        "/products/{productId}",
        "/products/{productId}/purchases",
    }
    assert set(document["paths"]["/products/{productId}"]) == {"get", "patch"}


def test_unknown_route_is_404_in_contract_shape(api_url):
    response = requests.get(f"{api_url}/nowhere", timeout=10)
    assert response.status_code == 404
    assert response.json()["error"] == "NOT_FOUND"
