-- The product label GPU Feature Discovery writes on this fleet's nodes of a model, where it is
-- not the catalogue's (a board variant whose NVML name differs: an H200 NVL, say). Null: the
-- catalogue's (shared/data/accelerators.csv, device_name).
alter table gpu_models add column product_label text
    check (product_label is null or product_label ~ '^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$');
comment on column gpu_models.product_label is 'the value of nvidia.com/gpu.product (gpufleet.io/accelerator outside NVIDIA) on whole-card nodes of the model; null: the catalogue''s';
