# col_replay.cmake - the replay backend (included from collector/CMakeLists.txt):
# library col_replay (col_events.c: the recorded event stream format;
# col_replay.c: events -> user-space segmenter -> struct col_sink), the
# segmenter's unit tests on recorded streams (segmenter_test.c, streams in
# testdata/), the parser/replay tests (col_replay_test.c) and, with
# -DRM_FUZZ=ON and CC=clang, the libFuzzer target col_events_fuzz:
#   cmake -S . -B build-fuzz -DRM_FUZZ=ON -DCMAKE_C_COMPILER=clang
#   make -C build-fuzz col_events_fuzz
#   build-fuzz/collector/col_events_fuzz -max_total_time=60 <corpus dir> collector/testdata
add_library(col_replay STATIC col_events.c col_replay.c)
target_include_directories(col_replay PUBLIC ${CMAKE_CURRENT_SOURCE_DIR})
target_link_libraries(col_replay PUBLIC rm_base rm_part_def)

rm_test(segmenter LIBS col_replay TIMEOUT 60)
target_compile_definitions(segmenter_test PRIVATE COL_TESTDATA="${CMAKE_CURRENT_SOURCE_DIR}/testdata")
rm_test(col_replay LIBS col_replay TIMEOUT 60)
# the segmenter's CPU-counter functions on their own (a minimal environment of its own)
rm_test(segmenter_ctr LIBS col_replay TIMEOUT 60)
target_compile_definitions(col_replay_test PRIVATE COL_TESTDATA="${CMAKE_CURRENT_SOURCE_DIR}/testdata")

if(RM_FUZZ)
  add_executable(col_events_fuzz col_events_fuzz.c col_events.c col_replay.c)
  target_include_directories(col_events_fuzz PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  target_compile_options(col_events_fuzz PRIVATE -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined)
  target_link_options(col_events_fuzz PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(col_events_fuzz PRIVATE rm_base rm_part_def)
endif()
