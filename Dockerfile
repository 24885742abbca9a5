# syntax=docker/dockerfile:1
# Multi-stage build: a static binary on a distroless base, running as a
# non-root user, with its data on a volume.

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" \
      -o /out/switchyard ./cmd/switchyard \
 && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/switchyard /switchyard
COPY --from=build --chown=65532:65532 /out/data /data
USER 65532:65532
VOLUME ["/data"]
EXPOSE 8080
# Listening beyond loopback requires an API token: pass SWITCHYARD_API_TOKEN
# (used when the config sets no server.api_token), and mount a config file at
# /config.yaml with `--config /config.yaml` for anything beyond the defaults.
ENTRYPOINT ["/switchyard"]
CMD ["serve", "--listen", "0.0.0.0:8080", "--data-dir", "/data"]
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
  CMD ["/switchyard", "healthcheck", "--server", "http://127.0.0.1:8080"]
