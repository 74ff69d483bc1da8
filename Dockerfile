# The images: oasr-server serving the bundled model, oasr-client for the
# health check. The CPU image is the default target; `--target cuda` builds
# the GPU image.
#
#   docker build -t oasr .
#   docker run -p 50051:50051 -p 8080:8080 oasr                # serves models/en-conformer-ctc
#   docker run -p 6000:6000 -e OASR_PORT=6000 oasr             # any flag as OASR_<FLAG> ...
#   docker run oasr --max-active-streams 128 --log-level debug # ... or appended as a flag
#
#   docker build --target cuda -t oasr:cuda .
#   docker run --gpus all -p 50051:50051 oasr:cuda             # on the first GPU (--device auto)
#
# Build arguments (build-time only, not in the image's environment):
#   BUILD_IMAGE, RUNTIME_IMAGE  the Debian bases (bookworm: the package names below)
#   CUDA_IMAGE                  the cuda target's CUDA toolkit: an image with it in
#                               /usr/local/cuda, of which only files are taken
#   CUDA_ARCHITECTURES          the cuda target's GPU code, as CMAKE_CUDA_ARCHITECTURES
#                               (default: the project's sm_90 plus PTX)
#   BUILD_JOBS                  compile jobs (default: every core of the builder)
#   GIT_REVISION                what GetServerInfo reports (.git is not sent to the build)
ARG BUILD_IMAGE=debian:bookworm
ARG RUNTIME_IMAGE=debian:bookworm-slim
ARG CUDA_IMAGE=docker.io/nvidia/cuda:13.0.2-devel-ubuntu24.04

FROM ${BUILD_IMAGE} AS build-deps
ARG DEBIAN_FRONTEND=noninteractive
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends \
      build-essential cmake pkg-config ca-certificates \
      libgrpc++-dev protobuf-compiler-grpc protobuf-compiler libprotobuf-dev grpc-proto \
      libabsl-dev libspdlog-dev libfmt-dev libcli11-dev nlohmann-json3-dev \
      libopenblas-dev libsoxr-dev libcpp-httplib-dev zlib1g-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src

FROM build-deps AS build
ARG BUILD_JOBS=
ARG GIT_REVISION=unknown
COPY . .
RUN cmake -S . -B /build -DCMAKE_BUILD_TYPE=Release -DOASR_BUILD_TESTS=OFF -DOASR_BUILD_BENCH=OFF \
      -DOASR_WITH_CUDA=OFF -DOASR_GIT_REVISION="${GIT_REVISION}" \
    && cmake --build /build -j "${BUILD_JOBS:-$(nproc)}" --target oasr-server oasr-client \
    && strip /build/server/oasr-server /build/server/oasr-client

# Only the toolkit's files are taken from CUDA_IMAGE (nothing runs in it), so
# the CUDA build and image stay on the Debian packages of the CPU ones;
# NVIDIA's toolkit and libraries ask for glibc 2.27 at most, bookworm's is 2.36.
FROM ${CUDA_IMAGE} AS cuda-toolkit

FROM build-deps AS build-cuda
ARG BUILD_JOBS=
ARG GIT_REVISION=unknown
ARG CUDA_ARCHITECTURES=
COPY --from=cuda-toolkit /usr/local/cuda /usr/local/cuda
COPY . .
# /cuda-libs: the toolkit's libraries the binaries link (libcudart and
# libcublasLt), as ldd finds them; the driver's libcuda is the host's.
RUN cmake -S . -B /build -DCMAKE_BUILD_TYPE=Release -DOASR_BUILD_TESTS=OFF -DOASR_BUILD_BENCH=OFF \
      -DOASR_WITH_CUDA=ON -DOASR_GIT_REVISION="${GIT_REVISION}" \
      ${CUDA_ARCHITECTURES:+"-DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCHITECTURES}"} \
    && cmake --build /build -j "${BUILD_JOBS:-$(nproc)}" --target oasr-server oasr-client \
    && strip /build/server/oasr-server /build/server/oasr-client \
    && mkdir /cuda-libs \
    && ldd /build/server/oasr-server /build/server/oasr-client \
      | awk '$3 ~ "^/usr/local/cuda" {print $3}' | sort -u | xargs -r cp -L -t /cuda-libs \
    && ls /cuda-libs | grep -q '^libcudart\.so'

FROM ${RUNTIME_IMAGE} AS runtime
ARG DEBIAN_FRONTEND=noninteractive
RUN apt-get update -qq && apt-get install -y -qq --no-install-recommends \
      libgrpc++1.51 libprotobuf32 libabsl20220623 libspdlog1.10 libfmt9 \
      libopenblas0 libsoxr0 libcpp-httplib0.11 zlib1g \
    && rm -rf /var/lib/apt/lists/*
COPY models /models
# Run-time defaults, not flags pinned in the entrypoint: a flag given to
# `docker run IMAGE ...` or an OASR_* variable overrides each of them. The
# address and ports are the server's defaults (0.0.0.0, 50051, 8080).
# OASR_MODEL_DIR= (empty) does not unset it; `--model-dir ""` serves no model.
ENV OASR_MODEL_DIR=/models/en-conformer-ctc
EXPOSE 50051 8080
# SERVING only once the model is loaded (about 2 s on a CPU). Follows
# OASR_PORT; a port given as --port needs --health-cmd too.
HEALTHCHECK --interval=15s --timeout=5s --start-period=60s --retries=3 \
  CMD /usr/local/bin/oasr-client --server "127.0.0.1:${OASR_PORT:-50051}" health
# SIGTERM drains: NOT_SERVING, new streams refused, open ones get
# --shutdown-grace (7 s, below docker stop's 10 s), then exit 0.
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/oasr-server"]
# Each image below runs as nobody:nogroup (USER 65534:65534); nothing is
# written at run time, so a read-only root works.

# The GPU image: the CPU image's packages plus the CUDA libraries the
# binaries link. `--device auto` (the default) computes on the first GPU the
# container is given (--gpus all, nvidia.com/gpu) and on the CPU where there
# is none; `--device cuda` refuses to start without one. The variables are
# the NVIDIA container toolkit's, as in NVIDIA's images: every GPU unless the
# runtime narrows it, compute and nvidia-smi, and a driver that runs CUDA 13.
FROM runtime AS cuda
COPY --from=build-cuda /cuda-libs/ /usr/local/cuda/lib64/
RUN echo /usr/local/cuda/lib64 >/etc/ld.so.conf.d/oasr-cuda.conf && ldconfig
COPY --from=build-cuda /build/server/oasr-server /build/server/oasr-client /usr/local/bin/
ENV NVIDIA_VISIBLE_DEVICES=all NVIDIA_DRIVER_CAPABILITIES=compute,utility \
    NVIDIA_REQUIRE_CUDA="cuda>=13.0"
USER 65534:65534

# The CPU image, the default target.
FROM runtime AS cpu
COPY --from=build /build/server/oasr-server /build/server/oasr-client /usr/local/bin/
USER 65534:65534
