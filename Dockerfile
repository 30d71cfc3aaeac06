# The upfd image: upfd, upfctl and upfbench on Debian 12 slim (docs/deploy.md, "Docker").
#
#   docker build -t upfd:0.1.0 .
#   docker run --rm upfd:0.1.0 check-config /etc/upfd/upfd.yaml
#
# The build stage runs the build of scripts/demo.sh (README), with upfctl, on the Debian 12
# packages scripts/deps.sh installs for it; the image gets the binaries, the one library
# they load that debian:12-slim lacks (libelf1; libc6, libgcc-s1 and zlib1g are there) and
# the example configuration. x86-64 only: the XDP programs' build names
# /usr/include/x86_64-linux-gnu (crates/bpf/build_bpf.rs).

ARG RUST_IMAGE=rust:1.95-bookworm
ARG RUNTIME_IMAGE=debian:12-slim

FROM ${RUST_IMAGE} AS build
# Debian 12's versions, whatever its point release (not pinned: old ones leave the mirror).
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        make clang llvm libbpf-dev libelf-dev zlib1g-dev pkg-config m4 bpftool linux-libc-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY crates crates
COPY bpf bpf
RUN cargo build --release --locked -p upfd -p upfbench -p upfctl \
    && mkdir /out \
    && cp target/release/upfd target/release/upfctl target/release/upfbench /out/ \
    && strip /out/*

FROM ${RUNTIME_IMAGE}
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends libelf1 \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /var/lib/upfd
COPY --from=build /out/ /usr/local/bin/
COPY deploy/config/upfd.yaml /etc/upfd/upfd.yaml
# N4 (PFCP), GTP-U, the API (api.listen, e.g. 0.0.0.0:9100 in a container).
# /var/lib/upfd: for state.directory (the example configuration leaves the state out, so a
# plain run writes nothing); with it set, a volume there keeps sessions across containers.
EXPOSE 8805/udp 2152/udp 9100/tcp
ENTRYPOINT ["upfd"]
CMD ["--config", "/etc/upfd/upfd.yaml"]
