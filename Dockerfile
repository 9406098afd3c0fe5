# syntax=docker/dockerfile:1
# Multi-stage build: dependencies are compiled in their own cached layer, so editing src/
# rebuilds only the crate itself. The runtime image holds the binary and nothing else.
#
# Base images are pinned by digest, so a rebuild uses the bytes that were reviewed, whatever the
# tags point to by then. To bump one, resolve its tag's current digest and replace both the tag
# and the digest, e.g.
#   docker buildx imagetools inspect rust:1.95-bookworm --format '{{json .Manifest.Digest}}'
#   docker buildx imagetools inspect gcr.io/distroless/cc-debian12:nonroot --format '{{json .Manifest.Digest}}'
# (or `crane digest IMAGE`), then build and run `make test`. tests/manifests.rs checks that every
# FROM names a digest.

FROM rust:1.95-bookworm@sha256:6258907abe69656e41cd992e0b705cdcfabcbbe3db374f92ed2d47121282d4a1 AS build
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
FROM gcr.io/distroless/cc-debian12:nonroot@sha256:9dac0a79194e45a7da0158a9c6da57b217585af0786db3845d1f0ec1a0dd182f
# Set by the release build (`docker build --build-arg REVISION=$(git rev-parse HEAD)`); VERSION
# follows Cargo.toml (tests/manifests.rs checks the default).
ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="kubevirt-operator" \
      org.opencontainers.image.description="Admission webhooks and reconciler that turn vitistack.io Machines into KubeVirt VirtualMachines" \
      org.opencontainers.image.source="https://github.com/vitistack/kubevirt-operator" \
      org.opencontainers.image.url="https://github.com/vitistack/kubevirt-operator" \
      org.opencontainers.image.vendor="vitistack" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.base.name="gcr.io/distroless/cc-debian12:nonroot"
# The same binary is the kubectl plugin `kubectl machine` when copied out under the name
# kubectl-machine (docs/user/console-and-power.md, "The kubectl machine plugin").
COPY --from=build /src/target/release/kubevirt-operator /usr/local/bin/kubevirt-operator
USER 65532:65532
EXPOSE 8443 8080 8081
ENTRYPOINT ["/usr/local/bin/kubevirt-operator"]
CMD ["run"]
