-- One fleet model: an accelerator's facts (vendor, memory, MIG) live in the shared crate's
-- catalogue (shared/data/accelerators.csv), not in this table. gpu_models now says only which
-- catalogue models the organisation owns and what an hour of one costs; the server refuses
-- names the catalogue does not know.
alter table gpu_models
    drop column vendor,
    drop column mem_mib,
    drop column mig_max_instances;

comment on table gpu_models is
    'Accelerator models the fleet holds (catalogue names) and their on-demand price; quota flavors and chargeback rates read it.';
comment on column gpu_models.price_cents_per_gpu_hour is 'whole cents for one GPU for one hour';
comment on table node_pools is
    'Groups of identical nodes: how many, of which model, with how many GPUs each.';
