# col_sender.cmake - the collector's sender (library col_sender, prefix
# col_sender_). Included from collector/CMakeLists.txt.
add_library(col_sender STATIC ${CMAKE_CURRENT_LIST_DIR}/col_sender.c ${CMAKE_CURRENT_LIST_DIR}/col_enc.c)
target_include_directories(col_sender PUBLIC ${CMAKE_CURRENT_LIST_DIR} ${NNG_INCLUDE})
target_link_libraries(col_sender PUBLIC rm_proto ${NNG_LIB} Threads::Threads)

if(EXISTS ${CMAKE_CURRENT_LIST_DIR}/col_sender_test.c)
  rm_test(col_sender LIBS col_sender TIMEOUT 180)
endif()
if(EXISTS ${CMAKE_CURRENT_LIST_DIR}/col_enc_test.c)
  rm_test(col_enc LIBS col_sender)
endif()
