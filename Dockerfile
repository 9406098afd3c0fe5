# syntax=docker/dockerfile:1
# Multi-stage build: dependencies are compiled in their own cached layer, so editing src/
# rebuilds only the crate itself. The runtime image holds the binary and nothing else.

FROM rust:1.95-bookworm AS build
WORKDIR /src
# Dependency layer: the manifests plus empty targets, built once and cached.
COPY Cargo.toml Cargo.lock ./
RUN mkdir -p src benches \
 && echo 'fn main() {}' > src/main.rs && touch src/lib.rs \
 && echo 'fn main() {}' > benches/admission_handler.rs \
 && cargo build --release --locked \
 && rm -rf src benches
# The crate itself.
COPY src src
COPY benches benches
RUN touch src/main.rs src/lib.rs && cargo build --release --locked \
 && strip target/release/kubevirt-operator

# distroless/cc: glibc and CA roots, no shell, no package manager; runs as uid 65532.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/kubevirt-operator /usr/local/bin/kubevirt-operator
USER 65532:65532
EXPOSE 8443 8080 8081
ENTRYPOINT ["/usr/local/bin/kubevirt-operator"]
CMD ["run"]
