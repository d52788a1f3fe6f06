-- Least-privilege user for cdc-outbox on MySQL 8.0 / 8.4.
-- REPLICATION SLAVE: the binlog dump, and SHOW REPLICAS (server_id conflict check).
-- REPLICATION CLIENT: SHOW BINARY LOGS / SHOW BINARY LOG STATUS.
-- SELECT on the outbox table: column names when binlog_row_metadata is not FULL.
CREATE USER IF NOT EXISTS 'cdc_outbox'@'%' IDENTIFIED BY 'change-me';
GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'cdc_outbox'@'%';
GRANT SELECT ON im.im_event_outbox TO 'cdc_outbox'@'%';
