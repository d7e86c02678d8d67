# The installed package: `cmake --install build --prefix P` puts the headers, the libraries, the
# object files of the operator-new hook and the shardcheck program under P, and exports the
# targets as P/lib/cmake/shardcheck (find_package(shardcheck CONFIG REQUIRED)).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
set(SHARDCHECK_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/shardcheck)

# shardcheck::shardcheck: everything a kernel's check program links — cli_main and the libraries,
# the operator-new hook (new_hook) and the MPI_* entry points recording raw MPI calls (pmpi). The
# last two are OBJECT libraries, whose object files reach only targets that link them directly;
# so the umbrella carries the object files themselves ($<TARGET_OBJECTS>, which propagates), here
# and in the installed copy (the objects are installed under lib/shardcheck/objects).
add_library(shardcheck_shardcheck INTERFACE)
add_library(shardcheck::shardcheck ALIAS shardcheck_shardcheck)
set_target_properties(shardcheck_reference PROPERTIES EXPORT_NAME reference)
set_target_properties(shardcheck_parallel PROPERTIES EXPORT_NAME parallel)
set_target_properties(shardcheck_properties PROPERTIES EXPORT_NAME properties)
set_target_properties(shardcheck_cli PROPERTIES EXPORT_NAME cli)
set_target_properties(shardcheck_new_hook PROPERTIES EXPORT_NAME new_hook)
set_target_properties(shardcheck_shardcheck PROPERTIES EXPORT_NAME shardcheck)
set(shardcheck_object_libraries shardcheck_new_hook)
if(TARGET shardcheck_pmpi)
  set_target_properties(shardcheck_pmpi PROPERTIES EXPORT_NAME pmpi)
  list(APPEND shardcheck_object_libraries shardcheck_pmpi)
endif()
target_link_libraries(shardcheck_shardcheck INTERFACE shardcheck::cli)
foreach(o IN LISTS shardcheck_object_libraries)
  get_target_property(export_name ${o} EXPORT_NAME)
  target_link_libraries(shardcheck_shardcheck INTERFACE
    ${o} $<BUILD_INTERFACE:$<TARGET_OBJECTS:${o}>>
    $<INSTALL_INTERFACE:$<TARGET_OBJECTS:shardcheck::${export_name}>>)
endforeach()

# Linked privately into the static libraries, so named in their link interface (as link-only, no
# flags reach a consumer).
set_target_properties(shardcheck_warnings PROPERTIES EXPORT_NAME warnings)

install(TARGETS shardcheck_reference shardcheck_parallel shardcheck_properties shardcheck_cli
                ${shardcheck_object_libraries} shardcheck_shardcheck shardcheck_warnings
        EXPORT shardcheck_targets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        OBJECTS DESTINATION ${CMAKE_INSTALL_LIBDIR}/shardcheck/objects
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS shardcheck RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
foreach(part reference parallel properties cli)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${part}/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
endforeach()
install(EXPORT shardcheck_targets NAMESPACE shardcheck:: FILE shardcheckTargets.cmake
        DESTINATION ${SHARDCHECK_INSTALL_CMAKEDIR})

# Dependencies beyond MPI, BLAS and RapidCheck that the libraries' link interface names (a static
# library's private ones included), found again by the config: e.g. find_dependency(pugixml).
set(SHARDCHECK_CONFIG_DEPENDENCIES "")
get_target_property(cli_links shardcheck_cli LINK_LIBRARIES)
if(cli_links MATCHES "pugixml::")
  string(APPEND SHARDCHECK_CONFIG_DEPENDENCIES "find_dependency(pugixml CONFIG)\n")
endif()
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/shardcheckConfig.cmake.in
  ${PROJECT_BINARY_DIR}/shardcheckConfig.cmake INSTALL_DESTINATION ${SHARDCHECK_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/shardcheckConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/shardcheckConfig.cmake
              ${PROJECT_BINARY_DIR}/shardcheckConfigVersion.cmake
              ${PROJECT_SOURCE_DIR}/cmake/shardcheck_helpers.cmake
              ${PROJECT_SOURCE_DIR}/cmake/shardcheck_expect.cmake
        DESTINATION ${SHARDCHECK_INSTALL_CMAKEDIR})
