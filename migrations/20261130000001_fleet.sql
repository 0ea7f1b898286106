-- The fleet inventory: accelerator models and the node pools that hold them.

create function set_updated_at() returns trigger language plpgsql as $$
begin
    new.updated_at = now();
    return new;
end;
$$;

create table gpu_models (
    id bigint generated always as identity primary key,
    name text not null unique check (name <> '' and length(name) <= 100),
    vendor text not null check (vendor <> ''),
    mem_mib bigint not null check (mem_mib > 0),
    -- 0 when the model has no MIG
    mig_max_instances integer not null default 0 check (mig_max_instances between 0 and 7),
    -- whole cents, rounded when entered
    price_cents_per_gpu_hour bigint not null check (price_cents_per_gpu_hour >= 0),
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now()
);

create trigger gpu_models_updated_at before update on gpu_models
    for each row execute function set_updated_at();

create table node_pools (
    id bigint generated always as identity primary key,
    name text not null unique check (name <> '' and length(name) <= 100),
    gpu_model_id bigint not null references gpu_models (id) on delete restrict,
    nodes integer not null check (nodes >= 0),
    gpus_per_node integer not null check (gpus_per_node between 1 and 64),
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now()
);

create index node_pools_gpu_model_id on node_pools (gpu_model_id);

create trigger node_pools_updated_at before update on node_pools
    for each row execute function set_updated_at();
