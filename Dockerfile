# CPU image by default. For GPUs, build from a CUDA devel image with the same
# Debian/Ubuntu packages, e.g.
#   docker build --build-arg BUILD_IMAGE=nvidia/cuda:13.0.0-cudnn-devel-ubuntu24.04 \
#                --build-arg RUNTIME_IMAGE=nvidia/cuda:13.0.0-cudnn-runtime-ubuntu24.04 -t oasr:cuda .
ARG BUILD_IMAGE=debian:bookworm
ARG RUNTIME_IMAGE=debian:bookworm-slim

FROM ${BUILD_IMAGE} AS build
ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends \
      build-essential cmake pkg-config git ca-certificates \
      libgrpc++-dev protobuf-compiler-grpc protobuf-compiler libprotobuf-dev grpc-proto \
      libabsl-dev libspdlog-dev libfmt-dev libcli11-dev nlohmann-json3-dev \
      libopenblas-dev libsoxr-dev libcpp-httplib-dev zlib1g-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B /build -DCMAKE_BUILD_TYPE=Release -DOASR_BUILD_TESTS=OFF -DOASR_BUILD_BENCH=OFF \
    && cmake --build /build -j "$(nproc)" --target oasr-server oasr-client

FROM ${RUNTIME_IMAGE}
ENV DEBIAN_FRONTEND=noninteractive
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends \
      libgrpc++1.51 libprotobuf32 libabsl20220623 libspdlog1.10 libfmt9 \
      libopenblas0 libsoxr0 libcpp-httplib0.11 zlib1g \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /build/server/oasr-server /build/server/oasr-client /usr/local/bin/
COPY models /models
EXPOSE 50051 8080
USER 65534:65534
ENTRYPOINT ["/usr/local/bin/oasr-server", "--address", "0.0.0.0", "--port", "50051", "--metrics-port", "8080"]
