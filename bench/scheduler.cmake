# oasr-bench-scheduler: scheduler overhead per stream per tick with a no-op
# model, and streams kept in real time by the CPU engine (bench/scheduler_bench.cc).
add_executable(oasr-bench-scheduler ${CMAKE_CURRENT_LIST_DIR}/scheduler_bench.cc)
target_link_libraries(oasr-bench-scheduler PRIVATE oasr_scheduler CLI11::CLI11)
target_compile_definitions(oasr-bench-scheduler PRIVATE OASR_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
# oasr-bench-step: one batched chunk step of the encoder for B streams on the
# serving path (paged pool, slot states), CPU or GPU (bench/step_bench.cc).
add_executable(oasr-bench-step ${CMAKE_CURRENT_LIST_DIR}/step_bench.cc)
target_link_libraries(oasr-bench-step PRIVATE oasr_scheduler CLI11::CLI11)
target_compile_definitions(oasr-bench-step PRIVATE
  OASR_BUNDLED_MODEL="${PROJECT_SOURCE_DIR}/models/en-conformer-ctc")

# oasr-bench-stem: the conv2d subsampling stem alone, fused and unfused
# (bench/stem_bench.cc; cuDNN's side is bench/gpu/stem_torch.py).
add_executable(oasr-bench-stem ${CMAKE_CURRENT_LIST_DIR}/stem_bench.cc)
target_link_libraries(oasr-bench-stem PRIVATE oasr_scheduler CLI11::CLI11)

# oasr-bench-gpu: concurrent real-time streams through the whole engine (front
# end, encoder, decoder, events; no gRPC) and offline RTFx (bench/gpu_bench.cc).
add_executable(oasr-bench-gpu ${CMAKE_CURRENT_LIST_DIR}/gpu_bench.cc)
target_link_libraries(oasr-bench-gpu PRIVATE oasr_scheduler CLI11::CLI11)
target_compile_definitions(oasr-bench-gpu PRIVATE
  OASR_BUNDLED_MODEL="${PROJECT_SOURCE_DIR}/models/en-conformer-ctc"
  OASR_SAMPLES_DIR="${PROJECT_SOURCE_DIR}/samples")

# oasr-bench-logmel: the GPU front end's filterbank (bench/log_mel_bench.cc).
add_executable(oasr-bench-logmel ${CMAKE_CURRENT_LIST_DIR}/log_mel_bench.cc)
target_link_libraries(oasr-bench-logmel PRIVATE oasr_scheduler CLI11::CLI11)
