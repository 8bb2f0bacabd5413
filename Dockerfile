# The kubewasm host. Build: docker build -t ghcr.io/kubewasm/kubewasm:0.1.0 .
# The builder is Debian 12 like the runtime image, so the binary needs no newer glibc than it has
# (plain rust:1.95 is Debian 13).
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --profile dist --locked -p kubewasm --bin kubewasm

# glibc and libgcc, no shell; runs as the unprivileged user 65532.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/dist/kubewasm /usr/local/bin/kubewasm
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/kubewasm"]
