# oasr-bench-decoder: CTC decoding cost per frame per stream (CPU, one core).
add_executable(oasr-bench-decoder ${CMAKE_CURRENT_LIST_DIR}/decoder_bench.cc)
# oasr_encoder: the model directory's config.json, for its frame clock.
target_link_libraries(oasr-bench-decoder PRIVATE oasr_decoder oasr_encoder CLI11::CLI11)
# The bundled model's units and language model, for the shallow-fusion rows.
target_compile_definitions(oasr-bench-decoder PRIVATE
  OASR_BENCH_MODEL_DIR="${PROJECT_SOURCE_DIR}/models/en-conformer-ctc")
