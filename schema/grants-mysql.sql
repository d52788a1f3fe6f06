-- EDIT BEFORE RUNNING: this file is an example with placeholders.
--   im.im_event_outbox  your outbox table as schema.table (source.schema, source.table)
--   '%'                 the host the publisher connects from (e.g. '10.0.0.%'); '%' is any host
--   'change-me'         the password: choose one, and give it to the publisher as
--                       CDC_OUTBOX_SOURCE_PASSWORD (or source.password), never in a committed file
-- e.g. sed -e 's/im\.im_event_outbox/shop.outbox/' -e "s/change-me/$(openssl rand -hex 16)/" FILE | mysql -uroot
-- Least-privilege user for cdc-outbox on MySQL 8.0 / 8.4.
-- REPLICATION SLAVE: the binlog dump, and SHOW REPLICAS (server_id conflict check).
-- REPLICATION CLIENT: SHOW BINARY LOGS / SHOW BINARY LOG STATUS.
-- SELECT on the outbox table: column names when binlog_row_metadata is not FULL.
CREATE USER IF NOT EXISTS 'cdc_outbox'@'%' IDENTIFIED BY 'change-me';
GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'cdc_outbox'@'%';
GRANT SELECT ON im.im_event_outbox TO 'cdc_outbox'@'%';
-- Only for `run --backfill` and `prune`: their consistent snapshot reads the binlog position under
-- FLUSH TABLES WITH READ LOCK (held for milliseconds), which needs RELOAD (or FLUSH_TABLES).
-- GRANT RELOAD ON *.* TO 'cdc_outbox'@'%';
