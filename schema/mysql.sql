-- Outbox schema for MySQL 8.0 and 8.4. JSON is stored as binary JSON;
-- the binlog carries it binary and cdc-outbox renders it as MySQL renders
-- JSON text (key order and spacing normalised by the server at INSERT).
-- The im_event_outbox table is the seed's (shared/seeds/000_*.txt): the
-- status/retry columns serve the polling dispatcher it replaces and the
-- backfill (they are ignored by cdc-outbox's binlog path).

CREATE TABLE IF NOT EXISTS im_message (
    id              BIGINT AUTO_INCREMENT PRIMARY KEY,
    conversation_id BIGINT        NOT NULL,
    seq_no          BIGINT        NOT NULL COMMENT 'per-conversation sequence number',
    sender_id       BIGINT        NOT NULL,
    receiver_id     BIGINT        NOT NULL,
    content         TEXT          NOT NULL,
    created_at      DATETIME(6)   NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    UNIQUE KEY uk_conversation_seq (conversation_id, seq_no)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

CREATE TABLE IF NOT EXISTS im_event_outbox (
    id              BIGINT AUTO_INCREMENT PRIMARY KEY,
    event_type      VARCHAR(32)   NOT NULL COMMENT 'message.created / conversation.updated',
    conversation_id BIGINT        NOT NULL,
    message_id      BIGINT        NOT NULL,
    seq_no          BIGINT        NOT NULL COMMENT 'message sequence number, keeps order',
    sender_id       BIGINT        NOT NULL,
    receiver_id     BIGINT        NOT NULL,
    payload         JSON          NOT NULL COMMENT 'snapshot of the message, pushed as is',
    status          VARCHAR(16)   NOT NULL DEFAULT 'PENDING' COMMENT 'PENDING -> SENDING -> SENT/FAILED/DEAD',
    retry_count     INT           NOT NULL DEFAULT 0,
    next_retry_at   DATETIME      NOT NULL DEFAULT CURRENT_TIMESTAMP,
    claimed_at      DATETIME      NULL,
    created_at      DATETIME      NOT NULL DEFAULT CURRENT_TIMESTAMP,
    updated_at      DATETIME      NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
    INDEX idx_status_retry (status, next_retry_at),
    INDEX idx_receiver_time (receiver_id, created_at),
    INDEX idx_message_id (message_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
