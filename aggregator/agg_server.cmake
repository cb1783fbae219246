# agg_server.cmake - the aggregator's transport server (library agg_server,
# prefix agg_server_). Included from aggregator/CMakeLists.txt.
# agg_admit.c: the admission rules (tokens: HMAC-SHA256 from libmbedcrypto,
# which Debian's libnng already uses for TLS)
find_library(MBEDCRYPTO_LIB mbedcrypto REQUIRED)
add_library(agg_server STATIC ${CMAKE_CURRENT_LIST_DIR}/agg_server.c
  ${CMAKE_CURRENT_LIST_DIR}/agg_admit.c)
target_include_directories(agg_server PUBLIC ${CMAKE_CURRENT_LIST_DIR} ${NNG_INCLUDE})
target_link_libraries(agg_server PUBLIC rm_proto rm_nng ${NNG_LIB} ${MBEDCRYPTO_LIB} Threads::Threads)

rm_test(agg_admit LIBS agg_server)

if(EXISTS ${CMAKE_CURRENT_LIST_DIR}/agg_server_test.c)
  rm_test(agg_server LIBS agg_server TIMEOUT 180)
  if(RM_SANITIZE)
    # nng 1.5.2 never frees the state of an ipc listener that a peer left deaf
    # (the case "peers misbehaving below the protocol" does that on purpose;
    # see agg_server.c). Only allocations made inside libnng are suppressed.
    file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/agg_server_lsan.supp "leak:libnng.so\n")
    set_tests_properties(agg_server PROPERTIES ENVIRONMENT
      "LSAN_OPTIONS=suppressions=${CMAKE_CURRENT_BINARY_DIR}/agg_server_lsan.supp")
  endif()
endif()
