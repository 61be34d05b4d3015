# syntax=docker/dockerfile:1

# Build: a static binary (pure Go, including SQLite), no cgo.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/dlqdash ./cmd/dlqdash \
 && mkdir -p /out/data

# Run: distroless, non-root (uid 65532), no shell and no curl, so the health
# check goes through the binary itself.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/dlqdash /dlqdash
COPY --from=build --chown=65532:65532 /out/data /data
# The SQLite catalog is ./dlqdash.db (--db's default) in the working
# directory, the /data volume, with its index file ./dlqdash.db-index (the
# search index and property rows) beside it in the same volume. DLQDASH_DB is deliberately not set here: a
# PostgreSQL URL in DLQDASH_DATABASE_URL is refused beside DLQDASH_DB (which
# of the two would be the database?), so the image leaves both to the
# deployment (deploy/compose, deploy/kubernetes).
WORKDIR /data
ENV DLQDASH_ADDR=:8080
VOLUME ["/data"]
# 8080: dashboard; 5672 and 5300: `dlqdash emulator --amqp-addr :5672 --admin-addr :5300`
EXPOSE 8080 5672 5300
USER 65532:65532
# 'dlqdash healthcheck' GETs http://127.0.0.1:<port of DLQDASH_ADDR>/healthz:
# change the port with DLQDASH_ADDR, not --addr, or the check asks the old
# one. `dlqdash emulator` serves no /healthz (disable the check for it).
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
  CMD ["/dlqdash", "healthcheck"]
ENTRYPOINT ["/dlqdash"]
CMD ["demo", "--addr", ":8080"]
