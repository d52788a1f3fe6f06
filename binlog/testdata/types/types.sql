-- Outbox tables with every column type the fast rows decoder skips or reads
-- (binlog/fastrows.go), and some it leaves to go-mysql; see README.md.
USE im;
SET SESSION sql_mode = '';
SET SESSION time_zone = '+09:00';
FLUSH BINARY LOGS;
CREATE TABLE ty_dt6 (
    pre_tiny        TINYINT       NULL,
    id              BIGINT AUTO_INCREMENT PRIMARY KEY,
    event_type      VARCHAR(300)  NOT NULL,
    pre_small       SMALLINT UNSIGNED NULL,
    conversation_id BIGINT        NOT NULL,
    pre_medium      MEDIUMINT     NULL,
    message_id      BIGINT        NOT NULL,
    pre_int         INT UNSIGNED  NULL,
    seq_no          BIGINT        NOT NULL,
    pre_float       FLOAT         NULL,
    pre_double      DOUBLE        NULL,
    sender_id       BIGINT        NOT NULL,
    pre_year        YEAR          NULL,
    pre_date        DATE          NULL,
    pre_time        TIME          NULL,
    pre_time3       TIME(3)       NULL,
    receiver_id     BIGINT        NOT NULL,
    pre_ts2         TIMESTAMP(2)  NULL DEFAULT NULL,
    pre_dt          DATETIME      NULL,
    pre_text        TEXT          NULL,
    pre_tinyblob    TINYBLOB      NULL,
    pre_mediumtext  MEDIUMTEXT    NULL,
    payload         JSON          NOT NULL,
    created_at      DATETIME(6)   NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE TABLE ty_ts3 (
    id              BIGINT UNSIGNED NOT NULL PRIMARY KEY,
    event_type      VARCHAR(32)   NOT NULL,
    conversation_id BIGINT        NOT NULL,
    message_id      BIGINT        NOT NULL,
    seq_no          BIGINT        NOT NULL,
    sender_id       BIGINT        NOT NULL,
    receiver_id     BIGINT        NOT NULL,
    payload         LONGTEXT      NOT NULL,
    created_at      TIMESTAMP(3)  NOT NULL DEFAULT CURRENT_TIMESTAMP(3)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
CREATE TABLE ty_char (
    id              BIGINT AUTO_INCREMENT PRIMARY KEY,
    event_type      VARCHAR(32)   NOT NULL,
    conversation_id BIGINT        NOT NULL,
    message_id      BIGINT        NOT NULL,
    seq_no          BIGINT        NOT NULL,
    sender_id       BIGINT        NOT NULL,
    receiver_id     BIGINT        NOT NULL,
    payload         JSON          NOT NULL,
    status          CHAR(8)       NOT NULL DEFAULT 'PENDING',
    amount          DECIMAL(10,2) NULL,
    created_at      DATETIME(3)   NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

BEGIN;
INSERT INTO ty_dt6 VALUES
  (-5, NULL, 'message.created', 65535, 7001, -8388608, 501, 4294967295, 1, 1.5, -2.25, 11, 2026, '2026-11-29', '-838:59:59', '12:34:56.789', 12,
   '2026-11-29 10:00:00.12', '2026-11-29 10:00:00', 'text ü 😀', x'00ff', REPEAT('m', 70000), '{"a": 1}', '2026-11-29 10:00:00.123456'),
  (NULL, NULL, REPEAT('e', 300), NULL, 7001, NULL, 502, NULL, 2, NULL, NULL, 12, NULL, NULL, NULL, NULL, 11,
   NULL, NULL, NULL, NULL, NULL, '{}', '2026-11-29 10:00:01.000000'),
  (1, NULL, 'message.created', 1, 7002, 1, 503, 1, 1, 0, 0, 13, 1999, '1000-01-01', '00:00:00', '00:00:00.000', 14,
   '1970-01-01 09:00:01.00', '1000-01-01 00:00:00', '', '', '', '[]', NULL);
COMMIT;
BEGIN;
INSERT INTO ty_dt6 (event_type, conversation_id, message_id, seq_no, sender_id, receiver_id, payload, created_at)
  VALUES ('old', 7003, 504, 1, 1, 2, '{"before":"1970"}', '1969-07-20 20:17:40.000001');
COMMIT;
BEGIN;
INSERT INTO ty_dt6 (event_type, conversation_id, message_id, seq_no, sender_id, receiver_id, payload, created_at)
  VALUES ('zero', 7004, 505, 1, 1, 2, '{"zero":"date"}', '0000-00-00 00:00:00');
COMMIT;
BEGIN;
INSERT INTO ty_ts3 VALUES
  (18446744073709551615, 'message.created', 8001, 601, 1, 21, 22, '{"max":"id"}', '2026-11-29 19:00:00.5'),
  (9223372036854775808, 'message.created', 8001, 602, 2, 22, 21, 'not json at all', '2026-11-29 19:00:00.001'),
  (1, 'message.created', 8002, 603, 1, -1, -2, '{"neg":true}', '1970-01-01 09:00:01.000');
UPDATE ty_ts3 SET payload = '{"updated":1}' WHERE id = 1;
DELETE FROM ty_ts3 WHERE id = 1;
COMMIT;
BEGIN;
INSERT INTO ty_char (event_type, conversation_id, message_id, seq_no, sender_id, receiver_id, payload, amount, created_at)
  VALUES ('message.created', 9001, 701, 1, 31, 32, '{"char":"column"}', 12.34, '2026-11-29 10:00:00.5');
COMMIT;
FLUSH BINARY LOGS;
