# oasr-bench-scheduler: scheduler overhead per stream per tick with a no-op
# model, and streams kept in real time by the CPU engine (bench/scheduler_bench.cc).
add_executable(oasr-bench-scheduler ${CMAKE_CURRENT_LIST_DIR}/scheduler_bench.cc)
target_link_libraries(oasr-bench-scheduler PRIVATE oasr_scheduler CLI11::CLI11)
target_compile_definitions(oasr-bench-scheduler PRIVATE OASR_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
