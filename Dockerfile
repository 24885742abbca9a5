# syntax=docker/dockerfile:1
# Multi-stage build: a static binary on a slim Debian base, running as a
# non-root user, with its data on a volume. The base is not distroless
# because agents need what their tools run: bash for the shell tool, git for
# checkouts and pushes, bubblewrap for the sandbox (it needs unprivileged
# user namespaces in the container; without them bash and command tools are
# refused, with an ERROR at start saying why).

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" \
      -o /out/switchyard ./cmd/switchyard \
 && mkdir -p /out/data

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends bash bubblewrap ca-certificates git \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 65532 switchyard \
 && useradd --uid 65532 --gid 65532 --home-dir /data --no-create-home --shell /usr/sbin/nologin switchyard
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
