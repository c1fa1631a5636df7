# sparecap's container image: a static binary on distroless, running as the
# non-root user 65532. Build it with `make image` (needs a Docker engine,
# or any builder that reads Dockerfiles); docs/deploy.md has the details.

# The builder's Go matches go.mod's go line (1.26.x).
FROM golang:1.26 AS build
WORKDIR /src
# Modules first, so the download layer is reused while only the code changes.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /sparecap ./cmd/sparecap

# distroless/static has CA certificates, /etc/passwd with "nonroot" (65532),
# tzdata, and no shell.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /sparecap /sparecap
USER 65532:65532
EXPOSE 8407
ENTRYPOINT ["/sparecap"]
CMD ["server", "--addr=0.0.0.0:8407"]
