"""A small asyncio MariaDB/MySQL client built on code protoframe generates from
protocols/mariadb/mariadb.yaml."""
