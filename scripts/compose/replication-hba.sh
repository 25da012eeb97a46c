#!/bin/sh
# Run once by the postgres image's entrypoint when it creates the database: the image lets every host in for the
# databases, not for replication, which the cluster profile's postgres-replica needs (pg_basebackup, streaming).
echo "host replication all all scram-sha-256" >>"$PGDATA/pg_hba.conf"
