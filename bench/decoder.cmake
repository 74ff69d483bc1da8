# oasr-bench-decoder: CTC decoding cost per frame per stream (CPU, one core).
add_executable(oasr-bench-decoder ${CMAKE_CURRENT_LIST_DIR}/decoder_bench.cc)
target_link_libraries(oasr-bench-decoder PRIVATE oasr_decoder)
