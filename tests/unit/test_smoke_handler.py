import json

from service.handlers import products
from tests.helpers import proxy_event, scan_all


def test_create_product_through_handler(moto_ddb, moto_tables):
    event = proxy_event(
        "POST",
        "/products",
        "/products",
        body=json.dumps({"productId": "p1", "name": "P", "stock": 2}),
    )
    response = products.handler(event, None)
    assert response["statusCode"] == 201
    assert response["headers"]["ETag"] == '"1"'
    assert len(scan_all(moto_ddb, moto_tables["products"])) == 1
