# col_sender.cmake - the collector's sender (library col_sender, prefix
# col_sender_). Included from collector/CMakeLists.txt.
# col_enc: the Batch / SegmentPart encoder, also linked by the aggregator
add_library(col_enc STATIC ${CMAKE_CURRENT_LIST_DIR}/col_enc.c)
target_include_directories(col_enc PUBLIC ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(col_enc PUBLIC rm_proto)
# col_sender: the queue and API (col_sender.c), the link thread (col_link.c),
# the spool file (col_spool.c) and its checksum (col_crc.c)
add_library(col_sender STATIC ${CMAKE_CURRENT_LIST_DIR}/col_sender.c
  ${CMAKE_CURRENT_LIST_DIR}/col_link.c ${CMAKE_CURRENT_LIST_DIR}/col_spool.c
  ${CMAKE_CURRENT_LIST_DIR}/col_crc.c)
target_include_directories(col_sender PUBLIC ${CMAKE_CURRENT_LIST_DIR} ${NNG_INCLUDE})
target_link_libraries(col_sender PUBLIC col_enc rm_proto rm_nng ${NNG_LIB} Threads::Threads)
# col_batcher: the sink between a backend and the sender
add_library(col_batcher STATIC ${CMAKE_CURRENT_LIST_DIR}/col_batcher.c)
target_include_directories(col_batcher PUBLIC ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(col_batcher PUBLIC col_sender col_merge)

if(EXISTS ${CMAKE_CURRENT_LIST_DIR}/col_sender_test.c)
  rm_test(col_sender LIBS col_sender TIMEOUT 180)
endif()
if(EXISTS ${CMAKE_CURRENT_LIST_DIR}/col_enc_test.c)
  rm_test(col_enc LIBS col_enc)
endif()
