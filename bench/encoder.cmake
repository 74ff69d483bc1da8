# oasr-bench-encoder: CPU encoder real-time factor and cohort throughput on
# the 12 x 256 x 2048, V = 5002 geometry, next to the PyTorch reference.
if(TARGET oasr_encoder)
  add_executable(oasr-bench-encoder ${CMAKE_CURRENT_LIST_DIR}/encoder_bench.cc)
  target_link_libraries(oasr-bench-encoder PRIVATE oasr_encoder oasr_cache CLI11::CLI11)
  target_compile_definitions(oasr-bench-encoder PRIVATE OASR_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
endif()
