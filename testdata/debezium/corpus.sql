-- The Debezium parity corpus: an outbox table in the layout of Debezium's Outbox
-- Event Router (id, aggregatetype, aggregateid, type, payload) with two additional
-- fields (region, shard), and the rows whose records Debezium 3.6.1.Final recorded in
-- testdata/debezium/*.jsonl (make debezium-golden) and the debezium preset must
-- reproduce (TestDebeziumGolden). {table} is replaced by the table's name. One
-- statement per line that ends with ";", each its own transaction (autocommit).
CREATE TABLE {table} (id VARCHAR(36) NOT NULL PRIMARY KEY, aggregatetype VARCHAR(255) NOT NULL, aggregateid VARCHAR(255) NOT NULL, type VARCHAR(255) NOT NULL, payload JSON NULL, region VARCHAR(32) NOT NULL, shard INT NOT NULL);
-- ordinary rows: two events of one aggregate, one of another type
INSERT INTO {table} VALUES ('0b6b5d2e-7f43-4b7e-9a63-3f2d7d4a0001', 'Order', '1001', 'OrderCreated', '{"orderId": 1001, "total": 12.5, "items": ["a", "b"]}', 'eu', 1);
INSERT INTO {table} VALUES ('0b6b5d2e-7f43-4b7e-9a63-3f2d7d4a0002', 'Order', '1001', 'OrderPaid', '{"orderId": 1001, "paid": true}', 'eu', 1);
INSERT INTO {table} VALUES ('0b6b5d2e-7f43-4b7e-9a63-3f2d7d4a0003', 'Customer', 'c-42', 'CustomerRenamed', '{"name": "Ada"}', 'us', 2);
-- NULL payload
INSERT INTO {table} VALUES ('0b6b5d2e-7f43-4b7e-9a63-3f2d7d4a0004', 'Order', '1002', 'OrderDeleted', NULL, 'eu', 0);
-- empty payloads (a JSON column takes no zero-length value): an empty object and an empty string
INSERT INTO {table} VALUES ('0b6b5d2e-7f43-4b7e-9a63-3f2d7d4a0005', 'Order', '1003', 'OrderTouched', '{}', 'eu', 3);
INSERT INTO {table} VALUES ('0b6b5d2e-7f43-4b7e-9a63-3f2d7d4a0006', 'Order', '1003', 'OrderNoted', '""', 'eu', 3);
-- unicode: key, type and payload (4-byte UTF-8 too), escapes in the JSON
INSERT INTO {table} VALUES ('0b6b5d2e-7f43-4b7e-9a63-3f2d7d4a0007', 'Order', 'ключ-ü-日本', 'Größe✓', '{"text": "héllo 日本語 🎉", "esc": "a\\"b\\\\c/d\\n", "ü": ["ß", "€"]}', 'ap', 4);
-- numbers and nesting
INSERT INTO {table} VALUES ('0b6b5d2e-7f43-4b7e-9a63-3f2d7d4a0008', 'Order', '1004', 'OrderPriced', '{"n": 1.50, "big": 12345678901234567890, "neg": -7, "exp": 1e3, "nested": {"a": [1, {"b": null}], "t": false}}', 'eu', 5);
-- large payload (20,000-character string)
INSERT INTO {table} VALUES ('0b6b5d2e-7f43-4b7e-9a63-3f2d7d4a0009', 'Order', '1005', 'OrderBulk', CONCAT('{"blob": "', REPEAT('abcdefghij', 2000), '"}'), 'eu', 6);
