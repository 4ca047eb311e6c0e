# syntax=docker/dockerfile:1
# One image with the three programs; docker-compose.yml picks the command (api, consumer or
# reconciler).
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOWORK=off go build -trimpath -ldflags="-s -w" -o /out/ ./api ./consumer ./reconciler

FROM debian:12-slim
RUN apt-get update \
	&& apt-get install -y --no-install-recommends ca-certificates tzdata \
	&& rm -rf /var/lib/apt/lists/*
COPY --from=build /out/api /out/consumer /out/reconciler /usr/local/bin/
USER 65532:65532
EXPOSE 8080
CMD ["api"]
