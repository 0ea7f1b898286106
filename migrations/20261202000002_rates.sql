-- Chargeback rates (shared::chargeback): per flavor, in whole cents per GPU-hour, from a UTC
-- day on until the next rate of that flavor. A flavor without a rate is priced at its GPU
-- model's price (gpu_models.price_cents_per_gpu_hour) from the start.
create table flavor_rates (
    flavor_id bigint not null references flavors (id) on delete cascade,
    effective_from date not null,
    cents_per_gpu_hour bigint not null check (cents_per_gpu_hour >= 0),
    set_by bigint references users (id),
    set_at timestamptz not null default now(),
    primary key (flavor_id, effective_from)
);
