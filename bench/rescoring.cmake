# oasr-bench-rescoring: attention rescoring's cost a final, CPU or CUDA, on a
# model directory with a decoder (bench/make_rescoring_model.py).
if(TARGET oasr_encoder)
  add_executable(oasr-bench-rescoring ${CMAKE_CURRENT_LIST_DIR}/rescoring_bench.cc)
  target_link_libraries(oasr-bench-rescoring PRIVATE oasr_encoder CLI11::CLI11)
  target_compile_definitions(oasr-bench-rescoring PRIVATE OASR_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
                             OASR_PYTHON="${OASR_PYTHON}")
endif()
