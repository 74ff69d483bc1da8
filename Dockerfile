# The CPU image: oasr-server serving the bundled model, oasr-client for the
# health check.
#
#   docker build -t oasr .
#   docker run -p 50051:50051 -p 8080:8080 oasr                # serves models/en-conformer-ctc
#   docker run -p 6000:6000 -e OASR_PORT=6000 oasr             # any flag as OASR_<FLAG> ...
#   docker run oasr --max-active-streams 128 --log-level debug # ... or appended as a flag
#
# Build arguments (build-time only, not in the image's environment):
#   BUILD_IMAGE, RUNTIME_IMAGE  the Debian bases (bookworm: the package names below)
#   BUILD_JOBS                  compile jobs (default: every core of the builder)
#   GIT_REVISION                what GetServerInfo reports (.git is not sent to the build)
#   WITH_CUDA                   OFF; AUTO or ON on bases that carry the CUDA toolkit
#                               (/usr/local/cuda) and the same Debian packages
ARG BUILD_IMAGE=debian:bookworm
ARG RUNTIME_IMAGE=debian:bookworm-slim

FROM ${BUILD_IMAGE} AS build
ARG DEBIAN_FRONTEND=noninteractive
ARG BUILD_JOBS=
ARG GIT_REVISION=unknown
ARG WITH_CUDA=OFF
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends \
      build-essential cmake pkg-config ca-certificates \
      libgrpc++-dev protobuf-compiler-grpc protobuf-compiler libprotobuf-dev grpc-proto \
      libabsl-dev libspdlog-dev libfmt-dev libcli11-dev nlohmann-json3-dev \
      libopenblas-dev libsoxr-dev libcpp-httplib-dev zlib1g-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake -S . -B /build -DCMAKE_BUILD_TYPE=Release -DOASR_BUILD_TESTS=OFF -DOASR_BUILD_BENCH=OFF \
      -DOASR_WITH_CUDA="${WITH_CUDA}" -DOASR_GIT_REVISION="${GIT_REVISION}" \
    && cmake --build /build -j "${BUILD_JOBS:-$(nproc)}" --target oasr-server oasr-client \
    && strip /build/server/oasr-server /build/server/oasr-client

FROM ${RUNTIME_IMAGE}
ARG DEBIAN_FRONTEND=noninteractive
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends \
      libgrpc++1.51 libprotobuf32 libabsl20220623 libspdlog1.10 libfmt9 \
      libopenblas0 libsoxr0 libcpp-httplib0.11 zlib1g \
    && rm -rf /var/lib/apt/lists/*
COPY --from=build /build/server/oasr-server /build/server/oasr-client /usr/local/bin/
COPY models /models
# Run-time defaults, not flags pinned in the entrypoint: a flag given to
# `docker run IMAGE ...` or an OASR_* variable overrides each of them. The
# address and ports are the server's defaults (0.0.0.0, 50051, 8080).
# OASR_MODEL_DIR= (empty) does not unset it; `--model-dir ""` serves no model.
ENV OASR_MODEL_DIR=/models/en-conformer-ctc
EXPOSE 50051 8080
# nobody:nogroup; nothing is written at run time, so a read-only root works.
USER 65534:65534
# SERVING only once the model is loaded (about 2 s on a CPU). Follows
# OASR_PORT; a port given as --port needs --health-cmd too.
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
  CMD /usr/local/bin/oasr-client --server "127.0.0.1:${OASR_PORT:-50051}" health
# SIGTERM drains: NOT_SERVING, new streams refused, open ones get
# --shutdown-grace (7 s, below docker stop's 10 s), then exit 0.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/oasr-server"]
