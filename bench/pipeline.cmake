# The pipeline schedules' training step (bubble share, activation memory), in its own target.
# Included from bench/CMakeLists.txt: include(${CMAKE_CURRENT_LIST_DIR}/pipeline.cmake)
# Run: mpirun -n 2 --bind-to core build/bench/shardcheck_bench_pipeline
add_executable(shardcheck_bench_pipeline ${CMAKE_CURRENT_LIST_DIR}/pipeline.cpp)
target_link_libraries(shardcheck_bench_pipeline PRIVATE shardcheck::properties
                      shardcheck::new_hook shardcheck_bench_clock benchmark::benchmark
                      shardcheck_warnings)
