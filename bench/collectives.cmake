# The collectives benchmark (nccl-tests style, both backends side by side). Included from
# bench/CMakeLists.txt: include(${CMAKE_CURRENT_SOURCE_DIR}/collectives.cmake)
add_executable(shardcheck_bench_collectives ${CMAKE_CURRENT_LIST_DIR}/collectives.cpp)
target_link_libraries(shardcheck_bench_collectives PRIVATE shardcheck::parallel benchmark::benchmark
                      shardcheck_warnings)
