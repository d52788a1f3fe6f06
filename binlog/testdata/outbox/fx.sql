USE im;
FLUSH BINARY LOGS;
CREATE TABLE fx_message (
    id              BIGINT AUTO_INCREMENT PRIMARY KEY,
    conversation_id BIGINT        NOT NULL,
    seq_no          BIGINT        NOT NULL,
    sender_id       BIGINT        NOT NULL,
    receiver_id     BIGINT        NOT NULL,
    content         TEXT          NOT NULL,
    created_at      DATETIME(6)   NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    UNIQUE KEY uk_conversation_seq (conversation_id, seq_no)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE TABLE fx_outbox (
    id              BIGINT AUTO_INCREMENT PRIMARY KEY,
    event_type      VARCHAR(32)   NOT NULL,
    conversation_id BIGINT        NOT NULL,
    message_id      BIGINT        NOT NULL,
    seq_no          BIGINT        NOT NULL,
    sender_id       BIGINT        NOT NULL,
    receiver_id     BIGINT        NOT NULL,
    payload         JSON          NOT NULL,
    status          VARCHAR(16)   NOT NULL DEFAULT 'PENDING',
    retry_count     INT           NOT NULL DEFAULT 0,
    next_retry_at   DATETIME      NOT NULL DEFAULT CURRENT_TIMESTAMP,
    claimed_at      DATETIME      NULL,
    created_at      DATETIME      NOT NULL DEFAULT CURRENT_TIMESTAMP,
    updated_at      DATETIME      NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
    INDEX idx_status_retry (status, next_retry_at),
    INDEX idx_receiver_time (receiver_id, created_at),
    INDEX idx_message_id (message_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
BEGIN;
INSERT INTO fx_message (id, conversation_id, seq_no, sender_id, receiver_id, content, created_at) VALUES (501, 7001, 1, 11, 12, 'hello', '2026-01-02 03:04:05.123456');
INSERT INTO fx_outbox (id, event_type, conversation_id, message_id, seq_no, sender_id, receiver_id, payload, created_at) VALUES (1, 'message.created', 7001, 501, 1, 11, 12, '{"message_id": 501, "content": "hello"}', '2026-01-02 03:04:05');
COMMIT;
BEGIN;
INSERT INTO fx_outbox (id, event_type, conversation_id, message_id, seq_no, sender_id, receiver_id, payload, created_at) VALUES
 (2, 'message.created', 7001, 502, 2, 12, 11, '{"n":2}', '2026-01-02 03:04:06'),
 (3, 'message.created', 7002, 503, 1, 13, 14, '{"n":3,"nested":{"a":[1,2,3]}}', '2026-01-02 03:04:07'),
 (4, 'conversation.updated', 7001, 502, 2, 12, 11, '{ "odd" :  "spacing" }', '2026-01-02 03:04:08');
COMMIT;
BEGIN;
INSERT INTO fx_outbox (id, event_type, conversation_id, message_id, seq_no, sender_id, receiver_id, payload, created_at) VALUES (5, 'message.created', 7003, 505, 1, 15, 16, '{"deleted":"in the same txn"}', '2026-01-02 03:04:09');
DELETE FROM fx_outbox WHERE id = 5;
COMMIT;
UPDATE fx_outbox SET status = 'SENT', updated_at = '2026-01-02 03:05:00' WHERE id = 1;
FLUSH BINARY LOGS;
BEGIN;
INSERT INTO fx_outbox (id, event_type, conversation_id, message_id, seq_no, sender_id, receiver_id, payload, created_at) VALUES (6, 'message.created', 7001, 506, 3, 11, 12, '{"emoji":"😀 ünïcödé"}', '2026-01-02 03:04:10');
INSERT INTO fx_outbox (id, event_type, conversation_id, message_id, seq_no, sender_id, receiver_id, payload, created_at) VALUES (7, 'message.created', 7002, 507, 2, 14, 13, '[]', '2026-01-02 03:04:11');
COMMIT;
BEGIN;
INSERT INTO fx_message (id, conversation_id, seq_no, sender_id, receiver_id, content, created_at) VALUES (508, 7004, 1, 17, 18, 'no outbox row', '2026-01-02 03:04:12.000001');
COMMIT;
FLUSH BINARY LOGS;
SHOW BINARY LOGS;
DROP TABLE fx_outbox, fx_message;
