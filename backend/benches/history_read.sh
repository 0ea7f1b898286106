#!/usr/bin/env bash
# The workload history read at a 10,000-GPU fleet's scale: 400,000 Workloads over the last four
# weeks (plus the demo's), written into a scratch database, then read whole by
# `gpufleet plan from-history` and `gpufleet quota findings`, and the last week (with the one
# before it, ~200,000) replayed by `gpufleet plan replay`, three times each.
#
#   cargo build --release -p gpufleet-backend --bin gpufleet
#   backend/benches/history_read.sh   # ADMIN_URL defaults to postgres://postgres@127.0.0.1:5432/postgres
#
# Figures are reported in docs/performance.md. The scratch database is dropped at the end.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
ADMIN_URL=${ADMIN_URL:-postgres://postgres@127.0.0.1:5432/postgres}
URL=${ADMIN_URL%/*}/gpufleet_history_bench
BIN=target/release/gpufleet
psql -q "$ADMIN_URL" -c "drop database if exists gpufleet_history_bench" \
  -c "create database gpufleet_history_bench"
trap 'psql -q "$ADMIN_URL" -c "drop database if exists gpufleet_history_bench"' EXIT
RUST_LOG=warn "$BIN" demo --database-url "$URL" > /dev/null
psql -q "$URL" <<'SQL'
insert into workload_history (uid, namespace, name, local_queue, cluster_queue, priority, pod_sets,
    created_at, quota_reserved_at, admitted_at, finished_at, finished_reason, evictions, problems,
    first_seen_at, last_seen_at)
select 'bench-' || i, case when i % 2 = 0 then 'team-research' else 'team-search' end, 'job-' || i,
       'q', 'research', (i % 3) * 100,
       jsonb_build_array(jsonb_build_object('name', 'main', 'count', 1,
           'resources', jsonb_build_object('nvidia.com/gpu', 1 + i % 8),
           'flavors', jsonb_build_object('nvidia.com/gpu', 'h100-shared'))),
       created, created + (i % 40) * interval '1 minute', created + (i % 40) * interval '1 minute',
       created + (i % 40 + 30 + i % 200) * interval '1 minute', 'Succeeded', '[]', '[]', now(), now()
from generate_series(1, 400000) as i,
     lateral (select date_trunc('day', now()) - interval '28 days' + i * interval '6 seconds' as created) c;
analyze workload_history;
SQL
echo "Workloads: $(psql -qtA "$URL" -c 'select count(*) from workload_history')"
TODAY=$(date -u +%F)
FROM=$(date -u -d "$TODAY - 28 days" +%F)
TO=$(date -u -d "$TODAY - 1 day" +%F)
ms() { local s e; s=$(date +%s%N); "$@" > /dev/null; e=$(date +%s%N); echo $(( (e - s) / 1000000 )); }
export DATABASE_URL=$URL
for run in 1 2 3; do
  echo "run $run: plan from-history $(ms "$BIN" plan from-history --from "$FROM" --to "$TO") ms;" \
       "quota findings $(ms "$BIN" quota findings) ms;" \
       "plan replay $(ms "$BIN" plan replay) ms"
done
