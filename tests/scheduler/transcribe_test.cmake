# oasr-transcribe run as a subprocess against the in-process engine, with the
# small_ln fixture model. Included from tests/encoder/CMakeLists.txt (see the
# note there) so that tests/scheduler/CMakeLists.txt stays untouched.
if(TARGET oasr-transcribe)
  oasr_add_test(scheduler_transcribe_test
    SOURCES ${CMAKE_CURRENT_LIST_DIR}/transcribe_test.cc
    LIBS oasr_scheduler
    LABELS unit
    FIXTURES encoder_golden)
  target_compile_definitions(scheduler_transcribe_test PRIVATE
    OASR_ENCODER_FIXTURES="${OASR_ENCODER_FIXTURES}"
    OASR_TRANSCRIBE_BIN="$<TARGET_FILE:oasr-transcribe>")
  add_dependencies(scheduler_transcribe_test oasr-transcribe)
endif()
