# oasr-bench-server: the load client against a local oasr-server on loopback:
# how many concurrent real-time streams it holds with p95 chunk latency under
# 300 ms. A script (server_bench.sh) with the binaries' paths filled in.
if(OASR_WITH_GRPC AND TARGET oasr-server AND TARGET oasr-client)
  set(OASR_BENCH_SERVER_BINARY ${CMAKE_BINARY_DIR}/server/oasr-server)
  set(OASR_BENCH_CLIENT_BINARY ${CMAKE_BINARY_DIR}/server/oasr-client)
  set(OASR_BENCH_SOURCE_DIR ${PROJECT_SOURCE_DIR})
  set(OASR_BENCH_FIXTURE_MODEL ${CMAKE_BINARY_DIR}/tests/encoder/golden/small_ln/model)
  configure_file(${CMAKE_CURRENT_LIST_DIR}/server_bench.sh
                 ${CMAKE_CURRENT_BINARY_DIR}/oasr-bench-server
                 @ONLY FILE_PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE GROUP_READ
                 GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
endif()
