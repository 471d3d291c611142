# syntax=docker/dockerfile:1
# The manager image: `make docker-build` (needs a Docker engine).
#
# The builder's Go is the toolchain go.mod asks for, and the build command is
# the Makefile's `build` target (test/release checks both).

FROM --platform=$BUILDPLATFORM golang:1.26.8 AS builder
ARG TARGETOS=linux
ARG TARGETARCH=amd64
# VERSION ends up in main.version (printed by --version).
ARG VERSION=dev
ENV GOFLAGS=-mod=mod GOTOOLCHAIN=local
WORKDIR /workspace

COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download

# Only what ./cmd imports; .dockerignore keeps the rest out of the context.
COPY api/ api/
COPY backends/ backends/
COPY cmd/ cmd/
COPY controllers/ controllers/
COPY pkg/ pkg/

RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} \
    go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/manager ./cmd

FROM gcr.io/distroless/static:nonroot
WORKDIR /
COPY --from=builder /out/manager /manager
USER 65532:65532
ENTRYPOINT ["/manager"]
