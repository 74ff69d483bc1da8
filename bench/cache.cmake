# oasr-bench-cache: per-step cost of the paged cache's hot path (bench/cache_bench.cc).
add_executable(oasr-bench-cache ${CMAKE_CURRENT_LIST_DIR}/cache_bench.cc)
target_link_libraries(oasr-bench-cache PRIVATE oasr_cache CLI11::CLI11)
