-- Least-privilege user for cdc-outbox on MariaDB 10.5+.
-- REPLICATION SLAVE: the binlog dump (COM_BINLOG_DUMP / _GTID).
-- BINLOG MONITOR (10.5+ name of REPLICATION CLIENT): SHOW BINARY LOGS / SHOW MASTER STATUS.
-- REPLICATION MASTER ADMIN: SHOW SLAVE HOSTS, to detect a server_id conflict (optional).
-- SELECT on the outbox table: column names when binlog_row_metadata is not FULL.
CREATE USER IF NOT EXISTS 'cdc_outbox'@'%' IDENTIFIED BY 'change-me';
GRANT REPLICATION SLAVE, BINLOG MONITOR, REPLICATION MASTER ADMIN ON *.* TO 'cdc_outbox'@'%';
GRANT SELECT ON im.im_event_outbox TO 'cdc_outbox'@'%';
