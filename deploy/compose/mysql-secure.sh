# shellcheck shell=bash
# docker-compose.secure.yml: sourced (not executable on purpose: the mysql image's entrypoint
# sources a non-executable *.sh, which gives it docker_process_sql) on the first start, after
# 02-grants.sql created the publisher's user with the placeholder password. Sets its password
# from the mysql-cdc secret and requires TLS for it (require_secure_transport=ON requires it for
# every TCP login anyway). docker_process_sql is the entrypoint's helper (logged in as root).
pw=$(cat /run/secrets/mysql-cdc)
pw=${pw//\\/\\\\}
pw=${pw//\'/\\\'}
docker_process_sql <<SQL
ALTER USER 'cdc_outbox'@'%' IDENTIFIED BY '$pw' REQUIRE SSL;
SQL
unset pw
