# Multi-stage build of the `strata` binary (operator, broker, dev tooling)
# into a distroless nonroot image.
#   docker build -t ghcr.io/strata-dev/strata:latest .
FROM golang:1.26 AS build
WORKDIR /src
ENV CGO_ENABLED=0 GOFLAGS=-trimpath
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG TARGETOS=linux
ARG TARGETARCH
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    GOOS=$TARGETOS GOARCH=$TARGETARCH go build -ldflags="-s -w" -o /out/strata .

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/strata /strata
USER 65532:65532
ENTRYPOINT ["/strata"]
