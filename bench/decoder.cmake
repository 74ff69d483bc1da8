# oasr-bench-decoder: CTC decoding cost per frame per stream (CPU, one core).
add_executable(oasr-bench-decoder ${CMAKE_CURRENT_LIST_DIR}/decoder_bench.cc)
target_link_libraries(oasr-bench-decoder PRIVATE oasr_decoder)
# The bundled model's units and language model, for the shallow-fusion rows.
target_compile_definitions(oasr-bench-decoder PRIVATE
  OASR_BENCH_MODEL_DIR="${PROJECT_SOURCE_DIR}/models/en-conformer-ctc")
