# Prints the SQL that gives every service schema its own login role, owning the schema and nothing else.
# Sourced by deploy/infra.sh (local Postgres) and by the agenthost/postgres image (swarm). Idempotent;
# objects an older deploy made as the admin are handed to the schema's role.
# Usage: pg_roles_sql <database> <schema>=<password>...
pg_roles_sql() {
  local database=$1 pair schema role password
  shift
  echo "revoke all on database $database from public;"
  for pair in "$@"; do
    schema=${pair%%=*}; password=${pair#*=}; role="agenthost_$schema"
    cat <<EOSQL
do \$\$ begin
  if not exists (select from pg_roles where rolname = '$role') then create role $role login; end if;
end \$\$;
alter role $role login nosuperuser nocreatedb nocreaterole password '$password';
grant connect on database $database to $role;
create schema if not exists $schema authorization $role;
alter schema $schema owner to $role;
do \$\$ declare r record; begin
  for r in select c.relname, c.relkind from pg_class c join pg_namespace n on n.oid = c.relnamespace
           where n.nspname = '$schema' and c.relkind in ('r', 'p', 'v', 'm') loop
    execute format('alter %s %I.%I owner to %I', case r.relkind when 'v' then 'view' when 'm' then 'materialized view' else 'table' end, '$schema', r.relname, '$role');
  end loop;
  for r in select p.oid::regprocedure as sig from pg_proc p join pg_namespace n on n.oid = p.pronamespace where n.nspname = '$schema' loop
    execute format('alter function %s owner to %I', r.sig, '$role');
  end loop;
end \$\$;
EOSQL
  done
}
