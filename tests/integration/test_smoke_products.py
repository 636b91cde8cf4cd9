from service.domain.products import Products


def test_create_then_read_round_trips(ddb, tables, unique):
    # Given a products service on DynamoDB Local
    products = Products(client=ddb, table=tables["products"])
    # When a product is created and read back
    products.create(unique, "Apple", 5)
    # Then it reads back at version 1 with its stock
    assert products.get(unique) == {"productId": unique, "name": "Apple", "stock": 5, "version": 1}
