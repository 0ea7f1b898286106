# The console as one image: `docker compose up` (see docker-compose.yml).
FROM rust:1.95-bookworm AS build
RUN apt-get update && apt-get install -y --no-install-recommends nodejs npm && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN ./dev build

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/target/release/gpufleet /usr/local/bin/gpufleet
COPY --from=build /src/public /srv/gpufleet/public
# glibc's allocator keeps an arena per thread and the memory its threads freed: two arenas
# bound what an idle server keeps after load (docs/operations.md, "Memory")
ENV GPUFLEET_PUBLIC_DIR=/srv/gpufleet/public GPUFLEET_LISTEN=0.0.0.0:8080 MALLOC_ARENA_MAX=2
EXPOSE 8080
USER nobody
ENTRYPOINT ["gpufleet"]
CMD ["serve"]
