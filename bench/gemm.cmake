# oasr-bench-gemm: the encoder's products on cuBLASLt and on the project's
# wgmma kernel, side by side (bench/gemm_bench.cc; CUDA builds).
if(OASR_CUDA_ENABLED)
  add_executable(oasr-bench-gemm ${CMAKE_CURRENT_LIST_DIR}/gemm_bench.cc)
  target_link_libraries(oasr-bench-gemm PRIVATE oasr_kernels CLI11::CLI11)
endif()
