# The sharded_weights benchmark (bucket sizes, overlap gain, peak memory), in its own target.
# Included from bench/CMakeLists.txt: include(${CMAKE_CURRENT_LIST_DIR}/sharded.cmake)
# Run: mpirun -n 2 build/bench/shardcheck_bench_sharded
add_executable(shardcheck_bench_sharded ${CMAKE_CURRENT_LIST_DIR}/sharded.cpp)
target_include_directories(shardcheck_bench_sharded PRIVATE ${PROJECT_SOURCE_DIR}/parallel/src)
target_link_libraries(shardcheck_bench_sharded PRIVATE shardcheck::properties shardcheck::new_hook
                      shardcheck_bench_clock benchmark::benchmark shardcheck_warnings)
