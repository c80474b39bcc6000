# The `toolgate` binary (CLI and controller).
#   docker build -f deploy/controller.Dockerfile -t registry.example/toolgate-controller:0.1.0 .
FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --locked --release -p toolgate

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /src/target/release/toolgate /usr/local/bin/toolgate
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/toolgate"]
