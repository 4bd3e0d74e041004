# Run by CTest (api_routes_links_no_libvirt): fails when BINARY, the routes suite on the fake
# service, needs libvirt at run time: the API's tests are to run with no libvirt at all.
execute_process(COMMAND readelf --dynamic ${BINARY} OUTPUT_VARIABLE dynamic RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "readelf --dynamic ${BINARY} failed (${rc})")
endif()
if(NOT dynamic MATCHES "NEEDED")
  message(FATAL_ERROR "${BINARY} names no shared library: not the binary this check is for")
endif()
if(dynamic MATCHES "libvirt")
  message(FATAL_ERROR "${BINARY} links libvirt: a library it links reaches the daemon's adapters\n${dynamic}")
endif()
message(STATUS "${BINARY} needs no libvirt")
