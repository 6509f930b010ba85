# Multi-stage build: compile in the official Rust image, run as a non-root user on Debian slim.
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src ./src
COPY crates ./crates
COPY openapi ./openapi
RUN cargo build --release --locked --bin mast

FROM debian:bookworm-slim
# bubblewrap sandboxes built-in tools; ca-certificates lets the server reach model providers.
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates bubblewrap \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --home-dir /var/lib/mast --create-home mast \
    && install -d -o mast -g mast -m 0711 /var/lib/mast/data
COPY --from=build /src/target/release/mast /usr/local/bin/mast
# The data directory exists in the image, so a volume mounted there (docker-compose.yml
# shares one between replicas) starts out owned by the mast user.
USER mast
WORKDIR /var/lib/mast
ENV MAST_LISTEN=0.0.0.0:8080 \
    MAST_DATA_DIR=/var/lib/mast/data
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/mast"]
CMD ["serve"]
