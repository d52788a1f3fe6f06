-- EDIT BEFORE RUNNING: this file is an example with placeholders.
--   im.im_event_outbox  your outbox table as schema.table (source.schema, source.table)
--   '%'                 the host the publisher connects from (e.g. '10.0.0.%'); '%' is any host
--   'change-me'         the password: choose one, and give it to the publisher as
--                       CDC_OUTBOX_SOURCE_PASSWORD (or source.password), never in a committed file
-- e.g. sed -e 's/im\.im_event_outbox/shop.outbox/' -e "s/change-me/$(openssl rand -hex 16)/" FILE | mysql -uroot
-- A separate user for `cdc-outbox prune` on MariaDB 10.5+: the publisher's
-- user (grants-mariadb.sql) stays read-only on the outbox table.
-- DELETE, SELECT on the outbox table: select published rows in a snapshot,
-- delete them by id.
-- REPLICATION SLAVE, BINLOG MONITOR: read the binlog from the checkpoint to
-- the snapshot (the publisher's lag) and list the binlog files.
-- Run prune as this user: CDC_OUTBOX_SOURCE_USER=cdc_outbox_prune
-- CDC_OUTBOX_SOURCE_PASSWORD=... cdc-outbox prune -c my.yaml --older-than 7d
CREATE USER IF NOT EXISTS 'cdc_outbox_prune'@'%' IDENTIFIED BY 'change-me';
GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO 'cdc_outbox_prune'@'%';
GRANT SELECT, DELETE ON im.im_event_outbox TO 'cdc_outbox_prune'@'%';
